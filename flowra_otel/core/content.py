"""Content capture: flowra messages as GenAI-semconv JSON, through one choke point.

Everything that could carry user or model content (messages, system instructions, tool
definitions, tool arguments, tool results, exception text) reaches a span only through a
``ContentRenderer``, after every hook has run on the value and only when content capture is on.

The pipeline, per attribute (see docs/redaction.md):

1. flowra messages -> semconv messages and parts (one ``tool`` message per tool result);
2. each **leaf** is scrubbed: string values, dict keys, and the text of numbers go through the
   user's ``redact=`` and then the built-in secret patterns; a number whose text changes (a card
   number stored as an int) becomes the scrubbed string; a leaf the redactor raised on becomes
   ``REDACTION_FAILED``; lone surrogates become U+FFFD;
3. the size budget (``max_content_length``) is applied **inside** the value: a long leaf is cut
   with a visible marker (before it is scrubbed, with a margin, so its cost is the budget's), the
   oldest messages are dropped first behind a marker message, a container that is still too wide
   keeps its first items and a marker item;
4. the tree is serialised: every JSON attribute is valid JSON that validates against the published
   GenAI schemas, at any size.

Cost is linear: a ``ContentRenderer`` lives for one agent run, renders each message once and
keeps the last conversation's JSON; a call checks its history against the leaves it rendered
(``leaf_spec``: by identity, which a deep copy keeps and an edit breaks) and renders only what is
new or changed, so a chat costs its new messages plus a cheap check per message, not the whole
history again.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple, Protocol

from .bounded_json import (
    OMITTED_KEY,
    OVER_BUDGET,
    REDACTION_FAILED,
    TRUNCATION_MARKER,
    Cut,
    Scrub,
    Walk,
    dumps_fitted,
    dumps_tree,
    fit,
    leaf_text,
    textual_media,
)
from .safety import failure_summary, safe_str, utf8_safe

__all__ = [
    "BUILTIN_SECRET_PATTERNS",
    "DEFAULT_MAX_CONTENT_LENGTH",
    "REDACTION_FAILED",
    "TRUNCATION_MARKER",
    "ContentPolicy",
    "ContentRenderer",
    "MessageReader",
    "Part",
    "Redactor",
    "canonical_json",
    "utf8_safe",
]

type Redactor = Callable[[str], str]

logger = logging.getLogger("flowra_otel")

DEFAULT_MAX_CONTENT_LENGTH: Final = 32_768

OMITTED_MESSAGES: Final = "…[flowra_otel: {count} earlier messages omitted, over max_content_length]"
"""The one text part of the ``system`` message put first when the oldest messages were dropped."""
MESSAGE_OMITTED: Final = "…[flowra_otel: message omitted, over max_content_length]"
TOOLS_OMITTED: Final = "…[flowra_otel: {count} more tools omitted, over max_content_length]"
"""The name of the last entry of ``gen_ai.tool.definitions`` when even the names alone are over budget."""
_MARKER_ROOM: Final = 200
"""An item this close to the budget keeps its tree, should it need shrinking to fit a marker."""
PARSE_FACTOR: Final = 4
"""A tool result of JSON text is parsed (to record an object) up to this many budgets long;
a longer one is recorded as text, cut before any work is done on it."""
_IDENT_LIMIT: Final = 1_024
"""Ids, names and MIME types are not content, but a hostile one must not be a megabyte."""

BUILTIN_SECRET_PATTERNS: Final[Mapping[str, str]] = {
    "api_key": r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}\b|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{30,}\b"
    r"|\bxox[abposr]-[A-Za-z0-9\-]{10,}\b|\bAIza[0-9A-Za-z_\-]{35}\b",
    "bearer_token": r"\b(?i:bearer)\s+[A-Za-z0-9._~+/\-]{12,}=*",
    "email": r"\b[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9.\-]{1,255}\.[A-Za-z]{2,}\b",
    "card_number": r"(?<![0-9A-Fa-f]-)\b(?:\d[ \-]?){12,18}\d\b(?!-[0-9A-Fa-f])",
}
"""Common secret shapes, replaced by ``[REDACTED:<name>]`` when ``redact_secrets=True``.
(The e-mail local part is bounded at 64 characters, as in RFC 5321: unbounded, a long run of
``a.a.a.…`` made the scan quadratic. A card number is 13 - 19 digits, spaced or dashed, that is
not a run of a dashed hex id: about one random UUID in 800 has groups of digits only that read
as one (125 of 100 000 measured), and the SDK's own ``service.instance.id`` is such a UUID, made anew per process.)"""

_NEEDS: Final[Mapping[str, Callable[[str], bool]]] = {
    "api_key": lambda t: "k-" in t or "AKIA" in t or "xox" in t or "AIza" in t or ("gh" in t and "_" in t),
    "bearer_token": lambda t: "bearer" in t.lower(),
    "email": lambda t: "@" in t,
}
"""A cheap test (substring search in C) each pattern's match needs: most text has no ``@``, so the
e-mail scan is skipped; a regex scan costs about ten times more."""


def _compile_patterns(names: Iterable[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((name, re.compile(BUILTIN_SECRET_PATTERNS[name])) for name in names)


class Part(NamedTuple):
    """One block of a flowra message, as the content pipeline needs it: neutral of flowra's types.

    ``kind`` is the semconv part type (``text``, ``reasoning``, ``tool_call``,
    ``tool_call_response``, ``blob``); any other kind is recorded by name only, with no content.
    ``content``: the text, the tool-call block (read as ``.id``, ``.name``, ``.input``), the result
    value, or the blob's bytes; ``ident``: a tool result's call id; ``media``: a blob's
    ``(modality, mime type)``.
    """

    kind: str
    content: Any = None
    ident: Any = None
    media: tuple[str, Any] | None = None


class MessageReader(Protocol):
    """What the content pipeline needs to know about one flowra line's messages and blocks.

    Each adapter has one (flowra moved blocks, roles and the system prompt between its API lines);
    the core renders only ``Part`` values and never imports flowra.
    """

    def split_request(self, request: Any) -> tuple[list[Any], list[Any]]:
        """A request's (system messages, conversation messages)."""
        ...

    def groups(self, message: Any) -> list[tuple[str, list[Any]]]:
        """One message -> (semconv role, its blocks) per semconv message (a tool result is a
        ``tool`` message of its own)."""
        ...

    def part(self, block: Any) -> Part:
        """One block, as a ``Part``."""
        ...

    def result_value(self, result: Any) -> Any:
        """A tool result's content as a plain value: text, or a structure of plain values."""
        ...

    def spec(self, message: Any) -> Any:
        """What the renderer reads of ``message``, kept while its rendering is (``leaf_spec``): a
        hashable value, or None when it holds something a spec cannot describe (it is then
        rendered on every call)."""
        ...

    def unchanged(self, messages: list[Any], specs: list[Any]) -> int:
        """How many of ``messages``, from the first, still are what ``specs`` (by position; None:
        no spec) were taken of: every leaf the same object. Cheap: it runs over the whole
        history of every LLM request."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class ContentPolicy:
    """How content is cleaned and bounded before it is set on a span (shared by every run)."""

    redact: Redactor | None = None
    secret_patterns: tuple[tuple[str, re.Pattern[str]], ...] = ()
    max_length: int | None = DEFAULT_MAX_CONTENT_LENGTH

    @classmethod
    def build(
        cls, *, redact: Redactor | None, redact_secrets: bool | Iterable[str], max_length: int | None
    ) -> ContentPolicy:
        if redact_secrets is True:
            patterns = _compile_patterns(BUILTIN_SECRET_PATTERNS)
        elif redact_secrets is False:
            patterns = ()
        else:
            names = list(redact_secrets)
            unknown = [n for n in names if n not in BUILTIN_SECRET_PATTERNS]
            if unknown:
                msg = f"redact_secrets: unknown pattern(s) {unknown}; known: {sorted(BUILTIN_SECRET_PATTERNS)}"
                raise ValueError(msg)
            patterns = _compile_patterns(names)
        return cls(redact=redact, secret_patterns=patterns, max_length=max_length)

    def clean(self, text: str) -> str:
        """Scrub one leaf: the user's callable first, then the built-in patterns. May raise
        (the user's callable, or a non-``str`` result): the caller withholds the leaf."""
        if self.redact is not None:
            cleaned: object = self.redact(text)
            if not isinstance(cleaned, str):
                msg = f"redact= must return str, got {type(cleaned).__name__}"
                raise TypeError(msg)
            text = cleaned
        for name, pattern in self.secret_patterns:
            need = _NEEDS.get(name)
            if need is None or need(text):
                text = pattern.sub(f"[REDACTED:{name}]", text)
        return text

    @property
    def scrub(self) -> Scrub | None:
        """``clean``, or None when there is nothing to scrub (numbers then stay numbers for free)."""
        return self.clean if self.redact is not None or self.secret_patterns else None

    def renderer(self, reader: MessageReader) -> ContentRenderer:
        """A fresh per-run renderer (its cache lives as long as the run) reading ``reader``'s
        messages."""
        return ContentRenderer(self, reader)


# ==================================================================================== the renderer
class _Entry:
    """One flowra message, rendered: the JSON text of each semconv message it became."""

    __slots__ = ("items", "roles", "size", "spec", "text", "trees")

    def __init__(self, spec: Any) -> None:
        self.spec = spec  # the reader's spec of the message (None: rendered again on every call)
        self.items: list[str] = []
        self.trees: list[Any] = []  # the tree of an item too big to fit with a marker, else None
        self.roles: list[str] = []
        self.text = ""  # the items, joined as they stand in the attribute
        self.size = 0  # what the items add to the attribute's length: each one and its comma


class ContentRenderer:
    """Renders one agent run's content attributes (create one per run, drop it at the run's end).

    Every method returns the attribute value to set (a ``str``) and never raises for odd content;
    a ``redact=`` that raises is logged once per attribute and its leaves are withheld. Not
    thread-safe: a run's hooks are called from the run's own task.

    The conversation (``gen_ai.input.messages``) grows by a message or two per LLM call: the
    renderer keeps the latest one's rendered messages by position, their specs, and its JSON
    when it was recorded whole. A call checks its messages against those specs (``unchanged``:
    the leaves only, by identity), renders what is new or changed, and extends the JSON; a
    message that moved is found by its spec. Work per call: what is new, plus a cheap check of
    each message of the history.
    """

    __slots__ = (
        "_body",
        "_budget",
        "_by_spec",
        "_entries",
        "_leaves",
        "_policy",
        "_reader",
        "_scrub",
        "_specs",
        "_system",
        "_tools",
        "_used",
    )

    def __init__(self, policy: ContentPolicy, reader: MessageReader) -> None:
        self._policy = policy
        self._reader = reader
        self._budget = policy.max_length
        self._scrub = policy.scrub
        self._entries: list[_Entry | None] = []  # the latest conversation's messages, rendered, by position
        self._specs: list[Any] = []  # their specs (None where unknown), for ``unchanged``
        self._body: str | None = ""  # the latest conversation's JSON without its brackets, when whole
        self._used = 2  # what the length check counted for it (see ``_history``)
        self._by_spec: dict[Any, _Entry] = {}  # rendered messages by spec: one that moved is found again
        self._leaves: dict[int, Any] = {}  # big leaves already cleaned (a tool result, then its history copy)
        self._system: tuple[list[Any], str] | None = None  # the system messages' specs, and their JSON
        self._tools: tuple[tuple[Any, ...], str] | None = None

    # ------------------------------------------------------------------ request
    def request_messages(self, request: Any) -> tuple[str | None, str]:
        """An LLM request -> (``gen_ai.system_instructions`` or None, ``gen_ai.input.messages``)."""
        system, messages = self._reader.split_request(request)
        return (self.system_instructions(system) if system else None), self.conversation(messages)

    def request_system(self, request: Any) -> str | None:
        """An LLM request's ``gen_ai.system_instructions``, or None when it has no system prompt."""
        system, _ = self._reader.split_request(request)
        return self.system_instructions(system) if system else None

    def conversation(self, messages: Iterable[Any]) -> str:
        """Conversation messages (no system prompt) -> ``gen_ai.input.messages``, newest kept
        first: when over budget the oldest are dropped and a ``system`` message with a marker text
        part comes first; a newest message too big on its own is shrunk inside its parts."""
        msgs = messages if type(messages) is list else list(messages)
        entries = self._entries
        specs = self._specs
        before = len(entries)
        count = len(msgs)
        if len(self._by_spec) > 2 * count + 64:  # forget messages no longer in the history
            self._by_spec = {e.spec: e for e in entries if e is not None and e.spec is not None}
        if count < before:  # the history shrank (compacted, or another list): positions past it go
            del entries[count:]
            del specs[count:]
            return self._history(msgs, self._reader.unchanged(msgs, specs))
        body = self._body
        if body is None:  # the latest was cut: only the newest messages that fit matter
            return self._history(msgs, 0)
        same = self._reader.unchanged(msgs, specs) if before else 0
        if same < before:
            return self._history(msgs, same)
        if count == before:  # the same conversation again (another attempt)
            return "[" + body + "]"
        # The history grew by what is after it: render the new messages, extend its JSON.
        added = [self._entry(m) for m in msgs[before:]]
        entries.extend(added)
        specs.extend([e.spec for e in added])
        budget = self._budget
        used = self._used
        for entry in added:
            used += entry.size
        if budget is not None and used > budget:
            return self._history(msgs, count)
        texts = ",".join([e.text for e in added])
        body = body + "," + texts if body else texts
        self._body, self._used = body, used
        return "[" + body + "]"

    def _history(self, msgs: list[Any], checked: int) -> str:
        """The newest-first walk that keeps what fits: each message's entry is checked against
        its spec, or found or rendered, as the walk reaches it (``checked``: the first messages
        are known to be unchanged, and every entry after them is up to date)."""
        budget = self._budget
        count = len(msgs)
        entries = self._entries
        specs = self._specs
        while len(entries) < count:
            entries.append(None)
            specs.append(None)
        unchanged = self._reader.unchanged
        kept: list[Any] = []  # newest first: whole entries, or single items (str) of a message cut
        used = 2
        visited = 0
        items = 0  # semconv messages of the flowra messages visited (a tool result is one of its own)
        newest: tuple[_Entry, int] | None = None
        omitted = 0
        for i in range(count - 1, -1, -1):
            entry = entries[i]
            if entry is None or (
                i >= checked and (entry.spec is None or not unchanged(msgs[i : i + 1], specs[i : i + 1]))
            ):
                entry = self._entry(msgs[i])
                entries[i] = entry
                specs[i] = entry.spec
            visited += 1
            n = len(entry.items)
            items += n
            if newest is None and n:
                newest = (entry, n - 1)
            if budget is None or used + entry.size <= budget:  # the whole message fits
                kept.append(entry)
                used += entry.size
                continue
            for j in range(n - 1, -1, -1):  # its newest semconv messages, as far as they fit
                item = entry.items[j]
                if used + len(item) + 1 <= budget:
                    kept.append(item)
                    used += len(item) + 1
                    continue
                omitted = j + 1 + (count - visited)
                break
            if omitted:
                break
        if not omitted:
            body = ",".join([x.text if type(x) is _Entry else x for x in reversed(kept)])
            self._body, self._used = body, used
            return "[" + body + "]"
        assert budget is not None
        self._body = None
        return self._cut(kept, used, omitted, items + count - visited, newest)

    def _cut(self, kept: list[Any], used: int, omitted: int, most: int, newest: tuple[_Entry, int] | None) -> str:
        """The history over budget: what was kept (newest first), and a marker message first
        that counts the semconv messages left out (``most``: the most it can count)."""
        budget = self._budget
        assert budget is not None
        flat: list[str] = []  # the kept semconv messages, newest first
        for x in kept:
            if type(x) is _Entry:
                flat.extend(reversed(x.items))
            else:
                flat.append(x)
        # The longest marker it can be: every semconv message visited and one per message not
        # visited (a message of many tool results is many semconv messages: N may exceed count).
        room = len(_marker_message(OMITTED_MESSAGES.format(count=most))) + 1
        while flat and used + room > budget:  # make room for the marker message
            used -= len(flat.pop()) + 1
            omitted += 1
        if not flat and newest is not None:
            omitted -= 1
            flat.append(self._shrunk(*newest, budget - 2 - (room if omitted else 0)))
        if omitted:
            flat.append(_marker_message(OMITTED_MESSAGES.format(count=omitted)))
        return "[" + ",".join(reversed(flat)) + "]"

    def _shrunk(self, entry: _Entry, index: int, budget: int) -> str:
        """The newest message, too big on its own: its leaves shortened, or a marker part."""
        tree = entry.trees[index]
        if tree is None:  # small enough to keep without its tree; re-render it (rare)
            tree = json.loads(entry.items[index])
        fitted = fit(tree, budget, prune_from=3)
        if fitted is None:
            fitted = {"role": entry.roles[index], "parts": [{"type": "text", "content": MESSAGE_OMITTED}]}
        return dumps_tree(fitted)

    def _entry(self, message: Any) -> _Entry:
        """``message`` rendered: found by its spec (a message that moved in the history), else
        rendered now."""
        reader = self._reader
        spec = reader.spec(message)
        if spec is not None:
            try:
                found = self._by_spec.get(spec)
            except TypeError:  # an unhashable spec (a reader's odd value): not kept
                found, spec = None, None
            if found is not None and reader.unchanged([message], [found.spec]) == 1:
                return found
        entry = self._render_message(message, spec)
        if spec is not None:
            self._by_spec[spec] = entry
        return entry

    def _render_message(self, message: Any, spec: Any) -> _Entry:
        entry = _Entry(spec)
        reader = self._reader
        groups = reader.groups(message)
        failure: BaseException | None = None
        keep_tree_over = None if self._budget is None else self._budget - _MARKER_ROOM
        for role, group in groups:
            walk = Walk(self._scrub, self._budget, self._leaves)
            tree = {"role": _ident(role), "parts": [_part(walk, reader.part(b)) for b in group]}
            text = dumps_tree(tree)
            entry.items.append(text)
            entry.roles.append(role)
            entry.trees.append(tree if keep_tree_over is not None and len(text) > keep_tree_over else None)
            entry.size += len(text) + 1
            failure = failure or walk.failure
        entry.text = ",".join(entry.items)
        _report(failure, "a message")
        return entry

    def system_instructions(self, system: list[Any]) -> str:
        """System messages -> ``gen_ai.system_instructions`` (rendered once while they stay the same)."""
        cached = self._system
        reader = self._reader
        if cached is not None and len(cached[0]) == len(system) and reader.unchanged(system, cached[0]) == len(system):
            return cached[1]  # the same messages, or copies of them (flowra 0.0.86+ copies them per request)
        walk = Walk(self._scrub, self._budget, self._leaves)
        parts = [_part(walk, reader.part(b)) for m in system for b in getattr(m, "blocks", None) or ()]
        text = dumps_fitted(
            parts, self._budget, prune_from=_NEVER, otherwise=lambda: [{"type": "text", "content": OVER_BUDGET}]
        )
        _report(walk.failure, "the system instructions")
        self._system = ([reader.spec(m) for m in system], text)
        return text

    def tool_definitions(self, tools: Sequence[Any] | None) -> str | None:
        """``LLMRequest.tools`` -> ``gen_ai.tool.definitions`` (with each tool's ``parameters``,
        its input schema), or None when there are none. Rendered once per run while the same
        tool objects are passed."""
        if not tools:
            return None
        cached = self._tools
        if cached is not None and _same_items(cached[0], tools):
            return cached[1]
        walk = Walk(self._scrub, self._budget, self._leaves)
        defs: list[dict[str, Any]] = []
        for t in tools:
            d: dict[str, Any] = {"type": "function", "name": _name(walk, getattr(t, "name", ""))}
            description = getattr(t, "description", None)
            if description is not None:
                d["description"] = leaf_text(walk.string(str(description)))
            schema = getattr(t, "input_schema", None)
            if schema is not None:
                d["parameters"] = walk.node(schema)
            defs.append(d)
        budget = self._budget
        text = dumps_fitted(
            defs, budget, prune_from=2, otherwise=lambda: _names_only(defs, budget) if budget is not None else defs
        )
        _report(walk.failure, "the tool definitions")
        self._tools = (tuple(tools), text)
        return text

    # ------------------------------------------------------------------ response
    def output_messages(
        self, message: Any, finish_reason: str | None, final_tool_uses: Mapping[int, Any] | None = None
    ) -> str:
        """The response as one output message (``gen_ai.output.messages``).

        Tool calls carry the arguments *after* the BeforeToolCallEvent hooks (``final_tool_uses``:
        ``id()`` of the original tool-use block -> final tool use, so ids that models repeat cannot
        mix them up). ``finish_reason`` is the semconv value (``attributes.finish_reason``), written
        in the message only when given: the conventions deprecated it there (#363) in favour of
        ``gen_ai.response.finish_reasons``, so it is given in compatibility mode only."""
        walk = Walk(self._scrub, self._budget, self._leaves)
        blocks = getattr(message, "blocks", None) or ()
        reader = self._reader
        parts = [_part(walk, reader.part(b), final_tool_uses) for b in blocks]
        text = dumps_fitted(
            [_output_message(parts, finish_reason)],
            self._budget,
            prune_from=4,
            otherwise=lambda: [_output_message([{"type": "text", "content": MESSAGE_OMITTED}], finish_reason)],
        )
        _report(walk.failure, "the output messages")
        return text

    # ------------------------------------------------------------------ single values
    def tool_arguments(self, value: Any) -> str:
        """``gen_ai.tool.call.arguments``: JSON of the post-hook tool input (an object). A string
        holding JSON of an object (arguments a provider or a hook left serialised) is deserialised,
        as the conventions advise; any other input that is not an object (text the model made
        that is not JSON, None) is recorded as it is."""
        value = deserialised_arguments(value, self._budget)
        return self._structure(value, "the tool arguments", object_only=isinstance(value, Mapping))

    def result_value(self, result: Any) -> Any:
        """A tool-result block's content as a plain value (the adapter's reader decides how)."""
        return self._reader.result_value(result)

    def tool_result(self, content: Any) -> str:
        """``gen_ai.tool.call.result``: always a JSON object, as the conventions' schema asks.

        A structure, or JSON text of an object, is recorded as that object (deserialised, as the
        conventions advise); any other result (plain text, a JSON array, a number) is wrapped as
        ``{"content": <value>}``, so every backend can parse the attribute the same way.
        """
        value: Any = content
        if isinstance(content, str):
            head = content[:64].lstrip()
            budget = self._budget
            if head[:1] in ("{", "[") and (budget is None or len(content) <= PARSE_FACTOR * budget):
                try:
                    parsed = json.loads(content)
                except (ValueError, RecursionError):
                    parsed = None
                if isinstance(parsed, dict | list):
                    value = parsed
        elif not isinstance(content, Mapping | list | tuple):
            value = safe_str(content)
        if not isinstance(value, Mapping):
            value = {"content": value}
        return self._structure(value, "the tool result", object_only=True)

    def result_text(self, result: Any) -> str:
        """A tool result as plain text (the description of a failed call's span)."""
        return self.text(safe_str(self._reader.result_value(result)))

    def text(self, text: str) -> str:
        """Plain text (exception messages, stack traces, error descriptions, text results):
        scrubbed, cut with the marker; no JSON."""
        walk = Walk(self._scrub, self._budget, self._leaves)
        value = walk.string(text if isinstance(text, str) else str(text))
        _report(walk.failure, "a text value")
        return leaf_text(value)

    def _structure(self, value: Any, what: str, *, object_only: bool) -> str:
        walk = Walk(self._scrub, self._budget, self._leaves)
        tree = walk.node(value)
        if tree is None:  # null always does (fit's None means "cannot fit")
            text = dumps_tree(tree)
        else:
            omitted: Any = {OMITTED_KEY: OVER_BUDGET} if object_only else OVER_BUDGET
            text = dumps_fitted(tree, self._budget, prune_from=1, otherwise=lambda: omitted)
        _report(walk.failure, what)
        return text


_NEVER: Final = 1 << 30
"""``prune_from`` for trees whose every container is schema (only leaves may shrink)."""


def _same_items(mine: tuple[Any, ...], theirs: Sequence[Any] | None) -> bool:
    """Same items: compared in C, identity first; a replaced item counts as the same only if it
    is equal (a frozen flowra block with the same fields renders the same)."""
    try:
        return mine == (tuple(theirs) if theirs is not None else ())
    except Exception:  # an odd item whose __eq__ raises: render again
        return False


def _output_message(parts: list[Any], finish_reason: str | None) -> dict[str, Any]:
    if finish_reason is None:
        return {"role": "assistant", "parts": parts}
    return {"role": "assistant", "parts": parts, "finish_reason": finish_reason}


def _marker_message(text: str) -> str:
    return dumps_tree({"role": "system", "parts": [{"type": "text", "content": text}]})


def _report(failure: BaseException | None, what: str) -> None:
    """Log that ``redact=`` failed: the exception's type and where it was raised, never its
    message or traceback text (they routinely echo the value being redacted)."""
    if failure is not None:
        logger.error(
            "flowra_otel: redact= raised %s on %s; the affected content is withheld",
            failure_summary(failure),
            what,
        )


def _ident(value: object) -> str:
    text = utf8_safe(value if isinstance(value, str) else str(value))
    return text if len(text) <= _IDENT_LIMIT else text[:_IDENT_LIMIT] + "…"


def _text(walk: Walk, value: object) -> str | Cut:
    return walk.string(value if isinstance(value, str) else str(value))


def _name(walk: Walk, value: object) -> str:
    """A tool's name inside a content value: scrubbed like any leaf (a model may put anything
    there), and bounded like an id."""
    return _ident(leaf_text(walk.string(value if isinstance(value, str) else safe_str(value))))


def _names_only(defs: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """Tool definitions too big for the budget even with their schemas cut: the names alone,
    as many as fit, then a definition whose name says how many more were omitted."""
    names = [{"type": "function", "name": d["name"]} for d in defs]
    if len(dumps_tree(names)) <= budget:
        return names

    def first(count: int) -> list[dict[str, Any]]:
        marker = {"type": "function", "name": TOOLS_OMITTED.format(count=len(names) - count)}
        return [*names[:count], marker]

    low, high = 0, len(names) - 1  # the largest count of names that fits beside the marker
    while low < high:
        mid = (low + high + 1) // 2
        if len(dumps_tree(first(mid))) <= budget:
            low = mid
        else:
            high = mid - 1
    return first(low)  # at least the marker: the smallest valid value, even for a tiny budget


def _part(walk: Walk, part: Part, tool_uses: Mapping[int, Any] | None = None) -> dict[str, Any]:
    """One block's ``Part`` -> one semconv part (a tree: leaves already scrubbed and bounded)."""
    kind = part.kind
    if kind == "text":
        return {"type": "text", "content": _text(walk, part.content)}
    if kind == "tool_call":
        block = part.content
        # A hook may leave any value as the call (flowra before 0.0.92 keeps it in the history and
        # still spawns it): what it lacks is recorded as the tool span records it (no id, no name).
        final = tool_uses.get(id(block), block) if tool_uses else block
        return {
            "type": "tool_call",
            "id": _ident(getattr(final, "id", "")),
            "name": _name(walk, getattr(final, "name", "")),  # the model chose it (or a hook): content, scrubbed
            "arguments": walk.node(deserialised_arguments(getattr(final, "input", None), walk.cap)),
        }
    if kind == "tool_call_response":
        return {"type": "tool_call_response", "id": _ident(part.ident), "response": walk.node(part.content)}
    if kind == "reasoning":
        return {"type": "reasoning", "content": _text(walk, part.content)}
    if kind == "blob":
        data = part.content
        modality, mime = part.media or ("image", None)
        binary = isinstance(data, bytes | bytearray | memoryview)
        content = walk.media(bytes(data), textual=textual_media(mime)) if binary else _text(walk, data)
        if mime is None:
            return {"type": "blob", "modality": modality, "content": content}
        return {"type": "blob", "modality": modality, "mime_type": _ident(mime), "content": content}
    return {"type": _ident(kind)}


def deserialised_arguments(value: Any, budget: int | None) -> Any:
    """Tool arguments as the conventions expect them, an object: a string holding JSON of an
    object (flowra keeps OpenAI's arguments as the JSON text the provider sent) is deserialised,
    when it is small enough to parse; any other value is returned as it is."""
    if not isinstance(value, str) or value[:64].lstrip()[:1] != "{":
        return value
    if budget is not None and len(value) > PARSE_FACTOR * budget:
        return value
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return value
    return parsed if isinstance(parsed, dict) else value


def blob_modality(media_type: object) -> str:
    """The semconv modality of a MIME type: ``image``, ``audio``, ``video``, else ``document``."""
    head = media_type.partition("/")[0].lower() if isinstance(media_type, str) else ""
    return head if head in ("image", "audio", "video") else "document"


# ==================================================================================== ledger text
def _default(obj: Any) -> Any:
    if isinstance(obj, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(obj)).decode("ascii")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    return f"<{type(obj).__qualname__}>"


def canonical_json(value: Any) -> str:
    """Stable JSON for lengths and HMACs in the redaction ledger (sorted keys, compact); never raises."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=_default)
    except TypeError:  # keys of mixed types cannot be sorted
        try:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_default)
        except Exception:
            return json.dumps(f"<unserialisable {type(value).__qualname__}>")
    except Exception:
        return json.dumps(f"<unserialisable {type(value).__qualname__}>")
