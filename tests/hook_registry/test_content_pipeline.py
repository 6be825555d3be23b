"""The content pipeline: every content attribute is valid JSON that validates against the published
GenAI schemas, at any size, with any redaction, for any odd value a run can carry.

Unit tests of ``ContentRenderer`` on real flowra message objects; each output is checked with
``jsonschema`` against the schemas vendored in tests/semconv/ (see PROVENANCE.md there). Paired
negative checks feed the legacy string-level output (``tests/legacy_content.py``) to the same
validator, proving the checks would catch the old failures.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from flowra.llm import (
    AssistantMessage,
    ImageBlock,
    LLMRequest,
    Message,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from flowra.llm.tools import Tool

from flowra_otel.adapters.hook_registry.messages import MESSAGES
from flowra_otel.core.bounded_json import MAX_DEPTH, OMITTED_KEY
from flowra_otel.core.content import (
    MESSAGE_OMITTED,
    OMITTED_MESSAGES,
    REDACTION_FAILED,
    TRUNCATION_MARKER,
    ContentPolicy,
    ContentRenderer,
)
from flowra_otel.core.options import validate_conversation_id, validate_override, validate_redactor
from tests.hook_registry import legacy_content

SCHEMAS = Path(__file__).parents[1] / "semconv"
CARD = 4111111111111111
EMAIL = "alice.smith@example.com"
API_KEY = "sk-proj-AbCdEf0123456789XyZ"

HISTORY_FLOOR = len(
    json.dumps(
        [
            {"role": "system", "parts": [{"type": "text", "content": OMITTED_MESSAGES.format(count=10**6)}]},
            {"role": "assistant", "parts": [{"type": "text", "content": MESSAGE_OMITTED}]},
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )
)
"""The longest ``gen_ai.input.messages`` recorded when even the newest message is over budget: the
omitted-messages marker message, then the newest message as a marker. Documented: a budget too
tiny for any valid value gets this instead, so a JSON content attribute is at most
``max(max_content_length, HISTORY_FLOOR)`` characters."""


@functools.cache
def validator(name: str) -> Any:
    schema = json.loads((SCHEMAS / f"gen-ai-{name}.json").read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Python's json accepts NaN and Infinity; the standard does not


def valid(name: str, text: str) -> Any:
    """Parse ``text`` as JSON and validate it against the named schema; returns the value."""
    value = json.loads(text, parse_constant=reject_constant)
    validator(name).validate(value)
    assert "\ud800" not in text and text.encode("utf-8")  # exportable as UTF-8
    return value


def is_valid(name: str, text: str) -> bool:
    try:
        valid(name, text)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def renderer(max_length: int | None = 32_768, **options: Any) -> ContentRenderer:
    return ContentPolicy.build(
        redact=options.get("redact"), redact_secrets=options.get("redact_secrets", False), max_length=max_length
    ).renderer(MESSAGES)


def request(messages: list[Message]) -> LLMRequest:
    """A request carrying ``messages`` (system messages among them, as flowra 0.0.3 - 0.0.8 sends)."""
    return LLMRequest(model="m", messages=messages)


def legacy(max_length: int | None = 32_768, **options: Any) -> legacy_content.ContentPolicy:
    return legacy_content.ContentPolicy.build(
        redact=options.get("redact"), redact_secrets=options.get("redact_secrets", False), max_length=max_length
    )


def user(text: str) -> UserMessage:
    return UserMessage(blocks=[TextBlock(text=text)])


def call(call_id: str, name: str, arguments: dict[str, Any]) -> AssistantMessage:
    return AssistantMessage(blocks=[ToolUseBlock(id=call_id, name=name, input=arguments)])


def results(*pairs: tuple[str, str]) -> UserMessage:
    return UserMessage(blocks=[ToolResultBlock(tool_use_id=i, content=c) for i, c in pairs])


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": True}
    for _ in range(depth):
        value = {"d": value}
    return value


def all_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from all_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from all_strings(v)


# ==================================================================================== sizes
@pytest.mark.parametrize("size", [10, 100_000, 10 * 1024 * 1024])
def test_prompt_of_any_size_is_valid_json_within_the_budget(size: int) -> None:
    budget = 32_768
    messages: list[Message] = [SystemMessage(blocks=[TextBlock(text="Be brief. " * (size // 10))]), user("q" * size)]
    system, history = renderer(budget).request_messages(request(messages))
    assert system is not None
    instructions = valid("system-instructions", system)
    value = valid("input-messages", history)
    assert len(history) <= budget
    assert len(system) <= budget
    (message,) = value
    content = message["parts"][0]["content"]
    if size > budget:
        assert content.startswith("q" * 1000)
        assert content.endswith(f" of {size} chars]")
        assert instructions[0]["content"].endswith(f" of {size} chars]")
    else:
        assert content == "q" * size


def test_legacy_string_cut_of_a_100_kb_prompt_fails_the_same_validation() -> None:
    """Paired negative: the validator used above rejects what the old cut produced."""
    _, messages = legacy_content.split_messages([user("q" * 100_000)])
    old = legacy().render(messages)
    assert old.endswith(" chars]")
    assert not is_valid("input-messages", old)


def test_a_10_mb_tool_result_in_history_and_on_the_tool_span() -> None:
    big = "r" * (10 * 1024 * 1024)
    r = renderer()
    _, history = r.request_messages(request([user("go"), call("c1", "dump", {}), results(("c1", big))]))
    value = valid("input-messages", history)
    assert len(history) <= 32_768
    assert [m["role"] for m in value][-1] == "tool"
    response = value[-1]["parts"][0]["response"]
    kept, marker = response.split("…", 1)
    assert set(kept) == {"r"}
    assert marker == TRUNCATION_MARKER.format(dropped=len(big) - len(kept), total=len(big))[1:]
    result = r.tool_result(big)
    assert len(result) <= 32_768  # plain text is wrapped as {"content": ...} and cut inside, within the budget
    content = valid("tool-call-result", result)["content"]
    kept, marker = content.split("…", 1)
    assert set(kept) == {"r"} and len(kept) > 32_000
    assert marker == TRUNCATION_MARKER.format(dropped=len(big) - len(kept), total=len(big))[1:]


def test_a_10_mb_json_tool_result_is_an_object_or_bounded_text() -> None:
    r = renderer()
    small = json.dumps({"temperature": {"high": 75, "low": 60}, "conditions": "sunny"})
    assert valid("tool-call-result", r.tool_result(small)) == json.loads(small)
    big = json.dumps({"rows": ["x" * 100] * 100_000})  # 10 MB of JSON text: not parsed, recorded as cut text
    text = r.tool_result(big)
    assert len(text) <= 32_768
    content = valid("tool-call-result", text)["content"]
    assert content.startswith('{"rows": ["xxx') and content.endswith(f" of {len(big)} chars]")
    medium = json.dumps({"rows": ["y" * 100] * 1_000})  # within the parse window: an object, shrunk inside
    obj = valid("tool-call-result", r.tool_result(medium))
    assert len(r.tool_result(medium)) <= 32_768
    assert obj["rows"][0] == "y" * 100
    assert obj["rows"][-1].endswith("more items omitted]")


def test_oldest_messages_are_dropped_first_behind_a_marker_message() -> None:
    history: list[Message] = [user("start")]
    for i in range(200):
        history += [call(f"c{i}", "lookup", {"i": i}), results((f"c{i}", f"result {i} " + "z" * 500))]
    _, text = renderer(8_000).request_messages(request(history))
    value = valid("input-messages", text)
    assert len(text) <= 8_000
    marker = value[0]
    assert marker["role"] == "system"
    assert "earlier messages omitted" in marker["parts"][0]["content"]
    assert value[-1]["parts"][0]["response"].startswith("result 199 ")  # the newest is kept whole
    omitted = int(marker["parts"][0]["content"].split(":")[1].split()[0])
    assert omitted + len(value) - 1 == 1 + 2 * 200


def test_a_newest_message_too_big_for_the_budget_is_shrunk_inside_its_parts() -> None:
    arguments = {f"k{i}": "v" * 2_000 for i in range(50)}
    r = renderer(4_000)
    _, text = r.request_messages(request([user("a"), call("c1", "bulk", arguments)]))
    value = valid("input-messages", text)
    assert len(text) <= 4_000
    assert value[-1]["role"] == "assistant"
    (part,) = value[-1]["parts"]
    assert part["type"] == "tool_call" and part["name"] == "bulk"
    output = r.output_messages(call("c1", "bulk", arguments), "tool_call")
    out = valid("output-messages", output)
    assert len(output) <= 4_000
    assert out[0]["finish_reason"] == "tool_call"
    args = valid("tool-call-arguments", r.tool_arguments(arguments))
    assert len(r.tool_arguments(arguments)) <= 4_000
    assert all(k.startswith("k") or k == OMITTED_KEY for k in args)


# ==================================================================================== redaction
def test_a_card_number_stored_as_a_json_number_stays_valid_json() -> None:
    arguments = {"customer_id": CARD, "contact": EMAIL, "count": 3, "ratio": 0.5}
    r = renderer(redact_secrets=True)
    args = valid("tool-call-arguments", r.tool_arguments(arguments))
    assert args == {"customer_id": "[REDACTED:card_number]", "contact": "[REDACTED:email]", "count": 3, "ratio": 0.5}
    _, history = r.request_messages(request([user("pay"), call("c1", "charge", arguments)]))
    (part,) = valid("input-messages", history)[-1]["parts"]
    assert part["arguments"]["customer_id"] == "[REDACTED:card_number]"
    output = valid("output-messages", r.output_messages(call("c1", "charge", arguments), "tool_call"))
    assert output[0]["parts"][0]["arguments"]["customer_id"] == "[REDACTED:card_number]"


def test_legacy_text_scrub_of_a_card_number_breaks_the_json() -> None:
    """Paired negative: scrubbing the serialised text turns the number into bare text."""
    old = legacy(redact_secrets=True).render({"customer_id": CARD})
    assert old == '{"customer_id":[REDACTED:card_number]}'
    assert not is_valid("tool-call-arguments", old)


def test_secrets_in_keys_strings_and_results_are_scrubbed_per_leaf() -> None:
    r = renderer(redact_secrets=True)
    args = valid(
        "tool-call-arguments", r.tool_arguments({EMAIL: 1, "note": f"key {API_KEY}", "nested": [{"k": EMAIL}]})
    )
    assert args == {"[REDACTED:email]": 1, "note": "key [REDACTED:api_key]", "nested": [{"k": "[REDACTED:email]"}]}
    result = valid("tool-call-result", r.tool_result(json.dumps({"owner": EMAIL})))
    assert result == {"owner": "[REDACTED:email]"}
    assert valid("tool-call-result", r.tool_result(f"mail {EMAIL}")) == {"content": "mail [REDACTED:email]"}
    assert r.text(f"failed for {EMAIL}") == "failed for [REDACTED:email]"


def test_colliding_scrubbed_keys_are_all_kept() -> None:
    args = valid("tool-call-arguments", renderer(redact_secrets=True).tool_arguments({EMAIL: 1, "bob@example.org": 2}))
    assert args == {"[REDACTED:email]": 1, "[REDACTED:email] #2": 2}


def test_the_user_redactor_sees_leaves_never_json_syntax() -> None:
    seen: list[str] = []

    def redact(text: str) -> str:
        seen.append(text)
        return text.replace("Atlantis", "A***s")

    r = renderer(redact=redact)
    args = valid("tool-call-arguments", r.tool_arguments({"city": "Atlantis", "Atlantis": 7, "n": 12}))
    assert args == {"city": "A***s", "A***s": 7, "n": 12}
    assert sorted(seen) == sorted(["city", "Atlantis", "Atlantis", "7", "n", "12"])
    assert not any(s.startswith(("{", '"')) for s in seen)


def test_a_secret_straddling_the_cut_is_scrubbed_not_shown_in_part() -> None:
    budget = 1_000
    text = "a " * 495 + EMAIL + " tail" * 500  # the e-mail starts 10 characters before the cut
    value = renderer(budget, redact_secrets=True).text(text)
    assert "alice" not in value
    assert "[REDACTED" in value


def test_a_raising_redactor_withholds_each_leaf_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    def broken(text: str) -> str:
        raise RuntimeError("redactor bug")

    r = renderer(redact=broken)
    with caplog.at_level(logging.ERROR, logger="flowra_otel"):
        args = valid("tool-call-arguments", r.tool_arguments({"city": "Oslo", "n": 4}))
        _, history = r.request_messages(
            request([user("Oslo?"), call("c1", "w", {"city": "Oslo"}), results(("c1", "Cold."))])
        )
        text = r.text("Oslo is cold")
    assert args == {REDACTION_FAILED: REDACTION_FAILED, f"{REDACTION_FAILED} #2": REDACTION_FAILED}
    messages = valid("input-messages", history)
    assert "Oslo" not in history and "Cold." not in history
    assert messages[0]["parts"][0]["content"] == REDACTION_FAILED
    assert text == REDACTION_FAILED
    errors = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert len(errors) == 1 + 3 + 1  # once per attribute or message, not once per leaf
    # The type and the place, never the exception's message or traceback (they echo the value).
    assert all(rec.exc_info is None and "RuntimeError at " in rec.getMessage() for rec in errors)
    assert not any("redactor bug" in rec.getMessage() for rec in errors)
    caplog.clear()  # logged on purpose: the autouse guard must not count these


def test_a_redactor_returning_a_non_string_is_a_failure_too(caplog: pytest.LogCaptureFixture) -> None:
    r = renderer(redact=lambda text: None)
    with caplog.at_level(logging.ERROR, logger="flowra_otel"):
        assert r.text("secret") == REDACTION_FAILED
    caplog.clear()


# ==================================================================================== odd values
def test_images_become_blob_parts_and_huge_ones_are_cut_inside_the_part() -> None:
    small = bytes(range(256))
    big = b"\x89PNG" + bytes(1024 * 1024)
    message = UserMessage(
        blocks=[
            TextBlock(text="Look:"),
            ImageBlock(data=small, media_type="image/png"),
            ImageBlock(data=big, media_type="image/png"),
        ]
    )
    _, text = renderer(32_768).request_messages(request([message]))
    (value,) = valid("input-messages", text)
    assert len(text) <= 32_768
    text_part, blob, huge = value["parts"]
    assert text_part == {"type": "text", "content": "Look:"}
    assert blob == {
        "type": "blob",
        "modality": "image",
        "mime_type": "image/png",
        "content": base64.b64encode(small).decode(),
    }
    assert huge["type"] == "blob" and huge["mime_type"] == "image/png"
    assert huge["content"].endswith(" chars]")
    old = legacy(2_000).render(legacy_content.split_messages([message])[1])
    assert not is_valid("input-messages", old)  # paired negative: the old cut broke it


@pytest.mark.parametrize("depth", [2_000, 200_000])
def test_deeply_nested_tool_input(depth: int) -> None:
    r = renderer()
    text = r.tool_arguments(nested(depth))
    value = valid("tool-call-arguments", text)
    for _ in range(MAX_DEPTH - 1):
        value = value["d"]
    assert value["d"].startswith("…[flowra_otel: nested deeper than")
    _, history = r.request_messages(request([user("deep"), call("c1", "deep", nested(depth))]))
    valid("input-messages", history)
    assert legacy().render(nested(200_000)) == '"<unserialisable dict>"'  # the old placeholder lost everything


def test_circular_tool_input_keeps_everything_but_the_cycle() -> None:
    cyclic: dict[str, Any] = {"name": "loop", "items": [1, 2]}
    cyclic["self"] = cyclic
    cyclic["items"].append(cyclic["items"])
    args = valid("tool-call-arguments", renderer().tool_arguments(cyclic))
    assert args["name"] == "loop"
    assert args["self"] == "…[flowra_otel: circular reference to a dict]"
    assert args["items"][:2] == [1, 2] and "circular" in args["items"][2]


class Opaque:
    pass


class Shown:
    def __str__(self) -> str:
        return "shown-thing"


def test_non_string_keys_bytes_sets_nan_and_objects() -> None:
    import dataclasses

    @dataclasses.dataclass
    class Point:
        x: int
        y: int

    arguments: dict[Any, Any] = {
        7: "int key",
        None: "none key",
        (1, 2): "tuple key",
        Opaque(): "opaque key",
        "blob": b"\x00\xffbinary",
        "tags": {"only"},
        "pair": (1, "two"),
        "point": Point(1, 2),
        "nan": float("nan"),
        "inf": float("-inf"),
        "opaque": Opaque(),
        "shown": Shown(),
        "huge_int": 10**5000,
    }
    args = valid("tool-call-arguments", renderer().tool_arguments(arguments))
    assert args["7"] == "int key"
    assert args["null"] == "none key"
    assert args["(1, 2)"] == "tuple key"
    assert args["<Opaque>"] == "opaque key"
    assert args["blob"] == base64.b64encode(b"\x00\xffbinary").decode()
    assert args["tags"] == ["only"]
    assert args["pair"] == [1, "two"]
    assert args["point"] == {"x": 1, "y": 2}
    assert (args["nan"], args["inf"]) == ("NaN", "-Infinity")
    assert args["opaque"] == "<Opaque>"
    assert args["shown"] == "<Shown>"
    assert args["huge_int"].startswith("<int of about 500")
    assert legacy().render({"nan": float("nan")}) == '{"nan":NaN}'  # paired negative: not JSON
    assert not is_valid("tool-call-arguments", legacy().render({"nan": float("nan")}))


def test_lone_surrogates_become_replacement_characters_everywhere() -> None:
    nasty = "lone \ud800 and \udfff, NUL \x00, ESC \x1b[31m"
    fixed = nasty.replace("\ud800", "\ufffd").replace("\udfff", "\ufffd")
    r = renderer()
    args = valid("tool-call-arguments", r.tool_arguments({nasty: nasty}))
    assert args == {fixed: fixed}
    assert valid("tool-call-result", r.tool_result(nasty)) == {"content": fixed}
    assert r.text(nasty) == fixed
    _, history = r.request_messages(request([user(nasty)]))
    assert valid("input-messages", history)[0]["parts"][0]["content"] == fixed


def test_non_string_tool_results() -> None:
    r = renderer()
    assert valid("tool-call-result", r.tool_result({"set": {1}})) == {"set": [1]}
    # Anything but an object is wrapped as {"content": <value>}: the schema asks for an object.
    assert valid("tool-call-result", r.tool_result(["a", 1])) == {"content": ["a", 1]}
    assert valid("tool-call-result", r.tool_result("[1, 2]")) == {"content": [1, 2]}  # JSON text of an array
    assert valid("tool-call-result", r.tool_result("12345")) == {"content": "12345"}
    # Non-text results other than structures are recorded as their str(), as a model would see them.
    assert valid("tool-call-result", r.tool_result(12345)) == {"content": "12345"}
    assert valid("tool-call-result", r.tool_result(None)) == {"content": "None"}
    assert valid("tool-call-result", r.tool_result(Shown())) == {"content": "shown-thing"}
    assert valid("tool-call-result", r.tool_result("[not json")) == {"content": "[not json"}
    text = r.tool_result("[" * 100_000)  # does not parse: cut as text inside the wrapper
    assert len(text) <= 32_768
    content = valid("tool-call-result", text)["content"]
    kept = content.split("…", 1)[0]
    assert set(kept) == {"["} and len(kept) > 32_000
    assert content == kept + TRUNCATION_MARKER.format(dropped=100_000 - len(kept), total=100_000)


# ==================================================================================== shape
def test_one_tool_message_per_parallel_tool_response() -> None:
    r = renderer()
    user_message = UserMessage(
        blocks=[
            ToolResultBlock(tool_use_id="a", content="A"),
            ToolResultBlock(tool_use_id="b", content="B"),
            TextBlock(text="and then?"),
        ]
    )
    _, history = r.request_messages(request([user("go"), user_message]))
    value = valid("input-messages", history)
    assert [(m["role"], [p.get("id") for p in m["parts"]]) for m in value] == [
        ("user", [None]),
        ("tool", ["a"]),
        ("tool", ["b"]),
        ("user", [None]),
    ]
    _, legacy_messages = legacy_content.split_messages([user_message])
    assert [m["role"] for m in legacy_messages] == ["tool", "user"]  # paired negative: results merged


def test_tool_definitions_carry_parameters() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tools = [
        Tool(name="weather", description="Weather for a city.", input_schema=schema),
        Tool(name="noop", description=""),
    ]
    r = renderer()
    text = r.tool_definitions(tools)
    assert text is not None
    value = valid("tool-definitions", text)
    assert value == [
        {"type": "function", "name": "weather", "description": "Weather for a city.", "parameters": schema},
        {"type": "function", "name": "noop", "description": ""},
    ]
    assert r.tool_definitions(tools) is text  # cached while the same tool objects come back
    assert r.tool_definitions([]) is None


def test_reasoning_text_and_output_finish_reason() -> None:
    response = AssistantMessage(blocks=[ThinkingBlock(text="hmm"), TextBlock(text="Done.")])
    value = valid("output-messages", renderer().output_messages(response, "stop"))
    assert value == [
        {
            "role": "assistant",
            "parts": [{"type": "reasoning", "content": "hmm"}, {"type": "text", "content": "Done."}],
            "finish_reason": "stop",
        }
    ]


def test_output_messages_use_the_post_hook_tool_arguments() -> None:
    original = ToolUseBlock(id="c1", name="send", input={"to": EMAIL})
    final = ToolUseBlock(id="c1", name="send", input={"to": "***"})
    value = valid(
        "output-messages",
        renderer().output_messages(AssistantMessage(blocks=[original]), "tool_call", {id(original): final}),
    )
    assert value[0]["parts"][0]["arguments"] == {"to": "***"}


# ==================================================================================== caching
def test_each_message_is_rendered_once_per_run() -> None:
    seen: list[str] = []

    def counting(text: str) -> str:
        seen.append(text)
        return text

    r = renderer(None, redact=counting)
    history: list[Message] = [SystemMessage(blocks=[TextBlock(text="sys")]), user("u0")]
    for i in range(50):
        r.request_messages(request(history))
        history = [*history, call(f"c{i}", "t", {"i": i}), results((f"c{i}", f"r{i}"))]
    final_system, final_history = r.request_messages(request(history))
    assert seen.count("sys") == 1
    assert seen.count("u0") == 1
    assert seen.count("r0") == 1 and seen.count("r49") == 1
    fresh = renderer(None, redact=counting)
    assert fresh.request_messages(request(history)) == (final_system, final_history)  # the cache changes nothing


def test_a_block_replaced_in_place_in_the_history_is_rendered_again() -> None:
    r = renderer()
    message = user(f"mail {EMAIL}")
    _, before = r.request_messages(request([message]))
    message.blocks[0] = TextBlock(text="mail ***")  # a hook redacting the history in place
    _, after = r.request_messages(request([message]))
    assert EMAIL in before
    assert EMAIL not in after and "mail ***" in after


# ==================================================================================== options
async def async_redactor(text: str) -> str:
    return text


class AsyncCall:
    async def __call__(self, text: str) -> str:
        return text


class SyncCall:
    def __call__(self, text: str) -> str:
        return text


ASYNC_CALLABLES: list[Any] = [
    async_redactor,
    AsyncCall(),
    functools.partial(async_redactor),
    functools.partial(functools.partial(AsyncCall())),
    AsyncCall().__call__,
]


@pytest.mark.parametrize(
    "value", ASYNC_CALLABLES, ids=["async-def", "async-call", "partial", "partial-object", "bound"]
)
@pytest.mark.parametrize(
    "validate",
    [validate_redactor, functools.partial(validate_override, "agent_name"), validate_conversation_id],
    ids=["redact", "agent_name", "conversation_id"],
)
def test_async_callables_are_rejected_at_construction(value: Any, validate: Callable[[Any], Any]) -> None:
    with pytest.raises(TypeError, match="synchronous"):
        validate(value)


@pytest.mark.parametrize("value", [str.upper, SyncCall(), lambda text: text, functools.partial(re.sub, "a", "b")])
def test_sync_callables_are_accepted(value: Any) -> None:
    assert validate_redactor(value) is value
    assert validate_override("provider_name", value) is value
