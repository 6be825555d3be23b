"""The redaction ledger's values, exactly (``flowra_otel.core.redaction``): its attribute names,
the canonical text its lengths and HMAC are computed over (a text result, a 0.0.57 list of blocks,
content blocks, arguments), the handler names, and the original taken before a later hook can
edit it in place. The HMAC must be computable for any text, a lone surrogate included: a ledger
entry that fails to encode is a ledger entry lost.

Flowra-free and fast: these are the tests ``tools/mutate.py redaction`` runs per mutant.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import json
import types
from typing import Any

from flowra_otel.core import redaction
from flowra_otel.core.redaction import FIELD_ARGUMENTS, FIELD_RESULT, FieldChange, canonical, handler_name, hmac_hex

KEY = b"0123456789abcdef-ledger-key"


@dataclasses.dataclass
class ToolUse:
    id: str
    name: str
    input: Any


@dataclasses.dataclass
class ResultBlock:
    tool_use_id: str
    content: Any


@dataclasses.dataclass
class TextBlock:
    text: str


def scrub(event: object) -> None:
    """A module-level hook."""


class Hooks:
    def on_result(self, event: object) -> None:
        """A bound method."""

    def __call__(self, event: object) -> None:
        """A callable object."""


class Nameless:
    """A callable whose instances say they come from no module."""

    __module__ = ""

    def __call__(self, event: object) -> None: ...


def test_the_ledger_attribute_names() -> None:
    assert redaction.APPLIED == "flowra.redaction.applied"
    assert redaction.FIELDS == "flowra.redaction.fields"
    assert (FIELD_ARGUMENTS, FIELD_RESULT) == ("arguments", "result")
    assert redaction.key("result", "handlers") == "flowra.redaction.result.handlers"


def test_handler_names_are_module_and_qualified_name() -> None:
    assert handler_name(scrub) == f"{__name__}.scrub"
    assert handler_name(Hooks().on_result) == f"{__name__}.Hooks.on_result"
    assert handler_name(functools.partial(functools.partial(scrub, 1))) == f"{__name__}.scrub"
    assert handler_name(Hooks()) == f"{__name__}.Hooks"  # an instance: its class
    # a callable object bound as a method: the object's class, not "method"
    assert handler_name(types.MethodType(Hooks(), object())) == f"{__name__}.Hooks"
    assert handler_name(len) == "builtins.len"
    assert handler_name(Nameless()) == "Nameless"  # no module to name: the qualified name alone
    surrogate = functools.partial(scrub)
    scrub.__qualname__ = "scrub\udc80"
    try:
        assert handler_name(surrogate) == f"{__name__}.scrub\ufffd"  # exportable
    finally:
        scrub.__qualname__ = "scrub"


def test_the_canonical_text_of_a_text_result_is_the_text() -> None:
    assert canonical(FIELD_RESULT, ResultBlock("c1", "Sunny, 24 °C")) == "Sunny, 24 °C"
    assert canonical(FIELD_RESULT, object()) == ""  # no content at all


def test_the_canonical_text_of_a_list_result_is_its_result_block() -> None:
    """flowra 0.0.57: a list of blocks, the result block anywhere in it."""
    blocks = [TextBlock("appended by a hook"), ResultBlock("c1", "the result")]
    assert canonical(FIELD_RESULT, blocks) == "the result"
    assert canonical(FIELD_RESULT, [TextBlock("only text")]) == ""


def test_the_canonical_text_of_content_blocks_is_sorted_compact_json() -> None:
    content = [{"type": "text", "text": "é", "a": 1}]
    expected = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical(FIELD_RESULT, ResultBlock("c1", content)) == expected == '[{"a":1,"text":"é","type":"text"}]'


def test_the_canonical_text_of_arguments_is_sorted_compact_json() -> None:
    assert canonical(FIELD_ARGUMENTS, ToolUse("c1", "t", {"b": 2, "a": "é"})) == '{"a":"é","b":2}'
    assert canonical(FIELD_ARGUMENTS, object()) == "null"


def test_the_hmac_covers_any_text_a_lone_surrogate_included() -> None:
    for text in ("plain", "é ü 😀", "half \ud83d of an emoji"):
        expected = hmac.new(KEY, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        assert hmac_hex(KEY, text) == expected
        assert len(expected) == 64


def test_a_field_change_keeps_the_original_as_it_was_before_any_later_edit() -> None:
    use = ToolUse("c1", "lookup", {"card": "4111 1111 1111 1111"})
    change = FieldChange(FIELD_ARGUMENTS, use)
    original_text = '{"card":"4111 1111 1111 1111"}'
    assert change.field == FIELD_ARGUMENTS and change.original is use and change.handlers == []
    assert change.original_text == original_text
    use.input["card"] = "[CARD]"  # a later hook edits the same object in place
    assert change.original_text == original_text
    assert change.differs_from(use)
    assert not change.differs_from(ToolUse("c2", "lookup", {"card": "4111 1111 1111 1111"}))


def test_a_given_original_text_is_kept_as_given() -> None:
    change = FieldChange(FIELD_RESULT, ResultBlock("c1", "now"), original_text="before")
    assert change.original_text == "before"
    assert change.differs_from(ResultBlock("c1", "now"))
    assert not change.differs_from(ResultBlock("c1", "before"))


def test_the_ledger_attributes_of_a_change() -> None:
    change = FieldChange(FIELD_RESULT, ResultBlock("c1", "secret: hunter2"))
    change.handlers += ["app.mask", "app.audit"]
    final = ResultBlock("c1", "secret: [X]")
    attrs = change.attributes(final, None)
    assert attrs == {
        "flowra.redaction.result.handlers": ["app.mask", "app.audit"],
        "flowra.redaction.result.original_length": 15,
        "flowra.redaction.result.final_length": 11,
    }
    change.handlers.append("later")
    assert attrs["flowra.redaction.result.handlers"] == ["app.mask", "app.audit"]  # a copy
    keyed = change.attributes(final, KEY)
    assert keyed["flowra.redaction.result.original_hmac_sha256"] == hmac_hex(KEY, "secret: hunter2")
    assert len(keyed) == 4


def test_a_surrogate_in_the_original_still_gets_its_hmac() -> None:
    change = FieldChange(FIELD_RESULT, ResultBlock("c1", "key \udcff end"))
    attrs = change.attributes(ResultBlock("c1", "key [X] end"), KEY)
    assert attrs["flowra.redaction.result.original_hmac_sha256"] == hmac_hex(KEY, "key \udcff end")
