"""The trace link of a durable run in flowra 0.0.3 - 0.0.8's session storage (``durable_link``).

It is kept as the state of one extra node key beside flowra's own node states.
"""

from __future__ import annotations

from typing import Any, Final

from flowra.runtime.storage import ChangeSet

STATE_KEY: Final = "__flowra_otel"
"""The node-state key in the session storage. flowra's node keys are node ids and storage keys;
the only ``__`` key it uses itself is ``__meta`` (its run counter)."""


class NodeStateLinkStore:
    """``durable_link.LinkStore`` on a flowra 0.0.3 - 0.0.8 ``SessionStorage``."""

    __slots__ = ("storage",)

    def __init__(self, storage: Any) -> None:
        self.storage = storage

    async def save(self, state: dict[str, Any]) -> None:
        async with self.storage.begin_transaction():
            await self.storage.save_node_state(STATE_KEY, ChangeSet(scalars=state, appends={}))

    async def load(self) -> dict[str, Any] | None:
        state = await self.storage.load_node_state(STATE_KEY)
        return dict(state) if isinstance(state, dict) else None
