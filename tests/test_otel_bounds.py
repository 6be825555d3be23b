"""The dependency metadata is true: every module imports on what it allows, and below it pip refuses.

``./dev test`` also runs this file, with a traced run and OTLP export, in environments holding
exactly the declared floors and the newest OpenTelemetry (``FLOWRA_OTEL_BOUNDS=lowest`` /
``highest``; see ``tests/otel_bounds.py``). In the ordinary suite it checks that every module
imports and that an app pinned below a floor gets pip's resolution error, never an import crash.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

import flowra_otel
from flowra_otel.adapters import flowra_version, line_of
from tests import otel_bounds
from tests.wheel import LOCK, ROOT, clean_env

BOUNDS = os.environ.get("FLOWRA_OTEL_BOUNDS", "")
"""``lowest`` or ``highest`` in the environments ``./dev test`` builds for the bounds, else empty."""
FLOWRA = importlib.metadata.version("flowra")


def test_every_module_imports() -> None:
    """Every module of the package and of this flowra line's adapter: a constant or class the
    installed OpenTelemetry lacks fails here, at import, as it would in a user's app."""
    other = {"hook_registry", "runtime_hooks"} - {line_of(flowra_version() or "")}
    skipped = tuple(f"flowra_otel.adapters.{name}" for name in other)
    names = [m.name for m in pkgutil.walk_packages(flowra_otel.__path__, "flowra_otel.")]
    imported = [name for name in names if not name.startswith(skipped)]
    for name in imported:
        importlib.import_module(name)
    assert "flowra_otel.core.semconv" in imported
    assert "flowra_otel.core.export_logs" in imported
    assert "flowra_otel.core.otlp_json_file" in imported


@pytest.mark.skipif(BOUNDS != "lowest", reason="only in the floors environment ./dev test builds")
def test_the_environment_holds_exactly_the_floors() -> None:
    """The check is only worth something if what runs is the floor, not whatever pip kept."""
    for name, floor in otel_bounds.declared().items():
        assert Version(importlib.metadata.version(name)) == Version(floor), name


@pytest.mark.skipif(BOUNDS != "highest", reason="only in the newest-OpenTelemetry environment ./dev test builds")
def test_the_environment_holds_at_least_the_locked_opentelemetry() -> None:
    lines = LOCK.read_text(encoding="utf-8").splitlines()
    locked = next(line for line in lines if line.startswith("opentelemetry-sdk=="))
    assert Version(importlib.metadata.version("opentelemetry-sdk")) >= Version(locked.split("==")[1])


def _resolve(tmp_path: Path, *pins: str) -> subprocess.CompletedProcess[str]:
    """pip's resolution (``--dry-run``: nothing installed) of this checkout beside the app's pins;
    the lock's other pins as constraints so pip resolves from its cache."""
    constraints = tmp_path / "constraints.txt"
    kept = [
        line
        for line in LOCK.read_text(encoding="utf-8").splitlines()
        if not line.startswith(("opentelemetry-", "protobuf==", "flowra=="))
    ]
    constraints.write_text("\n".join(kept) + "\n", encoding="utf-8")
    args = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q", "-c", constraints]
    return subprocess.run(
        [*map(str, args), str(ROOT), f"flowra=={FLOWRA}", *pins],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.skipif(BOUNDS != "" or FLOWRA != "0.0.93", reason="one resolution is enough: on the locked flowra only")
def test_an_app_pinned_below_the_floor_gets_pips_resolution_error(tmp_path: Path) -> None:
    """OpenTelemetry 1.41 lacks semantic-conventions constants this package imports: an app that
    pins it must be refused by pip, not handed an install whose import fails. 1.42, the floor,
    resolves (the paired check: the refusal is about the floor, not about the command)."""
    below = _resolve(tmp_path, "opentelemetry-sdk==1.41.1")
    assert below.returncode != 0
    assert "ResolutionImpossible" in below.stderr, below.stderr
    assert "opentelemetry-sdk" in below.stderr
    at_floor = _resolve(tmp_path, "opentelemetry-sdk==1.42.0")
    assert at_floor.returncode == 0, at_floor.stderr
