"""Content by reference: each model call's content written to storage, its location on the span.

Why: prompts and completions are large and often more sensitive than the rest of a trace. Written
to a directory or a bucket with access rules of its own, they leave the trace small, and the span
keeps where they are: ``gen_ai.input.messages_ref``, ``gen_ai.output.messages_ref``,
``gen_ai.system_instructions_ref``, ``gen_ai.tool.definitions_ref`` (the names, file names and
formats of opentelemetry-util-genai's ``upload`` completion hook, so a reader of either finds
the other's files the same way).

What is written is the content exactly as it would be recorded on a span: after every hook, the
``redact=`` function and the secret patterns, within ``max_content_length`` (``None`` writes whole
values). Files:

* ``{uuid}_inputs.{fmt}`` and ``{uuid}_outputs.{fmt}`` per call;
* ``{sha256}_system_instruction.{fmt}`` and ``{sha256}_tool.definitions.{fmt}``, named by their
  content, so an agent's unchanged instructions and tools are written once.

Writes happen on one background thread (a slow bucket never holds up the agent); the span gets
its references at once. A write that fails is logged (the reference and the error type, never
the content) and the agent never sees it; when more than ``MAX_PENDING`` writes wait, new ones
are dropped with a warning. ``flush()`` waits for what is queued (also run at interpreter exit).
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import logging
import os
import posixpath
import threading
import uuid
import weakref
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import unquote, urlparse

from . import semconv
from .environment_variables import (
    OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK,
    OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH,
    OTEL_INSTRUMENTATION_GENAI_UPLOAD_FORMAT,
)
from .log_credentials import without_credentials
from .safety import internal_error
from .shown_url import shown_url

logger = logging.getLogger("flowra_otel")

__all__ = [
    "MAX_PENDING",
    "ContentUploader",
    "UploadTarget",
    "upload_target_from_env",
    "validate_content_upload",
]

type UploadFormat = Literal["json", "jsonl"]

MAX_PENDING: Final = 256
"""Writes that may wait for the background thread; more are dropped (with a warning)."""
_DEDUP_LIMIT: Final = 4096
_EXIT_FLUSH_S: Final = 2.0


@dataclasses.dataclass(frozen=True, slots=True)
class UploadTarget:
    """Where content goes: ``base`` as the user gave it (the prefix of every reference)."""

    base: str
    fmt: UploadFormat = "json"
    directory: Path | None = None
    """The local directory (a plain path or a ``file://`` URL); None: an fsspec URL."""

    @property
    def shown(self) -> str:
        """The base as spans and log lines show it: a URL without user info, query or fragment
        (``shown_url``; credentials never go into a trace or a log), a local path as given."""
        return shown_url(self.base) if self.directory is None or "://" in self.base else self.base

    def ref(self, name: str) -> str:
        return f"{self.shown.rstrip('/')}/{name}"


def _format_from_env() -> UploadFormat:
    raw = os.environ.get(OTEL_INSTRUMENTATION_GENAI_UPLOAD_FORMAT, "").strip().lower()
    if raw in ("", "json"):
        return "json"
    if raw == "jsonl":
        return "jsonl"
    logger.warning("%s=%r is not json or jsonl; json is used", OTEL_INSTRUMENTATION_GENAI_UPLOAD_FORMAT, raw)
    return "json"


def _target(value: str) -> UploadTarget:
    """A target for ``value``; ``ValueError`` when it cannot be written to."""
    text = value.strip()
    if not text:
        msg = "content_upload must not be empty"
        raise ValueError(msg)
    fmt = _format_from_env()
    if "://" not in text:
        return UploadTarget(text, fmt, Path(text).expanduser())
    parsed = urlparse(text)
    shown = shown_url(text)  # the messages' URL: no user info, query or fragment
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            msg = f"content_upload={shown!r}: a file:// URL must name a local path (file:///dir)"
            raise ValueError(msg)
        return UploadTarget(text, fmt, Path(unquote(parsed.path)))
    try:
        import fsspec  # type: ignore[import-not-found, unused-ignore]  # optional: any other URL needs it
    except ImportError:
        msg = f"content_upload={shown!r}: URLs other than file:// need fsspec (pip install fsspec)"
        raise ValueError(msg) from None
    try:
        fsspec.core.url_to_fs(text)
    except Exception as exc:  # an unknown protocol, or its implementation (gcsfs, s3fs) missing
        why = without_credentials(str(exc), text)  # fsspec's message may quote the URL
        msg = f"content_upload={shown!r}: fsspec cannot open it ({type(exc).__name__}: {why})"
        raise ValueError(msg) from None
    return UploadTarget(text, fmt, None)


def validate_content_upload(value: object) -> UploadTarget | Literal[False] | None:
    """``content_upload=``: None (read the environment), False (never), or a directory / URL (a
    ``str`` or ``os.PathLike``). A bad value fails now: a wrong type with ``TypeError``, a URL
    nothing can write to with ``ValueError``."""
    if value is None or value is False:
        return value
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        msg = f"content_upload must be a directory path, a URL, False or None, got {value!r}"
        raise TypeError(msg)
    return _target(value)


def upload_target_from_env() -> UploadTarget | None:
    """util-genai's variables: ``OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=upload`` with
    ``OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH``. A base path nothing can write to warns and
    means no upload (an environment cannot be corrected at construction time)."""
    hooks = {h.strip().lower() for h in os.environ.get(OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK, "").split(",")}
    if "upload" not in hooks:
        return None
    base = os.environ.get(OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH, "").strip()
    if not base:
        logger.warning(
            "%s=upload without %s: no content is uploaded",
            OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK,
            OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH,
        )
        return None
    try:
        return _target(base)
    except ValueError as exc:
        logger.warning("%s: %s; no content is uploaded", OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH, exc)
        return None


# ==================================================================================== the writer
type _Job = tuple[str, str]  # (file name, text)


class ContentUploader:
    """One target's background writer (one per ``OtelHooks``; the thread starts on first use)."""

    def __init__(self, target: UploadTarget) -> None:
        self.target = target
        self._cond = threading.Condition()
        self._jobs: deque[_Job] = deque()
        self._busy = 0  # jobs taken by the thread and not finished yet
        self._thread: threading.Thread | None = None
        self._pid = -1
        self._written: set[str] = set()  # content-named files already queued (instructions, tools)
        self._dropped = 0
        self._prepared = False  # the directory (or bucket prefix) exists
        self._write: Callable[[str, str], None] = self._write_local if target.directory is not None else self._write_fs
        self._fs: Any = None
        _LIVE.add(self)

    # ------------------------------------------------------------------ what a chat calls
    def chat_refs(
        self, inputs: str | None, outputs: str | None, system: str | None, tools: str | None
    ) -> dict[str, str]:
        """Queue one call's rendered content (JSON text, already redacted and bounded) and return
        the reference attributes for its span. Never raises."""
        refs: dict[str, str] = {}
        try:
            call = uuid.uuid4().hex
            fmt = self.target.fmt
            if inputs is not None:
                refs[semconv.GEN_AI_INPUT_MESSAGES_REF] = self._queue(f"{call}_inputs.{fmt}", inputs)
            if outputs is not None:
                refs[semconv.GEN_AI_OUTPUT_MESSAGES_REF] = self._queue(f"{call}_outputs.{fmt}", outputs)
            if system is not None:
                name = f"{_digest(system)}_system_instruction.{fmt}"
                refs[semconv.GEN_AI_SYSTEM_INSTRUCTIONS_REF] = self._queue(name, system, once=True)
            if tools is not None:
                name = f"{_digest(tools)}_tool.definitions.{fmt}"
                refs[semconv.GEN_AI_TOOL_DEFINITIONS_REF] = self._queue(name, tools, once=True)
        except Exception:
            internal_error("flowra_otel: could not queue content for upload; the call keeps no references")
            return {}
        return refs

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every queued write finished (written or failed); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._jobs and not self._busy, max(0.0, timeout_s))

    # ------------------------------------------------------------------ queue and thread
    def _queue(self, name: str, text: str, *, once: bool = False) -> str:
        ref = self.target.ref(name)
        body = _as_format(text, self.target.fmt)
        with self._cond:
            if once:
                if name in self._written:
                    return ref
                if len(self._written) >= _DEDUP_LIMIT:
                    self._written.clear()
                self._written.add(name)
            if len(self._jobs) + self._busy >= MAX_PENDING:
                self._dropped += 1
                if self._dropped == 1 or self._dropped % 100 == 0:
                    logger.warning(
                        "flowra_otel: %d content upload(s) dropped: %d writes already waiting for %s",
                        self._dropped,
                        MAX_PENDING,
                        self.target.shown,
                    )
                return ref
            self._jobs.append((name, body))
            self._ensure_thread()
            self._cond.notify_all()
        return ref

    def _ensure_thread(self) -> None:
        if self._thread is not None and self._pid == os.getpid() and self._thread.is_alive():
            return
        thread = threading.Thread(target=self._loop, name="flowra-otel-content-upload", daemon=True)
        self._thread, self._pid = thread, os.getpid()
        thread.start()

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._jobs))
                name, body = self._jobs.popleft()
                self._busy += 1
            try:
                self._write(name, body)
            except Exception as exc:  # never the content: the reference and what went wrong
                logger.warning(
                    "flowra_otel: could not write content to %s (%s: %s)",
                    self.target.ref(name),
                    type(exc).__name__,
                    _describe(exc),
                )
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def _write_local(self, name: str, body: str) -> None:
        """Content is private: each folder this creates is 0700 and each file 0600 (never the
        process's default, typically world-readable); a folder that exists is left as it is."""
        directory = self.target.directory
        assert directory is not None
        if not self._prepared:
            _private_dirs(directory)
            self._prepared = True
        path = directory / name
        partial = path.with_name(f".{name}.partial")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            if hasattr(os, "fchmod"):
                os.fchmod(handle.fileno(), _FILE_MODE)  # a stale partial file kept its old mode
            handle.write(body)
        os.replace(partial, path)  # readers never see half a file

    def _write_fs(self, name: str, body: str) -> None:
        import fsspec  # type: ignore[import-not-found, unused-ignore]

        if self._fs is None:
            self._fs = fsspec.core.url_to_fs(self.target.base)
        fs, root = self._fs
        if not self._prepared:
            fs.makedirs(root, exist_ok=True)
            self._prepared = True
        with fs.open(posixpath.join(root, name), "w", encoding="utf-8") as handle:
            handle.write(body)


_FILE_MODE: Final = 0o600
_DIR_MODE: Final = 0o700


def _private_dirs(directory: Path) -> None:
    """``directory`` and any missing parent, each created 0700 (``mkdir(parents=True)`` gives the
    parents the default mode)."""
    missing: list[Path] = []
    current = directory
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=_DIR_MODE)
        except FileExistsError:  # made meanwhile (another writer): theirs
            continue
        folder.chmod(_DIR_MODE)  # the umask may have taken bits off; never adds any the mode lacks
    if not directory.is_dir():
        directory.mkdir(parents=True, exist_ok=True)  # raises the error the old code did


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _as_format(text: str, fmt: UploadFormat) -> str:
    """``json``: the attribute's JSON text as is; ``jsonl``: each item of the array on a line."""
    if fmt == "json":
        return text
    try:
        items = json.loads(text)
    except ValueError:
        return text + "\n"
    if not isinstance(items, list):
        items = [items]
    return "".join(json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n" for item in items)


def _describe(exc: BaseException) -> str:
    """An OS error's code and message (a path, never content); nothing from other errors."""
    if isinstance(exc, OSError):
        return exc.strerror or ""
    return ""


_LIVE: Final[weakref.WeakSet[ContentUploader]] = weakref.WeakSet()


@atexit.register
def _flush_all() -> None:
    for uploader in list(_LIVE):
        uploader.flush(_EXIT_FLUSH_S)
