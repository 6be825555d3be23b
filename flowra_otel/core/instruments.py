"""The GenAI metric instruments, with the bucket boundaries the semantic conventions advise, and
the one place where an ended invocation becomes metric records.

Metrics are recorded whether or not a span is sampled: dashboards must not depend on the
trace sampling rate. The invocation objects call the ``record_*`` methods once each, after their
span has ended, so a failing metric record can never keep a span open.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from opentelemetry.metrics import Counter, Histogram, Meter
from opentelemetry.util.types import AttributeValue

from . import semconv

type MetricAttributes = dict[str, AttributeValue]
type ChatMetricAttributes = tuple[MetricAttributes, MetricAttributes, MetricAttributes]
"""(base, input-token, output-token) attribute dicts of one chat's metric records."""

DURATION_BUCKETS: Final = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
AGENT_DURATION_BUCKETS: Final = [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6]
TOKEN_BUCKETS: Final = [
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
]
COUNT_BUCKETS: Final = [1, 2, 4, 8, 16, 32, 64, 128]

GEN_AI_CLIENT_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
GEN_AI_CLIENT_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"
GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK: Final = "gen_ai.client.operation.time_per_output_chunk"
GEN_AI_INVOKE_AGENT_DURATION: Final = "gen_ai.invoke_agent.duration"
GEN_AI_INVOKE_AGENT_INFERENCE_CALLS: Final = "gen_ai.invoke_agent.inference_calls"
GEN_AI_INVOKE_AGENT_TOOL_CALLS: Final = "gen_ai.invoke_agent.tool_calls"
GEN_AI_EXECUTE_TOOL_DURATION: Final = "gen_ai.execute_tool.duration"
FLOWRA_TOOL_ERRORS: Final = "flowra.tool.errors"
FLOWRA_COST: Final = "flowra.usage.cost"
FLOWRA_REDACTIONS: Final = "flowra.redactions"


class Instruments:
    """One set of instruments per ``OtelHooks`` (per meter provider)."""

    __slots__ = (
        "_chat_attrs",
        "_tool_attrs",
        "agent_duration",
        "agent_inference_calls",
        "agent_tool_calls",
        "cost",
        "enabled",
        "operation_duration",
        "redactions",
        "time_per_output_chunk",
        "time_to_first_chunk",
        "token_usage",
        "tool_duration",
        "tool_errors",
    )

    def __init__(self, meter: Meter, *, enabled: bool = True) -> None:
        self.enabled = enabled  # False: metrics off; the invocations record nothing at all
        self._chat_attrs: dict[tuple[Any, ...], tuple[MetricAttributes, MetricAttributes, MetricAttributes]] = {}
        self._tool_attrs: dict[tuple[Any, ...], MetricAttributes] = {}
        self.token_usage: Histogram = meter.create_histogram(
            GEN_AI_CLIENT_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used per LLM call.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.operation_duration: Histogram = meter.create_histogram(
            GEN_AI_CLIENT_OPERATION_DURATION,
            unit="s",
            description="Duration of LLM calls.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.time_to_first_chunk: Histogram = meter.create_histogram(
            GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK,
            unit="s",
            description="Time from the start of a streaming LLM call to its first chunk.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.time_per_output_chunk: Histogram = meter.create_histogram(
            GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK,
            unit="s",
            description="Time between consecutive chunks of a streaming LLM call, after the first.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.agent_duration: Histogram = meter.create_histogram(
            GEN_AI_INVOKE_AGENT_DURATION,
            unit="s",
            description="Duration of agent invocations (one flowra tool-loop run).",
            explicit_bucket_boundaries_advisory=AGENT_DURATION_BUCKETS,
        )
        self.agent_inference_calls: Histogram = meter.create_histogram(
            GEN_AI_INVOKE_AGENT_INFERENCE_CALLS,
            unit="{inference_call}",
            description="LLM calls made by one agent invocation itself (not its sub-agents).",
            explicit_bucket_boundaries_advisory=COUNT_BUCKETS,
        )
        self.agent_tool_calls: Histogram = meter.create_histogram(
            GEN_AI_INVOKE_AGENT_TOOL_CALLS,
            unit="{tool_call}",
            description="Tool calls made by one agent invocation itself.",
            explicit_bucket_boundaries_advisory=COUNT_BUCKETS,
        )
        self.tool_duration: Histogram = meter.create_histogram(
            GEN_AI_EXECUTE_TOOL_DURATION,
            unit="s",
            description="Duration of tool executions, hooks included.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.tool_errors: Counter = meter.create_counter(
            FLOWRA_TOOL_ERRORS,
            unit="{tool_call}",
            description="Tool calls whose result came back as an error.",
        )
        self.cost: Counter = meter.create_counter(
            FLOWRA_COST,
            unit="USD",
            description="LLM cost as reported by flowra's pricing tables.",
        )
        self.redactions: Counter = meter.create_counter(
            FLOWRA_REDACTIONS,
            unit="{redaction}",
            description="Tool arguments or results changed by a hook before they were recorded.",
        )

    def record_chat(
        self,
        base: ChatMetricAttributes,
        *,
        duration_s: float,
        error: Mapping[str, AttributeValue] | None,
        first_chunk_s: float | None,
        input_tokens: int | None,
        output_tokens: int | None,
        cost_usd: float | None,
    ) -> None:
        """One LLM call's records; ``error``: ``error.type`` (and its kind) when it failed."""
        attrs, input_attrs, output_attrs = base
        self.operation_duration.record(duration_s, attrs if error is None else {**attrs, **error})
        if first_chunk_s is not None:
            self.time_to_first_chunk.record(first_chunk_s, attrs)
        if input_tokens is not None:
            self.token_usage.record(input_tokens, input_attrs)
        if output_tokens is not None:
            self.token_usage.record(output_tokens, output_attrs)
        if cost_usd is not None and cost_usd > 0:  # a counter refuses a negative amount
            self.cost.add(cost_usd, attrs)

    def record_tool(
        self,
        tool_name: str,
        agent_name: str,
        extra: Mapping[str, AttributeValue],
        *,
        duration_s: float,
        error_type: str | None,
        result_error: bool = False,
    ) -> None:
        """``result_error``: the call returned an error result (counted in ``flowra.tool.errors``
        whatever its ``error.type``: an MCP call's may be a JSON-RPC code)."""
        key = (tool_name, agent_name, error_type, *extra.items()) if extra else (tool_name, agent_name, error_type)
        attrs = self._tool_attrs.get(key)
        if attrs is None:  # built once per tool, agent, outcome and extra attributes; never mutated after
            attrs = {
                semconv.GEN_AI_TOOL_NAME: tool_name,
                semconv.GEN_AI_TOOL_TYPE: semconv.TOOL_TYPE_FUNCTION,
                semconv.GEN_AI_AGENT_NAME: agent_name,
                **extra,
            }
            if error_type is not None:
                attrs[semconv.ERROR_TYPE] = error_type
            if len(self._tool_attrs) < 1024:
                self._tool_attrs[key] = attrs
        self.tool_duration.record(duration_s, attrs)
        if result_error or error_type == semconv.ERROR_TYPE_TOOL:
            self.tool_errors.add(1, {semconv.GEN_AI_TOOL_NAME: tool_name, **extra})

    def record_agent(
        self,
        agent_name: str,
        model: str | None,
        extra: Mapping[str, AttributeValue],
        *,
        duration_s: float,
        error: Mapping[str, AttributeValue] | None,
        inference_calls: int,
        tool_calls: int,
    ) -> None:
        attrs: MetricAttributes = {semconv.GEN_AI_AGENT_NAME: agent_name, **extra}
        if model is not None:
            attrs[semconv.GEN_AI_REQUEST_MODEL] = model
        if error is not None:
            attrs.update(error)
        self.agent_duration.record(duration_s, attrs)
        count_attrs: MetricAttributes = {semconv.GEN_AI_AGENT_NAME: agent_name, **extra}
        self.agent_inference_calls.record(inference_calls, count_attrs)
        self.agent_tool_calls.record(tool_calls, count_attrs)

    def record_redaction(self, tool_name: str, field: str, extra: Mapping[str, AttributeValue]) -> None:
        self.redactions.add(1, {semconv.GEN_AI_TOOL_NAME: tool_name, "flowra.redaction.field": field, **extra})

    def chat_attributes(
        self, provider: str, model: str, agent_name: str | None, extra: Mapping[str, AttributeValue]
    ) -> ChatMetricAttributes:
        """(base, input-token, output-token) attributes of a chat's metrics, built once per
        provider, model, agent and extra attributes (all low-cardinality); never mutated after."""
        key = (provider, model, agent_name, *extra.items()) if extra else (provider, model, agent_name)
        cached = self._chat_attrs.get(key)
        if cached is None:
            base: MetricAttributes = {
                semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
                semconv.GEN_AI_PROVIDER_NAME: provider,
                semconv.GEN_AI_REQUEST_MODEL: model,
                **extra,
            }
            if agent_name:
                base[semconv.GEN_AI_AGENT_NAME] = agent_name
            cached = (
                base,
                {**base, semconv.GEN_AI_TOKEN_TYPE: semconv.TOKEN_TYPE_INPUT},
                {**base, semconv.GEN_AI_TOKEN_TYPE: semconv.TOKEN_TYPE_OUTPUT},
            )
            if len(self._chat_attrs) < 1024:
                self._chat_attrs[key] = cached
        return cached
