"""The pytest plugin shipped with flowra-otel (entry point ``pytest11``: ``flowra_otel``): one fixture,
``flowra_otel_capture``, that gives a test in-memory OpenTelemetry and an installer for its runtime
(``flowra_otel.testing.TraceCapture``)::

    from flowra_otel.testing import assert_no_leak

    def test_cards_never_reach_traces(flowra_otel_capture):
        runtime = my_runtime()
        flowra_otel_capture.install(runtime)
        ...  # run the agent
        assert_no_leak(flowra_otel_capture.spans, ["4111 1111 1111 1111"])

Why it does nothing else: pytest loads it in every test session of every project that has the
package installed, whether or not a test uses it. So it defines no hook, sets no global provider or
variable, and imports nothing at start-up (no flowra, no OpenTelemetry SDK, not the plugin itself:
``flowra_otel`` loads its names on first use); ``TraceCapture`` is imported when a test asks for the
fixture. ``-p no:flowra_otel`` leaves it out altogether.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .testing import TraceCapture

__all__ = ["flowra_otel_capture"]


@pytest.fixture
def flowra_otel_capture() -> Iterator[TraceCapture]:
    """In-memory OpenTelemetry for this test (``flowra_otel.testing.TraceCapture``): ``install(runtime)``
    traces a runtime into it (content capture on); ``spans`` / ``span(name)`` / ``span_dicts()``,
    ``logs``, ``metric_points(name)`` and ``assert_no_leak(secrets)`` read what it recorded. After
    the test, what ``install`` did is undone (a runtime shared with other tests is left untraced,
    as it was) and its providers are shut down."""
    from .testing import TraceCapture

    capture = TraceCapture()
    try:
        yield capture
    finally:
        capture.shutdown()
