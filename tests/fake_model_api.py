"""Loopback stand-ins for model APIs: just enough for the real google-genai and openai SDKs.

The tests that put a provider SDK (its HTTP stack and any instrumentation of it) in front of a
model need a server that answers like the model's API. ``FakeModelApi`` listens on 127.0.0.1,
answers each ``POST`` whose path ends with its suffix (Gemini's ``:generateContent``, OpenAI's
``/chat/completions``) with the next reply the test queued (a JSON document as that API returns
it), and records every request body::

    with FakeGemini() as gemini:
        gemini.replies += [gemini_text("Sunny.", response_id="r-1")]
        client = genai.Client(api_key="test", http_options=HttpOptions(base_url=gemini.url))
        ...
        assert gemini.requests[0]["contents"][0]["parts"][0]["text"] == "Weather?"

Nothing else of the API is served (404), and an empty queue answers 500 with a message.
"""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any, Self

__all__ = [
    "FakeGemini",
    "FakeModelApi",
    "FakeOpenAI",
    "gemini_function_call",
    "gemini_text",
    "openai_text",
    "openai_tool_call",
]


def _usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "promptTokenCount": input_tokens,
        "candidatesTokenCount": output_tokens,
        "totalTokenCount": input_tokens + output_tokens,
    }


def gemini_text(
    text: str, *, response_id: str = "resp-1", tokens: tuple[int, int] = (11, 7), model: str = "gemini-2.5-flash"
) -> dict[str, Any]:
    """A ``GenerateContentResponse`` with one text candidate."""
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": _usage(*tokens),
        "modelVersion": model,
        "responseId": response_id,
    }


def gemini_function_call(
    name: str,
    args: dict[str, Any],
    *,
    response_id: str = "resp-1",
    tokens: tuple[int, int] = (11, 7),
    model: str = "gemini-2.5-flash",
) -> dict[str, Any]:
    """A ``GenerateContentResponse`` whose candidate calls one function."""
    part = {"functionCall": {"name": name, "args": args}}
    return {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": _usage(*tokens),
        "modelVersion": model,
        "responseId": response_id,
    }


def _openai_completion(
    message: dict[str, Any], finish_reason: str, response_id: str, tokens: tuple[int, int], model: str
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": 1_790_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1], "total_tokens": sum(tokens)},
    }


def openai_text(
    text: str, *, response_id: str = "chatcmpl-1", tokens: tuple[int, int] = (11, 7), model: str = "gpt-4o-mini"
) -> dict[str, Any]:
    """A ``ChatCompletion`` answering with text."""
    return _openai_completion({"role": "assistant", "content": text}, "stop", response_id, tokens, model)


def openai_tool_call(
    name: str,
    args: dict[str, Any],
    *,
    call_id: str = "call_1",
    response_id: str = "chatcmpl-1",
    tokens: tuple[int, int] = (11, 7),
    model: str = "gpt-4o-mini",
) -> dict[str, Any]:
    """A ``ChatCompletion`` calling one function."""
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return _openai_completion(message, "tool_calls", response_id, tokens, model)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _send(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        fake = self.server.fake
        if not self.path.split("?", 1)[0].endswith(fake.path_suffix):
            self._send(404, {"error": {"code": 404, "message": f"not served: {self.path}", "status": "NOT_FOUND"}})
            return
        with fake.lock:
            fake.requests.append(body)
            fake.paths.append(self.path)
            reply = fake.replies.pop(0) if fake.replies else None
        if reply is None:
            self._send(500, {"error": {"code": 500, "message": "no reply queued", "status": "INTERNAL"}})
            return
        self._send(200, reply)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeModelApi


class FakeModelApi:
    """The server (a context manager); ``replies`` is the queue, ``requests`` what came in."""

    path_suffix = ""

    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(2)


class FakeGemini(FakeModelApi):
    """Gemini's ``POST /v1beta/models/<model>:generateContent`` (give ``url`` as the client's base URL)."""

    path_suffix = ":generateContent"


class FakeOpenAI(FakeModelApi):
    """OpenAI's ``POST /v1/chat/completions`` (give ``url + "/v1"`` as the client's base URL)."""

    path_suffix = "/chat/completions"
