"""A pytest plugin that writes pytest's own last line ("878 passed, 140 skipped, 2 xfailed") to a file.

Why: ``./dev test`` ends with one line per flowra release, and the counts there must be pytest's,
not a re-count (the test count per release is what "no test lost" is measured by). Each nox test
session loads it (``-p tests.summary_line``) and names the file in ``FLOWRA_OTEL_PYTEST_LINE``;
without that variable it does nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

LINE_ENV = "FLOWRA_OTEL_PYTEST_LINE"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    target = os.environ.get(LINE_ENV)
    if not target:
        return
    parts, _color = terminalreporter.build_summary_stats_line()
    line = ", ".join(text for text, _markup in parts) or "no tests ran"
    Path(target).write_text(line + "\n", encoding="utf-8")
