"""A real Arize Phoenix server for the end-to-end tests: started on free loopback ports with a
throw-away working directory, stopped by its PID, and read back through its REST API.

Why a helper: Phoenix is the one GenAI trace backend that installs and runs here (a Python
package, ``requirements/phoenix.lock``, in its own venv that ``./dev test`` builds), so it is how
the suite proves that what flowra-otel exports is what a GenAI UI shows. The executable comes from
``FLOWRA_OTEL_PHOENIX`` (the ``phoenix`` script of that venv); nothing here installs anything.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

PHOENIX_ENV: Final = "FLOWRA_OTEL_PHOENIX"
"""Path of the ``phoenix`` executable (``./dev test`` sets it)."""
START_TIMEOUT_S: Final = 120.0
STOP_TIMEOUT_S: Final = 15.0


def phoenix_executable() -> str | None:
    """The configured ``phoenix`` executable, or None when ``FLOWRA_OTEL_PHOENIX`` is unset."""
    value = os.environ.get(PHOENIX_ENV, "").strip()
    return value or None


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports (all held open while choosing, so none repeats)."""
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        return ports


class PhoenixServer:
    """One ``phoenix serve`` process; ``url`` is its HTTP base (UI, REST, OTLP/HTTP at ``/v1/traces``)."""

    def __init__(self, executable: str, working_dir: Path) -> None:
        self.executable = executable
        self.working_dir = working_dir
        self.http_port, self.grpc_port = free_ports(2)
        self.url = f"http://127.0.0.1:{self.http_port}"
        self.grpc_endpoint = f"http://127.0.0.1:{self.grpc_port}"
        self.log_path = working_dir / "phoenix.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.start_seconds: float | None = None

    # ---------------------------------------------------------------------------- lifecycle
    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start the server and wait (bounded) until ``GET /healthz`` answers 200."""
        env = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "PHOENIX_"))} | {
            "PHOENIX_WORKING_DIR": str(self.working_dir),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.http_port),
            "PHOENIX_GRPC_PORT": str(self.grpc_port),
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        began = time.monotonic()
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [self.executable, "serve"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stop() ends it and its children
            )
        deadline = began + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"phoenix exited with {self.process.returncode} while starting:\n{self.log_tail()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as response:
                if response.status == 200:
                    self.start_seconds = time.monotonic() - began
                    return
            time.sleep(0.25)
        self.stop()
        raise TimeoutError(f"phoenix did not answer /healthz within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """End the server by its PID (its process group): SIGTERM, then SIGKILL after a grace period."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT_S)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # ---------------------------------------------------------------------------- reading back
    def get_json(self, path: str, **query: str | int) -> Any:
        url = f"{self.url}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> Any:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            document = json.loads(response.read())
        if document.get("errors"):
            raise RuntimeError(f"GraphQL errors: {document['errors']}")
        return document["data"]

    def spans(self, project: str) -> list[dict[str, Any]]:
        """Every span of ``project`` as ``GET /v1/projects/{project}/spans`` returns it (all pages)."""
        spans: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            query: dict[str, str | int] = {"limit": 1000}
            if cursor:
                query["cursor"] = cursor
            try:
                page = self.get_json(f"/v1/projects/{urllib.parse.quote(project)}/spans", **query)
            except urllib.error.HTTPError as exc:
                if exc.code == 404:  # the project does not exist until its first span arrives
                    return []
                raise
            spans.extend(page["data"])
            cursor = page.get("next_cursor")
            if not cursor:
                return spans

    def wait_for_spans(self, project: str, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """``project``'s spans once at least ``count`` arrived (Phoenix inserts in the background)."""
        deadline = time.monotonic() + timeout
        spans: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            spans = self.spans(project)
            if len(spans) >= count:
                return spans
            time.sleep(0.25)
        raise TimeoutError(f"{len(spans)} of {count} span(s) arrived in project {project!r} within {timeout:.0f} s")


@contextlib.contextmanager
def running_phoenix(executable: str, working_dir: Path) -> Iterator[PhoenixServer]:
    server = PhoenixServer(executable, working_dir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
