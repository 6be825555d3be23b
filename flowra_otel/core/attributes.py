"""Pure functions from flowra's LLM values to GenAI semantic-convention attributes.

Kept free of span and run state so each mapping can be read (and tested) on its own, and so the
hot path builds each attribute dict exactly once. Values are read by attribute name only: the
requests, responses and usage objects of both flowra API lines have these fields, and odd values
(None, strings, NaN) cost a number, never the span.
"""

from __future__ import annotations

import enum
import math
import sys
from typing import Any, Final

from opentelemetry.util.types import AttributeValue

from . import semconv
from .safety import INT64_MAX, safe_float, safe_int, safe_str, utf8_safe

type Attributes = dict[str, AttributeValue]

_FINISH_MEMO: dict[Any, str] = {}
_MEMO_SIZE: Final = 64


def finish_reason(stop_reason: Any) -> str:
    """flowra ``StopReason`` -> semconv finish reason (``stop``, ``length``, ``tool_call`` ...).

    Remembered per enum member: every response flowra makes costs one dict lookup."""
    try:
        return _FINISH_MEMO[stop_reason]
    except (KeyError, TypeError):  # a first sighting, or an unhashable odd value
        pass
    value = safe_str(getattr(stop_reason, "value", stop_reason))
    reason = semconv.FINISH_REASON_BY_STOP_REASON.get(value) or utf8_safe(value)
    if isinstance(stop_reason, enum.Enum) and len(_FINISH_MEMO) < _MEMO_SIZE:
        _FINISH_MEMO[stop_reason] = reason
    return reason


def chat_start_attributes(request: Any, provider: str, model: str, *, streaming: bool) -> Attributes:
    """Attributes known before the call; passed at span start so samplers can see them."""
    attrs: Attributes = {
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
        semconv.GEN_AI_PROVIDER_NAME: provider,
        semconv.GEN_AI_REQUEST_MODEL: model,
        semconv.FLOWRA_LLM_MODEL: safe_str(request.model),
    }
    temperature = safe_float(request.temperature)
    if temperature is not None:
        attrs[semconv.GEN_AI_REQUEST_TEMPERATURE] = temperature
    top_p = safe_float(getattr(request, "top_p", None))
    if top_p is not None:
        attrs[semconv.GEN_AI_REQUEST_TOP_P] = top_p
    if request.max_tokens is not None:
        attrs[semconv.GEN_AI_REQUEST_MAX_TOKENS] = safe_int(request.max_tokens)
    if request.stop_sequences:
        attrs[semconv.GEN_AI_REQUEST_STOP_SEQUENCES] = [safe_str(s) for s in request.stop_sequences]
    if request.json_schema is not None:
        attrs[semconv.GEN_AI_OUTPUT_TYPE] = "json"
    if streaming:
        attrs[semconv.GEN_AI_REQUEST_STREAM] = True
    return attrs


class TokenUsage:
    """A call's (or a run's) usage in semconv terms, read once from flowra's ``Usage``.

    flowra counts each token once (``input_tokens`` excludes cached ones); the conventions want
    input tokens to include cache reads and writes, with those two reported again as subsets
    (``cache_write`` is flowra's ``cache_creation_input_tokens``).
    Every field is read through ``safety``: a usage object with odd values (None, strings, NaN,
    negative counts) costs its numbers, never the span; counts (and their sums) are capped to
    int64, which OTLP can carry.
    """

    __slots__ = ("cache_read", "cache_write", "cost_usd", "input", "output")

    def __init__(self) -> None:
        self.input = 0
        self.output = 0
        self.cache_read = 0
        self.cache_write = 0
        self.cost_usd: float | None = None

    @classmethod
    def of(cls, usage: Any) -> TokenUsage | None:
        if usage is None:
            return None
        totals = cls()
        # flowra's own Usage holds ints (and a float or None for cost): read without a call each.
        cache_read = getattr(usage, "cache_read_input_tokens", 0)
        if type(cache_read) is not int or not 0 <= cache_read <= INT64_MAX:
            cache_read = token_count(cache_read)
        cache_creation = getattr(usage, "cache_creation_input_tokens", 0)
        if type(cache_creation) is not int or not 0 <= cache_creation <= INT64_MAX:
            cache_creation = token_count(cache_creation)
        input_tokens = getattr(usage, "input_tokens", 0)
        if type(input_tokens) is not int or not 0 <= input_tokens <= INT64_MAX:
            input_tokens = token_count(input_tokens)
        output = getattr(usage, "output_tokens", 0)
        totals.output = output if type(output) is int and 0 <= output <= INT64_MAX else token_count(output)
        totals.cache_read = cache_read
        totals.cache_write = cache_creation
        totals.input = min(input_tokens + cache_read + cache_creation, INT64_MAX)
        cost = getattr(usage, "cost_usd", None)
        totals.cost_usd = None if cost is None else safe_float(cost)
        return totals

    def add(self, other: TokenUsage) -> None:
        self.input = min(self.input + other.input, INT64_MAX)
        self.output = min(self.output + other.output, INT64_MAX)
        self.cache_read = min(self.cache_read + other.cache_read, INT64_MAX)
        self.cache_write = min(self.cache_write + other.cache_write, INT64_MAX)
        if other.cost_usd is not None:  # a finite sum, as every cost is (an overflow: the largest float)
            total = other.cost_usd + (self.cost_usd or 0.0)
            self.cost_usd = total if math.isfinite(total) else math.copysign(sys.float_info.max, total)


def token_count(value: object) -> int:
    """A token count spans and histograms accept: an int in ``[0, 2**63 - 1]``. A negative count
    (which a histogram refuses) or anything that is not a finite number counts as 0; a count
    beyond int64 (which OTLP cannot encode) is capped."""
    count = safe_int(value)
    return count if count >= 0 else 0


def usage_attributes(usage: TokenUsage, *, cache: bool = True, legacy: bool = False) -> Attributes:
    """Usage under the ``gen_ai.usage.*`` keys: a call's on ``chat``, the run's on ``invoke_agent``
    (the conventions put both there; a backend that sums model spans counts each token once).

    ``cache``: the cache read and write counts too (``chat``; since #469 not the internal
    ``invoke_agent`` span, which keeps the totals only). ``legacy`` (compatibility mode): also the
    names and places of the conventions before #440 / #469: ``cache_creation`` beside
    ``cache_write``, and the cache counts on ``invoke_agent`` under their old names."""
    attrs: Attributes = {
        semconv.GEN_AI_USAGE_INPUT_TOKENS: usage.input,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: usage.output,
    }
    if cache or legacy:
        if usage.cache_read:
            attrs[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cache_read
        if usage.cache_write:
            if cache:
                attrs[semconv.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS] = usage.cache_write
            if legacy:
                attrs[semconv.LEGACY_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_write
    if usage.cost_usd is not None:
        attrs[semconv.FLOWRA_USAGE_COST_USD] = usage.cost_usd
    return attrs


def chat_response_attributes(response: Any, usage: TokenUsage | None, *, legacy: bool = False) -> Attributes:
    attrs: Attributes = {semconv.GEN_AI_RESPONSE_FINISH_REASONS: [finish_reason(response.stop_reason)]}
    model = getattr(response, "model", None)  # flowra 0.0.82+: the model that served the call
    if type(model) is str and model:
        attrs[semconv.GEN_AI_RESPONSE_MODEL] = utf8_safe(model)
    if usage is not None:
        attrs.update(usage_attributes(usage, legacy=legacy))
    return attrs


def loop_result_attributes(status: Any, stop_reason: Any) -> Attributes:
    """A tool loop's (turn's) outcome: flowra's status and the final finish reason."""
    attrs: Attributes = {semconv.FLOWRA_TOOL_LOOP_STATUS: safe_str(getattr(status, "value", status))}
    if stop_reason is not None:
        attrs[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = [finish_reason(stop_reason)]
    return attrs


def tool_descriptions(tools: Any) -> dict[str, str]:
    """The tools a request offers: name -> description (``gen_ai.tool.description``)."""
    out: dict[str, str] = {}
    for tool in tools or ():
        name = getattr(tool, "name", None)
        if isinstance(name, str):
            description = getattr(tool, "description", None)
            out[name] = utf8_safe(description) if isinstance(description, str) else ""
    return out


def agent_config_attributes(llm_config: Any) -> Attributes:
    """An agent's own model settings, known before its first call (``gen_ai.request.*`` on
    ``invoke_agent``): a flowra tool loop has exactly one model per agent."""
    attrs: Attributes = {}
    model = getattr(llm_config, "model", None)
    if not isinstance(model, str) or not model:
        return attrs
    attrs[semconv.FLOWRA_LLM_MODEL] = utf8_safe(model)
    temperature = safe_float(getattr(llm_config, "temperature", None))
    if temperature is not None:
        attrs[semconv.GEN_AI_REQUEST_TEMPERATURE] = temperature
    max_tokens = getattr(llm_config, "max_tokens", None)
    if max_tokens is not None:
        attrs[semconv.GEN_AI_REQUEST_MAX_TOKENS] = safe_int(max_tokens)
    stop = getattr(llm_config, "stop_sequences", None)
    if stop:
        attrs[semconv.GEN_AI_REQUEST_STOP_SEQUENCES] = [safe_str(x) for x in stop]
    return attrs
