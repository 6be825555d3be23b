"""The README's zero-code lines on flowra 0.0.3 - 0.0.8, run verbatim: ``opentelemetry-instrument python
app.py`` exports as ``configure_telemetry()`` does from the same variables (the package's own
distro and configurator, ``flowra_otel.distro``), over HTTP and gRPC, with a bounded exit.

The scenarios are `tests.zero_code.ZeroCodeFollowsConfigureTelemetry` (shared with flowra 0.0.86 -
0.0.93); the app is this line's unmodified app from ``test_zero_code_instrumentation``.
"""

from __future__ import annotations

from tests.hook_registry.test_zero_code_instrumentation import APP
from tests.zero_code import ZeroCodeFollowsConfigureTelemetry


class TestReadmeZeroCodeLines(ZeroCodeFollowsConfigureTelemetry):
    APP = APP
