"""The trace link of a durable run in flowra 0.0.49 - 0.0.93's session storage (``durable_link``).

It is kept in the storage's *ephemeral* state under a key of its own per run (``__flowra_otel.``
and the run's root node id, which a resume restores): flowra clears ephemeral state when a run
completes, so a link never outlives the run it belongs to, and a later run never reads it.
flowra 0.0.47 - 0.0.48 have no ephemeral state (``_flowra.EPHEMERAL_STATE``): no link is kept
there, and a resumed run starts a trace of its own.
"""

from __future__ import annotations

from typing import Any, Final

from flowra.agent import ChangeSet

KEY_PREFIX: Final = "__flowra_otel."
"""flowra's ephemeral keys are node ids (``r1``, ``r1.0``): this prefix can never be one."""


class EphemeralLinkStore:
    """``durable_link.LinkStore`` on a flowra 0.0.49 - 0.0.93 ``SessionStorage``."""

    __slots__ = ("key", "storage")

    def __init__(self, storage: Any, root_node_id: str) -> None:
        self.storage = storage
        self.key = KEY_PREFIX + root_node_id

    async def save(self, state: dict[str, Any]) -> None:
        async with self.storage.begin_transaction():
            await self.storage.save_ephemeral(self.key, ChangeSet(scalars=state, appends={}))

    async def load(self) -> dict[str, Any] | None:
        state = await self.storage.load_ephemeral(self.key)
        return dict(state) if isinstance(state, dict) else None
