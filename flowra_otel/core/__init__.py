"""The framework-neutral core: OpenTelemetry and the GenAI conventions, no flowra.

The invocation objects (``agent_invocation``, ``chat_invocation``, ``tool_invocation``) own each
span's life; the content pipeline (``content``, ``bounded_json``), the redaction ledger
(``redaction``, ``field_tracker``), the conventions (``semconv``, ``attributes``), metrics
(``instruments``), provider-failure taxonomy (``provider_errors``, ``errors``), options
(``options``, ``telemetry``), the durable trace link (``durable_link``), and the export side
(``export``, ``console``, ``audit``, ``secret_scan``, ``testing``) live here. What they need to
know of flowra's values reaches them from an adapter: duck-typed fields both flowra lines share,
or a ``content.MessageReader``.
"""
