"""Classify a provider failure (rate limit, auth, outage...) from the exception a run raised.

flowra 0.0.3 - 0.0.8 lets the provider SDK's exceptions through unchanged, so the only thing a
span would record is the exception's class name.  Operators need to tell a rate limit from an
expired key from a model outage, and whether a retry can help.  ``classify_provider_error``
answers that from any exception, by *duck typing*: it reads the attributes the openai, anthropic
and google-genai SDKs (and httpx, google-auth and the builtins) put on their exceptions, and
imports none of them, so it works with whichever SDK versions the host has, or none.

flowra 0.0.83 and later raise their own typed errors instead (``flowra.llm.errors``:
``RateLimitedError``, ``QuotaExhaustedError``, ``ContextTooLongError``..., the SDK's exception as
``__cause__``).  flowra chose that class from the provider's status *and* body (a 429 whose code
is ``insufficient_quota`` is ``QuotaExhaustedError``), so the class decides first: the nearest
class of flowra's own in the exception's MRO (a subclass an application defines counts as its
flowra base; a class of the same name from another package does not).  Its ``status_code``,
``retry_after`` and ``request_id`` fill in the rest.

The rules run in a fixed order and the first that matches wins (the order matters: a 429 whose
error code is ``insufficient_quota`` is an exhausted quota, not a rate limit; an SDK's timeout
class subclasses its connection-error class).  See ``ErrorKind`` for the taxonomy.

Safety: classification never raises, whatever the exception does (a ``__str__`` that raises,
properties that raise, headers that are not a mapping): every read is guarded and the worst
outcome is ``kind=unknown``.  The exception message is read for one rule only (a prompt that
is too long has no dedicated status code) and is never returned or recorded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import email.utils
import enum
import math
import re
import time
from collections.abc import Callable, Mapping
from typing import Final

from opentelemetry.util.types import AttributeValue

from . import semconv
from .safety import utf8_safe

__all__ = [
    "ERROR_KIND",
    "ERROR_REQUEST_ID",
    "ERROR_RETRYABLE",
    "ERROR_RETRY_AFTER",
    "HTTP_RESPONSE_STATUS_CODE",
    "ErrorKind",
    "ProviderError",
    "classify_provider_error",
]

# Keys (documented in semconv.py, where every key this package writes lives).
ERROR_KIND: Final = semconv.FLOWRA_ERROR_KIND
ERROR_RETRYABLE: Final = semconv.FLOWRA_ERROR_RETRYABLE
HTTP_RESPONSE_STATUS_CODE: Final = semconv.HTTP_RESPONSE_STATUS_CODE
ERROR_RETRY_AFTER: Final = semconv.FLOWRA_ERROR_RETRY_AFTER
ERROR_REQUEST_ID: Final = semconv.FLOWRA_ERROR_REQUEST_ID

_MAX_SCANNED_TEXT: Final = 4000
"""Characters of a message scanned for the context-too-long rule (bounded work)."""
_MAX_REQUEST_ID: Final = 200
_MAX_CAUSE_DEPTH: Final = 3


class ErrorKind(enum.StrEnum):
    """What went wrong, in terms an operator acts on.  ``retryable`` is per kind."""

    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"
    OVERLOADED = "overloaded"
    UNAVAILABLE = "unavailable"
    AUTH = "auth"
    QUOTA_EXHAUSTED = "quota_exhausted"
    NOT_FOUND = "not_found"
    CONTEXT_TOO_LONG = "context_too_long"
    INVALID_REQUEST = "invalid_request"
    CONTENT_FILTER = "content_filter"
    UNKNOWN = "unknown"


_RETRYABLE: Final[Mapping[ErrorKind, bool | None]] = {
    ErrorKind.TIMEOUT: True,
    ErrorKind.RATE_LIMITED: True,
    ErrorKind.OVERLOADED: True,
    ErrorKind.UNAVAILABLE: True,
    ErrorKind.AUTH: False,
    ErrorKind.QUOTA_EXHAUSTED: False,
    ErrorKind.NOT_FOUND: False,
    ErrorKind.CONTEXT_TOO_LONG: False,
    ErrorKind.INVALID_REQUEST: False,
    ErrorKind.CONTENT_FILTER: False,
    ErrorKind.UNKNOWN: None,
}


@dataclasses.dataclass(frozen=True, slots=True)
class ProviderError:
    """The classification of one failure.  Holds no message text, only low-risk identifiers."""

    kind: ErrorKind
    retryable: bool | None
    http_status: int | None = None
    retry_after_s: float | None = None
    request_id: str | None = None

    def attributes(self) -> dict[str, AttributeValue]:
        """Span attributes: kind, retryability, HTTP status, retry delay, request id (those known)."""
        attrs = self.metric_attributes()
        if self.retry_after_s is not None:
            attrs[ERROR_RETRY_AFTER] = self.retry_after_s
        if self.request_id is not None:
            attrs[ERROR_REQUEST_ID] = self.request_id
        return attrs

    def metric_attributes(self) -> dict[str, AttributeValue]:
        """The low-cardinality subset for metrics: no request id, no retry delay."""
        attrs: dict[str, AttributeValue] = {ERROR_KIND: self.kind.value}
        if self.retryable is not None:
            attrs[ERROR_RETRYABLE] = self.retryable
        if self.http_status is not None:
            attrs[HTTP_RESPONSE_STATUS_CODE] = self.http_status
        return attrs


_UNKNOWN: Final = ProviderError(ErrorKind.UNKNOWN, None)


def classify_provider_error(exc: BaseException) -> ProviderError:
    """Classify ``exc``; never raises.  An unknown exception is retried through its ``__cause__``."""
    try:
        seen: list[BaseException] = []
        current: BaseException | None = exc
        while current is not None and len(seen) <= _MAX_CAUSE_DEPTH and all(current is not s for s in seen):
            seen.append(current)
            result = _classify_one(current)
            if result.kind is not ErrorKind.UNKNOWN:
                return result
            cause = _safe_getattr(current, "__cause__")
            current = cause if isinstance(cause, BaseException) else None
    except Exception:
        return _UNKNOWN
    return _UNKNOWN


# ---------------------------------------------------------------------------------------------
# The rules
# ---------------------------------------------------------------------------------------------

_TIMEOUT_CLASSES: Final = frozenset({"APITimeoutError", "TimeoutException", "DeadlineExceededError"})
_CONNECTION_CLASSES: Final = frozenset(
    {
        "APIConnectionError",  # openai, anthropic
        "NetworkError",  # httpx: ConnectError, ReadError, WriteError, CloseError
        "RemoteProtocolError",  # httpx: the server dropped the connection mid-response
        "ProxyError",  # httpx
    }
)
_CONTENT_FILTER_CLASSES: Final = frozenset({"ContentFilterFinishReasonError"})
_FLOWRA_ERROR_KINDS: Final[Mapping[str, ErrorKind]] = {
    # flowra.llm.errors (0.0.83+). Its bases (LLMError, TransientLLMError, PermanentLLMError)
    # say too little: such an error is classified by the other rules (its status, its cause).
    "RateLimitedError": ErrorKind.RATE_LIMITED,
    "OverloadedError": ErrorKind.OVERLOADED,
    "UnavailableError": ErrorKind.UNAVAILABLE,
    "LLMTimeoutError": ErrorKind.TIMEOUT,
    "AuthFailedError": ErrorKind.AUTH,
    "NotFoundError": ErrorKind.NOT_FOUND,
    "QuotaExhaustedError": ErrorKind.QUOTA_EXHAUSTED,
    "ContextTooLongError": ErrorKind.CONTEXT_TOO_LONG,
    "BadRequestError": ErrorKind.INVALID_REQUEST,
}
_GOOGLE_AUTH_MODULE: Final = "google.auth"

_TOO_LONG: Final = re.compile(
    r"prompt is too long"  # anthropic
    r"|maximum context length"  # openai chat
    r"|context[ _]length[ _]exceeded"  # openai code, also in messages
    r"|context window"  # openai responses, others
    r"|input token count.{0,40}exceeds"  # gemini
    r"|exceeds the maximum number of tokens"  # gemini, vertex
    r"|too many (?:input )?tokens",
    re.IGNORECASE,
)


def _classify_one(exc: BaseException) -> ProviderError:
    status = _http_status(exc)
    response = _safe_getattr(exc, "response")
    flowra_kind = _flowra_kind(exc)
    if flowra_kind is not None:  # flowra read the provider's body already: its class decides
        retry_after = _retry_after(response, exc)
        return ProviderError(
            kind=flowra_kind,
            retryable=_RETRYABLE[flowra_kind],
            http_status=status,
            retry_after_s=retry_after if retry_after is not None else _seconds(_safe_getattr(exc, "retry_after")),
            request_id=_request_id(exc, response),
        )
    mro_names = _mro_names(exc)
    google_status = _google_status(exc)
    error_type, error_code = _body_type_and_code(exc)

    kind = _kind(exc, mro_names, status, google_status, error_type, error_code)
    if kind is ErrorKind.UNKNOWN:
        return _UNKNOWN
    return ProviderError(
        kind=kind,
        retryable=_RETRYABLE[kind],
        http_status=status,
        retry_after_s=_retry_after(response, exc),
        request_id=_request_id(exc, response),
    )


def _flowra_kind(exc: BaseException) -> ErrorKind | None:
    """The kind flowra's own error class says (``flowra.llm.errors``, 0.0.83+): the nearest such
    class in the MRO, so ``ContextTooLongError`` wins over its base ``BadRequestError``."""
    try:
        for cls in type(exc).__mro__:
            kind = _FLOWRA_ERROR_KINDS.get(cls.__name__)
            if kind is not None:
                module = cls.__module__
                if isinstance(module, str) and (module == "flowra" or module.startswith("flowra.")):
                    return kind
    except Exception:
        return None
    return None


def _kind(
    exc: BaseException,
    mro_names: frozenset[str],
    status: int | None,
    google_status: str | None,
    error_type: str | None,
    error_code: str | None,
) -> ErrorKind:
    if (
        isinstance(exc, TimeoutError)
        or mro_names & _TIMEOUT_CLASSES
        or status in (408, 504)
        or google_status == "DEADLINE_EXCEEDED"
        or error_type == "timeout_error"
    ):
        return ErrorKind.TIMEOUT
    if error_code == "insufficient_quota" or error_type in ("insufficient_quota", "billing_error") or status == 402:
        return ErrorKind.QUOTA_EXHAUSTED
    if status == 429 or google_status == "RESOURCE_EXHAUSTED" or error_type == "rate_limit_error":
        return ErrorKind.RATE_LIMITED
    if status in (503, 529) or google_status == "UNAVAILABLE" or error_type == "overloaded_error":
        return ErrorKind.OVERLOADED
    if (
        (status is not None and status >= 500)
        or mro_names & _CONNECTION_CLASSES
        or isinstance(exc, ConnectionError)
        or (_is_google_auth(exc) and "TransportError" in mro_names)
    ):
        return ErrorKind.UNAVAILABLE
    if (
        status in (401, 403)
        or google_status in ("UNAUTHENTICATED", "PERMISSION_DENIED")
        or error_type in ("authentication_error", "permission_error")
        or _is_google_auth(exc)
    ):
        return ErrorKind.AUTH
    if status == 404 or google_status == "NOT_FOUND" or error_type == "not_found_error":
        return ErrorKind.NOT_FOUND
    is_4xx = status is not None and 400 <= status < 500
    if (
        status in (400, 413) or google_status == "INVALID_ARGUMENT" or error_type == "request_too_large"
    ) and _says_too_long(exc, error_code):
        return ErrorKind.CONTEXT_TOO_LONG
    if is_4xx or google_status in ("INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE"):
        return ErrorKind.INVALID_REQUEST
    if mro_names & _CONTENT_FILTER_CLASSES:
        return ErrorKind.CONTENT_FILTER
    return ErrorKind.UNKNOWN


# ---------------------------------------------------------------------------------------------
# Guarded readers: each returns None (or empty) rather than raise
# ---------------------------------------------------------------------------------------------


def _safe_getattr(obj: object, name: str) -> object:
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _mro_names(exc: BaseException) -> frozenset[str]:
    try:
        return frozenset(cls.__name__ for cls in type(exc).__mro__ if isinstance(cls.__name__, str))
    except Exception:
        return frozenset()


def _is_google_auth(exc: BaseException) -> bool:
    try:
        return any(
            cls.__name__ == "GoogleAuthError" and str(cls.__module__).startswith(_GOOGLE_AUTH_MODULE)
            for cls in type(exc).__mro__
        )
    except Exception:
        return False


def _as_status(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
        return value
    return None


def _http_status(exc: BaseException) -> int | None:
    """``status_code`` (openai, anthropic), ``code`` (google-genai), else ``response.status_code``."""
    for name in ("status_code", "code"):
        status = _as_status(_safe_getattr(exc, name))
        if status is not None:
            return status
    return _as_status(_safe_getattr(_safe_getattr(exc, "response"), "status_code"))


def _google_status(exc: BaseException) -> str | None:
    """google-genai's ``APIError.status`` (a ``google.rpc.Code`` name such as ``UNAVAILABLE``)."""
    value = _safe_getattr(exc, "status")
    if isinstance(value, str) and value.isupper() and len(value) <= 40:
        return value
    return None


def _mapping_get(mapping: object, key: str) -> object:
    if not isinstance(mapping, Mapping):
        return None
    try:
        return mapping.get(key)
    except Exception:
        return None


def _short_str(value: object, limit: int = 100) -> str | None:
    return value if isinstance(value, str) and len(value) <= limit else None


def _body_type_and_code(exc: BaseException) -> tuple[str | None, str | None]:
    """The provider's error ``type`` and ``code`` from the SDK's attributes or the JSON body.

    openai: ``exc.type`` / ``exc.code`` (body = the ``error`` object); anthropic: ``exc.type``
    (newer SDKs) or ``body["error"]["type"]`` (older ones).
    """
    body = _safe_getattr(exc, "body")
    error = _mapping_get(body, "error")
    inner = error if isinstance(error, Mapping) else body
    error_type = _short_str(_safe_getattr(exc, "type")) or _short_str(_mapping_get(inner, "type"))
    error_code = _short_str(_safe_getattr(exc, "code")) or _short_str(_mapping_get(inner, "code"))
    return error_type, error_code


def _says_too_long(exc: BaseException, error_code: str | None) -> bool:
    """Whether the provider said the prompt exceeds the context window.  The text is not kept."""
    if error_code == "context_length_exceeded":
        return True
    texts: list[object] = [_safe_getattr(exc, "message")]
    with contextlib.suppress(Exception):
        texts.extend(exc.args[:1])
    body = _safe_getattr(exc, "body")
    texts.append(_mapping_get(_mapping_get(body, "error"), "message"))
    texts.append(_mapping_get(body, "message"))
    return any(isinstance(text, str) and _TOO_LONG.search(text[:_MAX_SCANNED_TEXT]) for text in texts)


def _header(response: object, name: str) -> str | None:
    headers = _safe_getattr(response, "headers")
    get = _safe_getattr(headers, "get")
    if not callable(get):
        return None
    try:
        value = get(name)
    except Exception:
        return None
    return value if isinstance(value, str) else None


def _retry_after(response: object, exc: BaseException, now: Callable[[], float] = time.time) -> float | None:
    """Seconds from ``retry-after-ms`` (what the openai/anthropic SDKs prefer) or ``retry-after``."""
    millis = _parse_number(_header(response, "retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    text = _header(response, "retry-after")
    if text is None:
        return _google_retry_delay(exc)
    seconds = _parse_number(text)
    if seconds is not None:
        return seconds
    if not text.strip():
        return None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except Exception:
        return None
    return max(0.0, round(when.timestamp() - now(), 3))


def _google_retry_delay(exc: BaseException) -> float | None:
    """google-genai: the ``google.rpc.RetryInfo`` detail of the error body (``"retryDelay": "37s"``)."""
    details = _mapping_get(_mapping_get(_safe_getattr(exc, "details"), "error"), "details")
    if not isinstance(details, list):
        return None
    for detail in details[:20]:
        kind = _mapping_get(detail, "@type")
        delay = _mapping_get(detail, "retryDelay")
        if isinstance(kind, str) and kind.endswith("google.rpc.RetryInfo") and isinstance(delay, str):
            return _parse_number(delay.removesuffix("s"))
    return None


def _seconds(value: object) -> float | None:
    """A delay flowra parsed already (``LLMError.retry_after``): a finite, non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    seconds = float(value)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _parse_number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _request_id(exc: BaseException, response: object) -> str | None:
    """openai ``request_id``, anthropic ``request_id`` / ``_request_id``, else a request-id header.

    google-genai exposes no request id (neither on ``APIError`` nor in a documented header).
    """
    for name in ("request_id", "_request_id"):
        value = _safe_getattr(exc, name)
        if isinstance(value, str) and value:
            return utf8_safe(value[:_MAX_REQUEST_ID])
    for header in ("x-request-id", "request-id"):
        value = _header(response, header)
        if value:
            return utf8_safe(value[:_MAX_REQUEST_ID])
    return None
