"""A real MLflow tracking server for the end-to-end tests: started on a free loopback port with a
throw-away working directory (SQLite store, artifact root), stopped by its PID, and read back
through its REST API.

Why a helper: MLflow (PyPI ``mlflow``, ``requirements/mlflow.lock``, in its own venv) is a second
GenAI trace backend that installs and runs here, and flowra ships an MLflow integration of its own,
so flowra users know it. Its server takes OTLP/HTTP traces at ``/v1/traces`` (protobuf or JSON, the
header ``x-mlflow-experiment-id`` required) and translates the GenAI semantic conventions itself
(span types, inputs/outputs, token usage, session id). It takes no metrics (``/v1/metrics`` answers
404) and has no gRPC endpoint. The executable comes from ``FLOWRA_OTEL_MLFLOW`` (the ``mlflow``
script of that venv); nothing here installs anything.

Reading back: ``traces`` lists an experiment's traces (``POST /api/3.0/mlflow/traces/search``),
``trace_info`` gives one trace's info (``GET /api/3.0/mlflow/traces/{trace_id}``) and
``trace_spans`` its spans (``GET /api/3.0/mlflow/traces/get``) as plain dicts: hex ids, attribute
values decoded from OTLP ``AnyValue``. MLflow stores every attribute JSON-encoded and decodes it on
the way out, so an attribute that was a JSON *string* (``gen_ai.input.messages``) comes back as the
list or dict it encodes.
"""

from __future__ import annotations

import base64
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
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

MLFLOW_ENV: Final = "FLOWRA_OTEL_MLFLOW"
"""Path of the ``mlflow`` executable (of the venv built from ``requirements/mlflow.lock``)."""
START_TIMEOUT_S: Final = 120.0
"""``mlflow server`` took 20-24 s to answer on the 2-core machine under load (database migrations
and imports); the bound leaves room for a slower CI machine."""
STOP_TIMEOUT_S: Final = 15.0
REQUEST_TIMEOUT_S: Final = 30.0
EXPERIMENT_ID_HEADER: Final = "x-mlflow-experiment-id"
TRACE_ID_PREFIX: Final = "tr-"
"""MLflow's id of a trace received over OTLP is ``tr-`` + the 32-hex OTel trace id."""
SEARCH_PAGE_SIZE: Final = 500
"""The server's upper bound for ``max_results`` of a trace search."""

# Server environment: no telemetry, nothing fetched from outside (the model price catalog is
# otherwise fetched from GitHub on the first span that names a provider, which stalls that OTLP
# request for seconds where there is no network; the bundled catalog still prices the calls), no
# job runner (it starts about eight extra processes and leaves a directory in /dev/shm).
SERVER_ENV: Final[Mapping[str, str]] = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "MLFLOW_MODEL_CATALOG_URI": "",
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
}


def mlflow_executable() -> str | None:
    """The configured ``mlflow`` executable, or None when ``FLOWRA_OTEL_MLFLOW`` is unset."""
    value = os.environ.get(MLFLOW_ENV, "").strip()
    return value or None


def free_port() -> int:
    """A free loopback port (free when asked; the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def mlflow_trace_id(trace_id: int | str) -> str:
    """MLflow's id for an OTel trace id (an int, 32 hex digits, or already ``tr-...``)."""
    if isinstance(trace_id, int):
        return f"{TRACE_ID_PREFIX}{trace_id:032x}"
    return trace_id if trace_id.startswith(TRACE_ID_PREFIX) else f"{TRACE_ID_PREFIX}{trace_id.lower()}"


def decode_any_value(value: Mapping[str, Any]) -> Any:
    """A plain Python value from OTLP ``AnyValue`` JSON as MLflow writes it (snake_case fields)."""
    if "string_value" in value:
        return value["string_value"]
    if "bool_value" in value:
        return bool(value["bool_value"])
    if "int_value" in value:
        return int(value["int_value"])
    if "double_value" in value:
        return float(value["double_value"])
    if "array_value" in value:
        return [decode_any_value(item) for item in value["array_value"].get("values", [])]
    if "kvlist_value" in value:
        return decode_attributes(value["kvlist_value"].get("values", []))
    if "bytes_value" in value:
        return base64.b64decode(value["bytes_value"])
    return None  # an empty AnyValue


def decode_attributes(key_values: list[dict[str, Any]]) -> dict[str, Any]:
    """``[{"key": k, "value": AnyValue}, ...]`` as ``{k: plain value}``."""
    return {item["key"]: decode_any_value(item.get("value", {})) for item in key_values}


def _hex_id(value: str | None) -> str | None:
    """A base64 trace or span id (as MLflow's JSON carries it) as lowercase hex."""
    return base64.b64decode(value).hex() if value else None


def plain_span(span: Mapping[str, Any]) -> dict[str, Any]:
    """One span of ``GET /api/3.0/mlflow/traces/get`` as a plain dict: hex ids, decoded attributes.

    MLflow keeps no OTel span kind (it is dropped on ingest). Its own reading of the GenAI
    attributes is in the ``mlflow.*`` attributes: ``mlflow.spanType`` (AGENT, CHAT_MODEL, TOOL...),
    ``mlflow.spanInputs`` / ``mlflow.spanOutputs``, ``mlflow.chat.tokenUsage``, ``mlflow.llm.model``,
    ``mlflow.llm.provider``, ``mlflow.llm.cost``, ``mlflow.chat.tools``.
    """
    status = span.get("status") or {}
    return {
        "trace_id": _hex_id(span.get("trace_id")),
        "span_id": _hex_id(span.get("span_id")),
        "parent_span_id": _hex_id(span.get("parent_span_id")),
        "name": span.get("name", ""),
        "start_time_unix_nano": int(span.get("start_time_unix_nano", 0)),
        "end_time_unix_nano": int(span.get("end_time_unix_nano", 0)),
        "status_code": status.get("code", "STATUS_CODE_UNSET"),
        "status_message": status.get("message", ""),
        "attributes": decode_attributes(span.get("attributes", [])),
        "events": [
            {
                "name": event.get("name", ""),
                "time_unix_nano": int(event.get("time_unix_nano", 0)),
                "attributes": decode_attributes(event.get("attributes", [])),
            }
            for event in span.get("events", [])
        ],
    }


def trace_metadata_json(info: Mapping[str, Any], key: str) -> Any:
    """A JSON-valued trace metadata entry decoded (``mlflow.trace.tokenUsage``, ``mlflow.trace.cost``),
    or None when absent."""
    raw = info.get("trace_metadata", {}).get(key)
    return None if raw is None else json.loads(raw)


class MlflowApiError(RuntimeError):
    """An MLflow REST call answered with an HTTP error; ``status`` and the body are kept."""

    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        super().__init__(f"{method} {url} answered {status}: {body[:500]}")
        self.status = status
        self.body = body


class MlflowServer:
    """One ``mlflow server`` process; ``url`` is its HTTP base (UI, REST API, OTLP at ``/v1/traces``)."""

    def __init__(self, executable: str, working_dir: Path) -> None:
        self.executable = executable
        self.working_dir = working_dir.resolve()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.traces_endpoint = f"{self.url}/v1/traces"
        """What ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (or an OTLP/HTTP span exporter) takes."""
        self.db_path = self.working_dir / "mlflow.db"
        self.artifact_root = self.working_dir / "artifacts"
        self.log_path = self.working_dir / "mlflow.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.start_seconds: float | None = None

    # ---------------------------------------------------------------------------- lifecycle
    def command(self) -> list[str]:
        return [
            self.executable,
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{self.db_path}",
            "--default-artifact-root",
            str(self.artifact_root),
        ]

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start the server and wait (bounded) until ``GET /health`` answers 200."""
        self.working_dir.mkdir(parents=True, exist_ok=True)
        env = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "MLFLOW_"))}
        # XDG_CONFIG_HOME: the server writes an installation id (config/mlflow/telemetry.json) even
        # with telemetry off; keep it in the working directory, not in the user's home.
        env |= dict(SERVER_ENV) | {"XDG_CONFIG_HOME": str(self.working_dir / "config")}
        began = time.monotonic()
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.command(),
                cwd=self.working_dir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stop() ends it and its uvicorn child
            )
        deadline = began + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"mlflow server exited with {self.process.returncode} while starting:\n{self.log_tail()}"
                )
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                if response.status == 200:
                    self.start_seconds = time.monotonic() - began
                    return
            time.sleep(0.25)
        self.stop()
        raise TimeoutError(f"mlflow server did not answer /health within {timeout:.0f} s:\n{self.log_tail()}")

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

    # ---------------------------------------------------------------------------- REST
    def request_json(self, method: str, path: str, body: Any = None, **query: str | int | bool) -> Any:
        """One REST call; JSON in and out. HTTP errors raise ``MlflowApiError`` with the body."""
        url = f"{self.url}{path}"
        if query:
            plain = {key: str(value).lower() if isinstance(value, bool) else value for key, value in query.items()}
            url += "?" + urllib.parse.urlencode(plain)
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                text = response.read().decode("utf-8")
        except urllib.error.HTTPError as exc:
            raise MlflowApiError(method, url, exc.code, exc.read().decode("utf-8", errors="replace")) from None
        return json.loads(text) if text.strip() else {}

    def create_experiment(self, name: str) -> str:
        """A new experiment's id (``0``, the ``Default`` experiment, exists from the start too)."""
        document = self.request_json("POST", "/api/2.0/mlflow/experiments/create", {"name": name})
        experiment_id: str = document["experiment_id"]
        return experiment_id

    def otlp_headers(self, experiment_id: str) -> dict[str, str]:
        """The headers an OTLP/HTTP exporter must send (without one ``/v1/traces`` answers 422)."""
        return {EXPERIMENT_ID_HEADER: experiment_id}

    def otlp_env(self, experiment_id: str) -> dict[str, str]:
        """Environment for a process exporting its traces here (and no metrics or logs: MLflow has none)."""
        return {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": self.traces_endpoint,
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"{EXPERIMENT_ID_HEADER}={experiment_id}",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
        }

    # ---------------------------------------------------------------------------- reading back
    def traces(self, experiment_id: str, filter_string: str = "") -> list[dict[str, Any]]:
        """Every trace (its TraceInfo: ``trace_id``, ``state``, ``trace_metadata``, ``tags``,
        ``request_preview``...) of an experiment, newest first, all pages.

        ``filter_string`` is MLflow's search syntax, e.g. ``metadata.`mlflow.trace.session` = 'c1'``,
        ``tags.`service.name` = 'x'``, ``span.name = 'chat gpt-4o'``, ``trace.status = 'ERROR'``.
        """
        found: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            body: dict[str, Any] = {
                "locations": [{"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": experiment_id}}],
                "max_results": SEARCH_PAGE_SIZE,
            }
            if filter_string:
                body["filter"] = filter_string
            if token:
                body["page_token"] = token
            page = self.request_json("POST", "/api/3.0/mlflow/traces/search", body)
            found.extend(page.get("traces", []))
            token = page.get("next_page_token")
            if not token:
                return found

    def wait_for_traces(self, experiment_id: str, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The experiment's traces once at least ``count`` have arrived with their root span
        (a trace whose root has not arrived yet stays ``IN_PROGRESS``)."""
        deadline = time.monotonic() + timeout
        done: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            done = [info for info in self.traces(experiment_id) if info.get("state") != "IN_PROGRESS"]
            if len(done) >= count:
                return done
            time.sleep(0.25)
        raise TimeoutError(
            f"{len(done)} of {count} finished trace(s) arrived in experiment {experiment_id} within {timeout:.0f} s"
        )

    def trace_info(self, trace_id: int | str) -> dict[str, Any]:
        """One trace's TraceInfo (``trace_metadata`` holds ``mlflow.trace.tokenUsage``,
        ``mlflow.trace.cost``, ``mlflow.trace.session``; resource attributes are in ``tags``)."""
        document = self.request_json("GET", f"/api/3.0/mlflow/traces/{mlflow_trace_id(trace_id)}")
        info: dict[str, Any] = document["trace"]["trace_info"]
        return info

    def trace_spans(self, trace_id: int | str) -> list[dict[str, Any]]:
        """One trace's spans as plain dicts (see ``plain_span``), in MLflow's order (start time)."""
        document = self.request_json(
            "GET", "/api/3.0/mlflow/traces/get", trace_id=mlflow_trace_id(trace_id), allow_partial=True
        )
        return [plain_span(span) for span in document["trace"].get("spans", [])]


@contextlib.contextmanager
def running_mlflow(executable: str, working_dir: Path) -> Iterator[MlflowServer]:
    server = MlflowServer(executable, working_dir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
