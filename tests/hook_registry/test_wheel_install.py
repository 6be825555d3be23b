"""The package as a user gets it: built as a wheel, installed into a fresh virtual environment
with nothing but its declared dependencies, used by an app in a directory outside the repository.

This catches what the editable dev install hides: a module missing from the wheel, a dependency
only the dev lock provides, a broken entry point, an extra that does not make the zero-code path
work, a long description whose links break off GitHub. Dependencies are pinned by the dev lock
(as constraints), so pip mostly serves them from its cache. One slow test (a venv and two
installs), kept to a single module-scoped environment.
"""

from __future__ import annotations

import json
import re
import textwrap
import tomllib
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path
from zipfile import ZipFile

import pytest

from tests.hook_registry.test_zero_code_instrumentation import APP as PLAIN_APP
from tests.wheel import EDGE_RELEASES, FLOWRA, PIP_TIMEOUT_S, REPOSITORY, ROOT, Installed, constraints, install, run

pytestmark = pytest.mark.skipif(
    FLOWRA not in EDGE_RELEASES,
    reason=f"the wheel is installed on each line's lowest and highest release ({', '.join(EDGE_RELEASES)})",
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    yield from install(tmp_path_factory.mktemp("wheel-install"))


def test_the_wheel_carries_the_package_its_metadata_and_absolute_links(installed: Installed) -> None:
    with ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(wheel.read(metadata_name).decode())
        (entry_points_name,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points = wheel.read(entry_points_name).decode()
    assert "flowra_otel/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "examples/"))]
    assert "flowra = flowra_otel.instrumentor:FlowraInstrumentor" in entry_points
    # Zero-code export set up as configure_telemetry() does: our own distro and configurator.
    assert "[opentelemetry_distro]\nflowra = flowra_otel.distro:FlowraDistro" in entry_points
    assert "[opentelemetry_configurator]\nflowra = flowra_otel.distro:FlowraConfigurator" in entry_points

    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL") or [])
    assert urls["Repository"] == REPOSITORY
    requires = metadata.get_all("Requires-Dist") or []
    extra = [r.split(";")[0].strip() for r in requires if 'extra == "instrument"' in r.replace("'", '"')]
    # opentelemetry-distro's defaults (gRPC, metrics and logs to the endpoint) are what the extra must not bring.
    assert [r for r in extra if not r.startswith("opentelemetry-instrumentation")] == [], extra
    assert extra, requires

    # The long description is the README: every link must work on a package index page too.
    description = metadata.get_payload()
    assert isinstance(description, str)
    assert "pip install" in description
    links = re.findall(r"\]\(([^)]+)\)", description)
    assert links
    relative = [link for link in links if not link.startswith(("https://", "http://", "#"))]
    assert not relative, f"relative links break off GitHub: {relative}"
    assert [link for link in links if link.startswith(REPOSITORY)]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["urls"]["Repository"] == REPOSITORY


TRACED_APP = """
    import json
    import flowra_otel
    from flowra.agent import HookRegistry
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from flowra_otel import OtelHooks
    from flowra_otel.export import configure_telemetry

    spans = InMemorySpanExporter()
    telemetry = configure_telemetry(service_name="wheel-app", span_exporter=spans, console=True)
    hooks = HookRegistry()
    hooks.add(OtelHooks())

    PLAIN_APP_WITH_HOOKS

    telemetry.shutdown()
    print("SPANS " + json.dumps({
        "installed_at": flowra_otel.__file__,
        "spans": sorted(
            [s.name, s.parent is None, s.resource.attributes["service.name"]] for s in spans.get_finished_spans()
        ),
    }))
"""


def test_an_app_outside_the_repository_traces_with_runtime_dependencies_only(installed: Installed) -> None:
    # The plain app, given the hooks through the runtime's services.
    plain = textwrap.dedent(PLAIN_APP).replace(
        '"""A plain flowra app: it knows nothing of OpenTelemetry or flowra_otel."""', ""
    )
    plain = plain.replace(
        "from flowra.runtime import AgentRuntime",
        "from flowra.runtime import AgentRuntime\nfrom flowra.agent import HookRegistry as _HR",
    )
    assert "                ToolRegistry: tools,\n" in plain
    plain = plain.replace(
        "                ToolRegistry: tools,\n", "                ToolRegistry: tools,\n                _HR: hooks,\n"
    )
    code = textwrap.dedent(TRACED_APP).replace("PLAIN_APP_WITH_HOOKS", plain)
    app = installed.app_dir / "traced_app.py"
    app.write_text(code, encoding="utf-8")

    proc = run([installed.python, "-W", "error", app], cwd=installed.app_dir)

    assert "answer: It is noon in Oslo." in proc.stdout
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("SPANS ")]
    report = json.loads(line.removeprefix("SPANS "))
    assert Path(report["installed_at"]).is_relative_to(installed.python.parent.parent), report["installed_at"]
    assert report["spans"] == [
        ["chat gpt-4o", False, "wheel-app"],
        ["chat gpt-4o", False, "wheel-app"],
        ["execute_tool get_time", False, "wheel-app"],
        ["invoke_agent assistant", True, "wheel-app"],
    ]
    # The tree printer, the default output of configure_telemetry, works from the wheel too.
    tree = proc.stdout.splitlines()
    assert any(line.startswith("invoke_agent assistant  ") for line in tree), proc.stdout
    assert any(line.startswith("├─ execute_tool get_time  ") for line in tree), proc.stdout


def test_the_instrument_extra_makes_opentelemetry_instrument_export(installed: Installed) -> None:
    """``pip install 'flowra-otel[instrument]'`` is all the zero-code path needs: the README's line
    with no variable prints the trace tree, as ``configure_telemetry()`` does, and
    opentelemetry-distro is not installed."""
    run(
        [
            installed.python,
            "-m",
            "pip",
            "install",
            "-q",
            f"{installed.wheel}[instrument]",
            "-c",
            constraints(installed.app_dir),
        ],
        cwd=installed.app_dir,
        timeout=PIP_TIMEOUT_S,
    )
    app = installed.app_dir / "plain_app.py"
    app.write_text(textwrap.dedent(PLAIN_APP), encoding="utf-8")

    installed_names = run([installed.python, "-m", "pip", "list", "--format=freeze"], cwd=installed.app_dir).stdout
    assert "opentelemetry-instrumentation==" in installed_names
    assert "opentelemetry-distro==" not in installed_names

    proc = run(
        ["opentelemetry-instrument", "python", app.name], cwd=installed.app_dir, PATH=f"{installed.bin}:/usr/bin:/bin"
    )

    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("trace ")
    assert [line.split("  ")[0] for line in lines[1:5]] == [
        "invoke_agent assistant",
        "├─ chat gpt-4o",
        "├─ execute_tool get_time",
        "└─ chat gpt-4o",
    ], proc.stdout
    assert lines[-1] == "answer: It is noon in Oslo."
