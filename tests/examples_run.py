"""Running an example the way a reader does: ``python examples/.../X.py`` in a fresh interpreter,
from the repository's root, with no ``OTEL_*`` variable from the developer's shell."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_example(
    folder: Path, name: str, *args: str, python: str = sys.executable, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``folder/name`` (with its command-line ``args``, by ``python``) with ``env`` on top of
    the cleaned environment; it must exit 0."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    clean.update(env)
    proc = subprocess.run(
        [python, str(folder / name), *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc
