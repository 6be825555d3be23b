"""One adapter per flowra hook API, and the choice between them.

flowra changed its hook API completely after 0.0.8 (``HookRegistry`` / ``HookProvider`` then,
``runtime.hooks`` with ``on`` / ``on_span`` now). Each adapter translates
one API's events into the core's invocation objects; neither imports the other, and only the
one for the installed flowra is ever imported (the other would fail to import against it).

* ``hook_registry``: flowra 0.0.3 - 0.0.8;
* ``runtime_hooks``: flowra 0.0.47 - 0.0.93 (two handler storages, 0.0.47 - 0.0.55 and 0.0.56+,
  and the other era differences inside the range are facts in ``runtime_hooks/_flowra.py``).

Any other flowra (0.0.9 - 0.0.46 had other, short-lived hook APIs, six eras in three weeks; later
releases are untested) gets ``UnsupportedFlowraError`` naming the supported releases and the
installed one when tracing is set up, never a silent no-op. Refusing is safe: the gate runs before
any adapter is imported, so on a refused release nothing of this package touches flowra (no patch,
no hook); the app's runs are exactly as without it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from types import ModuleType
from typing import Final

SUPPORTED: Final = "flowra 0.0.3 - 0.0.8 (the HookRegistry API) and 0.0.47 - 0.0.93 (runtime.hooks)"

LINES: Final = (
    ((0, 0, 3), (0, 0, 8), "hook_registry"),
    ((0, 0, 47), (0, 0, 93), "runtime_hooks"),
)
"""(lowest, highest release, adapter) per hook API. ``noxfile.py``'s release sweep reads it from
this file alone, in nox's own venv (no flowra, no OpenTelemetry): keep this module's top-level
imports to the standard library."""


class UnsupportedFlowraError(ImportError):
    """The installed flowra is not one this package can trace (or there is none)."""


def flowra_version() -> str | None:
    """The installed flowra's version string, or None when flowra is not installed."""
    try:
        return importlib.metadata.version("flowra")
    except importlib.metadata.PackageNotFoundError:
        return None


def line_of(version: str) -> str | None:
    """The adapter module name for a flowra version (``"0.0.93"`` -> ``"runtime_hooks"``), or None."""
    match = re.match(r"^(\d+)\.(\d+)\.(\d+)", version)
    if match is None:
        return None
    release = tuple(int(x) for x in match.groups())
    for low, high, name in LINES:
        if low <= release <= high:
            return name
    return None


def current() -> ModuleType:
    """The adapter package for the installed flowra (imported on first use).

    Raises:
        UnsupportedFlowraError: flowra is missing, or its release is outside the supported ones.
    """
    version = flowra_version()
    if version is None:
        msg = f"flowra_otel traces flowra agents, but flowra is not installed; supported: {SUPPORTED}"
        raise UnsupportedFlowraError(msg)
    name = line_of(version)
    if name is None:
        msg = (
            f"flowra {version} is not supported by flowra_otel; supported: {SUPPORTED}. "
            "Install a supported flowra release, or a flowra_otel release that supports yours."
        )
        raise UnsupportedFlowraError(msg)
    return importlib.import_module(f"{__name__}.{name}")


__all__ = ["LINES", "SUPPORTED", "UnsupportedFlowraError", "current", "flowra_version", "line_of"]
