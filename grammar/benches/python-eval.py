#!/usr/bin/env python3
"""Python's `eval` of the benchmark's ensure, the way the reference evaluates it.

The same expression and the same result as `benches/eval.rs`. The expression is compiled once
(`compile(..., "eval")`), the result is bound as a SimpleNamespace (as the reference binds a
dict result), and the globals are the reference's jail (`__builtins__` empty plus the
built-ins). Two figures:

- "eval only (pre-wrapped)": `bool(eval(code, env, {"result": namespace}))` with the
  namespace built once: the evaluation itself, the counterpart of `eval/ensure_bool` (which
  also builds its bindings on every evaluation).
- "wrap + eval + bool": the reference's real path, which wraps the result dict on every
  evaluation.

Each statement is timed by `timeit` as a statement (no extra Python call around it), with
`autorange` choosing the loop count (at least 0.2 s per run), best of 7 runs.
Run: python3 grammar/benches/python-eval.py
"""
import platform
import timeit
import types

ENSURE = "result.confidence > 0.7 and len(result.items) > 0"
RESULT = {
    "confidence": 0.92,
    "items": ["a", "b", "c"],
    "label": "positive",
    "summary": "The change is small, tested and documented; the reviewer agrees with it.",
}

code = compile(ENSURE, "<ensure_expr>", "eval")
env = {"__builtins__": {}, "len": len, "bool": bool, "int": int, "str": str,
       "any": any, "all": all, "min": min, "max": max}
namespace = types.SimpleNamespace(**RESULT)
names = {"code": code, "env": env, "RESULT": RESULT, "namespace": namespace,
         "SimpleNamespace": types.SimpleNamespace}

CASES = [
    ("eval only (pre-wrapped)", 'bool(eval(code, env, {"result": namespace}))'),
    ("wrap + eval + bool", 'bool(eval(code, env, {"result": SimpleNamespace(**RESULT)}))'),
]

assert eval(CASES[0][1], names) is True and eval(CASES[1][1], names) is True
print(f"Python {platform.python_version()} ({platform.python_implementation()})")
for name, statement in CASES:
    timer = timeit.Timer(statement, globals=names)
    loops, _ = timer.autorange()
    best = min(timer.repeat(repeat=7, number=loops)) / loops
    print(f"{name}: {best * 1e9:.0f} ns per evaluation, {1 / best:,.0f} evaluations/s")
