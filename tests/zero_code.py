"""The README's zero-code lines, run verbatim in an app environment, for each flowra line's tests.

``pip install "flowra-otel[instrument]"`` gives an app environment with this package (its
distro, configurator and instrumentor entry points) and ``opentelemetry-instrumentation``, but
not ``opentelemetry-distro``. `app_environment` builds that environment in seconds, without a
package index: a venv of the running Python that sees the running environment's packages (by a
``.pth`` file; ``opentelemetry-distro``'s metadata left out unless asked for) and has this
package installed the way a wheel installs it (the sources, and a ``.dist-info`` whose
``entry_points.txt`` is written from pyproject.toml's ``[project.entry-points]``). Other
``opentelemetry-instrument`` plugins the dev lock brings (the openai, anthropic and google-genai
instrumentations) are left out too: an app with this package has none of them. The tests of
the wheel itself (``test_wheel_install.py``) check that the built wheel carries those entry points.

`run_line` runs one README line through ``bash -c`` in the app's directory, with that venv's
``bin`` first on ``PATH`` (so ``opentelemetry-instrument`` and ``python`` are the app's), and
times how long the process takes to exit after the app's last line of output: the part of the
exit that telemetry adds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sysconfig
import textwrap
import threading
import time
import tomllib
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Final, Literal

import pytest

from flowra_otel.core.export import DEFAULT_TIMEOUT_MILLIS
from flowra_otel.distro import OTHER_DISTRO_WARNING
from tests.otlp_receiver import OtlpReceiver, Protocol, Signal, SpanRecord

ROOT: Final = Path(__file__).resolve().parents[1]

README_LINES: Final = {
    "nothing-set": "opentelemetry-instrument python app.py",
    "http-traces-only": (
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://localhost:4318/v1/traces opentelemetry-instrument python app.py"
    ),
    "http": "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 opentelemetry-instrument python app.py",
    "grpc": (
        "OTEL_EXPORTER_OTLP_PROTOCOL=grpc OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4317 "
        "opentelemetry-instrument python app.py"
    ),
    "traces-file": "FLOWRA_OTEL_TRACES_FILE=spans.jsonl opentelemetry-instrument python app.py",
    "audit": "flowra-otel audit spans.jsonl",
}
"""The zero-code lines proposed for the README (the receiver's ports replace 4318 and 4317)."""

UPSTREAM_DISTRO: Final = "opentelemetry_distro-"

Upstream = Literal["absent", "after", "first"]
"""Where ``opentelemetry-distro``'s metadata is: not installed (what the ``[instrument]`` extra
gives), installed and found after this package, or found before it (``opentelemetry-instrument``
then picks its distro: the order is the file system's in a real environment)."""


@dataclass(frozen=True)
class AppEnvironment:
    root: Path
    bin: Path
    python: Path
    app_dir: Path
    pythonpath: str | None


@dataclass(frozen=True)
class LineRun:
    line: str
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    exit_s: float
    """From the app's last line on stdout to the process's end (or to its kill)."""
    killed: bool = False
    """Still running ``stop_after_s`` after its last line on stdout, so killed."""


def _entry_points(groups: frozenset[str] | None) -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    tables = dict(project.get("entry-points", {}))
    tables["console_scripts"] = project.get("scripts", {})
    text = []
    for group, entries in sorted(tables.items()):
        if groups is not None and group not in groups:
            continue
        text.append(f"[{group}]")
        text.extend(f"{name} = {value}" for name, value in entries.items())
        text.append("")
    return "\n".join(text)


_PLUGIN_GROUPS: Final = frozenset(
    {
        "opentelemetry_instrumentor",
        "opentelemetry_distro",
        "opentelemetry_configurator",
        "opentelemetry_pre_instrument",
        "opentelemetry_post_instrument",
    }
)


def _other_plugin(entry: Path) -> bool:
    """A distribution's metadata that declares ``opentelemetry-instrument`` plugins (another
    instrumentation, distro or configurator); ``opentelemetry-distro``'s is placed by ``upstream``."""
    if not entry.name.endswith(".dist-info") or entry.name.startswith(UPSTREAM_DISTRO):
        return False
    entry_points = entry / "entry_points.txt"
    if not entry_points.is_file():
        return False
    groups = {
        line.strip()[1:-1] for line in entry_points.read_text(encoding="utf-8").splitlines() if line.startswith("[")
    }
    return bool(groups & _PLUGIN_GROUPS)


def app_environment(
    base: Path, *, upstream: Upstream = "absent", groups: frozenset[str] | None = None
) -> AppEnvironment:
    """An app environment under ``base`` (see the module docstring). ``groups``: the entry-point
    groups this package declares there (default: all of pyproject.toml's)."""
    site = Path(sysconfig.get_paths()["purelib"])
    deps = base / "deps"
    deps.mkdir(parents=True)
    first = base / "found-first"
    first.mkdir()
    for entry in site.iterdir():
        name = entry.name
        if name.startswith(("flowra_otel-", "_editable_impl_", "__editable__")) or name.endswith(".pth"):
            continue  # this package comes from the app environment's own install below
        if _other_plugin(entry):
            continue  # another instrumentation the dev lock has (openai, ...): not in the app's environment
        if name.startswith(UPSTREAM_DISTRO):
            if upstream == "after":
                (deps / name).symlink_to(entry)
            elif upstream == "first":
                (first / name).symlink_to(entry)
            continue
        (deps / name).symlink_to(entry)

    if upstream != "absent":
        placed = [e.name for folder in (deps, first) for e in folder.iterdir() if e.name.startswith(UPSTREAM_DISTRO)]
        assert placed, "opentelemetry-distro is not installed here (the dev lock brings it for these tests)"
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    env_site = env_dir / site.relative_to(Path(sysconfig.get_paths()["data"]))
    assert env_site.is_dir(), env_site
    (env_site / "app_dependencies.pth").write_text(f"{deps}\n", encoding="utf-8")
    (env_site / "flowra_otel").symlink_to(ROOT / "flowra_otel")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    dist_info = env_site / f"flowra_otel-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.4\nName: flowra-otel\nVersion: {version}\n", encoding="utf-8"
    )
    (dist_info / "entry_points.txt").write_text(_entry_points(groups), encoding="utf-8")
    scripts = {"opentelemetry-instrument": "opentelemetry.instrumentation.auto_instrumentation:run"}
    scripts.update(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"])
    for name, target in scripts.items():  # as pip writes console scripts
        module, function = target.split(":")
        script = env_dir / "bin" / name
        script.write_text(
            f"#!{python}\nimport sys\nfrom {module} import {function}\nsys.exit({function}())\n", encoding="utf-8"
        )
        script.chmod(0o755)
    app_dir = base / "app"
    app_dir.mkdir()
    return AppEnvironment(
        root=env_dir,
        bin=env_dir / "bin",
        python=python,
        app_dir=app_dir,
        pythonpath=str(first) if upstream == "first" else None,
    )


def run_line(
    env: AppEnvironment,
    line: str,
    *,
    receiver: OtlpReceiver | None = None,
    extra_env: dict[str, str] | None = None,
    stop_after_s: float | None = None,
    timeout: float = 60,
) -> LineRun:
    """Run one README line (``localhost:4318`` / ``localhost:4317`` pointed at ``receiver``).

    ``stop_after_s``: kill the process if it is still running that long after its last line on
    stdout (a negative check of a bounded exit need not wait for an unbounded one)."""
    if receiver is not None:
        line = line.replace("http://localhost:4318", receiver.http_endpoint)
        line = line.replace("http://localhost:4317", receiver.grpc_endpoint)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"):
        clean.pop(name, None)
    clean["PATH"] = f"{env.bin}{os.pathsep}{clean.get('PATH', '')}"
    clean["PYTHONUNBUFFERED"] = "1"  # lines arrive as printed: the exit is timed from the last one
    if env.pythonpath is not None:
        clean["PYTHONPATH"] = env.pythonpath
    clean.update(extra_env or {})

    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", line],
        cwd=env.app_dir,
        env=clean,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: a kill reaches whatever bash started
    )
    out: list[str] = []
    err: list[str] = []
    last_line_at = [started]

    def read_out() -> None:
        assert proc.stdout is not None
        for text in proc.stdout:
            last_line_at[0] = time.monotonic()
            out.append(text)

    def read_err() -> None:
        assert proc.stderr is not None
        err.extend(proc.stderr)

    readers = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
    for reader in readers:
        reader.start()
    killed = False
    try:
        while (returncode := proc.poll()) is None:
            now = time.monotonic()
            if now - started > timeout:
                raise subprocess.TimeoutExpired(line, timeout)
            if stop_after_s is not None and out and now - last_line_at[0] > stop_after_s:
                killed = True
                os.killpg(proc.pid, signal.SIGKILL)
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    ended = time.monotonic()
    for reader in readers:
        reader.join(5)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    return LineRun(
        line=line,
        returncode=returncode,
        stdout="".join(out),
        stderr="".join(err),
        wall_s=ended - started,
        exit_s=ended - last_line_at[0],
        killed=killed,
    )


# --------------------------------------------------------------------------------- the contract
SPAN_NAMES: Final = ["chat gpt-4o", "chat gpt-4o", "execute_tool get_time", "invoke_agent assistant"]
ANSWER: Final = "answer: It is noon in Oslo."
EXIT_BUDGET_S: Final = DEFAULT_TIMEOUT_MILLIS / 1000
SLACK_S: Final = 2.5
"""Interpreter teardown on top of the exit budget, generous for a loaded two-core machine (the
unbounded exit this guards against took 14 s)."""
SHUTDOWN_RAN_OUT: Final = "telemetry shutdown did not finish within 2000 ms (is the OTLP endpoint reachable?)"
"""The one warning of a shutdown that ran out, with its hint, over HTTP and gRPC alike."""
UPSTREAM_DISTRO_CLASS: Final = "opentelemetry.distro:OpenTelemetryDistro"


def readme_zero_code_lines(readme: Path = ROOT / "README.md") -> list[str]:
    """Every command line in the README's code blocks that runs ``opentelemetry-instrument`` or the
    audit, without its trailing comment."""
    lines: list[str] = []
    in_block = False
    for raw in readme.read_text(encoding="utf-8").splitlines():
        if raw.lstrip().startswith("```"):
            in_block = not in_block
            continue
        command = raw.split(" #", 1)[0].strip()
        if in_block and ("opentelemetry-instrument " in command or command.startswith("flowra-otel audit")):
            lines.append(command)
    return lines


def assert_one_trace(spans: list[SpanRecord]) -> None:
    assert sorted(s.name for s in spans) == SPAN_NAMES, [s.name for s in spans]
    (agent,) = [s for s in spans if s.name == "invoke_agent assistant"]
    assert agent.is_root
    assert all(s.parent_span_id == agent.span_id for s in spans if s is not agent)
    assert {s.trace_id for s in spans} == {agent.trace_id}


class ZeroCodeFollowsConfigureTelemetry:
    """The README's zero-code lines on one flowra line; a subclass in that line's tests sets
    ``APP``: an unmodified app (no OpenTelemetry, no flowra_otel) whose one run makes the spans
    `SPAN_NAMES` and prints `ANSWER` last."""

    APP: ClassVar[str]

    @classmethod
    def _environment(cls, base: Path, upstream: Upstream) -> AppEnvironment:
        env = app_environment(base, upstream=upstream)
        (env.app_dir / "app.py").write_text(textwrap.dedent(cls.APP), encoding="utf-8")
        return env

    @pytest.fixture(scope="class")
    @classmethod
    def env(cls, tmp_path_factory: pytest.TempPathFactory) -> AppEnvironment:
        """What ``pip install "flowra-otel[instrument]"`` gives: no opentelemetry-distro."""
        return cls._environment(tmp_path_factory.mktemp("zero-code"), "absent")

    @pytest.fixture(scope="class")
    @classmethod
    def env_after(cls, tmp_path_factory: pytest.TempPathFactory) -> AppEnvironment:
        return cls._environment(tmp_path_factory.mktemp("zero-code-after"), "after")

    @pytest.fixture(scope="class")
    @classmethod
    def env_first(cls, tmp_path_factory: pytest.TempPathFactory) -> AppEnvironment:
        return cls._environment(tmp_path_factory.mktemp("zero-code-first"), "first")

    def test_the_app_knows_nothing_of_opentelemetry(self) -> None:
        code = self.APP.replace('"""A plain flowra app: it knows nothing of OpenTelemetry or flowra_otel."""', "")
        assert "flowra_otel" not in code and "opentelemetry" not in code

    def test_every_zero_code_line_of_the_readme_is_run_here(self) -> None:
        tested = set(README_LINES.values())
        assert [line for line in readme_zero_code_lines() if line not in tested] == []

    def test_nothing_set_prints_the_tree_and_exits_at_once(self, env: AppEnvironment) -> None:
        run = run_line(env, README_LINES["nothing-set"])
        assert run.returncode == 0, run.stderr
        assert run.stderr == ""
        lines = run.stdout.splitlines()
        assert lines[0].startswith("trace ")
        assert [line.split("  ")[0] for line in lines[1:5]] == [
            "invoke_agent assistant",
            "├─ chat gpt-4o",
            "├─ execute_tool get_time",
            "└─ chat gpt-4o",
        ], run.stdout
        assert lines[-1] == ANSWER
        assert run.exit_s < EXIT_BUDGET_S + SLACK_S, run

    @pytest.mark.parametrize(
        ("line", "protocol", "signals"),
        [
            pytest.param("http-traces-only", "http", ("traces",), id="http-traces-only"),
            pytest.param("http", "http", ("traces", "metrics"), id="http-base-endpoint"),
            pytest.param("grpc", "grpc", ("traces", "metrics"), id="grpc-base-endpoint"),
        ],
    )
    def test_each_line_exports_what_it_says_and_nothing_else(
        self, env: AppEnvironment, line: str, protocol: Protocol, signals: tuple[Signal, ...]
    ) -> None:
        with OtlpReceiver() as rx:
            run = run_line(env, README_LINES[line], receiver=rx)
            assert run.returncode == 0, run.stderr
            assert run.stderr == ""
            assert run.stdout.splitlines() == [ANSWER]  # no tree: the spans had somewhere to go
            spans = rx.wait_for_spans(4)
            points = rx.wait_for_metric_points("gen_ai.client.token.usage", 2) if "metrics" in signals else []
            attempts = {(a.protocol, a.signal) for a in rx.attempts}
        assert attempts == {(protocol, signal) for signal in signals}
        assert_one_trace(spans)
        assert {s.protocol for s in spans} == {protocol}
        assert {p.attributes["gen_ai.token.type"] for p in points} == ({"input", "output"} if points else set())
        assert run.exit_s < EXIT_BUDGET_S + SLACK_S, run

    @pytest.mark.parametrize("backend", ["hanging", "refusing"])
    @pytest.mark.parametrize(("line", "protocol"), [("http", "http"), ("grpc", "grpc")])
    def test_exit_is_bounded_with_the_backend_down(
        self, env: AppEnvironment, line: str, protocol: Protocol, backend: str
    ) -> None:
        """A backend that takes every export and never answers (the worst there is), or a port
        nothing listens on: the exit waits at most the budget, and says why, with the hint."""
        with OtlpReceiver() as rx:
            if backend == "hanging":
                rx.mode = "hang"
            else:
                rx.close()  # its ports stay in the line, with nothing behind them
            run = run_line(env, README_LINES[line], receiver=rx)
            tried = rx.attempt_count(protocol=protocol, signal="traces")
        assert run.returncode == 0, run.stderr
        assert run.stdout.splitlines() == [ANSWER]
        assert tried >= 1 or backend == "refusing"
        assert SHUTDOWN_RAN_OUT in run.stderr, run.stderr
        assert run.exit_s < EXIT_BUDGET_S + SLACK_S, run

    def test_opentelemetry_distro_installed_as_well_changes_nothing(self, env_after: AppEnvironment) -> None:
        """Its distro and configurator are there, found after ours: ours is used, and the launcher's
        warning that it skipped the other configurator is not shown."""
        with OtlpReceiver() as rx:
            run = run_line(env_after, README_LINES["http-traces-only"], receiver=rx)
            spans = rx.wait_for_spans(4)
            attempts = {(a.protocol, a.signal) for a in rx.attempts}
        assert run.returncode == 0, run.stderr
        assert run.stderr == ""
        assert attempts == {("http", "traces")}
        assert_one_trace(spans)

    def test_when_opentelemetry_distro_is_picked_the_line_fails_as_in_the_issue(
        self, env_first: AppEnvironment
    ) -> None:
        """The paired negative: opentelemetry-distro found first, so its distro and configurator
        set the process up and ours do not run. The same README line then delivers nothing (gRPC
        dialled at the HTTP endpoint) and the exit is not bounded (killed after the budget); the
        instrumentor says once what happened and how to fix it."""
        with OtlpReceiver() as rx:
            run = run_line(
                env_first, README_LINES["http-traces-only"], stop_after_s=EXIT_BUDGET_S + SLACK_S, receiver=rx
            )
            time.sleep(0.2)
            delivered = rx.spans()
        assert ANSWER in run.stdout.splitlines()
        assert delivered == []
        assert run.killed, f"exited {run.exit_s:.1f} s after its output"
        assert run.stderr.count(OTHER_DISTRO_WARNING.format(distro=UPSTREAM_DISTRO_CLASS)) == 1, run.stderr

    def test_the_variables_the_warning_names_make_ours_the_one(self, env_first: AppEnvironment) -> None:
        line = "OTEL_PYTHON_DISTRO=flowra OTEL_PYTHON_CONFIGURATOR=flowra " + README_LINES["http-traces-only"]
        with OtlpReceiver() as rx:
            run = run_line(env_first, line, receiver=rx)
            spans = rx.wait_for_spans(4)
            attempts = {(a.protocol, a.signal) for a in rx.attempts}
        assert run.returncode == 0, run.stderr
        assert run.stderr == ""
        assert attempts == {("http", "traces")}
        assert_one_trace(spans)
        assert run.exit_s < EXIT_BUDGET_S + SLACK_S, run

    def test_a_bad_protocol_is_reported_and_the_app_runs_untraced(self, env: AppEnvironment) -> None:
        line = "OTEL_EXPORTER_OTLP_PROTOCOL=http/json " + README_LINES["http"]
        with OtlpReceiver() as rx:
            run = run_line(env, line, receiver=rx)
            attempts = rx.attempts
        assert run.returncode == 0, run.stderr
        assert run.stdout.splitlines() == [ANSWER]
        assert "OTEL_EXPORTER_OTLP_PROTOCOL='http/json' is not a supported OTLP protocol" in run.stderr
        assert attempts == []

    def test_the_traces_file_is_what_the_audit_reads(self, env: AppEnvironment) -> None:
        """app -> FLOWRA_OTEL_TRACES_FILE -> ``flowra-otel audit``: clean without content; with
        content capture on, a value the tool returned is found (so the audit read the spans'
        content from the file, not just their names)."""
        spans_file = env.app_dir / "spans.jsonl"
        spans_file.unlink(missing_ok=True)
        run = run_line(env, README_LINES["traces-file"])
        assert run.returncode == 0, run.stderr
        assert run.stderr == ""
        assert run.stdout.splitlines() == [ANSWER]  # no tree: the spans went to the file
        assert len(spans_file.read_text(encoding="utf-8").splitlines()) >= 1

        audit = run_line(env, README_LINES["audit"])
        assert audit.returncode == 0, audit.stdout + audit.stderr
        out = audit.stdout.splitlines()
        assert out[0] == "flowra-otel audit: spans.jsonl (OTLP JSON: 1 trace(s), 4 span(s))", audit.stdout
        calls = [line.split("  trace_id=")[0] for line in out if line.startswith("  get_time  ")]
        assert calls == ["  get_time  call_id=t1  status=ok"], audit.stdout
        assert out[-1] == "result: clean"

        spans_file.unlink()
        run = run_line(
            env, README_LINES["traces-file"], extra_env={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
        )
        assert run.returncode == 0, run.stderr
        leak = run_line(env, README_LINES["audit"] + " --secret '12:00 in Oslo'")
        assert leak.returncode == 1, leak.stdout + leak.stderr
        assert "  LEAK given_secret: span 'execute_tool get_time'" in leak.stdout
        assert leak.stdout.splitlines()[-1].startswith("result: LEAK (")
