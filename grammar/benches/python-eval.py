#!/usr/bin/env python3
"""Python's `eval` of the benchmark's ensure, the way the reference evaluates it.

The expression is compiled once (`compile(..., "eval")`), the result is bound as a
SimpleNamespace (as the reference binds a dict result), and the globals are the reference's
jail (`__builtins__` empty plus the built-ins). Prints evaluations per second.
Run: python3 grammar/benches/python-eval.py
"""
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


def once():
    # As the reference: wrap the dict, evaluate, take the truth value.
    return bool(eval(code, env, {"result": types.SimpleNamespace(**RESULT)}))


def eval_only(namespace=types.SimpleNamespace(**RESULT)):
    return bool(eval(code, env, {"result": namespace}))


assert once() is True
for name, fn in [("eval (wrap + eval + bool)", once), ("eval only (pre-wrapped)", eval_only)]:
    timer = timeit.Timer(fn)
    loops, _ = timer.autorange()
    best = min(timer.repeat(repeat=5, number=loops)) / loops
    print(f"{name}: {best * 1e9:.0f} ns per evaluation, {1 / best:,.0f} evaluations/s")
