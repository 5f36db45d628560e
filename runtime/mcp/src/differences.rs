//! Where this runtime and its MCP server deliberately differ from the reference server
//! (`stratum-mcp` 0.2.114, Python), each with what the reference does, what we do and why:
//! what `stratum-mcp explain` prints. The README's "Where we differ" lists say the same in
//! short.

/// One deliberate difference.
pub struct Difference {
    /// Its name on the command line (`stratum-mcp explain TOPIC`).
    pub topic: &'static str,
    /// One line.
    pub summary: &'static str,
    pub reference: &'static str,
    pub ours: &'static str,
    pub why: &'static str,
}

impl Difference {
    /// The long explanation.
    pub fn text(&self) -> String {
        format!(
            "{}: {}\n\nThe reference: {}\n\nThis runtime: {}\n\nWhy: {}\n",
            self.topic, self.summary, self.reference, self.ours, self.why
        )
    }
}

/// The difference of that topic, or a message naming the closest one.
pub fn find(topic: &str) -> Result<&'static Difference, String> {
    let wanted = topic.trim().to_ascii_lowercase().replace('_', "-");
    DIFFERENCES
        .iter()
        .find(|difference| difference.topic == wanted)
        .ok_or_else(|| {
            let topics = DIFFERENCES.iter().map(|difference| difference.topic);
            let close = stratum_compiler::diagnostic::did_you_mean(&wanted, topics)
                .map(|best| format!("; did you mean `{best}`?"))
                .unwrap_or_default();
            format!(
                "no topic or diagnostic code `{topic}`{close} (`stratum-mcp explain` lists the \
                 topics; codes look like E0011)"
            )
        })
}

/// Every difference, the server's first, then the state machine's, then version 0.3's fan-outs
/// and judge.
pub static DIFFERENCES: &[Difference] = &[
    Difference {
        topic: "every-diagnostic",
        summary: "stratum_validate and stratum_plan report every problem of a spec, not the first",
        reference: "validation stops at the first error and reports it as one dotted path, so an \
                    agent needs one round trip per mistake.",
        ours: "the whole compiler runs: `stratum_validate` lists every error (and the warnings \
               apart); `stratum_plan` answers in the reference's error shape and adds \
               `diagnostics`, each with code, line, column, help and, when the fix is \
               mechanical, `fix.edits`; at most 200 in one answer, then \
               `omitted_diagnostics` counts the rest (`stratumc check` lists every one).",
        why: "an agent fixes every problem in one edit, and typos in `ensure` fields are caught \
              before the flow runs instead of failing every attempt.",
    },
    Difference {
        topic: "typed-output-schemas",
        summary: "every tool declares a typed outputSchema; isError only for calls that could not run",
        reference: "each tool declares an untyped object and answers argument errors with \
                    pydantic's text.",
        ours: "each tool's full output schema is generated from its response types (an object \
               whose `anyOf` lists every shape, published in `runtime/cli/schemas/tools/`); \
               `tools/list` serves it folded into one compact object schema (`status` as an enum \
               of the tool's values, each field some shape always carries typed, one subschema \
               per type, no prose below the root); arguments of the wrong type or shape are refused with \
               `invalid_argument` naming the argument; runtime refusals (`flow_not_found`, \
               `wrong_step`, …) answer `status: error` as the reference does.",
        why: "clients that validate structured content (the TypeScript and Python SDKs) and \
              agents that read only `structuredContent` get a contract; the Python SDK checks \
              the schema itself against the meta-schema on every call, which cost up to 110 ms \
              a call with the full schemas and costs under 10 ms with the compact ones.",
    },
    Difference {
        topic: "unknown-arguments",
        summary: "misspelt arguments are refused with the expected name",
        reference: "unknown arguments are dropped silently, so a misspelt `usage` is lost.",
        ours: "an unknown argument is refused with the names the tool takes and a did-you-mean; \
               `flow` of `stratum_plan` may be omitted for the spec's entry flow.",
        why: "a silently dropped argument is a wrong answer the agent cannot see.",
    },
    Difference {
        topic: "shared-state",
        summary: "state lives in one SQLite database every process shares, not in process memory",
        reference: "each process caches flows in memory and never re-reads its JSON files: a gate \
                    approved from the CLI is invisible to a running server, which resolves it \
                    again on stale state; completed flows are deleted.",
        ours: "every call is one store transaction, compare-and-set on the flow's version; no \
               flow state is kept between calls; finished flows are kept until `stratum-mcp \
               prune`.",
        why: "two servers, or a server and an operator, never lose each other's updates, and \
              audits work after a flow ends and after a restart.",
    },
    Difference {
        topic: "spec-modified",
        summary: "a flow runs on the plan it started with; `spec_modified` never happens",
        reference: "each flow keeps its raw spec and re-validates it with the current rules on \
                    restore; an edited spec answers `spec_modified`, a tightened validator \
                    orphans running flows.",
        ours: "a flow names its compiled plan by checksum; the plan is stored once, immutable, and \
               verified when loaded. An edited spec starts new flows only.",
        why: "a running flow's meaning cannot change under it, and upgrades never orphan flows.",
    },
    Difference {
        topic: "file-root",
        summary: "file_exists and file_contains are confined to --root",
        reference: "the file built-ins read any path relative to the server's working directory.",
        ours: "they read only below `--root` (default: the working directory), with a size cap.",
        why: "a spec must not read the user's secrets through an `ensure`.",
    },
    Difference {
        topic: "authoring-root",
        summary: "over HTTP the authoring tools read and write only under --root, links included",
        reference: "`stratum_compile_speckit`, `stratum_list_workflows` and \
                    `stratum_draft_pipeline` take any path and follow symbolic links anywhere.",
        ours: "on stdio a path means what it says. Over HTTP (`serve`) a directory argument must \
               lie under `--root`, and so must every file opened in it: a task file or a spec \
               that is a symbolic link leading out of the root is never read (the compile is \
               refused with `compile_error`; the listing reports a problem, without the link's \
               target), and a draft goes only to a `.stratum` under the root, replacing a link \
               there rather than writing through it.",
        why: "a token must not read the server's files (`/etc/passwd`, `/proc/self/environ`) or \
              write outside the project through a link in an allowed directory.",
    },
    Difference {
        topic: "message-limits",
        summary: "oversized messages and arguments get an error, not silence",
        reference: "no limits; rmcp's own stdio transport drops a line over 16 MiB without an \
                    answer, which leaves the client waiting.",
        ours: "a message over 8 MiB gets a JSON-RPC error for its id, naming its size; a line \
               that is not a request (not JSON, not UTF-8, a batch, `null`, `42`) gets -32700 \
               or -32600 with `\"id\": null`; `spec` and other arguments over 4 MiB or nested \
               deeper than 64 levels get `invalid_argument`.",
        why: "bounded memory and time, and a client always hears back.",
    },
    Difference {
        topic: "gate-actor",
        summary: "a gate resolved over HTTP records the access token that resolved it",
        reference: "a gate's audit record keeps only `resolved_by`, which the caller chooses: an \
                    agent may write `human`.",
        ours: "`stratum-mcp serve` takes every call with an access token; a gate resolved \
               through it keeps the caller's `resolved_by` and adds `actor`, the token's name, \
               which no argument sets (`os:<user>` from the operator CLI and a stdio server's \
               form; absent for an agent's own call over stdio). A read-only token cannot \
               resolve a gate at all.",
        why: "the audit must say who decided, and an agent's own claim cannot be that record.",
    },
    Difference {
        topic: "gate-approvals",
        summary: "gate functions can require approvers, several approvals and no self-approval",
        reference: "any caller resolves any gate with one call, whatever it claims to be.",
        ours: "the server's config file may give a gate function `approvers` (token names, \
               `os:<user>`), `min_approvals` (distinct identities) and `self_approval = false` \
               (the flow's starter may not approve). Such a gate takes decisions only from an \
               identity the server vouches for (refusing an agent's own call over stdio with \
               `identity_required`), refuses `not_an_approver` and `self_approval`, and answers \
               `approval_recorded` to each approval before the last one needed.",
        why: "a gate exists so that the right people decide; a rule that a spec's author, or \
              the agent whose work is judged, could set or bypass would not ensure that.",
    },
    Difference {
        topic: "compact-text",
        summary: "the text copy of an answer is compact JSON",
        reference: "the text block is JSON indented by two spaces.",
        ours: "the same JSON without indentation, beside the same `structuredContent`.",
        why: "the same content in fewer tokens.",
    },
    Difference {
        topic: "speckit-bugs",
        summary: "the task compiler matches phrases whole and escapes what it writes",
        reference: "`tests pass` matches inside \"test passwords are hashed\"; backslashes and \
                    quotes in paths break the generated ensures; a non-UTF-8 task file is reported \
                    as an id collision.",
        ours: "phrases match whole; paths and needles are escaped for the expression language and \
               YAML; a non-UTF-8 file is reported as such; the generated spec checks clean.",
        why: "the generated spec must mean what the tasks say.",
    },
    Difference {
        topic: "retries-exhausted",
        summary: "a step whose retries are exhausted ends the flow",
        reference: "the flow stays live in memory: audit says `in_progress` and a further \
                    `step_done` on the same step completes it.",
        ours: "the flow ends `failed` with `error_type: retries_exhausted`; a later `step_done` \
               gets `flow_already_complete`.",
        why: "a failure must not be undone by submitting again.",
    },
    Difference {
        topic: "fresh-attempts",
        summary: "routing back to a step gives it fresh attempts, within a bound",
        reference: "`on_fail` back to an earlier step keeps the failed step's attempts (it fails \
                    at once the next time); `on_fail` to itself counts retries below zero; `next` \
                    loops have no bound.",
        ours: "a step entered again starts with fresh attempts; a step entered more often than \
               the flow's `max_rounds` (default 100) in one round ends the flow with \
               `routing_loop`.",
        why: "a retry loop should retry, and no loop should run forever.",
    },
    Difference {
        topic: "contracts-enforced",
        summary: "output schemas and contracts are checked for every kind of step",
        reference: "`output_schema` is checked for function steps only, contracts are never \
                    enforced, the flow's output contract is never checked and inputs are never \
                    validated.",
        ours: "every result is checked against its schema and contract; the final output against \
               the flow's `output` contract (and a step that would end the flow with another \
               contract is reported before the flow runs: `stratumc explain E0077`); inputs \
               against the flow's input schema at start, with every problem listed; undeclared \
               inputs are refused with a did-you-mean.",
        why: "the spec's types are promises; the runtime keeps them.",
    },
    Difference {
        topic: "ensure-errors",
        summary: "an ensure that raises fails in the words of every failed ensure",
        reference: "an exception in an `ensure` is the violation `Ensure expression '<expr>' \
                    raised: <Python's message>`, so a `no_file_conflicts` conflict reads `Ensure \
                    expression 'no_file_conflicts(result.tasks)' raised: File ownership conflict \
                    between independent tasks 't1' and 't2': ['shared.py']`; a built-in's \
                    `ValueError` of a list of strings (`plan_completion`) is one violation per \
                    string.",
        ours: "`ensure '<expr>' failed: <message>`, then the operands it read: the message is \
               the built-in's own for a `no_file_conflicts` conflict, word for word, and this \
               runtime's for a type error. `plan_completion`'s and `vocabulary_compliance`'s \
               lines are one violation each, word for word, as in the reference.",
        why: "one shape for every failed `ensure`, with the values that decided it; the \
              planning built-ins' own words are kept, since agents act on them.",
    },
    Difference {
        topic: "all-skipped",
        summary: "a flow whose steps are all skipped completes",
        reference: "`stratum_plan` returns None (an MCP error) and leaves a completed flow file \
                    behind.",
        ours: "the answer is the `complete` envelope.",
        why: "skipping everything is a legitimate outcome.",
    },
    Difference {
        topic: "iteration-state",
        summary: "accumulated fields only where a step accumulates; step_done closes an open loop",
        reference: "every iterated step gets `accumulated: [], accumulated_count: 0` merged into \
                    its output; a `step_done` during an open loop leaves it dangling.",
        ours: "only accumulating steps get those fields; `step_done` closes the loop.",
        why: "outputs must match their contracts, and the next loop must be able to start.",
    },
    Difference {
        topic: "kill-cleanup",
        summary: "a kill routed to a cleanup step reports `killed` once the cleanup is done",
        reference: "the flow is marked killed at once: after a restart `stratum_resume` refuses \
                    to dispatch the pending cleanup; cleanup steps that are not last fall through \
                    into later steps.",
        ours: "the cleanup step runs (also across a restart), then the flow ends `killed`; it \
               does not fall through unless an explicit `next` routes on.",
        why: "cleanup must run, and only cleanup.",
    },
    Difference {
        topic: "sub-flows",
        summary: "a flow step accepts a result only once its child flow completed",
        reference: "the parent accepts any result without the child having run; a restart between \
                    the child's end and the parent's `step_done` re-runs the child.",
        ours: "`child_flow_not_complete` until the child ends; the step's output is the child's \
               recorded output; a child whose parent moves on without it is `cancelled`.",
        why: "a sub-flow's result must be what the sub-flow produced.",
    },
    Difference {
        topic: "revert",
        summary: "revert dispatches like any move and cannot resurrect a finished flow",
        reference: "revert skips gate policies (a `skip` gate shows `await_gate`) and can revive a \
                    completed flow held in memory.",
        ours: "gate policies apply after a revert; a finished flow stays finished.",
        why: "a checkpoint is a place in a running flow, not a way around its end.",
    },
    Difference {
        topic: "gate-timeouts",
        summary: "gate timeouts run from the persisted dispatch time, on every call",
        reference: "`check_timeouts` is the only trigger, and a restart loses the gate's clock.",
        ours: "the dispatch time is stored; any call touching the flow kills an expired gate, \
               recorded at its deadline.",
        why: "a timeout must hold whoever looks, and whenever.",
    },
    Difference {
        topic: "skip-if-errors",
        summary: "a skip_if that cannot be evaluated runs the step and says why",
        reference: "every error in `skip_if` silently means \"do not skip\".",
        ours: "the step runs and its dispatch carries `skip_if_error`.",
        why: "a typo that disables a skip should be visible.",
    },
    Difference {
        topic: "refusals-change-nothing",
        summary: "a refused command leaves the store as it was",
        reference: "a `revise` refused by `max_rounds` keeps its gate record in the trace.",
        ours: "no record is written for a revision that never happened.",
        why: "the trace must say what happened, only that.",
    },
    Difference {
        topic: "flow-ids",
        summary: "flow ids are validated UUIDs and never reach a path",
        reference: "the id is used raw in file paths (read, unlink, rmtree).",
        ours: "ids are parsed as UUIDs; state is rows in a database, never a path built from input.",
        why: "no path traversal through an id.",
    },
    Difference {
        topic: "operator-statuses",
        summary: "query answers may say `failed` or `cancelled`",
        reference: "the version-1 contracts list `running, awaiting_gate, complete, killed, \
                    budget_exhausted`.",
        ours: "the same fields and values, plus `failed` (a step failed for good) and \
               `cancelled` (a sub-flow whose parent moved on), statuses the reference never \
               reaches because it keeps such flows running.",
        why: "an operator must see that a flow failed.",
    },
    Difference {
        topic: "gate-context",
        summary: "a waiting gate comes with what the person decides on",
        reference: "`query gates` lists a gate's flow, function, routes and timeout; the work \
                    it is about is read elsewhere.",
        ours: "each gate's JSON also carries `context` (the flow's input, the outputs before \
               the gate, earlier decisions with their rationales, the diffs its parallel \
               steps merged, all bounded), which `query gates FLOW`, the console and the \
               elicitation form show.",
        why: "a person approves what they see; a gate that shows no work invites a blind \
              approval.",
    },
    Difference {
        topic: "steps-completed",
        summary: "steps_completed in an audit counts steps that succeeded",
        reference: "it counts records (gates, skips, policies and duplicates included).",
        ours: "the steps with a step record in the current round.",
        why: "the number should mean what its name says.",
    },
    Difference {
        topic: "budget-ms",
        summary: "the ms budget counts wall time since the flow started",
        reference: "`ms` accrues only for agents the server dispatched itself.",
        ours: "wall-clock time since the flow started.",
        why: "the agent does the work here, so its time is the flow's time.",
    },
    Difference {
        topic: "task-graph-checked",
        summary: "a decompose step's task graph is checked before its ensures",
        reference: "the `step_done` result of a decompose step is not checked at all: a task \
                    that is not an object or has no id raises later, at dispatch, and ids reach \
                    file paths as written.",
        ours: "`result.tasks` must be a list of at most 256 objects whose `id`s match \
               `^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$` and are unique, whose `depends_on` name \
               tasks of the list, without a cycle; otherwise the attempt fails \
               (`schema_failed`) with a violation naming the task. A parallel step's `source` \
               is checked the same way when it is dispatched.",
        why: "a task graph that cannot run should fail the step that wrote it, where a retry \
              can fix it, and a task id must never name a path.",
    },
    Difference {
        topic: "parallel-envelope",
        summary: "a parallel_dispatch envelope lists the attempt's tasks with their prompts rendered",
        reference: "`tasks` is the resolved `source`, verbatim, and `intent_template` ships \
                    unrendered for the client to format; a retry answers the same envelope again \
                    with every task, plus `violations` and `bounced_tasks` (also on \
                    `retries_exhausted` and on an `on_fail` route).",
        ours: "the reference's fields, with the same names and values, plus: each task is its \
               `source` element plus `prompt`, the template rendered by the server (and, on a \
               retry, the `violations` of its previous attempt); `attempt` (from 1); `kept`, the \
               tasks accepted in an earlier attempt, which count without running again; \
               `dispatch` (`consumer`, or `server` once stratum_parallel_start took the tasks). \
               A retry lists only the tasks that must run again. A task whose template reads \
               `{prev}` is listed once its dependency completed, in the next round's envelope \
               (the reference sends such a template unrendered when the task has no single \
               dependency). `bounced_tasks` is on the retry \
               envelope when a task bounced; on `retries_exhausted` and an `on_fail` route the \
               bounces are named in `violations`. As in the reference, `task_timeout`, \
               `capture_diff`, `defer_advance` and the reasoning template are not in the \
               envelope.",
        why: "every client gets the same prompt, in the checked template dialect, and knows \
              exactly which tasks to run and report.",
    },
    Difference {
        topic: "parallel-reports",
        summary: "stratum_parallel_done checks the report against the tasks it dispatched",
        reference: "`require` counts the client's list (`[]` passes `all`, a duplicate counts \
                    twice, unknown ids are accepted); results are opaque; any `merge_status` \
                    other than `conflict` counts as clean; `stratum_step_done` completes a \
                    parallel step with any object.",
        ours: "`require` counts the tasks the step expects, those kept from earlier attempts \
               included: a task left out is failed (`task 'b' was not reported`), and the \
               violation says so in those terms (`require='all' not satisfied: 1 of 2 tasks \
               completed, 2 needed`; the reference: `1 completed, 1 failed`). A report naming a task the attempt did not \
               dispatch (or one kept from an earlier attempt) is refused with `unknown_task`, a \
               task named twice with `duplicate_task`, a `merge_status` that is not `clean`, \
               `conflict` or `{status, bounced_tasks}` with `invalid_merge_status`, and \
               `stratum_step_done` on a parallel step with `wrong_step_type`; a refusal changes \
               nothing and spends no attempt. Each complete task's result must satisfy the \
               step's `output_contract`, or that task fails.",
        why: "a step that needs every task must not pass on an empty or padded report.",
    },
    Difference {
        topic: "parallel-retries",
        summary: "a parallel step's retry runs again only what failed, keyed by attempt",
        reference: "task state is keyed by task id across the whole flow: a retry re-scores \
                    the first attempt's tasks instead of running them (`already_started`, then \
                    `retries_exhausted`), and a second parallel step over the same ids can \
                    never start.",
        ours: "tasks are keyed by (flow, step, attempt, task). Attempt N+1 runs the tasks that \
               did not complete or were bounced (every task not yet merged when the step's own \
               `ensure` refused the aggregate), each with its violations in its prompt; \
               accepted tasks are kept and count again. stratum_parallel_start is idempotent \
               per attempt, and every parallel step starts at attempt 1.",
        why: "a retry should retry, and the same task ids may be fanned out again.",
    },
    Difference {
        topic: "server-fan-out",
        summary: "tasks the server runs are bounded, isolated and merged; polling never advances",
        reference: "stratum_parallel_poll flushes events and advances the flow itself; worktrees \
                    are made from raw task ids (`../../x` escaped the home directory); \
                    `pre_merge_verify` commands may come from `$.input` and run with the \
                    server's full environment; diffs are text only and never merged; state is \
                    whole files rewritten by every server; errors come in three shapes \
                    (`{error}` without a status among them).",
        ours: "the server evaluates the step itself once every task settled (or, with \
               `defer_advance`, stratum_parallel_advance does), under the flow's lease; \
               stratum_parallel_poll is read-only, with `running` and, once evaluated, \
               `outcome`, the answer of the evaluation. Each task runs in a worktree at \
               `$STRATUM_HOME/worktrees/<flow>/<step>/<attempt>/<task>` from store keys, with \
               its `task_timeout` and its own process group; only the spec's own pre-merge \
               commands run (commands read from the flow's data only when the server's \
               allow-list names their program), under the agents' environment allow-list; \
               diffs are binary-safe, each stored once in a row of its own (at most 256 MiB a \
               step) and `merge: sequential_apply` applies them to the project \
               in dependency order, a conflict bouncing its task to the retry. Every refusal is \
               `status: error` with an `error_type`; `started` lists the tasks as poll does.",
        why: "an agent's call must not move a flow it only looks at, and tasks written by a \
              model must not reach the server's paths, secrets or other servers' state.",
    },
    Difference {
        topic: "judge",
        summary: "a judge's verdict binds, its files stay staged, and paranoid stakes' cold read runs \
                  with no container and no key on an argv",
        reference: "the verdict does not bind (`step_done` with `{\"met\": true}` completes the \
                    step after `met: false`); deterministic statements go through `eval` (a \
                    `__subclasses__` predicate ran `os.system`) and read outside the staging \
                    directory; wall time is checked only between predicates and `max_dollars` \
                    never; the third tier (`paranoid`, after a second-tier `met`) runs Codex in \
                    a read-only Docker container with `-e OPENAI_API_KEY=…` on docker's argv, \
                    where any process of the machine can read it, and falls back to Claude; \
                    every tier runs inside the one `stratum_judge` call, which says nothing \
                    until the verdict.",
        ours: "only the server's recorded verdict completes a judge step (`stratum_step_done` on \
               it is refused with `judge_required`); deterministic predicates run in our VM with \
               file built-ins rooted at the turn directory; every agent tier run counts a turn \
               and gets what is left of the wall clock as its deadline, and a tier the budget \
               has no room for leaves its predicate `ambiguous` with the reason. The third tier \
               is a cold read: a fresh agent run told only the predicate and the staged files' \
               names, on another CLI than the second tier's when one is installed (Codex after \
               Claude, Claude after Codex), else the same CLI in a fresh session (`t3.mode`: \
               `other_cli` or `same_cli_fresh_session`; the latter counts in \
               `meta.t3_summary.any_degraded`), in the same turn directory, its citations checked \
               as the second tier's. It runs the agent CLI in its own read-only mode (Codex's \
               `--sandbox read-only`; Claude with only Read, Grep and Glob), under the agents' \
               environment allow-list, not in a container (`all_jailed` is always false), and \
               an API key reaches it only through that environment, never an argv. Anything but \
               `met` from it makes the predicate `ambiguous` and adds a `tier_disagreements` \
               entry (`predicate_id`, `tiers`, `verdicts`, `reasons`). The tiers run on a \
               thread of the server: `stratum_judge` waits for the verdict as the reference's \
               does, sending a progress notification per decided predicate and a heartbeat, or \
               answers `judging` after its `wait_seconds`, and `stratum_judge_poll` follows \
               them.",
        why: "a judge that can be overruled by the client, or that leaks a key or the server's \
              files, is worse than none; a container runtime is not something every machine \
              running this server has, and the CLIs' own read-only modes keep the cold read from \
              changing the staged files it judges.",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_unique_and_found_loosely() {
        let mut topics: Vec<&str> = DIFFERENCES.iter().map(|d| d.topic).collect();
        topics.sort_unstable();
        topics.dedup();
        assert_eq!(topics.len(), DIFFERENCES.len());
        assert!(find("retries_exhausted").is_ok());
        assert!(find("Retries-Exhausted").is_ok());
        assert_eq!(
            find("retries-exausted").err(),
            Some(
                "no topic or diagnostic code `retries-exausted`; did you mean \
                 `retries-exhausted`? (`stratum-mcp explain` lists the topics; codes look like \
                 E0011)"
                    .to_owned()
            )
        );
    }

    #[test]
    fn the_fan_out_refusals_and_additions_are_named() {
        let reports = find("parallel-reports").map(|d| d.ours).unwrap_or_default();
        for error_type in [
            "unknown_task",
            "duplicate_task",
            "invalid_merge_status",
            "wrong_step_type",
        ] {
            assert!(reports.contains(&format!("`{error_type}`")), "{error_type}");
        }
        let envelope = find("parallel-envelope")
            .map(|d| d.ours)
            .unwrap_or_default();
        for field in ["prompt", "attempt", "kept", "dispatch", "violations"] {
            assert!(envelope.contains(&format!("`{field}`")), "{field}");
        }
    }

    #[test]
    fn the_cold_read_says_it_runs_without_a_container_or_a_key_on_an_argv() {
        let judge = find("judge").map(|d| d.ours).unwrap_or_default();
        for said in [
            "not in a container",
            "never an argv",
            "read-only mode",
            "`tier_disagreements`",
            "`judge_required`",
        ] {
            assert!(judge.contains(said), "{said}");
        }
    }
}
