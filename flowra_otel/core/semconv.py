"""Every attribute key, span name part and well-known value this package writes.

Why one module: the GenAI semantic conventions are still in Development and keep renaming
things (``cache_creation`` became ``cache_write``, the token metric was split, ...). With every
key here, following a rename is a one-line change, and tests import the same names.

GenAI keys come from ``opentelemetry-semantic-conventions`` (the released 1.41 set, still shipped
as plain string constants by later releases) where it has them; the few it lacks are spelled
here as in the semantic-conventions-genai repository. Our own keys share the ``flowra.`` prefix.

The target is semantic-conventions-genai ``fe5608e`` plus the merged changes #440 (cache writes are
``cache_write``), #469 (no cache counts on the internal ``invoke_agent`` span), #410 and #363
(``finish_reason`` inside output messages deprecated): see ``tests/semconv/PROVENANCE.md``. The
names those changes replaced are kept below as ``LEGACY_*``: written only when a user asks for
them (``OtelHooks(semconv_compat=True)`` or ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental/dup``).
"""

from __future__ import annotations

from typing import Final

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _g
from opentelemetry.semconv.attributes import error_attributes as _err

SCHEMA_URL: Final = "https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev"
"""Unchanged by the four merged changes: upstream ``model/manifest.yaml`` still declared
``gen-ai-dev/1.42.0-dev`` in October 2026 (the repository has no release yet)."""
INSTRUMENTATION_NAME: Final = "flowra_otel"

# --- operations -------------------------------------------------------------------------------
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_CHAT: Final = "chat"
OP_EXECUTE_TOOL: Final = "execute_tool"

# --- GenAI attribute keys (semantic conventions) ----------------------------------------------
GEN_AI_OPERATION_NAME: Final[str] = _g.GEN_AI_OPERATION_NAME
GEN_AI_PROVIDER_NAME: Final[str] = _g.GEN_AI_PROVIDER_NAME
GEN_AI_AGENT_NAME: Final[str] = _g.GEN_AI_AGENT_NAME
GEN_AI_AGENT_DESCRIPTION: Final[str] = _g.GEN_AI_AGENT_DESCRIPTION
GEN_AI_CONVERSATION_ID: Final[str] = _g.GEN_AI_CONVERSATION_ID
GEN_AI_REQUEST_MODEL: Final[str] = _g.GEN_AI_REQUEST_MODEL
GEN_AI_REQUEST_TEMPERATURE: Final[str] = _g.GEN_AI_REQUEST_TEMPERATURE
GEN_AI_REQUEST_MAX_TOKENS: Final[str] = _g.GEN_AI_REQUEST_MAX_TOKENS
GEN_AI_REQUEST_TOP_P: Final[str] = _g.GEN_AI_REQUEST_TOP_P
GEN_AI_REQUEST_STOP_SEQUENCES: Final[str] = _g.GEN_AI_REQUEST_STOP_SEQUENCES
GEN_AI_REQUEST_STREAM: Final[str] = _g.GEN_AI_REQUEST_STREAM
GEN_AI_OUTPUT_TYPE: Final[str] = _g.GEN_AI_OUTPUT_TYPE
GEN_AI_RESPONSE_FINISH_REASONS: Final[str] = _g.GEN_AI_RESPONSE_FINISH_REASONS
GEN_AI_RESPONSE_MODEL: Final[str] = _g.GEN_AI_RESPONSE_MODEL
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final[str] = _g.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK
GEN_AI_USAGE_INPUT_TOKENS: Final[str] = _g.GEN_AI_USAGE_INPUT_TOKENS
GEN_AI_USAGE_OUTPUT_TOKENS: Final[str] = _g.GEN_AI_USAGE_OUTPUT_TOKENS
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final[str] = _g.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS: Final = "gen_ai.usage.cache_write.input_tokens"
"""#440: input tokens written to a provider-managed cache (before: ``cache_creation``)."""
LEGACY_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final[str] = _g.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
"""The name #440 replaced; written beside ``cache_write`` only in compatibility mode."""
GEN_AI_RESPONSE_ID: Final[str] = _g.GEN_AI_RESPONSE_ID
GEN_AI_AGENT_VERSION: Final[str] = _g.GEN_AI_AGENT_VERSION
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
USER_ID: Final = "user.id"
"""The core (not GenAI) convention for the user a run serves; the GenAI model defines none."""
GEN_AI_TOOL_NAME: Final[str] = _g.GEN_AI_TOOL_NAME
GEN_AI_TOOL_CALL_ID: Final[str] = _g.GEN_AI_TOOL_CALL_ID
GEN_AI_TOOL_TYPE: Final[str] = _g.GEN_AI_TOOL_TYPE
GEN_AI_TOOL_DESCRIPTION: Final[str] = _g.GEN_AI_TOOL_DESCRIPTION
GEN_AI_TOOL_CALL_ARGUMENTS: Final[str] = _g.GEN_AI_TOOL_CALL_ARGUMENTS
GEN_AI_TOOL_CALL_RESULT: Final[str] = _g.GEN_AI_TOOL_CALL_RESULT
GEN_AI_INPUT_MESSAGES: Final[str] = _g.GEN_AI_INPUT_MESSAGES
GEN_AI_OUTPUT_MESSAGES: Final[str] = _g.GEN_AI_OUTPUT_MESSAGES
GEN_AI_SYSTEM_INSTRUCTIONS: Final[str] = _g.GEN_AI_SYSTEM_INSTRUCTIONS
GEN_AI_TOOL_DEFINITIONS: Final[str] = _g.GEN_AI_TOOL_DEFINITIONS
GEN_AI_TOKEN_TYPE: Final[str] = _g.GEN_AI_TOKEN_TYPE
ERROR_TYPE: Final[str] = _err.ERROR_TYPE

# Content written to storage by reference (opentelemetry-util-genai's upload completion hook names).
GEN_AI_INPUT_MESSAGES_REF: Final = "gen_ai.input.messages_ref"
GEN_AI_OUTPUT_MESSAGES_REF: Final = "gen_ai.output.messages_ref"
GEN_AI_SYSTEM_INSTRUCTIONS_REF: Final = "gen_ai.system_instructions_ref"
GEN_AI_TOOL_DEFINITIONS_REF: Final = "gen_ai.tool.definitions_ref"

EVENT_INFERENCE_DETAILS: Final = "gen_ai.client.inference.operation.details"
"""The event (a log record) that carries one inference's details, content included (events.yaml)."""

TOOL_TYPE_FUNCTION: Final = "function"
TOKEN_TYPE_INPUT: Final = "input"
TOKEN_TYPE_OUTPUT: Final = "output"

# --- flowra's own keys -------------------------------------------------------------------------
FLOWRA_AGENT_PATH: Final = "flowra.agent.path"
"""Registry path of the tool-loop agent behind an ``invoke_agent`` span (e.g. ``chat/tool_loop``)."""
FLOWRA_NODE_ID: Final = "flowra.node.id"
"""Engine node id (``r1``, ``r1.0.2`` ...) of the node that emitted the span's events."""
FLOWRA_TOOL_LOOP_STATUS: Final = "flowra.tool_loop.status"
FLOWRA_TOOL_LOOP_ITERATIONS: Final = "flowra.tool_loop.iterations"
FLOWRA_END_REASON: Final = "flowra.end_reason"
"""Why a span ended early: ``interrupted``, ``cancelled``, ``timed_out``, ``error`` or ``run_ended``."""
FLOWRA_LLM_MODEL: Final = "flowra.llm.model"
"""The model string exactly as given to flowra (``anthropic/sonnet-4-5``)."""
FLOWRA_USAGE_COST_USD: Final = "flowra.usage.cost_usd"
"""Cost in USD as flowra's pricing tables report it: per call on ``chat``, the run's total on ``invoke_agent``."""
FLOWRA_TOOL_REQUESTED_NAME: Final = "flowra.tool.requested_name"
"""Content (capture on only): the name the model asked for when it is not a tool the request offered."""
FLOWRA_ERROR_KIND: Final = "flowra.error.kind"
"""``provider_errors.ErrorKind`` of a failure. Own namespace: ``error.type`` keeps the exception's
qualified name and has no well-known values for rate limits or timeouts."""
FLOWRA_ERROR_RETRYABLE: Final = "flowra.error.retryable"
"""bool; omitted when the kind is unknown. No convention exists for retryability yet."""
FLOWRA_ERROR_RETRY_AFTER: Final = "flowra.error.retry_after"
"""double, seconds. The conventions only offer ``http.response.header.retry-after`` (the raw header,
which may be an HTTP date), so the parsed delay gets its own name."""
FLOWRA_ERROR_REQUEST_ID: Final = "flowra.error.request_id"
"""The provider's request id, for support tickets (``gen_ai.response.id`` is the completion's id)."""
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"
"""The stable HTTP convention (int), reused as is."""

INVENTED_TOOL_NAME: Final = "_unknown_tool"
"""Span name target, ``gen_ai.tool.name`` and metric attribute of a tool the model named but the
request did not offer: model output, so it is content, and an unbounded metric series."""

# --- OpenInference aliases (opt-in, for Phoenix / Arize) ---------------------------------------
OI_INPUT_VALUE: Final = "input.value"
OI_INPUT_MIME_TYPE: Final = "input.mime_type"
OI_OUTPUT_VALUE: Final = "output.value"
OI_OUTPUT_MIME_TYPE: Final = "output.mime_type"
OI_TOKEN_COUNT_KEYS: Final = ("llm.token_count.prompt", "llm.token_count.completion", "llm.token_count.total")
MIME_JSON: Final = "application/json"
FLOWRA_TOOL_IS_ERROR: Final = "flowra.tool.is_error"
FLOWRA_TOOL_ERROR_KIND: Final = "flowra.tool.error_kind"
"""flowra 0.0.86+: the ``ToolErrorKind`` of a failed call (``execution``, ``unknown_tool`` ...)."""
FLOWRA_TOOL_PREFILLED: Final = "flowra.tool.prefilled"
"""flowra 0.0.92+: true for a call a ``BeforeToolCallsEvent`` hook answered; the tool did not run."""
FLOWRA_TOOL_CUT_OFF: Final = "flowra.tool.cut_off"
"""true for a call the response cut off (e.g. at ``max_tokens``): answered with an error, never run."""
FLOWRA_AGENT_RESUMED: Final = "flowra.agent.resumed"
"""true on an ``invoke_agent`` span that continues an agent a durable run had started before."""

END_INTERRUPTED: Final = "interrupted"
END_CANCELLED: Final = "cancelled"
END_TIMED_OUT: Final = "timed_out"
END_ERROR: Final = "error"
END_RUN_ENDED: Final = "run_ended"

ERROR_TYPE_TOOL: Final = "tool_error"
"""``error.type`` of an ``execute_tool`` span whose result came back with ``is_error``."""
ERROR_TYPE_OTHER: Final = "_OTHER"

# --- well-known gen_ai.provider.name values, keyed by flowra's "vendor/" model prefix ----------
PROVIDER_BY_VENDOR: Final[dict[str, str]] = {
    "anthropic": "anthropic",
    "claude": "anthropic",
    "openai": "openai",
    "gpt": "openai",
    "azure": "azure.ai.openai",
    "azure_openai": "azure.ai.openai",
    "azure-openai": "azure.ai.openai",
    "azure_inference": "azure.ai.inference",
    "bedrock": "aws.bedrock",
    "aws": "aws.bedrock",
    "google": "gcp.gen_ai",
    "gcp": "gcp.gen_ai",
    "gemini": "gcp.gemini",
    "vertex": "gcp.vertex_ai",
    "vertex_ai": "gcp.vertex_ai",
    "cohere": "cohere",
    "deepseek": "deepseek",
    "groq": "groq",
    "ibm": "ibm.watsonx.ai",
    "watsonx": "ibm.watsonx.ai",
    "mistral": "mistral_ai",
    "mistral_ai": "mistral_ai",
    "moonshot": "moonshot_ai",
    "moonshot_ai": "moonshot_ai",
    "perplexity": "perplexity",
    "xai": "x_ai",
    "x_ai": "x_ai",
    "grok": "x_ai",
}
PROVIDER_BY_FLOWRA_CLASS: Final[dict[str, str]] = {
    "OpenAIProvider": "openai",
    "AnthropicVertexProvider": "gcp.vertex_ai",
    "GoogleVertexProvider": "gcp.vertex_ai",
    "AnthropicProvider": "anthropic",
    "AnthropicBedrockProvider": "aws.bedrock",
    "OpenAIResponsesProvider": "openai",
}
"""flowra's own provider classes, for models named without a vendor prefix."""
UNKNOWN_PROVIDER: Final = "unknown"
"""A custom value (the conventions define no fallback; ``_OTHER`` is for ``error.type`` only)."""

# --- flowra StopReason value -> semconv finish reason -------------------------------------------
FINISH_REASON_BY_STOP_REASON: Final[dict[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_call",
    "schema_validation_failed": "error",
    "other": "other",
    "refusal": "content_filter",
}
