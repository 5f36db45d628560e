"""The spec the gate-form scripts run (both SDK versions): a step, then a gate whose revise
goes back to it. Imports nothing, so either SDK's script can import it."""

SPEC = """version: "0.2"
contracts:
  Draft:
    text: {type: string}
functions:
  write:
    mode: infer
    intent: "Write the release note"
    input: {}
    output: Draft
  sign_off:
    mode: gate
    timeout: 3600
flows:
  release:
    input: {}
    steps:
      - id: write
        function: write
        inputs: {}
      - id: review
        function: sign_off
        on_approve: ~
        on_revise: write
        on_kill: ~
        depends_on: [write]
"""
