"""Which real backends the end-to-end tests get, and what happens when one is missing.

``./dev test`` builds the backends (Phoenix and MLflow venvs, the Collector and Jaeger binaries)
and hands their executables to the test runs of the two *home* releases (the locked flowra of
each line: ``requirements/dev.lock``'s and 0.0.8) through ``FLOWRA_OTEL_*`` variables. On a
developer machine without them a backend test is skipped, saying why; on a home release in CI
(``CI`` set, as CI services do), with ``FLOWRA_OTEL_REQUIRE_BACKENDS=1``, or when ``./dev``
reported a backend it could not build (``FLOWRA_OTEL_BACKENDS_MISSING``) it FAILS: a backend that
silently went missing must never turn the end-to-end suite into a row of skips. The other
releases' runs never get the backends (0.0.75 and 0.0.79 get the MCP servers only), so there the
tests skip, saying so.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

import pytest

from flowra_otel.adapters import flowra_version

REQUIRE_ENV: Final = "FLOWRA_OTEL_REQUIRE_BACKENDS"
MISSING_ENV: Final = "FLOWRA_OTEL_BACKENDS_MISSING"
"""Set by noxfile.py's ``backend_env`` under ``./dev test`` to the backends that were not built."""
_FALSE: Final = frozenset({"", "0", "false", "no", "off"})
_LOCK: Final = Path(__file__).resolve().parent.parent / "requirements" / "dev.lock"
OLD_LINE_HOME: Final = "0.0.8"


def home_releases() -> frozenset[str]:
    """The flowra releases whose test runs ``./dev test`` gives the backends (noxfile.py's
    ``LOCKED_FLOWRA`` and ``OLD_LINE_HOME``)."""
    try:
        match = re.search(r"^flowra==(\S+)$", _LOCK.read_text(encoding="utf-8"), re.MULTILINE)
    except OSError:
        match = None
    return frozenset({OLD_LINE_HOME} | ({match.group(1)} if match else set()))


def on_home_release() -> bool:
    return flowra_version() in home_releases()


def _set(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in _FALSE


def backends_required() -> bool:
    """True with ``FLOWRA_OTEL_REQUIRE_BACKENDS`` on, when ``./dev`` reported a build failure to this
    run (it does so to the runs it meant to give a backend: the home releases, and the MCP server's
    other releases), or on a home release in CI."""
    return _set(REQUIRE_ENV) or _set(MISSING_ENV) or (on_home_release() and _set("CI"))


def require_executable(env_var: str, what: str) -> str:
    """The executable named by ``env_var``; else skip (developer machine) or fail (CI) the test.

    Call it from a fixture or a test, never at import time: ``pytest.fail`` there would abort
    the collection of every other test too.
    """
    value = os.environ.get(env_var, "").strip()
    if value and os.path.isfile(value) and os.access(value, os.X_OK):
        return value
    if value:
        reason = f"{env_var}={value} is not an executable file ({what})"
    else:
        reason = f"{env_var} is not set: {what} is missing (./dev test builds it; ./dev backends prints the variables)"
    missing = os.environ.get(MISSING_ENV, "").strip()
    if missing:
        reason += f"; ./dev could not build: {missing}"
    if backends_required():
        pytest.fail(f"{reason}. Backends are required here (CI / {REQUIRE_ENV}): not skipping.", pytrace=False)
    if not on_home_release():
        reason += (
            f" (./dev test gives the backends to flowra {' and '.join(sorted(home_releases()))} only,"
            " and the MCP servers also to the cells whose backends name them, noxfile.py)"
        )
    pytest.skip(reason)
