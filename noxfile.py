"""flowra-otel's workshop: every check, test cell, backend and benchmark is a nox session.

    nox -l                                  list the sessions (with what each one does)
    nox -s tests-0.0.93                     the full suite on flowra 0.0.93 (any cell: tests-0.0.6, tests-0.0.75, ...)
    nox -s tests-0.0.6 -- -x -q             pytest options after ``--`` are added to the cell's own selection;
    nox -s tests-0.0.93 -- tests/test_x.py  a path there replaces it
    nox -t check                            ruff and mypy (``./dev check``)
    nox -s backends tests-0.0.93            the cell with every real backend built first
    nox --parallel 3 -t matrix              what ``./dev test`` runs (it also builds the Go backends meanwhile)

uv makes every environment from ``requirements/`` (``uv pip sync``: exactly the lock, with the cell's
flowra and this package editable) and nox keeps them between runs, so a second run only checks the
sync (a second). ``nox -R`` skips even that. Nox and uv themselves come from ``./dev`` (it installs
``requirements/nox.lock`` into ``.venv-nox``), or from ``uvx nox`` / ``pipx run --spec 'nox[uv]' nox``.

The data below is the matrix: ``MATRIX`` (one row per flowra release that gets a suite of its own),
``SWEEP`` / ``SWEEP_REFUSED`` (the releases the release sweep installs in turn), ``PYTHON_BACKENDS`` and
``GO_BACKENDS`` (the real backends and which variable hands each to the tests), ``BENCHMARKS``. Adding a
release, a backend or a benchmark is a line there; the sessions are made from it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import re
import resource
import shutil
import subprocess
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path

import nox

nox.needs_version = ">=2026.10.20"  # --parallel and requires=
nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "yes"
nox.options.download_python = "never"  # Pythons come from this machine (PATH, pyenv), never a download
nox.options.error_on_external_run = True
# Sessions run side by side under --parallel (./dev test): each has its own venv and its own files;
# the two that write .venv (dev, demo) and pytest-on (.venv-flowra-*) opt out.
nox.options.allow_parallel = True
# `nox` alone: lint, types and the two home releases' cells (default=True below).

ROOT = Path(__file__).resolve().parent
LOCK = ROOT / "requirements" / "dev.lock"
LOG_DIR = ROOT / ".dev-logs"
STATE_DIR = ROOT / ".nox" / "_state"
"""What the backend sessions record for the test cells (the path of each built backend, its lock's digest)."""
LOCKED_FLOWRA = re.findall(r"^flowra==(\S+)$", LOCK.read_text(encoding="utf-8"), re.MULTILINE)[0]
OLD_LINE_HOME = "0.0.8"

# uv: never a Python download. Bytecode: written as modules are imported, by the sessions' own
# processes, and kept. The tests start hundreds of Pythons; with PYTHONDONTWRITEBYTECODE (set on some
# machines) each would compile every module it imports, this package's included, every time, and
# compiling whole environments at install instead costs more than it saves (measured on the full
# suite of flowra 0.0.6: 133 s of CPU with `uv pip sync --compile-bytecode` and the variable set,
# 113 s the first time without both, 106 s the second).
os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


# ---- the matrix ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Cell:
    """One flowra release that gets a suite of its own.

    ``python``: the minor it runs on (they alternate so both 3.12 and 3.13 run the suite; a minor that
    is not installed falls back to any Python >= 3.12). ``suite``: ``full`` runs every test,
    ``adapter`` the line's own tests and ``tests/both_lines``. ``backends``: the real backends its run
    gets (names from ``PYTHON_BACKENDS`` / ``GO_BACKENDS``).
    """

    flowra: str
    python: str
    suite: str
    backends: tuple[str, ...] = ()

    @property
    def session(self) -> str:
        return f"tests-{self.flowra}"


@dataclasses.dataclass(frozen=True)
class PythonBackend:
    """A real backend that is a Python program: its own venv from its lock, the executable the tests
    start, and the variable that hands its path to them (tests/backend_env.py)."""

    name: str
    lock: str
    executable: str
    variable: str


@dataclasses.dataclass(frozen=True)
class GoBackend:
    """A binary built from the Go module proxy by ``infra/build-backends`` (``KEY=path`` on its stdout)."""

    name: str
    key: str
    variable: str


PYTHON_BACKENDS = (
    PythonBackend("mcp", "requirements/mcp.lock", "python", "FLOWRA_OTEL_MCP_PYTHON"),
    PythonBackend("fastmcp", "requirements/fastmcp.lock", "python", "FLOWRA_OTEL_FASTMCP_PYTHON"),
    PythonBackend("phoenix", "requirements/phoenix.lock", "phoenix", "FLOWRA_OTEL_PHOENIX"),
    PythonBackend("mlflow", "requirements/mlflow.lock", "mlflow", "FLOWRA_OTEL_MLFLOW"),
)
GO_BACKENDS = (
    GoBackend("otelcol", "OTELCOL", "FLOWRA_OTEL_OTELCOL"),
    GoBackend("jaeger", "JAEGER", "FLOWRA_OTEL_JAEGER"),
)
BACKENDS: dict[str, PythonBackend | GoBackend] = {b.name: b for b in (*PYTHON_BACKENDS, *GO_BACKENDS)}
EVERY_BACKEND = tuple(BACKENDS)
"""What the home releases (the locked flowra of each line) get."""
MCP = ("mcp", "fastmcp")
"""The MCP servers alone (the mcp SDK's and FastMCP): 0.0.75 (its MCP client speaks only the handshake
era, no ``_meta``) and 0.0.79 (the lowest whose client sends ``_meta``)."""

# The HookRegistry line (0.0.3 - 0.0.8): the full suite on each. The runtime.hooks line (0.0.47 -
# 0.0.93): the line's own tests on its era boundaries: 0.0.47 (the lowest: UserMessageEvent, no
# ephemeral state), 0.0.49 (ephemeral state), 0.0.55 / 0.0.56 (the handler storage changes), 0.0.57 (a list result),
# 0.0.67 / 0.0.68 (the ToolCallSpan moves around the tool-call agent's AgentSpan), 0.0.75, 0.0.79 (the
# lowest whose MCP client sends `_meta`), 0.0.85 / 0.0.86 (result blocks), 0.0.92 (BeforeToolCallsEvent);
# the full suite on 0.0.93 (the locked one). Every release of the line also gets the release sweep.
MATRIX = (
    Cell("0.0.3", "3.12", "full"),
    Cell("0.0.4", "3.13", "full"),
    Cell("0.0.5", "3.12", "full"),
    Cell("0.0.6", "3.13", "full"),
    Cell("0.0.7", "3.12", "full"),
    Cell("0.0.8", "3.13", "full", EVERY_BACKEND),
    Cell("0.0.47", "3.13", "adapter"),
    Cell("0.0.49", "3.12", "adapter"),
    Cell("0.0.55", "3.13", "adapter"),
    Cell("0.0.56", "3.12", "adapter"),
    Cell("0.0.57", "3.13", "adapter"),
    Cell("0.0.67", "3.12", "adapter"),
    Cell("0.0.68", "3.13", "adapter"),
    Cell("0.0.75", "3.12", "adapter", MCP),
    Cell("0.0.79", "3.13", "adapter", MCP),
    Cell("0.0.85", "3.13", "adapter"),
    Cell("0.0.86", "3.12", "adapter"),
    Cell("0.0.92", "3.13", "adapter"),
    Cell(LOCKED_FLOWRA, "3.13", "full", EVERY_BACKEND),
)
SEED = ("--seed",)
"""The test venvs get pip (uv's venvs have none): tests build and install the wheel with it, as a user does."""
ADAPTER_SUITE = ("tests/runtime_hooks", "tests/both_lines")


def _adapter_lines() -> tuple[tuple[tuple[int, int, int], tuple[int, int, int], str], ...]:
    """``flowra_otel.adapters.LINES``, loaded from its file alone (standard library only: nox's venv
    has neither flowra nor OpenTelemetry), so the supported range is written once, in the package."""
    spec = importlib.util.spec_from_file_location("_adapter_lines", ROOT / "flowra_otel" / "adapters" / "__init__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    lines: tuple[tuple[tuple[int, int, int], tuple[int, int, int], str], ...] = module.LINES
    return lines


# The release sweep: tests/runtime_hooks/test_release_sweep.py (one traced run that checks every
# guarantee, seconds) on every release of the modern line, and tests/test_refused_flowra_releases.py
# on releases the package refuses; one environment gets each release in turn (uv pip install
# --no-deps: their dependencies are the same and all in the lock). The range: the package's own
# (flowra_otel.adapters.LINES), never written here.
_MODERN_LOW, _MODERN_HIGH = next((low, high) for low, high, name in _adapter_lines() if name == "runtime_hooks")
assert _MODERN_LOW[:2] == _MODERN_HIGH[:2], "the sweep counts patch releases of one minor"
SWEEP = tuple(f"{_MODERN_LOW[0]}.{_MODERN_LOW[1]}.{n}" for n in range(_MODERN_LOW[2], _MODERN_HIGH[2] + 1))
SWEEP_REFUSED = ("0.0.9", "0.0.30", "0.0.45", "0.0.46")
SWEEP_PYTHON = "3.12"
# The dependency bounds (tests/otel_bounds.py): the declared floors on the lowest Python the package
# allows, the newest OpenTelemetry on the release's own Python, each beside these releases. The
# credential tests too: the exporters' log lines and their redirect handling differ by release.
BOUNDS_RELEASES = (LOCKED_FLOWRA, OLD_LINE_HOME)
BOUNDS_TESTS = (
    "tests/test_otel_bounds.py",
    "tests/both_lines/test_otlp_export_example.py",
    "tests/test_configure_telemetry_logs.py",
    "tests/both_lines/test_content_modes_and_events.py",
    "tests/test_credentials_never_cross_an_origin.py",
    "tests/test_credentials_stay_out_of_logs_and_errors.py",
)


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """A benchmark script, its own arguments, and the flowra release of the environment it runs in
    (the user's flags go after ``--``)."""

    session: str
    flowra: str
    script: str
    args: tuple[str, ...] = ()


BENCHMARKS = (
    Benchmark("bench", OLD_LINE_HOME, "benchmarks/bench.py", ("--line", "old")),
    Benchmark("bench-093", LOCKED_FLOWRA, "benchmarks/bench.py", ("--line", "modern")),
    Benchmark("bench-content", OLD_LINE_HOME, "benchmarks/content.py"),
)


@dataclasses.dataclass(frozen=True)
class TypeCheck:
    """One mypy --strict run per flowra line (an environment holds one line's flowra): the core, the
    line's adapter and tests, and the line's benchmark scripts (they import their siblings by bare
    name, so each line's set is checked on its own)."""

    flowra: str
    adapter: str
    benchmarks: tuple[str, ...]


BENCH_HARNESS = ("bench", "worker", "replay", "sdk", "workloads")
"""The benchmark harness both lines share; each line adds its own module (modern_line, old_line)."""
TYPE_CHECKS = (
    TypeCheck(
        LOCKED_FLOWRA,
        "runtime_hooks",
        tuple(f"benchmarks/{name}.py" for name in (*BENCH_HARNESS, "modern_line", "knockouts")),
    ),
    TypeCheck(
        OLD_LINE_HOME,
        "hook_registry",
        tuple(f"benchmarks/{name}.py" for name in (*BENCH_HARNESS, "old_line", "content")),
    ),
)


def cell_of(flowra: str) -> Cell | None:
    return next((cell for cell in MATRIX if cell.flowra == flowra), None)


# ---- Pythons ---------------------------------------------------------------------------------------
def _pyenv_roots() -> list[Path]:
    roots = [os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv"), "/root/.pyenv"]
    roots += ["/usr/local/pyenv", "/opt/pyenv"]
    return [Path(r) for r in dict.fromkeys(roots) if r and (Path(r) / "versions").is_dir()]


def _probe(path: str) -> tuple[tuple[int, int], str] | None:
    """The minor version of a Python and its base interpreter (a venv's python is not one to make
    venvs from: ``./dev`` puts .venv-nox first on PATH)."""
    code = "import sys, venv; print(*sys.version_info[:2], getattr(sys, '_base_executable', sys.executable))"
    try:
        out = subprocess.run([path, "-c", code], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    major, minor, base = out.split(maxsplit=2)
    return (int(major), int(minor)), base.strip()


_FOUND: dict[str, str] = {}


def interpreter(minor: str) -> str:
    """A Python of ``minor`` (e.g. "3.12") as an absolute path: FLOWRA_OTEL_PYTHON when set, else PATH,
    else pyenv's versions (installed but not on PATH on our machines: uv does not look there), else
    any Python >= 3.12 (the newest), else ``minor`` itself (nox then says it found none)."""
    if minor not in _FOUND:
        want = tuple(map(int, minor.split(".")))
        chosen = os.environ.get("FLOWRA_OTEL_PYTHON", "")
        preferred = [chosen] if chosen else []
        preferred.append(f"python{minor}")
        fallback: list[str] = []
        for root in _pyenv_roots():
            versions = sorted(
                (root / "versions").glob("3.*"),
                key=lambda p: [int(x) if x.isdigit() else 0 for x in p.name.split(".")],
                reverse=True,
            )
            for version in versions:
                python = str(version / "bin" / "python")
                (preferred if version.name.startswith(f"{minor}.") else fallback).append(python)
        fallback += ["python3.13", "python3.12", "python3", "python"]
        _FOUND[minor] = minor
        for candidate in [*preferred, *fallback]:
            path = shutil.which(candidate)
            probe = _probe(path) if path else None
            if probe is None or probe[0] < (3, 12):
                continue
            if probe[0] == want or candidate in fallback or candidate == chosen:
                _FOUND[minor] = probe[1]
                break
    return _FOUND[minor]


# ---- environments ----------------------------------------------------------------------------------
def uv() -> str:
    """The uv beside nox (``nox[uv]``, ``./dev``'s .venv-nox), else the one on PATH."""
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found,unused-ignore]

        return str(find_uv_bin())
    except ImportError:
        return shutil.which("uv") or "uv"


def requirements(folder: Path, flowra: str) -> Path:
    """The lock with flowra pinned to ``flowra`` (its requirements are the same across the supported
    releases, and all in the lock) and this package editable: what ``uv pip sync`` makes exact."""
    lines = [
        f"flowra=={flowra}" if line.startswith("flowra==") else line
        for line in LOCK.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    lines.append(f"-e {ROOT}")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"requirements-flowra-{flowra}.txt"
    path.write_text("\n".join([*lines, ""]), encoding="utf-8")
    return path


def sync(session: nox.Session, flowra: str) -> None:
    """The session's venv made exactly the lock, with flowra ``flowra`` and this package (editable)."""
    req = requirements(Path(session.create_tmp()), flowra)
    session.run_install("uv", "pip", "sync", "-q", str(req))


def venv_python(session: nox.Session) -> str:
    return str(Path(session.bin) / "python")


def label(python: str) -> str:
    """'flowra 0.0.6, Python 3.13.0': what the environment really holds."""
    code = (
        'import importlib.metadata as m, sys; print("flowra", m.version("flowra") + ", Python", sys.version.split()[0])'
    )
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=False).stdout.strip()


def ensure_plain_venv(session: nox.Session, folder: Path, minor: str, flowra: str) -> Path:
    """A venv outside nox's folder (``.venv`` for editors and the examples), made or synced with uv."""
    python = folder / "bin" / "python"
    if not python.exists() or _probe(str(python)) is None:
        session.log(f"building {folder.name} with {interpreter(minor)} (the lock, flowra {flowra})")
        session.run(uv(), "venv", "-q", "--seed", "--clear", "-p", interpreter(minor), str(folder), external=True)
    req = requirements(Path(session.create_tmp()), flowra)
    session.run(uv(), "pip", "sync", "-q", "-p", str(python), str(req), external=True)
    return python


def pytest_args(default: Sequence[str], posargs: Sequence[str]) -> list[str]:
    """The cell's own selection plus the options after ``--``; a path there (``tests/x.py``,
    ``tests/x.py::test_y``) replaces the selection."""
    paths = [a for a in posargs if not a.startswith("-") and (ROOT / a.split("::")[0]).exists()]
    return list(posargs) if paths else [*default, *posargs]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclasses.dataclass
class Clock:
    """A session's wall time and the CPU time of the processes it ran (uv, pytest and whatever pytest
    started and waited for): where the time goes, whatever else shares the machine."""

    wall: float = dataclasses.field(default_factory=time.monotonic)
    cpu: float = dataclasses.field(default_factory=_children_cpu)

    def took(self) -> dict[str, int]:
        return {"seconds": round(time.monotonic() - self.wall), "cpu_seconds": round(_children_cpu() - self.cpu)}


def record(name: str, clock: Clock, **fields: object) -> None:
    """What ``./dev test``'s summary prints for one session (.dev-logs/results/NAME.json)."""
    folder = LOG_DIR / "results"
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"session": name, **fields, **clock.took()}
    (folder / f"{name}.json").write_text(json.dumps(entry) + "\n", encoding="utf-8")


def run_pytest(
    session: nox.Session, clock: Clock, name: str, scope: str, args: Sequence[str], env: dict[str, str]
) -> None:
    """pytest in the session's venv; its result line (e.g. "878 passed, 2 xfailed") recorded for the summary."""
    LOG_DIR.mkdir(exist_ok=True)
    line_file = LOG_DIR / "results" / f"{name}.line"
    line_file.parent.mkdir(parents=True, exist_ok=True)
    line_file.unlink(missing_ok=True)
    python = venv_python(session)
    what = label(python)
    session.log(f"pytest on {what}")
    verdict = "FAILED"
    try:
        session.run(
            "python",
            "-m",
            "pytest",
            "-p",
            "tests.summary_line",
            *args,
            env={**env, "FLOWRA_OTEL_PYTEST_LINE": str(line_file)},
        )
        verdict = "passed"
    finally:
        line = line_file.read_text(encoding="utf-8").strip() if line_file.exists() else "no pytest summary"
        record(name, clock, label=what, scope=scope, verdict=verdict, line=line)


# ---- the real backends -----------------------------------------------------------------------------
def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def python_backend_path(backend: PythonBackend) -> str | None:
    """The executable its session built, if it was built from today's lock."""
    try:
        state = json.loads((STATE_DIR / f"backend-{backend.name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    path = Path(state.get("path", ""))
    if state.get("lock") != _digest(ROOT / backend.lock) or not os.access(path, os.X_OK):
        return None
    return str(path)


def go_backend_paths(session: nox.Session) -> dict[str, str]:
    """The Go binaries that are built and current (waiting for a build in progress; never starting one)."""
    out = subprocess.run(
        [str(ROOT / "infra" / "build-backends"), "--cached", "all"],
        capture_output=True,
        text=True,
        check=False,
    )
    for line in out.stderr.splitlines():
        session.log(line)
    found = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    return {b.variable: found[b.key] for b in GO_BACKENDS if b.key in found}


def backend_env(session: nox.Session, cell: Cell) -> dict[str, str]:
    """The FLOWRA_OTEL_* variables of the cell's backends: a path the caller set wins, else what the
    backend sessions built. A backend the cell wants that is not there: the tests skip on a developer
    machine and fail in CI (tests/backend_env.py); they fail too after ``./dev test`` tried to build it
    (FLOWRA_OTEL_BACKENDS_EXPECTED=1: FLOWRA_OTEL_BACKENDS_MISSING names it)."""
    env: dict[str, str] = {}
    missing: list[str] = []
    wanted_go = [b for b in GO_BACKENDS if b.name in cell.backends]
    go = go_backend_paths(session) if any(not os.environ.get(b.variable) for b in wanted_go) else {}
    for name in cell.backends:
        backend = BACKENDS[name]
        built = python_backend_path(backend) if isinstance(backend, PythonBackend) else go.get(backend.variable)
        path = os.environ.get(backend.variable) or built
        if path:
            env[backend.variable] = path
        else:
            missing.append(name)
    if missing:
        session.log(f"not built: {', '.join(missing)} (nox -s backends builds them)")
        if os.environ.get("FLOWRA_OTEL_BACKENDS_EXPECTED") == "1":
            env["FLOWRA_OTEL_BACKENDS_MISSING"] = " ".join(missing)
    return env


def _python_backend_session(backend: PythonBackend) -> None:
    def build(session: nox.Session) -> None:
        clock = Clock()
        session.run_install("uv", "pip", "sync", "-q", backend.lock)
        path = Path(session.bin) / backend.executable
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        state = {"path": str(path), "lock": _digest(ROOT / backend.lock)}
        (STATE_DIR / f"backend-{backend.name}.json").write_text(json.dumps(state) + "\n", encoding="utf-8")
        session.log(f"{backend.variable}={path}")
        record(session.name, clock, scope="backend", line=f"{backend.variable}={path}")

    build.__doc__ = f"The {backend.name} backend's venv, from {backend.lock} ({backend.variable})."
    nox.session(
        name=f"backend-{backend.name}",
        python=interpreter("3.13"),
        tags=["backends", "matrix"],
        default=False,
    )(build)


for _backend in PYTHON_BACKENDS:
    _python_backend_session(_backend)


@nox.session(name="backend-go", venv_backend="none", tags=["backends"], default=False)
def backend_go(session: nox.Session) -> None:
    """The Collector and Jaeger, built from the Go module proxy into ~/.cache/flowra-otel (reused)."""
    session.run(str(ROOT / "infra" / "build-backends"), "all", external=True)


@nox.session(
    venv_backend="none",
    requires=[*(f"backend-{b.name}" for b in PYTHON_BACKENDS), "backend-go"],
    default=False,
)
def backends(session: nox.Session) -> None:
    """Every real backend (Python venvs, Collector, Jaeger); prints the variables the tests read."""
    home = cell_of(LOCKED_FLOWRA)
    assert home is not None  # the locked release is a cell of MATRIX
    env = backend_env(session, home)
    for name, value in env.items():
        print(f"{name}={value}")  # noqa: T201
    if "FLOWRA_OTEL_BACKENDS_MISSING" in env or len(env) < len(EVERY_BACKEND):
        session.error("some backends are missing (see above)")


# ---- the test cells --------------------------------------------------------------------------------
def _cell_session(cell: Cell) -> None:
    def tests(session: nox.Session) -> None:
        clock = Clock()
        sync(session, cell.flowra)
        default = () if cell.suite == "full" else ADAPTER_SUITE
        args = pytest_args(default, session.posargs)
        run_pytest(session, clock, cell.session, cell.suite, args, backend_env(session, cell))

    scope = "every test" if cell.suite == "full" else "the line's own tests and tests/both_lines"
    gets = f"; real backends: {', '.join(cell.backends)}" if cell.backends else ""
    tests.__doc__ = f"flowra {cell.flowra}, Python {cell.python}: {scope}{gets}."
    python_backends = [f"backend-{b.name}" for b in PYTHON_BACKENDS if b.name in cell.backends]
    nox.session(
        name=cell.session,
        python=interpreter(cell.python),
        tags=["tests", "matrix"],
        requires=python_backends,
        venv_params=SEED,
        default=cell.flowra in (LOCKED_FLOWRA, OLD_LINE_HOME),
    )(tests)


def sweep(session: nox.Session) -> None:
    clock = Clock()
    sync(session, LOCKED_FLOWRA)
    python = venv_python(session)
    releases = (*SWEEP, *SWEEP_REFUSED)
    log = LOG_DIR / "sweep.log"
    LOG_DIR.mkdir(exist_ok=True)
    failed: list[str] = []
    with log.open("w", encoding="utf-8") as out:
        for index, version in enumerate(releases, 1):
            began = time.monotonic()
            out.write(f"== flowra {version}\n")
            out.flush()
            test = (
                "tests/test_refused_flowra_releases.py"
                if version in SWEEP_REFUSED
                else "tests/runtime_hooks/test_release_sweep.py"
            )
            steps = (
                [uv(), "pip", "install", "-q", "--no-deps", "-p", python, f"flowra=={version}"],
                [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
            )
            code = 0
            for step in steps:
                code = subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, check=False).returncode
                if code:
                    break
            verdict = "passed" if code == 0 else f"FAILED (exit {code}; see {log.relative_to(ROOT)})"
            session.log(f"sweep {index}/{len(releases)} flowra {version} {verdict} ({time.monotonic() - began:.0f} s)")
            if code:
                failed.append(version)
    line = f"{len(releases)} releases passed" if not failed else f"FAILED on {' '.join(failed)} of {len(releases)}"
    record("sweep", clock, label=f"release sweep {SWEEP[0]} - {SWEEP[-1]} + refused", scope="sweep",
           verdict="FAILED" if failed else "passed", line=line)  # fmt: skip
    if failed:
        session.error(f"the release sweep failed on {' '.join(failed)} (log: {log})")


sweep.__doc__ = (
    f"The release sweep: every flowra {SWEEP[0]} - {SWEEP[-1]} and the refused releases"
    f" ({', '.join(SWEEP_REFUSED)}), in turn in one venv."
)


def _start_order(cell: Cell) -> int:
    """When ./dev test starts a cell (nox --parallel takes the sessions in the order they are made):
    the full suites without a backend first, while the Go backends build; then the cells that get
    them (the longest runs; they wait for that build); the era boundaries after the sweep, and the
    bounds last (short: they fill the end)."""
    if any(isinstance(BACKENDS[name], GoBackend) for name in cell.backends):
        return 1
    return 0 if cell.suite == "full" else 2


for _cell in sorted(MATRIX, key=_start_order):
    if _start_order(_cell) < 2:
        _cell_session(_cell)
nox.session(python=interpreter(SWEEP_PYTHON), tags=["matrix"], default=False)(sweep)
for _cell in sorted(MATRIX, key=_start_order):
    if _start_order(_cell) == 2:
        _cell_session(_cell)


def plain_venv(flowra: str) -> Path:
    """The venv ``pytest-on`` (and ``./dev setup``) keeps for a release: ``.venv`` for the locked one,
    ``.venv-flowra-VERSION`` for any other (the names the examples and docs use)."""
    return ROOT / (".venv" if flowra == LOCKED_FLOWRA else f".venv-flowra-{flowra}")


@nox.session(name="pytest-on", venv_backend="none", default=False, allow_parallel=False)
def pytest_on(session: nox.Session) -> None:
    """pytest on any supported release, no backends: nox -s pytest-on -- 0.0.60 [pytest args] (./dev pytest-on)."""
    if not session.posargs or not re.fullmatch(r"\d+\.\d+\.\d+", session.posargs[0]):
        session.error("name a flowra release first: nox -s pytest-on -- 0.0.60 -q")
    version, *args = session.posargs
    cell = cell_of(version)
    python = ensure_plain_venv(session, plain_venv(version), cell.python if cell else SWEEP_PYTHON, version)
    session.log(f"pytest on {label(str(python))}")
    session.run(str(python), "-m", "pytest", *args, external=True)


# ---- the dependency bounds -------------------------------------------------------------------------
def _drop_broken(session: nox.Session) -> None:
    """Uninstall what ``uv pip check`` names as broken (the dev-only packages that need a newer
    OpenTelemetry than the floors; never flowra or this package)."""
    for _ in range(5):
        out = session.run("uv", "pip", "check", silent=True, success_codes=[0, 1]) or ""
        broken = set(re.findall(r"The package `([^`]+)` requires", str(out))) - {"flowra", "flowra-otel"}
        if not broken:
            return
        session.run("uv", "pip", "uninstall", "-q", *sorted(broken))


def _bounds_session(kind: str, flowra: str) -> None:
    def bounds(session: nox.Session) -> None:
        clock = Clock()
        sync(session, flowra)
        python = venv_python(session)
        tmp = Path(session.create_tmp())
        if kind == "lowest":
            floors = subprocess.run(
                [python, "tests/otel_bounds.py", "lowest"], capture_output=True, text=True, check=True
            ).stdout
            (tmp / "floors.txt").write_text(floors, encoding="utf-8")
            session.run("uv", "pip", "install", "-q", "-c", str(tmp / "floors.txt"), "-e", ".[instrument]",
                        f"flowra=={flowra}")  # fmt: skip
        else:
            names = subprocess.run(
                [python, "tests/otel_bounds.py", "names"], capture_output=True, text=True, check=True
            ).stdout.split()
            session.run("uv", "pip", "install", "-q", *(f"--upgrade-package={n}" for n in names), *names)
        _drop_broken(session)
        session.run("uv", "pip", "check")
        name = f"bounds-{kind}-{flowra}"
        run_pytest(
            session,
            clock,
            name,
            "bounds",
            ["-q", "-p", "no:cacheprovider", *BOUNDS_TESTS],
            {"FLOWRA_OTEL_BOUNDS": kind},
        )

    what = "the declared floors" if kind == "lowest" else "the newest OpenTelemetry on the index"
    bounds.__doc__ = f"{what[0].upper()}{what[1:]} beside flowra {flowra}: imports, traced runs, OTLP export."
    cell = cell_of(flowra)
    minor = "3.12" if kind == "lowest" or cell is None else cell.python
    nox.session(name=f"bounds-{kind}-{flowra}", python=interpreter(minor), tags=["bounds", "matrix"],
                venv_params=SEED, default=False)(bounds)  # fmt: skip


for _kind in ("lowest", "highest"):
    for _flowra in BOUNDS_RELEASES:
        _bounds_session(_kind, _flowra)


# ---- checks ----------------------------------------------------------------------------------------
def _locked(*names: str) -> list[str]:
    """``name==version`` of each name, as the lock pins it."""
    text = LOCK.read_text(encoding="utf-8")
    return [re.findall(rf"^{re.escape(n)}==\S+$", text, re.MULTILINE)[0] for n in names]


def mypy_cache(session: str) -> str:
    """A mypy cache of the session's own: ``./dev check`` runs the check sessions side by side, and two
    mypy processes writing one cache corrupt it (seen: INTERNAL ERROR in one or the other, by turns)."""
    return str(ROOT / ".mypy_cache" / session)


@nox.session(python=interpreter("3.13"), tags=["check"])
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check (the lock's ruff), and mypy --strict on this noxfile."""
    nox_pin = re.findall(r"^nox==\S+$", (ROOT / "requirements" / "nox.lock").read_text(encoding="utf-8"), re.M)
    session.install(*_locked("ruff", "mypy"), *nox_pin)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy", "--strict", "--cache-dir", mypy_cache("lint"), "noxfile.py")


def _types_session(check: TypeCheck) -> None:
    def types(session: nox.Session) -> None:
        sync(session, check.flowra)
        others = "|".join(f"flowra_otel/adapters/{c.adapter}/|tests/{c.adapter}/" for c in TYPE_CHECKS if c != check)
        # pyproject's mypy exclude leaves out the adapters whose flowra is not today's (so a plain
        # `mypy --strict flowra_otel` in .venv checks today's line); files named on the command line
        # are checked whatever it says, so such a line's run names its own
        excluded = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]["exclude"]
        own = sorted(
            str(p.relative_to(ROOT))
            for folder in (f"flowra_otel/adapters/{check.adapter}", f"tests/{check.adapter}")
            if f"{folder}/" in excluded
            for p in (ROOT / folder).rglob("*.py")
        )
        cache = ("--cache-dir", mypy_cache(session.name))
        session.run("mypy", "--strict", *cache, "--exclude", others, "flowra_otel", "tests", "tools", *own)
        session.run("mypy", "--strict", *cache, *check.benchmarks)

    types.__doc__ = (
        f"mypy --strict: the core, the {check.adapter} adapter, its tests and benchmarks (flowra {check.flowra})."
    )
    cell = cell_of(check.flowra)
    nox.session(name=f"types-{check.flowra}", python=interpreter(cell.python if cell else "3.13"), tags=["check"])(
        types
    )


for _check in TYPE_CHECKS:
    _types_session(_check)


# ---- the developer's environment, the demo, the benchmarks ----------------------------------------
@nox.session(venv_backend="none", default=False, allow_parallel=False)
def dev(session: nox.Session) -> None:
    """.venv (flowra 0.0.93) and .venv-flowra-0.0.8, for editors and the examples (``./dev setup``)."""
    for flowra in (LOCKED_FLOWRA, OLD_LINE_HOME):
        cell = cell_of(flowra)
        ensure_plain_venv(session, plain_venv(flowra), cell.python if cell else "3.13", flowra)


@nox.session(venv_backend="none", default=False, allow_parallel=False)
def demo(session: nox.Session) -> None:
    """examples/quickstart.py in .venv: a real flowra agent run, its trace printed as a tree (``./dev demo``)."""
    home = cell_of(LOCKED_FLOWRA)
    python = ensure_plain_venv(session, plain_venv(LOCKED_FLOWRA), home.python if home else "3.13", LOCKED_FLOWRA)
    session.run(str(python), "examples/quickstart.py", *session.posargs, external=True)


def _bench_session(bench: Benchmark) -> None:
    def run(session: nox.Session) -> None:
        sync(session, bench.flowra)
        session.run("python", bench.script, *bench.args, *session.posargs)

    run.__doc__ = f"{' '.join((bench.script, *bench.args))} (flowra {bench.flowra}); its flags after --."
    nox.session(name=bench.session, python=interpreter("3.13"), tags=["bench"], default=False)(run)


for _bench in BENCHMARKS:
    _bench_session(_bench)


# ---- ./dev test's summary --------------------------------------------------------------------------
@nox.session(venv_backend="none", default=False)
def summary(session: nox.Session) -> None:
    """The table ``./dev test`` prints at the end, from nox's --report: nox -s summary -- REPORT.json."""
    report = Path(session.posargs[0]) if session.posargs else LOG_DIR / "nox-report.json"
    for line in summary_lines(json.loads(report.read_text(encoding="utf-8"))):
        print(line)  # noqa: T201


def summary_lines(report: dict[str, list[dict[str, object]]]) -> list[str]:
    """A line per session of the run: what ran (the release and Python it really had), its scope,
    nox's verdict, pytest's own last line (the counts), the time."""
    lines = [f"== summary (logs in {LOG_DIR.name}/)"]
    for entry in report.get("sessions", []):
        signatures = entry.get("signatures")
        name = str(signatures[0] if isinstance(signatures, list) and signatures else entry.get("name"))
        try:
            result = json.loads((LOG_DIR / "results" / f"{name}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            result = {}
        status = str(entry.get("result", "?"))
        verdict = "passed" if status == "success" else status.upper()
        duration = entry.get("duration")
        took = f"({duration:.0f} s" if isinstance(duration, (int, float)) else "("
        took += f", CPU {result['cpu_seconds']} s)" if "cpu_seconds" in result else ")"
        what = f"{name}: {result['label']}" if result.get("label") else name
        lines.append(f"{what:<48} {result.get('scope', '-'):<8} {verdict:<9} {result.get('line', '')} {took}")
    return lines
