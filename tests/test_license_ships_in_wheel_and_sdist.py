"""The MIT license travels with the package: the wheel and the sdist both carry LICENSE, and their
metadata names it.

Why: ``license = "MIT"`` in pyproject only names the license; the MIT terms themselves require the
notice to ship with every copy, so a wheel without the file (what the package had before this
test) is not a copy anyone may redistribute. Both archives are built here the way a release is
built: pyproject's own ``[build-system]`` backend (hatchling) in a fresh venv, through its PEP 517
hooks, and then read back as a user's installer would.
"""

from __future__ import annotations

import email
import importlib.metadata
import re
import subprocess
import tarfile
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from tests.wheel import LOCK, ROOT, clean_env

FLOWRA = importlib.metadata.version("flowra")
LOCKED = re.findall(r"^flowra==(\S+)$", LOCK.read_text(encoding="utf-8"), re.MULTILINE)[0]
pytestmark = pytest.mark.skipif(
    FLOWRA != LOCKED, reason=f"the archives do not depend on flowra: built once, on the locked flowra {LOCKED}"
)

BUILD = """
import importlib, sys
backend = importlib.import_module(sys.argv[1])
print(backend.build_wheel(sys.argv[2]))
print(backend.build_sdist(sys.argv[2]))
"""


def _run(*args: str | Path) -> str:
    proc = subprocess.run(
        [str(a) for a in args], cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, f"{args}\n{proc.stderr}"
    return proc.stdout


def _build(tmp_path: Path) -> tuple[Path, Path]:
    """The wheel and the sdist, built by pyproject's build backend in a venv of its own."""
    system = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]
    env_dir = tmp_path / "build-env"
    venv.create(env_dir, with_pip=True, clear=True)
    python = env_dir / "bin" / "python"
    _run(python, "-m", "pip", "install", "-q", *system["requires"])
    dist = tmp_path / "dist"
    dist.mkdir()
    wheel_name, sdist_name = _run(python, "-c", BUILD, system["build-backend"], dist).split()[-2:]
    return dist / wheel_name, dist / sdist_name


def test_the_wheel_and_the_sdist_carry_the_license(tmp_path: Path) -> None:
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("MIT License"), "LICENSE is the MIT license"
    wheel, sdist = _build(tmp_path)

    with zipfile.ZipFile(wheel) as archive:
        dist_info = next(n.split("/")[0] for n in archive.namelist() if n.split("/")[0].endswith(".dist-info"))
        assert archive.read(f"{dist_info}/licenses/LICENSE").decode("utf-8") == license_text
        metadata = email.message_from_bytes(archive.read(f"{dist_info}/METADATA"))
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]

    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        member = archive.extractfile(f"{top}/LICENSE")
        assert member is not None
        assert member.read().decode("utf-8") == license_text
        pkg_info = archive.extractfile(f"{top}/PKG-INFO")
        assert pkg_info is not None
        sdist_metadata = email.message_from_bytes(pkg_info.read())
    assert sdist_metadata["License-Expression"] == "MIT"
    assert sdist_metadata.get_all("License-File") == ["LICENSE"]
