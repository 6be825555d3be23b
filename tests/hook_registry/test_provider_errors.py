"""``classify_provider_error`` against the real exceptions of the openai, anthropic and google-genai SDKs.

The exceptions are not constructed by hand: each case points the SDK's real client at a loopback
HTTP server that answers with the case's status, headers and JSON body (timeouts: the server
answers too late; connection errors: nothing listens), so the SDK builds its exception from a
real ``httpx.Response`` exactly as it does in production.  The classifier imports none of these
SDKs; these tests are what ties its duck typing to their current shapes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import http.server
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import google.auth.exceptions
import httpx
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core.provider_errors import (
    ERROR_KIND,
    ERROR_REQUEST_ID,
    ERROR_RETRY_AFTER,
    ERROR_RETRYABLE,
    HTTP_RESPONSE_STATUS_CODE,
    ErrorKind,
    ProviderError,
    classify_provider_error,
)
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    get_weather,
    run_tool_loop,
    tool_loop_runtime,
    tool_registry,
)

CLIENT_TIMEOUT_S = 2.0  # far above a loopback answer on a loaded CI machine; the SLOW cases wait longer
SLOW_REPLY_S = 2.5


# ---------------------------------------------------------------------------------------------
# A loopback server that answers every request with the reply the test set
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    delay_s: float = 0.0


class _Handler(http.server.BaseHTTPRequestHandler):
    server: ReplyServer

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        reply = self.server.reply
        if reply.delay_s:
            time.sleep(reply.delay_s)
        payload = json.dumps(reply.body).encode() if reply.body is not None else b""
        try:
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            pass  # the client gave up (timeout cases)

    def do_POST(self) -> None:
        self._answer()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class ReplyServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    reply: Reply = Reply(500)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


@pytest.fixture(scope="module")
def server() -> Iterator[ReplyServer]:
    srv = ReplyServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# ---------------------------------------------------------------------------------------------
# One real SDK call per provider; each returns the exception the SDK raised
# ---------------------------------------------------------------------------------------------


def _raised(call: Callable[[], object]) -> BaseException:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("the SDK call did not raise")


def openai_error(base_url: str) -> BaseException:
    client = openai.OpenAI(api_key="sk-test", base_url=f"{base_url}/v1", max_retries=0, timeout=CLIENT_TIMEOUT_S)
    with client:
        return _raised(
            lambda: client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        )


def anthropic_error(base_url: str) -> BaseException:
    client = anthropic.Anthropic(api_key="sk-ant-test", base_url=base_url, max_retries=0, timeout=CLIENT_TIMEOUT_S)
    with client:
        return _raised(
            lambda: client.messages.create(
                model="claude-sonnet-4-5", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
            )
        )


def google_error(base_url: str) -> BaseException:
    options = genai_types.HttpOptions(base_url=base_url, timeout=int(CLIENT_TIMEOUT_S * 1000))
    client = genai.Client(api_key="goog-test", http_options=options)
    return _raised(lambda: client.models.generate_content(model="gemini-2.5-flash", contents="hi"))


SDK_CALLS: dict[str, Callable[[str], BaseException]] = {
    "openai": openai_error,
    "anthropic": anthropic_error,
    "google": google_error,
}


def openai_body(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def anthropic_body(type_: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


def google_body(code: int, status: str, message: str, details: list[Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details is not None:
        error["details"] = details
    return {"error": error}


@dataclasses.dataclass(frozen=True)
class Case:
    sdk: str
    reply: Reply | None  # None: nothing listens (connection refused)
    exc_class: type[BaseException]
    kind: ErrorKind
    status: int | None = None
    retry_after_s: float | None = None
    request_id: str | None = None

    @property
    def id(self) -> str:
        where = self.reply.status if self.reply else "refused"
        return f"{self.sdk}-{self.exc_class.__name__}-{where}-{self.kind.value}"


SLOW = Reply(200, {}, delay_s=SLOW_REPLY_S)
TOO_LONG_OPENAI = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens."
)
TOO_LONG_ANTHROPIC = "prompt is too long: 208310 tokens > 200000 maximum"
TOO_LONG_GOOGLE = "The input token count (1500000) exceeds the maximum number of tokens allowed (1048576)."

CASES = [
    # -- openai
    Case(
        "openai",
        Reply(
            429,
            openai_body("Rate limit reached", "requests", "rate_limit_exceeded"),
            {"retry-after-ms": "1500", "x-request-id": "req_oa1"},
        ),
        openai.RateLimitError,
        ErrorKind.RATE_LIMITED,
        429,
        1.5,
        "req_oa1",
    ),
    Case(
        "openai",
        Reply(429, openai_body("You exceeded your current quota", "insufficient_quota", "insufficient_quota")),
        openai.RateLimitError,
        ErrorKind.QUOTA_EXHAUSTED,
        429,
    ),
    Case(
        "openai",
        Reply(503, openai_body("The server is overloaded", "server_error")),
        openai.InternalServerError,
        ErrorKind.OVERLOADED,
        503,
    ),
    Case(
        "openai",
        Reply(500, openai_body("The server had an error", "server_error")),
        openai.InternalServerError,
        ErrorKind.UNAVAILABLE,
        500,
    ),
    Case("openai", Reply(502, None), openai.InternalServerError, ErrorKind.UNAVAILABLE, 502),
    Case("openai", Reply(504, None), openai.InternalServerError, ErrorKind.TIMEOUT, 504),
    Case(
        "openai",
        Reply(
            401,
            openai_body("Incorrect API key provided", "invalid_request_error", "invalid_api_key"),
            {"x-request-id": "req_oa2"},
        ),
        openai.AuthenticationError,
        ErrorKind.AUTH,
        401,
        None,
        "req_oa2",
    ),
    Case(
        "openai",
        Reply(403, openai_body("Country not supported", "request_forbidden")),
        openai.PermissionDeniedError,
        ErrorKind.AUTH,
        403,
    ),
    Case(
        "openai",
        Reply(404, openai_body("The model does not exist", "invalid_request_error", "model_not_found")),
        openai.NotFoundError,
        ErrorKind.NOT_FOUND,
        404,
    ),
    Case(
        "openai",
        Reply(400, openai_body(TOO_LONG_OPENAI, "invalid_request_error", "context_length_exceeded")),
        openai.BadRequestError,
        ErrorKind.CONTEXT_TOO_LONG,
        400,
    ),
    Case(
        "openai",
        Reply(400, openai_body("Invalid 'temperature': decimal above maximum value.", "invalid_request_error")),
        openai.BadRequestError,
        ErrorKind.INVALID_REQUEST,
        400,
    ),
    Case(
        "openai",
        Reply(422, openai_body("Unprocessable", "invalid_request_error")),
        openai.UnprocessableEntityError,
        ErrorKind.INVALID_REQUEST,
        422,
    ),
    Case("openai", SLOW, openai.APITimeoutError, ErrorKind.TIMEOUT),
    Case("openai", None, openai.APIConnectionError, ErrorKind.UNAVAILABLE),
    # -- anthropic
    Case(
        "anthropic",
        Reply(
            429,
            anthropic_body("rate_limit_error", "Number of request tokens has exceeded your rate limit"),
            {"retry-after": "20", "request-id": "req_011CA"},
        ),
        anthropic.RateLimitError,
        ErrorKind.RATE_LIMITED,
        429,
        20.0,
        "req_011CA",
    ),
    Case(
        "anthropic",
        Reply(529, anthropic_body("overloaded_error", "Overloaded")),
        anthropic.OverloadedError,
        ErrorKind.OVERLOADED,
        529,
    ),
    Case(
        "anthropic",
        Reply(503, anthropic_body("api_error", "Service unavailable")),
        anthropic.InternalServerError,
        ErrorKind.OVERLOADED,
        503,
    ),
    # A proxy (or an older SDK) turning an overload into a 500: the body type decides.
    Case(
        "anthropic",
        Reply(500, anthropic_body("overloaded_error", "Overloaded")),
        anthropic.InternalServerError,
        ErrorKind.OVERLOADED,
        500,
    ),
    Case(
        "anthropic",
        Reply(500, anthropic_body("api_error", "Internal server error")),
        anthropic.InternalServerError,
        ErrorKind.UNAVAILABLE,
        500,
    ),
    Case(
        "anthropic",
        Reply(504, anthropic_body("timeout_error", "Request timed out")),
        anthropic.InternalServerError,
        ErrorKind.TIMEOUT,
        504,
    ),
    Case(
        "anthropic",
        Reply(401, anthropic_body("authentication_error", "invalid x-api-key")),
        anthropic.AuthenticationError,
        ErrorKind.AUTH,
        401,
    ),
    Case(
        "anthropic",
        Reply(403, anthropic_body("permission_error", "Not allowed")),
        anthropic.PermissionDeniedError,
        ErrorKind.AUTH,
        403,
    ),
    Case(
        "anthropic",
        Reply(404, anthropic_body("not_found_error", "model: claude-x")),
        anthropic.NotFoundError,
        ErrorKind.NOT_FOUND,
        404,
    ),
    Case(
        "anthropic",
        Reply(402, anthropic_body("billing_error", "Your credit balance is too low")),
        anthropic.APIStatusError,
        ErrorKind.QUOTA_EXHAUSTED,
        402,
    ),
    Case(
        "anthropic",
        Reply(400, anthropic_body("invalid_request_error", TOO_LONG_ANTHROPIC)),
        anthropic.BadRequestError,
        ErrorKind.CONTEXT_TOO_LONG,
        400,
    ),
    Case(
        "anthropic",
        Reply(400, anthropic_body("invalid_request_error", "max_tokens: Field required")),
        anthropic.BadRequestError,
        ErrorKind.INVALID_REQUEST,
        400,
    ),
    Case(
        "anthropic",
        Reply(413, anthropic_body("request_too_large", "Request exceeds the maximum allowed number of bytes.")),
        anthropic.RequestTooLargeError,
        ErrorKind.INVALID_REQUEST,
        413,
    ),
    Case("anthropic", SLOW, anthropic.APITimeoutError, ErrorKind.TIMEOUT),
    Case("anthropic", None, anthropic.APIConnectionError, ErrorKind.UNAVAILABLE),
    # -- google-genai
    Case(
        "google",
        Reply(
            429,
            google_body(
                429,
                "RESOURCE_EXHAUSTED",
                "Resource has been exhausted (e.g. check quota).",
                [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}],
            ),
        ),
        genai_errors.ClientError,
        ErrorKind.RATE_LIMITED,
        429,
        37.0,
    ),
    Case(
        "google",
        Reply(503, google_body(503, "UNAVAILABLE", "The model is overloaded.")),
        genai_errors.ServerError,
        ErrorKind.OVERLOADED,
        503,
    ),
    Case(
        "google",
        Reply(500, google_body(500, "INTERNAL", "An internal error has occurred.")),
        genai_errors.ServerError,
        ErrorKind.UNAVAILABLE,
        500,
    ),
    Case(
        "google",
        Reply(504, google_body(504, "DEADLINE_EXCEEDED", "Deadline exceeded.")),
        genai_errors.ServerError,
        ErrorKind.TIMEOUT,
        504,
    ),
    Case(
        "google",
        Reply(401, google_body(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")),
        genai_errors.ClientError,
        ErrorKind.AUTH,
        401,
    ),
    Case(
        "google",
        Reply(403, google_body(403, "PERMISSION_DENIED", "API key not valid.")),
        genai_errors.ClientError,
        ErrorKind.AUTH,
        403,
    ),
    Case(
        "google",
        Reply(404, google_body(404, "NOT_FOUND", "models/gemini-x is not found")),
        genai_errors.ClientError,
        ErrorKind.NOT_FOUND,
        404,
    ),
    Case(
        "google",
        Reply(400, google_body(400, "INVALID_ARGUMENT", TOO_LONG_GOOGLE)),
        genai_errors.ClientError,
        ErrorKind.CONTEXT_TOO_LONG,
        400,
    ),
    Case(
        "google",
        Reply(400, google_body(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")),
        genai_errors.ClientError,
        ErrorKind.INVALID_REQUEST,
        400,
    ),
    Case(
        "google",
        Reply(400, google_body(400, "FAILED_PRECONDITION", "User location is not supported.")),
        genai_errors.ClientError,
        ErrorKind.INVALID_REQUEST,
        400,
    ),
    Case("google", SLOW, httpx.ReadTimeout, ErrorKind.TIMEOUT),
    Case("google", None, httpx.ConnectError, ErrorKind.UNAVAILABLE),
]


def sdk_exception(case: Case, server: ReplyServer) -> BaseException:
    if case.reply is None:
        return SDK_CALLS[case.sdk](closed_port_url())
    server.reply = case.reply
    return SDK_CALLS[case.sdk](server.url)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_sdk_exceptions_are_classified(case: Case, server: ReplyServer) -> None:
    exc = sdk_exception(case, server)
    assert type(exc) is case.exc_class, f"the SDK raised {type(exc)!r}: {exc!r}"

    result = classify_provider_error(exc)

    retryable = case.kind in (ErrorKind.TIMEOUT, ErrorKind.RATE_LIMITED, ErrorKind.OVERLOADED, ErrorKind.UNAVAILABLE)
    assert result == ProviderError(case.kind, retryable, case.status, case.retry_after_s, case.request_id)
    expected: dict[str, object] = {ERROR_KIND: case.kind.value, ERROR_RETRYABLE: retryable}
    if case.status is not None:
        expected[HTTP_RESPONSE_STATUS_CODE] = case.status
    assert result.metric_attributes() == expected
    if case.retry_after_s is not None:
        expected[ERROR_RETRY_AFTER] = case.retry_after_s
    if case.request_id is not None:
        expected[ERROR_REQUEST_ID] = case.request_id
    assert result.attributes() == expected


@pytest.mark.parametrize("case", [c for c in CASES if c.kind is ErrorKind.CONTEXT_TOO_LONG], ids=lambda c: c.sdk)
def test_the_message_that_decides_context_too_long_is_never_recorded(case: Case, server: ReplyServer) -> None:
    result = classify_provider_error(sdk_exception(case, server))
    assert result.kind is ErrorKind.CONTEXT_TOO_LONG
    rendered = repr(result) + repr(result.attributes())
    assert "token" not in rendered
    assert "prompt" not in rendered


def test_anthropic_overloaded_body_decides_even_without_the_sdk_type_attribute(server: ReplyServer) -> None:
    # Older anthropic SDKs have no ``type`` attribute: the body's ``error.type`` is read instead.
    server.reply = Reply(500, anthropic_body("overloaded_error", "Overloaded"))
    exc = anthropic_error(server.url)
    assert isinstance(exc, anthropic.InternalServerError)
    exc.type = None
    assert classify_provider_error(exc).kind is ErrorKind.OVERLOADED


def test_retry_after_as_an_http_date(server: ReplyServer) -> None:
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    server.reply = Reply(429, anthropic_body("rate_limit_error", "slow down"), {"retry-after": when})
    result = classify_provider_error(anthropic_error(server.url))
    assert result.retry_after_s is not None
    assert 100 < result.retry_after_s <= 120


@pytest.mark.parametrize("value", ["soon", "", "-5", "nan", "inf"])
def test_unparseable_retry_after_is_omitted(value: str, server: ReplyServer) -> None:
    server.reply = Reply(429, anthropic_body("rate_limit_error", "slow down"), {"retry-after": value})
    result = classify_provider_error(anthropic_error(server.url))
    assert (result.kind, result.retry_after_s) == (ErrorKind.RATE_LIMITED, None)
    assert ERROR_RETRY_AFTER not in result.attributes()


# ---------------------------------------------------------------------------------------------
# Exceptions that are not HTTP responses
# ---------------------------------------------------------------------------------------------


class ProviderWrapperError(RuntimeError):
    pass


def _chained(cause: BaseException) -> BaseException:
    try:
        raise ProviderWrapperError("wrapped") from cause
    except ProviderWrapperError as exc:
        return exc


NON_HTTP = [
    pytest.param(TimeoutError(), ErrorKind.TIMEOUT, id="TimeoutError"),
    pytest.param(httpx.ConnectTimeout("connect timed out"), ErrorKind.TIMEOUT, id="httpx.ConnectTimeout"),
    pytest.param(httpx.PoolTimeout("pool"), ErrorKind.TIMEOUT, id="httpx.PoolTimeout"),
    pytest.param(ConnectionResetError(104, "reset"), ErrorKind.UNAVAILABLE, id="ConnectionResetError"),
    pytest.param(ConnectionRefusedError(111, "refused"), ErrorKind.UNAVAILABLE, id="ConnectionRefusedError"),
    pytest.param(
        httpx.RemoteProtocolError("peer closed connection"), ErrorKind.UNAVAILABLE, id="httpx.RemoteProtocolError"
    ),
    pytest.param(httpx.ReadError("read"), ErrorKind.UNAVAILABLE, id="httpx.ReadError"),
    pytest.param(
        openai.ContentFilterFinishReasonError(), ErrorKind.CONTENT_FILTER, id="openai.ContentFilterFinishReasonError"
    ),
    pytest.param(
        google.auth.exceptions.DefaultCredentialsError("no ADC"),  # type: ignore[no-untyped-call]
        ErrorKind.AUTH,
        id="google.auth.DefaultCredentialsError",
    ),
    pytest.param(google.auth.exceptions.RefreshError("invalid_grant"), ErrorKind.AUTH, id="google.auth.RefreshError"),  # type: ignore[no-untyped-call]
    pytest.param(google.auth.exceptions.TransportError("dns"), ErrorKind.UNAVAILABLE, id="google.auth.TransportError"),  # type: ignore[no-untyped-call]
    pytest.param(ValueError("schema"), ErrorKind.UNKNOWN, id="ValueError"),
    pytest.param(KeyError("x"), ErrorKind.UNKNOWN, id="KeyError"),
    pytest.param(_chained(TimeoutError()), ErrorKind.TIMEOUT, id="wrapper-from-TimeoutError"),
    pytest.param(_chained(ValueError()), ErrorKind.UNKNOWN, id="wrapper-from-ValueError"),
]


@pytest.mark.parametrize(("exc", "kind"), NON_HTTP)
def test_non_http_exceptions_are_classified(exc: BaseException, kind: ErrorKind) -> None:
    result = classify_provider_error(exc)
    assert (result.kind, result.http_status, result.retry_after_s, result.request_id) == (kind, None, None, None)
    if kind is ErrorKind.UNKNOWN:
        assert result.retryable is None
        assert result.attributes() == {ERROR_KIND: "unknown"}  # retryable omitted when unknown
    else:
        assert result.retryable is (kind in (ErrorKind.TIMEOUT, ErrorKind.UNAVAILABLE))


def test_a_wrapped_sdk_error_is_classified_through_its_cause(server: ReplyServer) -> None:
    server.reply = Reply(429, anthropic_body("rate_limit_error", "slow down"), {"request-id": "req_w"})
    result = classify_provider_error(_chained(anthropic_error(server.url)))
    assert (result.kind, result.http_status, result.request_id) == (ErrorKind.RATE_LIMITED, 429, "req_w")


def test_a_cause_cycle_terminates() -> None:
    first, second = ValueError("a"), ValueError("b")
    first.__cause__, second.__cause__ = second, first
    assert classify_provider_error(first).kind is ErrorKind.UNKNOWN


# ---------------------------------------------------------------------------------------------
# Never raises
# ---------------------------------------------------------------------------------------------


class BoomError(Exception):
    pass


class HostileError(Exception):
    """Every attribute the classifier might read raises; so do ``str`` and ``repr``."""

    def __str__(self) -> str:
        raise BoomError("str")

    def __repr__(self) -> str:
        raise BoomError("repr")

    def __getattribute__(self, name: str) -> Any:
        if name in ("__class__", "__dict__"):
            return object.__getattribute__(self, name)
        raise BoomError(name)


class RaisingHeaders:
    def get(self, name: str) -> str:
        raise BoomError(name)


class WeirdResponse:
    status_code = 429
    headers = RaisingHeaders()


class OddValuesError(Exception):
    status_code = True  # a bool is not a status
    code = 99_999
    status = 503  # google's ``status`` is a string; an int is ignored
    body: object = {"error": ["not", "a", "mapping"]}
    type = 42
    request_id = b"bytes"
    response = WeirdResponse()


class HostilePropertiesError(Exception):
    @property
    def status_code(self) -> int:
        raise BoomError("status_code")

    @property
    def response(self) -> object:
        raise BoomError("response")

    @property
    def body(self) -> object:
        raise BoomError("body")

    @property
    def args(self) -> Any:  # type: ignore[override]
        raise BoomError("args")

    @property
    def __cause__(self) -> Any:  # type: ignore[override]
        raise BoomError("__cause__")


def test_classification_never_raises_whatever_the_exception_does() -> None:
    assert classify_provider_error(HostileError()).kind is ErrorKind.UNKNOWN
    assert classify_provider_error(HostilePropertiesError()).kind is ErrorKind.UNKNOWN
    # The response's status still counts when its headers misbehave.
    odd = classify_provider_error(OddValuesError())
    assert (odd.kind, odd.http_status, odd.retry_after_s, odd.request_id) == (ErrorKind.RATE_LIMITED, 429, None, None)


def test_result_is_frozen() -> None:
    result = classify_provider_error(TimeoutError())
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.kind = ErrorKind.AUTH  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# Inside a real flowra run
# ---------------------------------------------------------------------------------------------


async def test_an_sdk_exception_raised_by_the_provider_reaches_the_caller_unchanged(
    server: ReplyServer, otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter
) -> None:
    headers = {"retry-after": "3", "request-id": "req_r"}
    server.reply = Reply(429, anthropic_body("rate_limit_error", "slow down"), headers)
    sdk_exc = await asyncio.to_thread(anthropic_error, server.url)
    assert isinstance(sdk_exc, anthropic.RateLimitError)

    provider = ScriptedProvider([sdk_exc])
    async with tool_registry(get_weather) as tools:
        with pytest.raises(anthropic.RateLimitError) as caught:
            await run_tool_loop(tool_loop_runtime(provider, tools, otel_hooks), "weather?")

    assert caught.value is sdk_exc
    assert (caught.value.status_code, caught.value.request_id) == (429, "req_r")
    result = classify_provider_error(caught.value)
    assert (result.kind, result.retryable, result.retry_after_s, result.request_id) == (
        ErrorKind.RATE_LIMITED,
        True,
        3.0,
        "req_r",
    )
    assert span_exporter.get_finished_spans()  # the run was traced
