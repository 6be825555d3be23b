"""The dependency bounds ``./dev test`` installs: the floors ``pyproject.toml`` declares, and the newest.

Why: a floor that is not true crashes a user's ``import flowra_otel`` (an app with OpenTelemetry 1.41
installed this package under a ``>= 1.30`` floor, then failed on a semantic-conventions constant
1.41 lacks). So ``./dev test`` builds two environments per flowra line (0.0.93 and 0.0.8), one with
every declared dependency at exactly its floor (the constraints printed by ``lowest``) and one with
the newest OpenTelemetry on the index (the distributions named by ``names``, upgraded), and runs a
quick real subset on each: every module imported, a traced run, OTLP export to the test receiver.

    python tests/otel_bounds.py lowest   # "opentelemetry-api==1.42", ... (pip constraints)
    python tests/otel_bounds.py names    # the declared distributions other than flowra

Reads the metadata with ``tomllib`` only, so any Python >= 3.11 runs it (no environment needed).
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_FLOOR = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*>=\s*([0-9][0-9A-Za-z.]*)$")


def declared() -> dict[str, str]:
    """Every dependency of the package and of its ``instrument`` extra, name -> floor (flowra
    excluded: each run pins its own release). Every requirement must be a plain ``name>=floor``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["instrument"]]
    floors: dict[str, str] = {}
    for requirement in requirements:
        match = _FLOOR.match(requirement.strip())
        if match is None:
            msg = f"pyproject.toml: {requirement!r} is not 'name>=floor'; tests/otel_bounds.py cannot read its floor"
            raise ValueError(msg)
        name, floor = match.groups()
        if name != "flowra":
            floors[name] = floor
    return floors


def lowest() -> list[str]:
    """The floors as pip constraints (``name==floor``)."""
    return [f"{name}=={floor}" for name, floor in declared().items()]


def main(argv: list[str]) -> int:
    if argv == ["lowest"]:
        print("\n".join(lowest()))
        return 0
    if argv == ["names"]:
        print("\n".join(declared()))
        return 0
    print("usage: otel_bounds.py lowest|names", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
