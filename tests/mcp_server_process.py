"""The real MCP tool server (tests/mcp_tool_server.py) as a process for the end-to-end tests:
started on a free loopback port in its own venv (``.venv-mcp``, requirements/mcp.lock), exporting
its spans by OTLP/HTTP to the endpoint the test gives, stopped when the test is done.

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
SERVER_SCRIPT: Final = Path(__file__).resolve().parent / "mcp_tool_server.py"


def mcp_python() -> str:
    """The MCP server venv's python; skipped on a developer machine without it, failed in CI."""
    return require_executable(MCP_ENV, "the MCP server venv (requirements/mcp.lock)")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def mcp_server(python: str, era: str, traces_endpoint: str, host: str = "127.0.0.1") -> Iterator[str]:
    """The test server (``era``: ``stateless`` or ``handshake``) on a free port of the loopback
    address ``host``, exporting its spans to ``traces_endpoint``; yields its URL."""
    port = free_port(host)
    env = {**os.environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": traces_endpoint, "OTEL_SDK_DISABLED": "false"}
    process = subprocess.Popen(
        [python, str(SERVER_SCRIPT), str(port), era, host],
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


__all__ = ["MCP_ENV", "SERVER_SCRIPT", "free_port", "mcp_python", "mcp_server"]
