"""Building the wheel and installing it into a fresh virtual environment, as a user gets it.

Shared by each flowra line's ``test_wheel_install.py``: a module-scoped environment with the wheel
installed next to the flowra release under test (the dev lock pins the other dependencies, as
constraints, so pip mostly serves them from its cache).
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "dev.lock"
PIP_TIMEOUT_S = 600
REPOSITORY = "https://github.com/flowra-otel/flowra-otel"
FLOWRA = importlib.metadata.version("flowra")
EDGE_RELEASES = ("0.0.3", "0.0.8", "0.0.47", "0.0.55", "0.0.56", "0.0.67", "0.0.68", "0.0.85", "0.0.86", "0.0.93")
"""The lowest and highest release of each flowra line, and of each era of the modern line (0.0.47 -
0.0.55, 0.0.56 - 0.0.67, 0.0.68 - 0.0.85, 0.0.86 - 0.0.93): where the wheel is built and installed
(a minute each; the install rule, no upper bound on flowra, is the same for every release)."""


def constraints(folder: Path, flowra: str | None = None) -> Path:
    """The dev lock as pip constraints, flowra left free (None) or pinned to ``flowra``."""
    lines = [line for line in LOCK.read_text(encoding="utf-8").splitlines() if not line.startswith("flowra==")]
    if flowra is not None:
        lines.append(f"flowra=={flowra}")
    path = folder / ("constraints.txt" if flowra is None else f"constraints-flowra-{flowra}.txt")
    path.write_text("\n".join([*lines, ""]), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Installed:
    wheel: Path
    python: Path
    bin: Path
    app_dir: Path


def clean_env() -> dict[str, str]:
    """No OTEL_* from the developer's shell, and nothing that would put the repository on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"):
        env.pop(name, None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(args: list[str | Path], cwd: Path, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env={**clean_env(), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"{args}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return proc


def installed_flowra(python: Path) -> str:
    """The flowra release installed in the venv of ``python``."""
    code = "import importlib.metadata as m; print(m.version('flowra'))"
    return run([python, "-c", code], cwd=python.parent).stdout.strip()


def install(base: Path, *, flowra: str = FLOWRA) -> Iterator[Installed]:
    """The wheel, built from this checkout, installed into a new venv that already has flowra
    ``flowra`` (the app's), outside the repository."""
    dist = base / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, ROOT], cwd=base, timeout=PIP_TIMEOUT_S)
    (wheel,) = dist.glob("flowra_otel-*.whl")
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=True, clear=True)
    python = env_dir / "bin" / "python"
    # The app's flowra first; then the wheel with flowra left free: pip must keep the app's release.
    app_pins = constraints(base, flowra)
    run([python, "-m", "pip", "install", "-q", f"flowra=={flowra}", "-c", app_pins], cwd=base, timeout=PIP_TIMEOUT_S)
    run([python, "-m", "pip", "install", "-q", wheel, "-c", constraints(base)], cwd=base, timeout=PIP_TIMEOUT_S)
    assert installed_flowra(python) == flowra, "installing flowra-otel changed the app's flowra"
    app_dir = base / "app"
    app_dir.mkdir()
    yield Installed(wheel=wheel, python=python, bin=env_dir / "bin", app_dir=app_dir)
