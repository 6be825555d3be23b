"""``opentelemetry-instrument`` on a flowra this package does not support: one line, the app runs.

The wheel with ``opentelemetry-instrumentation`` (what the ``[instrument]`` extra brings) installed
next to flowra 0.0.46 (the last release of another hook API), in a fresh venv outside the
repository; an app that imports flowra runs under the real launcher. It used to print a 15-line
traceback ("Importing of flowra failed, skipping it") before the app's output.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.wheel import FLOWRA, constraints, install, run

APP = """
import importlib.metadata
import flowra

print("app ran on flowra", importlib.metadata.version("flowra"))
"""


@pytest.mark.skipif(FLOWRA != "0.0.93", reason="one unsupported-release install is enough: on the locked flowra only")
def test_opentelemetry_instrument_on_an_unsupported_flowra_warns_in_one_line(tmp_path: Path) -> None:
    (env,) = install(tmp_path, flowra="0.0.46")
    run(
        [env.python, "-m", "pip", "install", "-q", "opentelemetry-instrumentation", "-c", constraints(tmp_path)],
        cwd=tmp_path,
        timeout=600,
    )
    app = env.app_dir / "app.py"
    app.write_text(textwrap.dedent(APP), encoding="utf-8")
    proc = run([env.bin / "opentelemetry-instrument", env.python, app], cwd=env.app_dir)
    assert proc.stdout.splitlines()[0] == "app ran on flowra 0.0.46", proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("flowra_otel: flowra 0.0.46 is not supported by flowra_otel; supported: "), lines[0]
    assert lines[0].endswith("The app runs untraced."), lines[0]
