"""The helpers that keep the plugin from raising into flowra or handing the exporter a bad value
(``flowra_otel.core.safety``), value by value: counts that OTLP can carry whatever they were
(``inf``, ``nan``, huge, strings, objects whose conversion raises), text that encodes as UTF-8,
equality that cannot be decided, and failures logged by type and place, never by message.

Flowra-free and fast: these are the tests ``tools/mutate.py safety`` runs per mutant.
"""

from __future__ import annotations

import decimal
import logging
import math
from typing import Any

import pytest

from flowra_otel.core import safety
from flowra_otel.core.safety import (
    INT64_MAX,
    INT64_MIN,
    changed,
    failure_summary,
    failure_trail,
    guarded,
    internal_error,
    safe_float,
    safe_int,
    safe_str,
    utf8_safe,
)

SECRET = "card 4111-1111-1111-1111"


class BadFloat:
    def __float__(self) -> float:
        raise ValueError(SECRET)


class BadStr:
    def __str__(self) -> str:
        raise RuntimeError(SECRET)


class BadEq:
    def __eq__(self, other: object) -> bool:
        raise TypeError(SECRET)

    __hash__ = object.__hash__


class Ambiguous:
    """Array-like equality: element-wise, and the result's truth raises."""

    def __eq__(self, other: object) -> Any:
        return self

    def __bool__(self) -> bool:
        raise ValueError("the truth value of an array is ambiguous")

    __hash__ = object.__hash__


class Says:
    def __init__(self, answer: object) -> None:
        self.answer = answer

    def __eq__(self, other: object) -> Any:
        return self.answer

    __hash__ = object.__hash__


def test_the_int64_bounds_are_otlps() -> None:
    assert INT64_MIN == -(2**63) == -9223372036854775808
    assert INT64_MAX == 2**63 - 1 == 9223372036854775807


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, 0),
        (42, 42),
        (-7, -7),
        (INT64_MAX, INT64_MAX),
        (INT64_MIN, INT64_MIN),
        (INT64_MAX + 1, INT64_MAX),
        (INT64_MIN - 1, INT64_MIN),
        (10**30, INT64_MAX),
        (-(10**30), INT64_MIN),
        (3.9, 3),
        (-3.9, -3),
        (1e30, INT64_MAX),
        (-1e30, INT64_MIN),
        (float("inf"), 0),
        (float("-inf"), 0),
        (float("nan"), 0),
        ("12", 12),
        ("12.7", 12),
        ("twelve", 0),
        ("inf", 0),
        (None, 0),
        (True, 1),
        (decimal.Decimal("1e400"), 0),  # a finite Decimal that is inf as a float
        (decimal.Decimal("5.5"), 5),
        (BadFloat(), 0),
        (object(), 0),
    ],
)
def test_a_count_is_always_an_int_otlp_can_carry(value: object, expected: int) -> None:
    result = safe_int(value)
    assert result == expected
    assert type(result) is int
    assert INT64_MIN <= result <= INT64_MAX


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (0, 0.0),
        (1.5, 1.5),
        ("2.5", 2.5),
        ("-0.25", -0.25),
        ("cheap", None),
        (float("nan"), None),
        (float("inf"), None),
        (float("-inf"), None),
        ("inf", None),
        (BadFloat(), None),
        (object(), None),
    ],
)
def test_a_cost_is_a_finite_float_or_none(value: object, expected: float | None) -> None:
    result = safe_float(value)
    assert result == expected
    assert result is None or (type(result) is float and math.isfinite(result))


def test_utf8_safe_replaces_only_lone_surrogates() -> None:
    plain = "plain ascii"
    assert utf8_safe(plain) is plain
    accented = "déjà vu 😀"
    assert utf8_safe(accented) is accented
    assert utf8_safe("a\udc80b\ud83dc") == "a\ufffdb\ufffdc"
    utf8_safe("a\udc80b").encode("utf-8")


def test_safe_str_never_raises_and_is_always_encodable() -> None:
    plain = "plain"
    assert safe_str(plain) is plain
    assert safe_str("x\udcff") == "x\ufffd"
    assert safe_str(42) == "42"
    assert safe_str(b"raw") == "b'raw'"
    assert safe_str(BadStr()) == "<BadStr: str() failed>"
    assert SECRET not in safe_str(BadStr())

    class Sneaky(str):
        pass

    assert safe_str(Sneaky("é\udc80")) == "é\ufffd"
    assert safe_str(Sneaky("abc")) == "abc"


def test_changed_is_identity_first_then_guarded_equality() -> None:
    value = {"a": 1}
    assert changed(value, value) is False
    assert changed({"a": 1}, {"a": 1}) is False  # an equal replacement is no change
    assert changed({"a": 2}, {"a": 1}) is True
    assert changed(BadEq(), BadEq()) is True  # equality that raises: counted as a change
    bad = BadEq()
    assert changed(bad, bad) is False  # identity needs no equality
    assert changed(Ambiguous(), Ambiguous()) is True  # undecidable: a change
    assert changed(Says("yes"), 1) is False  # a truthy answer: equal
    assert changed(Says(0), 1) is True
    assert changed(Says(None), 1) is True


def test_guarded_runs_the_function_and_swallows_and_logs_its_failure(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[tuple[Any, ...]] = []

    def record(*args: Any, **kwargs: Any) -> None:
        calls.append((args, kwargs))

    guarded(record, 1, two=2)
    assert calls == [((1,), {"two": 2})]

    def explode(value: str) -> None:
        raise KeyError(value)

    caplog.set_level(logging.DEBUG)
    guarded(explode, SECRET)  # never raises
    (record_,) = [r for r in caplog.records if r.name == "flowra_otel"]
    assert record_.levelno == logging.ERROR
    message = record_.getMessage()
    assert message.startswith("flowra_otel: internal error in test_guarded_runs_the_function_and_swallows")
    assert "explode; the agent is unaffected (KeyError <- " in message
    assert SECRET not in message and record_.exc_info is None
    caplog.flowra_otel_expected_errors = 1  # type: ignore[attr-defined]


def test_guarded_names_a_callable_object_by_its_class(caplog: pytest.LogCaptureFixture) -> None:
    class Exploding:
        def __call__(self) -> None:
            raise RuntimeError(SECRET)

    caplog.set_level(logging.DEBUG)
    guarded(Exploding())
    (record_,) = [r for r in caplog.records if r.name == "flowra_otel"]
    assert "internal error in test_guarded_names_a_callable_object_by_its_class.<locals>.Exploding;" in (
        record_.getMessage()
    )
    caplog.flowra_otel_expected_errors = 1  # type: ignore[attr-defined]


def test_internal_error_logs_type_and_frames_at_the_level_and_logger_given(caplog: pytest.LogCaptureFixture) -> None:
    other = logging.getLogger("flowra_otel.tests.safety")
    caplog.set_level(logging.DEBUG)
    try:
        int(SECRET)
    except ValueError:
        internal_error("could not count", level=logging.WARNING, log=other)
    internal_error("nothing failed", level=logging.INFO, log=other)
    first, second = [r for r in caplog.records if r.name == "flowra_otel.tests.safety"]
    assert first.levelno == logging.WARNING
    assert first.getMessage().startswith("could not count (ValueError <- ")
    assert "test_safety_helpers_never_raise.py:" in first.getMessage()
    assert SECRET not in first.getMessage()
    assert (second.levelno, second.getMessage()) == (logging.INFO, "nothing failed (no exception)")
    assert safety.logger.name == "flowra_otel"


def _raise(depth: int) -> None:
    if depth:
        _raise(depth - 1)
    raise LookupError(SECRET)


def test_failure_summary_is_the_type_and_the_innermost_frame_never_the_message() -> None:
    try:
        _raise(2)
    except LookupError as exc:
        summary = failure_summary(exc)
    assert summary.startswith("LookupError at ")
    assert summary.endswith(f":{_raise.__code__.co_firstlineno + 3} in _raise")
    assert "test_safety_helpers_never_raise.py" in summary
    assert SECRET not in summary
    assert failure_summary(decimal.InvalidOperation()) == "decimal.InvalidOperation"  # not raised: no frame


def test_failure_trail_is_every_frame_innermost_first_and_the_cause_type() -> None:
    try:
        try:
            _raise(2)
        except LookupError as inner:
            raise RuntimeError(SECRET) from inner
    except RuntimeError as exc:
        trail = failure_trail(exc)
        short = failure_trail(exc, frames=1)
    head, *frames = trail.split(" <- ")
    assert head == "RuntimeError"
    assert len(frames) == 1 and frames[0].endswith(
        "in test_failure_trail_is_every_frame_innermost_first_and_the_cause_type; while handling LookupError"
    )
    assert short == trail
    try:
        _raise(2)
    except LookupError as exc:
        deep = failure_trail(exc)
        one = failure_trail(exc, frames=1)
    names = [step.rsplit(" in ", 1)[-1] for step in deep.split(" <- ")[1:]]
    assert names == [
        "_raise",
        "_raise",
        "_raise",
        "test_failure_trail_is_every_frame_innermost_first_and_the_cause_type",
    ]
    assert one.split(" <- ")[1:] == [deep.split(" <- ")[1]]  # the innermost frame
    assert "while handling" not in deep
    assert SECRET not in deep + trail
    assert failure_trail(KeyError("x")) == "KeyError"


def test_an_odd_traceback_still_gives_the_type() -> None:
    class OddTracebackError(Exception):
        @property
        def __traceback__(self) -> Any:
            raise RuntimeError("no traceback for you")

        @__traceback__.setter
        def __traceback__(self, value: Any) -> None:
            pass

    exc = OddTracebackError()
    assert failure_summary(exc) == f"{__name__}.test_an_odd_traceback_still_gives_the_type.<locals>.OddTracebackError"
    assert failure_trail(exc) == failure_summary(exc)


def test_a_name_with_a_surrogate_is_made_encodable() -> None:
    odd = type("OddError", (Exception,), {})
    odd.__qualname__ = "Odd\udc80Error"
    assert failure_summary(odd()).endswith("Odd\ufffdError")
    assert failure_trail(odd()).endswith("Odd\ufffdError")


class _HidesItsModule(type):
    @property
    def __module__(cls) -> str:  # type: ignore[override]
        raise AttributeError("__module__")


class NoModuleError(Exception, metaclass=_HidesItsModule):
    pass


def test_an_exception_class_that_names_no_module_is_named_bare() -> None:
    assert failure_summary(NoModuleError()) == "NoModuleError"
    assert failure_trail(NoModuleError()) == "NoModuleError"


def test_the_trail_keeps_the_innermost_frames_only() -> None:
    try:
        _raise(30)
    except LookupError as exc:
        trail = failure_trail(exc)
        three = failure_trail(exc, frames=3)
    steps = trail.split(" <- ")[1:]
    assert len(steps) == 12  # the default: the last 12 frames
    assert all(step.endswith(" in _raise") for step in steps)
    assert three.split(" <- ")[1:] == steps[:3]


def test_the_trail_names_an_implicit_context_too() -> None:
    try:
        try:
            _raise(0)
        except LookupError:
            raise RuntimeError(SECRET)  # noqa: B904 -- the implicit context on purpose
    except RuntimeError as exc:
        assert failure_trail(exc).endswith("; while handling LookupError")
