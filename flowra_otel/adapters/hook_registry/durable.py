"""The trace link of a durable run in flowra 0.0.3 - 0.0.8's session storage (``durable_link``).

It is kept as the state of one extra node key per run beside flowra's own node states:
``__flowra_otel.`` and the run's root node id (``r<run number>``, which a resume restores), so a
later run of the same session never reads an earlier run's link (nor its conversation id).
These releases' storage can only add and merge node state, never delete it: each run's link
stays behind, under a key no other run reads.
"""

from __future__ import annotations

from typing import Any, Final

from flowra.runtime.storage import ChangeSet

KEY_PREFIX: Final = "__flowra_otel."
"""The node-state key prefix in the session storage. flowra's node keys are node ids (``r1``,
``r1.0``) and storage keys; the only ``__`` key it uses itself is ``__meta`` (its run counter)."""


class NodeStateLinkStore:
    """``durable_link.LinkStore`` on a flowra 0.0.3 - 0.0.8 ``SessionStorage``, for one run.

    A resumed run knows its root node id before it starts (the execution snapshot); a new run
    learns it when its root agent starts (``bind``): nothing is saved or loaded before.
    """

    __slots__ = ("key", "storage")

    def __init__(self, storage: Any, run_id: str | None = None) -> None:
        self.storage = storage
        self.key: str | None = KEY_PREFIX + run_id if run_id else None

    def bind(self, run_id: str) -> None:
        """The run's root node id, once known (the first binding holds)."""
        if self.key is None and run_id:
            self.key = KEY_PREFIX + run_id

    async def save(self, state: dict[str, Any]) -> None:
        if self.key is None:
            return
        async with self.storage.begin_transaction():
            await self.storage.save_node_state(self.key, ChangeSet(scalars=state, appends={}))

    async def load(self) -> dict[str, Any] | None:
        if self.key is None:
            return None
        state = await self.storage.load_node_state(self.key)
        return dict(state) if isinstance(state, dict) else None
