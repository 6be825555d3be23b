"""The real MCP tool servers as processes for the end-to-end tests: the ``mcp`` SDK's
(tests/mcp_tool_server.py, in the ``backend-mcp`` session's venv, requirements/mcp.lock) and FastMCP's
(tests/fastmcp_tool_server.py, in the ``backend-fastmcp`` session's, requirements/fastmcp.lock, which also holds the
OpenTelemetry distro and the Starlette instrumentation), each started on a free loopback port,
plainly or under ``opentelemetry-instrument``, exporting its spans by OTLP/HTTP to the endpoint the
test gives, stopped when the test is done.

Shared by the MCP trace tests and the backend read-backs (Jaeger, Phoenix) that show the server's
work inside the agent's trace. Flowra-free: which flowra client talks to it is the test's affair.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.backend_env import require_executable

MCP_ENV: Final = "FLOWRA_OTEL_MCP_PYTHON"
FASTMCP_ENV: Final = "FLOWRA_OTEL_FASTMCP_PYTHON"
SERVER_SCRIPT: Final = Path(__file__).resolve().parent / "mcp_tool_server.py"
FASTMCP_SERVER_SCRIPT: Final = Path(__file__).resolve().parent / "fastmcp_tool_server.py"


def mcp_python() -> str:
    """The MCP server venv's python; skipped on a developer machine without it, failed in CI."""
    return require_executable(MCP_ENV, "the MCP server venv (requirements/mcp.lock)")


def fastmcp_python() -> str:
    """The FastMCP server venv's python (with ``opentelemetry-instrument`` beside it); as ``mcp_python``."""
    return require_executable(FASTMCP_ENV, "the FastMCP server venv (requirements/fastmcp.lock)")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


INSTRUMENT_ENV: Final = {
    # what an operator sets for `opentelemetry-instrument` (the endpoint comes from the test)
    "OTEL_SERVICE_NAME": "instrumented-mcp-server",
    "OTEL_TRACES_EXPORTER": "otlp",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    "OTEL_METRICS_EXPORTER": "none",
    "OTEL_LOGS_EXPORTER": "none",
    "OTEL_BSP_SCHEDULE_DELAY": "50",  # the batch processor's: the test reads the spans seconds later
}


@contextlib.contextmanager
def mcp_server(
    python: str,
    era: str,
    traces_endpoint: str,
    host: str = "127.0.0.1",
    *,
    script: Path = SERVER_SCRIPT,
    instrument: bool = False,
) -> Iterator[str]:
    """The test server ``script`` (``era``: ``stateless`` or ``handshake``) on a free port of the
    loopback address ``host``, exporting its spans to ``traces_endpoint``; under
    ``opentelemetry-instrument`` (the one beside ``python``) with ``instrument``. Yields its URL."""
    port = free_port(host)
    env = {**os.environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": traces_endpoint, "OTEL_SDK_DISABLED": "false"}
    command = [python, str(script), str(port), era, host]
    if instrument:
        env.update(INSTRUMENT_ENV)
        command = [str(Path(python).with_name("opentelemetry-instrument")), *command]
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                err = process.stderr.read().decode(errors="replace") if process.stderr else ""
                pytest.fail(f"the MCP server did not start: {err[-2000:]}")
            time.sleep(0.1)
        yield f"http://{f'[{host}]' if ':' in host else host}:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        if process.stderr is not None:
            process.stderr.close()


__all__ = [
    "FASTMCP_ENV",
    "FASTMCP_SERVER_SCRIPT",
    "MCP_ENV",
    "SERVER_SCRIPT",
    "fastmcp_python",
    "free_port",
    "mcp_python",
    "mcp_server",
]
