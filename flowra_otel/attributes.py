"""Pure functions from flowra's LLM types to GenAI semantic-convention attributes.

Kept free of span and run state so each mapping can be read (and tested) on its own, and so the
hot path builds each attribute dict exactly once.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.util.types import AttributeValue

from . import semconv
from ._flowra import LLMRequest, LLMResponse, ToolLoopResult, Usage

type Attributes = dict[str, AttributeValue]


def finish_reason(stop_reason: Any) -> str:
    """flowra ``StopReason`` -> semconv finish reason (``stop``, ``length``, ``tool_call`` ...)."""
    value = str(getattr(stop_reason, "value", stop_reason))
    return semconv.FINISH_REASON_BY_STOP_REASON.get(value, value)


def chat_start_attributes(request: LLMRequest, provider: str, model: str, *, streaming: bool) -> Attributes:
    """Attributes known before the call; passed at span start so samplers can see them."""
    attrs: Attributes = {
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
        semconv.GEN_AI_PROVIDER_NAME: provider,
        semconv.GEN_AI_REQUEST_MODEL: model,
        semconv.FLOWRA_LLM_MODEL: request.model,
    }
    if request.temperature is not None:
        attrs[semconv.GEN_AI_REQUEST_TEMPERATURE] = float(request.temperature)
    if request.max_tokens is not None:
        attrs[semconv.GEN_AI_REQUEST_MAX_TOKENS] = int(request.max_tokens)
    if request.stop_sequences:
        attrs[semconv.GEN_AI_REQUEST_STOP_SEQUENCES] = [str(s) for s in request.stop_sequences]
    if request.json_schema is not None:
        attrs[semconv.GEN_AI_OUTPUT_TYPE] = "json"
    if streaming:
        attrs[semconv.GEN_AI_REQUEST_STREAM] = True
    return attrs


def usage_attributes(usage: Usage) -> Attributes:
    """Per-call usage in semconv terms.

    flowra counts each token once (``input_tokens`` excludes cached ones); the conventions
    want ``gen_ai.usage.input_tokens`` to include cache reads and writes, with those two
    reported again as subsets.
    """
    cache_read = int(usage.cache_read_input_tokens or 0)
    cache_creation = int(usage.cache_creation_input_tokens or 0)
    attrs: Attributes = {
        semconv.GEN_AI_USAGE_INPUT_TOKENS: int(usage.input_tokens or 0) + cache_read + cache_creation,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: int(usage.output_tokens or 0),
    }
    if cache_read:
        attrs[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = cache_read
    if cache_creation:
        attrs[semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = cache_creation
    if usage.cost_usd is not None:
        attrs[semconv.FLOWRA_USAGE_COST_USD] = float(usage.cost_usd)
    return attrs


def total_input_tokens(usage: Usage) -> int:
    return (
        int(usage.input_tokens or 0)
        + int(usage.cache_read_input_tokens or 0)
        + int(usage.cache_creation_input_tokens or 0)
    )


def chat_response_attributes(response: LLMResponse) -> Attributes:
    attrs: Attributes = {semconv.GEN_AI_RESPONSE_FINISH_REASONS: [finish_reason(response.stop_reason)]}
    if response.usage is not None:
        attrs.update(usage_attributes(response.usage))
    return attrs


def agent_usage_attributes(usage: Usage) -> Attributes:
    """Run totals for ``invoke_agent``, under ``flowra.agent.usage.*``.

    Deliberately not the ``gen_ai.usage.*`` keys of the chat spans: backends that sum usage
    over a trace would otherwise count every token twice.
    """
    attrs: Attributes = {
        semconv.FLOWRA_AGENT_USAGE_INPUT_TOKENS: total_input_tokens(usage),
        semconv.FLOWRA_AGENT_USAGE_OUTPUT_TOKENS: int(usage.output_tokens or 0),
    }
    if usage.cache_read_input_tokens:
        attrs[semconv.FLOWRA_AGENT_USAGE_CACHE_READ_INPUT_TOKENS] = int(usage.cache_read_input_tokens)
    if usage.cache_creation_input_tokens:
        attrs[semconv.FLOWRA_AGENT_USAGE_CACHE_CREATION_INPUT_TOKENS] = int(usage.cache_creation_input_tokens)
    if usage.cost_usd is not None:
        attrs[semconv.FLOWRA_AGENT_USAGE_COST_USD] = float(usage.cost_usd)
    return attrs


def tool_loop_result_attributes(result: ToolLoopResult) -> Attributes:
    attrs: Attributes = {semconv.FLOWRA_TOOL_LOOP_STATUS: str(getattr(result.status, "value", result.status))}
    if result.stop_reason is not None:
        attrs[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = [finish_reason(result.stop_reason)]
    return attrs
