"""How a HumanEval completion behaves on its problem's tests, recorded outcome by outcome.

Two completions that both fail the tests may still behave alike or not; the pass bit cannot
tell. :func:`behaviour` runs a completion in the sandbox (:mod:`racer_bench.tasks.sandbox`) against
the problem's ``check`` function, one top-level statement of its body at a time, and records

* ``load``: ``"ok"`` or the exception that defining the code raised (``SyntaxError`` ...);
* per statement (assertion, loop, helper line): ``"pass"``, ``"timeout"`` (over
  ``statement_s`` seconds, default 1) or the exception's type name (``AssertionError`` = a
  wrong value);
* ``calls``: every call of the candidate function, in order, as the ``repr`` of its return
  value or ``"raise <Type>"`` (memory addresses removed, each at most 200 characters, at most
  500 calls).

Two completions behave the same when these records are equal (:func:`same_behaviour`): same
outcome of every assertion and the same value of every call on the test inputs. A program
that does not finish within the sandbox's timeout has the record ``{"load": "timeout"}``.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from racer_bench.tasks.sandbox import run_python_report

REPORT_FILE = "behaviour.json"
MAX_CALLS = 500
MAX_REPR = 200

# The probe: argv-free, everything it needs is pasted in as literals (CODE, TEST, ENTRY).
PROBE = r"""
import ast as _ast, json as _json, re as _re, signal as _signal
CODE, TEST, ENTRY, STATEMENT_S = {code!r}, {test!r}, {entry!r}, {statement_s!r}
_open, _type, _repr, _len = open, type, repr, len
class _Timeout(BaseException):
    pass
def _alarm(signum, frame):
    raise _Timeout()
_signal.signal(_signal.SIGALRM, _alarm)
CALLS = []
def _show(value):
    text = _re.sub(r" at 0x[0-9a-fA-F]+", "", _repr(value))
    return text[:{max_repr}]
def _probe(fn, *args, **kwargs):
    try:
        result = fn(*args, **kwargs)
    except _Timeout:
        raise
    except BaseException as error:
        if _len(CALLS) < {max_calls}:
            CALLS.append("raise " + _type(error).__name__)
        raise
    if _len(CALLS) < {max_calls}:
        CALLS.append(_show(result))
    return result
class _Calls(_ast.NodeTransformer):
    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, _ast.Name) and node.func.id == "candidate":
            probe = _ast.Name("_probe", _ast.Load())
            return _ast.copy_location(_ast.Call(probe, [node.func, *node.args], node.keywords),
                                      node)
        return node
def _run(source, namespace):
    _signal.setitimer(_signal.ITIMER_REAL, STATEMENT_S)
    try:
        exec(source, namespace)
        return "pass"
    except _Timeout:
        return "timeout"
    except BaseException as error:
        return _type(error).__name__
    finally:
        _signal.setitimer(_signal.ITIMER_REAL, 0)
report = {{"load": "ok", "statements": [], "calls": CALLS}}
namespace = {{"__name__": "__candidate__", "_probe": _probe}}
try:
    report["load"] = _run(compile(CODE, "candidate.py", "exec"), namespace)
except BaseException as error:  # SyntaxError, ValueError (null bytes)
    report["load"] = _type(error).__name__
report["load"] = "ok" if report["load"] == "pass" else report["load"]
if report["load"] == "ok":
    check = next(n for n in _ast.parse(TEST).body
                 if isinstance(n, _ast.FunctionDef) and n.name == "check")
    namespace["candidate"] = namespace.get(ENTRY)
    for node in check.body:
        module = _ast.fix_missing_locations(_ast.Module([_Calls().visit(node)], []))
        try:
            source = compile(module, "test.py", "exec")
        except SyntaxError:
            report["statements"].append("skipped")
            continue
        report["statements"].append(_run(source, namespace))
with _open({report_file!r}, "w") as f:
    f.write(_json.dumps(report))
"""


def probe_program(code: str, test: str, entry: str, statement_s: float = 1.0) -> str:
    """The sandboxed program that records the behaviour of ``code`` (a whole module)."""
    return PROBE.format(code=code, test=test, entry=entry, statement_s=float(statement_s),
                        max_repr=MAX_REPR, max_calls=MAX_CALLS,
                        report_file=REPORT_FILE)  # fmt: skip


def check_statements(test: str) -> int:
    """Top-level statements in the body of the test's ``check`` function."""
    for node in ast.parse(test).body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            return len(node.body)
    raise ValueError("the test defines no check function")


def behaviour(
    code: str, test: str, entry: str, timeout_s: float = 10.0, statement_s: float = 1.0
) -> dict[str, Any]:
    """The behaviour record of the module ``code`` on the problem's ``check`` (module doc).

    ``timeout_s`` bounds loading the code; each statement of ``check`` adds ``statement_s``.
    """
    program = probe_program(code, test, entry, statement_s)
    total = timeout_s + statement_s * check_statements(test)
    _, _, text = run_python_report(program, total, report=REPORT_FILE)
    if text is None:
        return {"load": "timeout"}
    try:
        return json.loads(text)
    except ValueError:
        return {"load": "unreadable"}


def same_behaviour(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two behaviour records agree on loading, every statement's outcome and every call."""
    return a == b
