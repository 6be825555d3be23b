"""Mutation run over the safety-critical modules: do their tests notice a broken safeguard?

    ./dev python tools/mutate.py [MODULE ...] [--list] [--jobs N] [--timeout S] [--sample N]

Each MODULE is a name from `MODULES` (``redaction``, ``secret_scan``, ``safety``, ``bounded_json``,
``audit``; none: all of them). For each module the tool makes every mutant of its source (or of
the functions `MODULES` names, or a seeded sample of them, as `MODULES` says) with small ``ast``
changes -- an arithmetic or bitwise operator swapped, a comparison flipped (``<`` / ``<=`` /
``>``, ``==`` / ``!=``, ``in`` / ``not in``, ``is`` / ``is not``), ``and`` / ``or`` swapped, a
``not`` dropped, a constant changed (numbers by one, strings emptied or altered, ``True`` /
``False`` swapped), a statement removed (replaced by ``pass``), ``continue`` / ``break`` swapped
-- and runs, for each mutant, the module's tests that execute the mutated line (learnt once per
run by tracing the module's tests with ``sys.monitoring``; a line run only while the module is
imported gets all of them), in a fork of the tool's process (which has imported pytest,
OpenTelemetry and flowra, never the package) whose import of the module yields the mutant (the
file on disk is never touched), with a timeout. A test failing (or the timeout) kills the
mutant; a mutant no test fails survives.

Survivors that cannot be killed because they change nothing observable (equivalent mutants) are
listed with the reason in ``tools/mutation-equivalents.txt``, keyed by module, function, the
change and the line's text, so a rerun counts them and a changed line drops its entry. The table
printed at the end: module, mutants, killed, equivalent, score = killed / (mutants - equivalent);
every other survivor is listed for a test to be written. Exit 1 when a module scores below
``TARGET``.

Not in CI: a run takes minutes per module (a few seconds per mutant). Run it under ``nice`` on a
shared machine; ``--jobs`` runs that many mutants at once.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import functools
import importlib.abc
import importlib.util
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
EQUIVALENTS: Final = ROOT / "tools" / "mutation-equivalents.txt"
TARGET: Final = 0.90


@dataclasses.dataclass(frozen=True)
class Module:
    path: str
    tests: tuple[str, ...]
    """The module's own tests (flowra-free, fast): the only ones a mutant runs."""
    functions: tuple[str, ...] = ()
    """Only mutants inside these functions (qualified names); empty: the whole module."""
    sample: int | None = None
    """Mutants drawn (``random.Random(SEED)``) from all of them; None: every one."""


SEED: Final = 33
MODULES: Final[dict[str, Module]] = {
    "redaction": Module("flowra_otel/core/redaction.py", ("tests/test_redaction_ledger_values.py",)),
    "secret_scan": Module(
        "flowra_otel/core/secret_scan.py",
        ("tests/test_secret_scan_finds_every_leak.py", "tests/test_audit_matching_and_verdict.py"),
    ),
    "safety": Module("flowra_otel/core/safety.py", ("tests/test_safety_helpers_never_raise.py",)),
    "bounded_json": Module(
        "flowra_otel/core/bounded_json.py",
        ("tests/test_bounded_json_scrubs_and_bounds.py",),
    ),
    "audit": Module(
        "flowra_otel/core/audit.py",
        ("tests/test_audit_matching_and_verdict.py", "tests/test_audit_reads_every_value.py"),
        functions=(
            "audit_spans",
            "_masked",
            "_masked_value",
            "_masked_call",
            "_tool_call",
            "_ledger_value",
            "_span_texts",
            "_attribute_texts",
            "_strings",
            "_scalar_text",
            "_mask",
            "AuditReport.clean",
            "AuditReport.exit_code",
            "_report",
            "render_text",
            "_format_value",
            "is_mcp_server_call",
            "mcp_server_calls",
        ),
    ),
}


# ------------------------------------------------------------------------------------ mutants
@dataclasses.dataclass(frozen=True)
class Mutant:
    index: int
    """Position in the module's full list (stable while the source is)."""
    line: int
    function: str
    change: str
    text: str
    """The mutated line's text, stripped."""
    occurrence: int
    """Among mutants with the same function, change and text: which one (0-based)."""

    @property
    def key(self) -> str:
        return f"{self.function} | {self.change} | {self.text} | {self.occurrence}"


_BINOP_SWAPS: Final[dict[type, tuple[type, ...]]] = {
    ast.Add: (ast.Sub,),
    ast.Sub: (ast.Add,),
    ast.Mult: (ast.FloorDiv,),
    ast.FloorDiv: (ast.Mult,),
    ast.Div: (ast.Mult,),
    ast.Mod: (ast.FloorDiv,),
    ast.Pow: (ast.Mult,),
    ast.LShift: (ast.RShift,),
    ast.RShift: (ast.LShift,),
    ast.BitOr: (ast.BitAnd,),
    ast.BitAnd: (ast.BitOr,),
    ast.BitXor: (ast.BitOr,),
}
_CMP_SWAPS: Final[dict[type, tuple[type, ...]]] = {
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
    ast.Lt: (ast.LtE, ast.Gt),
    ast.LtE: (ast.Lt, ast.Gt),
    ast.Gt: (ast.GtE, ast.Lt),
    ast.GtE: (ast.Gt, ast.Lt),
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
}
_REMOVABLE: Final = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.If, ast.Raise, ast.Delete)


def _name(op: object) -> str:
    return type(op).__name__


def _constant_changes(value: object) -> list[tuple[str, object]]:
    if isinstance(value, bool):
        return [(f"constant {value} -> {not value}", not value)]
    if isinstance(value, int):
        zero = [(f"constant {value} -> 0", 0)] if value > 1 else []
        return [(f"constant {value} -> {value + 1}", value + 1), *zero]
    if isinstance(value, float):
        return [(f"constant {value} -> {value + 1}", value + 1)]
    if isinstance(value, str):
        if not value:
            return [("constant '' -> 'mutant'", "mutant")]
        if len(value) > 1:
            return [(f"constant {value[:24]!r} changed", "X" + value[1:])]
        return [(f"constant {value!r} -> 'X'", "X" if value != "X" else "Y")]
    if isinstance(value, bytes) and value:
        return [("constant bytes changed", b"X" + value[1:])]
    return []


Edit = Callable[[ast.AST], None]
Point = tuple[ast.AST, str, str, Edit | None, str]
"""A mutation point: (node, enclosing function, change, edit or None, kind)."""
_NOT_EXPRESSIONS: Final = (ast.stmt, ast.expr_context, ast.operator, ast.cmpop, ast.boolop, ast.unaryop)


def _setter(attribute: str, make: Callable[[], object]) -> Edit:
    def edit(node: ast.AST) -> None:
        setattr(node, attribute, make())

    return edit


def _edits(node: ast.AST) -> Iterator[tuple[str, Edit]]:
    """(change, edit) for each mutation of ``node`` itself; ``edit`` applies it in place."""
    if isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _BINOP_SWAPS:
        suffix = "=" if isinstance(node, ast.AugAssign) else ""
        for new in _BINOP_SWAPS[type(node.op)]:
            yield f"{_name(node.op)}{suffix} -> {new.__name__}{suffix}", _setter("op", new)
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for new in _CMP_SWAPS.get(type(op), ()):

                def swap(n: ast.AST, i: int = i, new: type = new) -> None:
                    n.ops[i] = new()  # type: ignore[attr-defined]

                yield f"{_name(op)} -> {new.__name__}", swap
    if isinstance(node, ast.BoolOp):
        new_op = ast.Or if isinstance(node.op, ast.And) else ast.And
        yield f"{_name(node.op)} -> {new_op.__name__}", _setter("op", new_op)
    if isinstance(node, ast.Constant):
        for change, value in _constant_changes(node.value):
            yield change, _setter("value", functools.partial(lambda v: v, value))


_NOT_RUN: Final = frozenset({"annotation", "returns", "type_comment"})
"""Fields whose code never runs (``from __future__ import annotations``): not mutated."""


_INERT: Final = frozenset({"__all__", "__slots__"})


def _is_inert(stmt: ast.stmt) -> bool:
    """A statement whose mutants change nothing by construction, or only break the module's
    import: a docstring (of the module, a class, a function or an attribute), ``__all__``,
    ``__slots__``, an ``if TYPE_CHECKING:`` block, an import."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return True
    if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id in _INERT for t in stmt.targets):
        return True
    if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Name) and stmt.test.id == "TYPE_CHECKING":
        return True
    return isinstance(stmt, ast.Import | ast.ImportFrom)


class _Walker:
    """Numbers every mutation point of a module in a fixed order (``ast.walk`` of statements in
    source order), with the enclosing function's qualified name."""

    def __init__(self, tree: ast.Module, lines: Sequence[str]) -> None:
        self.tree = tree
        self.lines = lines

    def points(self) -> Iterator[Point]:
        """(node, function, change, edit or None (statement swap), kind)."""
        yield from self._visit(self.tree, "<module>", None)

    def _visit(self, node: ast.AST, function: str, parent: ast.AST | None) -> Iterator[Point]:
        for field, value in ast.iter_fields(node):
            if field in _NOT_RUN:
                continue
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                for position, stmt in enumerate(value):
                    yield from self._statement(stmt, function, node, field, position)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.excepthandler | ast.match_case):  # a body of statements
                        yield from self._visit(item, function, node)
                    elif isinstance(item, ast.AST):
                        yield from self._expression(item, function, node)
            elif isinstance(value, ast.AST) and not isinstance(value, ast.stmt):
                yield from self._expression(value, function, node)

    def _statement(self, stmt: ast.stmt, function: str, parent: ast.AST, field: str, position: int) -> Iterator[Point]:
        inner = function
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            inner = stmt.name if function == "<module>" else f"{function}.{stmt.name}"
        if _is_inert(stmt):
            return
        if isinstance(stmt, _REMOVABLE) and not _is_type_only(stmt) and function != "<module>":
            yield stmt, function, "remove statement", None, "remove"
        if isinstance(stmt, ast.Continue | ast.Break):
            change = "continue -> break" if isinstance(stmt, ast.Continue) else "break -> continue"
            yield stmt, function, change, None, "swap"
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            for default in [*stmt.args.defaults, *stmt.args.kw_defaults]:
                if default is not None:
                    yield from self._expression(default, function, stmt)
            for decorator in stmt.decorator_list:
                yield from self._expression(decorator, function, stmt)
            yield from self._visit_body(stmt, inner)
            return
        if isinstance(stmt, ast.ClassDef):
            yield from self._visit_body(stmt, inner)
            return
        yield from self._visit(stmt, function, parent)

    def _visit_body(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, function: str) -> Iterator[Any]:
        for position, stmt in enumerate(node.body):
            yield from self._statement(stmt, function, node, "body", position)

    def _expression(self, node: ast.AST, function: str, parent: ast.AST) -> Iterator[Point]:
        if isinstance(node, ast.JoinedStr):  # f-strings: their constant parts are message text
            for value in node.values:
                if isinstance(value, ast.FormattedValue):
                    yield from self._expression(value.value, function, node)
            return
        for change, edit in _edits(node):
            yield node, function, change, edit, "edit"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, function, "not removed", None, "not"
        for _, child in ast.iter_fields(node):
            children = child if isinstance(child, list) else [child]
            for item in children:
                if isinstance(item, ast.AST) and not isinstance(item, _NOT_EXPRESSIONS):
                    yield from self._expression(item, function, node)


def _is_type_only(stmt: ast.stmt) -> bool:
    """An annotation without a value: removing it changes nothing at run time."""
    return isinstance(stmt, ast.AnnAssign) and stmt.value is None


def mutants(source: str, module: Module) -> list[Mutant]:
    tree = ast.parse(source)
    lines = source.splitlines()
    found: list[Mutant] = []
    counts: dict[tuple[str, str, str], int] = {}
    for index, (node, function, change, _edit, _kind) in enumerate(_Walker(tree, lines).points()):
        line = getattr(node, "lineno", 0)
        text = lines[line - 1].strip() if line else ""
        key = (function, change, text)
        occurrence = counts.get(key, 0)
        counts[key] = occurrence + 1
        found.append(Mutant(index, line, function, change, text, occurrence))
    if module.functions:
        wanted = set(module.functions)
        found = [m for m in found if m.function in wanted or m.function.split(".")[0] in wanted]
    return found


def mutated_source_tree(source: str, index: int) -> ast.Module:
    """The module's tree with mutant ``index`` applied (the same walk, the ``index``-th point)."""
    tree = ast.parse(source)
    for position, (node, _function, change, edit, kind) in enumerate(_Walker(tree, source.splitlines()).points()):
        if position != index:
            continue
        if kind == "edit" and edit is not None:
            edit(node)
        elif kind == "not":
            _replace(tree, node, node.operand)  # type: ignore[attr-defined]
        elif kind == "remove":
            _replace(tree, node, ast.Pass())
        elif kind == "swap":
            _replace(tree, node, ast.Break() if isinstance(node, ast.Continue) else ast.Continue())
        else:
            raise AssertionError(change)
        return ast.fix_missing_locations(tree)
    raise IndexError(index)


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    ast.copy_location(new, old)
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return
    raise AssertionError("node not found")


# ------------------------------------------------------------------------------------ in the child
class _MutantFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Gives the mutated code for one module name; every other import goes its usual way."""

    def __init__(self, name: str, path: str, code: Any) -> None:
        self.name, self.path, self.code = name, path, code

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path, loader=self)

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        exec(self.code, module.__dict__)  # the mutant under test


def _module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def _preload() -> None:
    """Import, once, what every test run needs and the mutants never change (pytest,
    OpenTelemetry, flowra): each mutant's run is a fork of this process, so it pays only for the
    package's own modules and the tests. Never ``flowra_otel`` (the fork imports it afresh, with
    the mutant), nor a pytest plugin (pytest must import those itself, to rewrite their asserts)."""
    import importlib

    for name in (
        "pytest",
        "_pytest.python",
        "_pytest.logging",
        "opentelemetry.sdk.trace",
        "opentelemetry.sdk.metrics",
        "opentelemetry.sdk._logs",
        "opentelemetry.sdk.trace.export.in_memory_span_exporter",
        "opentelemetry.exporter.otlp.proto.common.trace_encoder",
        "flowra",
        "flowra.agent",
    ):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    assert not any(m == "flowra_otel" or m.startswith("flowra_otel.") for m in sys.modules), "flowra_otel preloaded"


def _fork(work: Callable[[], int]) -> int:
    """Run ``work`` in a forked child (its output thrown away); the child's pid."""
    pid = os.fork()
    if pid == 0:  # the child
        status = 3
        try:
            if not os.environ.get("MUTATE_SHOW_OUTPUT"):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
            status = work()
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(status)
    return pid


def _pytest(module: Module, args: list[str], index: int | None, plugins: list[Any] | None = None) -> int:
    """In the child: the module's mutant ``index`` (None: the module as it is) for every import,
    then pytest with ``args``."""
    import pytest

    if index is not None:
        path = ROOT / module.path
        code = compile(mutated_source_tree(path.read_text(encoding="utf-8"), index), str(path), "exec")
        sys.meta_path.insert(0, _MutantFinder(_module_name(module.path), str(path), code))
        _leave_to_mutant(_module_name(module.path))
    os.chdir(ROOT)
    status = int(pytest.main([*PYTEST_ARGS, *args], plugins=plugins or []))
    loaded = sys.modules.get(_module_name(module.path))
    if index is not None and loaded is not None and not isinstance(loaded.__loader__, _MutantFinder):
        return NOT_THE_MUTANT  # the tests ran the original: no verdict on the mutant
    return status


NOT_THE_MUTANT: Final = 99
"""A child's status when the module its tests imported was not the mutant (an error, never a kill)."""


def _leave_to_mutant(name: str) -> None:
    """Keep pytest's assertion rewriter off the mutated module. The package's pytest plugin (the
    ``pytest11`` entry point) makes pytest mark the whole distribution for rewriting, and the
    rewriter, put first on ``sys.meta_path`` when pytest starts, would load the module from disk
    before ``_MutantFinder`` is asked: every mutant would then run as the original and survive."""
    from _pytest.assertion import rewrite

    find_spec = rewrite.AssertionRewritingHook.find_spec

    def skipping(self: Any, fullname: str, path: Any = None, target: Any = None) -> Any:
        return None if fullname == name else find_spec(self, fullname, path, target)

    rewrite.AssertionRewritingHook.find_spec = skipping  # type: ignore[method-assign,assignment]


def _traced_pytest(module: Module, out: str) -> int:
    """In the child: the module's tests once, noting per test which of its lines ran."""
    import pytest

    target = str(ROOT / module.path)
    mon = sys.monitoring
    tool = mon.PROFILER_ID if mon.get_tool(mon.PROFILER_ID) is None else mon.OPTIMIZER_ID
    mon.use_tool_id(tool, "mutate")
    lines: dict[str, set[int]] = {}
    current = ["<import>"]

    def on_line(code: Any, line: int) -> Any:
        if code.co_filename != target:
            return mon.DISABLE
        lines.setdefault(current[0], set()).add(line)
        return None

    mon.register_callback(tool, mon.events.LINE, on_line)
    mon.set_events(tool, mon.events.LINE)

    class Plugin:
        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Any:
            current[0] = item.nodeid
            try:
                return (yield)
            finally:
                current[0] = "<between tests>"

    status = _pytest(module, list(module.tests), None, [Plugin()])
    mon.set_events(tool, 0)
    Path(out).write_text(json.dumps({k: sorted(v) for k, v in lines.items()}), encoding="utf-8")
    return status


def _wait(pid: int, timeout: float) -> int | None:
    """The child's exit status, or None when it ran out of time (it is killed)."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return None
        time.sleep(delay)
        delay = min(0.05, delay * 2)


# ------------------------------------------------------------------------------------ the run
PYTEST_ARGS: Final = ["-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly", "-o", "addopts="]


def trace_lines(module: Module) -> dict[str, set[int]]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "lines.json")
        status = _wait(_fork(lambda: _traced_pytest(module, out)), 3600)
        if status != 0:
            sys.exit(
                f"mutate: the tests of {module.path} fail unmutated (pytest exit {status}): run them, "
                "or set MUTATE_SHOW_OUTPUT=1 to see this run's output"
            )
        return {k: set(v) for k, v in json.loads(Path(out).read_text(encoding="utf-8")).items()}


def tests_for(line: int, traced: dict[str, set[int]], module: Module) -> list[str] | None:
    """The tests that run ``line``; every test of the module when only the import ran it; None
    when nothing runs it."""
    by_test = [test for test, lines in traced.items() if line in lines and not test.startswith("<")]
    if by_test:
        return by_test
    if any(line in lines for test, lines in traced.items() if test.startswith("<")):
        return list(module.tests)
    return None


@dataclasses.dataclass
class Outcome:
    mutant: Mutant
    result: str
    """``killed``, ``timeout`` (killed), ``survived``, ``not run`` (no test runs the line), ``error``."""


def _result(status: int | None) -> str:
    if status is None:
        return "timeout"
    if status in (5, NOT_THE_MUTANT):  # no tests collected, or the original ran: never a kill
        return "error"
    # 0: every test passed; else a test failed, or the mutant broke the import or collection,
    # which any run of the tests notices too
    return "survived" if status == 0 else "killed"


def load_equivalents() -> dict[tuple[str, str], str]:
    """``module | function | change | line text | occurrence | reason`` lines -> reason."""
    found: dict[tuple[str, str], str] = {}
    if not EQUIVALENTS.exists():
        return found
    for raw in EQUIVALENTS.read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        parts = [p.strip() for p in raw.split(" | ")]
        if len(parts) < 6:
            continue
        module, function, change, text, occurrence = parts[:5]
        reason = " | ".join(parts[5:])
        found[module, f"{function} | {change} | {text} | {occurrence}"] = reason
    return found


def run_module(
    name: str, module: Module, *, jobs: int, timeout: float | None, listing: bool
) -> tuple[int, int, int, list[Outcome]]:
    source = (ROOT / module.path).read_text(encoding="utf-8")
    every = mutants(source, module)
    chosen = every
    if module.sample is not None and module.sample < len(every):
        chosen = sorted(random.Random(SEED).sample(every, module.sample), key=lambda m: m.index)
    if listing:
        for mutant in chosen:
            print(f"{name}:{mutant.line}: {mutant.key}")
        return len(chosen), 0, 0, []
    print(f"mutate: {name}: {len(chosen)} mutant(s) of {len(every)}; tracing its tests", file=sys.stderr, flush=True)
    start = time.monotonic()
    traced = trace_lines(module)
    limit = timeout if timeout is not None else max(30.0, 10 * (time.monotonic() - start))
    outcomes: list[Outcome] = []
    running: dict[int, tuple[Mutant, float]] = {}
    pending = list(chosen)
    while pending or running:
        while pending and len(running) < max(1, jobs):
            mutant = pending.pop(0)
            tests = tests_for(mutant.line, traced, module)
            if tests is None:
                outcomes.append(Outcome(mutant, "not run"))
                continue
            pid = _fork(functools.partial(_pytest, module, tests, mutant.index))
            running[pid] = (mutant, time.monotonic() + limit)
        if not running:
            continue
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            for child, (mutant, deadline) in list(running.items()):
                if time.monotonic() > deadline:
                    os.kill(child, 9)
                    os.waitpid(child, 0)
                    del running[child]
                    outcomes.append(Outcome(mutant, "timeout"))
            time.sleep(0.01)
            continue
        mutant, _ = running.pop(pid)
        outcomes.append(Outcome(mutant, _result(os.waitstatus_to_exitcode(status))))
        if len(outcomes) % 25 == 0:
            killed = sum(o.result in ("killed", "timeout") for o in outcomes)
            print(f"mutate: {name}: {len(outcomes)}/{len(chosen)} run, {killed} killed", file=sys.stderr, flush=True)
    outcomes.sort(key=lambda o: o.mutant.index)
    equivalents = load_equivalents()
    killed = sum(o.result in ("killed", "timeout") for o in outcomes)
    equivalent = sum(o.result not in ("killed", "timeout") and (name, o.mutant.key) in equivalents for o in outcomes)
    return len(chosen), killed, equivalent, outcomes


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"of: {', '.join(MODULES)} (default: all)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    parser.add_argument("--timeout", type=float, help="seconds per mutant (default: 10x the traced run, >= 30)")
    parser.add_argument("--list", action="store_true", help="list the mutants and run nothing")
    parser.add_argument(
        "--sample", type=int, help=f"run a seeded sample (seed {SEED}) of this many of each module's mutants"
    )
    options = parser.parse_args(args)
    names = options.modules or list(MODULES)
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        parser.error(f"unknown module(s): {', '.join(unknown)}; known: {', '.join(MODULES)}")
    if not options.list:
        _preload()
    equivalents = load_equivalents()
    rows: list[tuple[str, int, int, int, float, str]] = []
    for name in names:
        module = MODULES[name]
        if options.sample is not None:
            module = dataclasses.replace(module, sample=options.sample)
        count, killed, equivalent, outcomes = run_module(
            name, module, jobs=options.jobs, timeout=options.timeout, listing=options.list
        )
        if options.list:
            continue
        score = killed / max(1, count - equivalent)
        total = len(mutants((ROOT / module.path).read_text(encoding="utf-8"), module))
        what = f" (sample of {count} of {total}, seed {SEED})" if count < total else ""
        what += " (matching and verdict functions)" if module.functions else ""
        rows.append((name, count, killed, equivalent, score, what))
        for outcome in outcomes:
            if outcome.result in ("killed", "timeout") or (name, outcome.mutant.key) in equivalents:
                continue
            print(f"  SURVIVED ({outcome.result}) {name}:{outcome.mutant.line}: {name} | {outcome.mutant.key}")
    if options.list:
        return 0
    print()
    print(f"{'module':<14} {'mutants':>8} {'killed':>7} {'equivalent':>11} {'score':>7}")
    for name, count, killed, equivalent, score, what in rows:
        print(f"{name:<14} {count:>8} {killed:>7} {equivalent:>11} {score:>7.1%}{what}")
    return 0 if all(row[4] >= TARGET for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
