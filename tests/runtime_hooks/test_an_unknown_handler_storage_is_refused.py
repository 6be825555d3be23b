"""The plugin reads flowra's handler storage only where it knows it; any other is refused untouched.

``HooksImpl`` keeps its handlers in one of two known storages across 0.0.47 - 0.0.93
(``_flowra.SUBSCRIPTIONS``, 0.0.56+; ``_flowra.HANDLER_LISTS``, 0.0.47 - 0.0.55), and the emit
patch reads it on every emit: a patch that read the wrong one would fail every run of the app.
So the storage is read once, exactly (the group's fields, their types, where a subscribed handler
lands, ``__resolve``'s parameters), and a third is refused before anything is patched.

The third storage is made in a process of its own, on the installed release: flowra's
``_HandlerGroup`` given one more field before the plugin is imported (as a future flowra might).
There, setting up tracing (``OtelHooks()``, ``FlowraInstrumentor().instrument()``) raises a
``TypeError`` naming both known storages, ``HooksImpl.emit`` and ``AgentRuntime.__init__`` stay
flowra's, and the app's run gives what it gave before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from flowra_otel.adapters.runtime_hooks import _flowra
from tests.runtime_hooks.support import HANDLER_STORAGE

ROOT = Path(__file__).resolve().parents[2]

THIRD_STORAGE_APP = """
import asyncio, json
import flowra.agent.flow.hooks as flowra_hooks
from flowra.agent import AgentRuntime


class _HandlerGroup(flowra_hooks._HandlerGroup):
    __slots__ = ("priorities",)

    def __init__(self):
        super().__init__()
        self.priorities = {}


flowra_hooks._HandlerGroup = _HandlerGroup
emit, init = flowra_hooks.HooksImpl.__dict__["emit"], AgentRuntime.__dict__["__init__"]

from flowra_otel import OtelHooks
from flowra_otel.instrumentor import FlowraInstrumentor
from tests.runtime_hooks.support import ScriptedProvider, chat_runtime, run_chat, text_response


async def answer():
    return (await run_chat(chat_runtime(ScriptedProvider(text_response("Hello."))))).response


async def main():
    before = await answer()
    errors = []
    for set_up in (OtelHooks, lambda: FlowraInstrumentor().instrument()):
        try:
            set_up()
        except TypeError as error:
            errors.append(str(error))
    untouched = flowra_hooks.HooksImpl.__dict__["emit"] is emit and AgentRuntime.__dict__["__init__"] is init
    print(json.dumps({"before": before, "after": await answer(), "errors": errors, "untouched": untouched}))


asyncio.run(main())
"""


def test_this_releases_storage_is_known_and_read_as_the_tests_facts_say() -> None:
    assert _flowra.emit_shape_missing() == []
    expected = _flowra.SUBSCRIPTIONS if "global_subscriptions" in HANDLER_STORAGE else _flowra.HANDLER_LISTS
    assert _flowra.STORAGE is expected
    assert set(HANDLER_STORAGE) == set(expected.attributes)


def test_a_third_storage_is_refused_and_the_app_runs_as_before(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(THIRD_STORAGE_APP), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run(
        [sys.executable, "-W", "error", str(app)],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report["before"] == report["after"] == "Hello."
    assert report["untouched"] is True
    known = " or ".join(s.describe() for s in (_flowra.SUBSCRIPTIONS, _flowra.HANDLER_LISTS))
    assert (
        report["errors"]
        == [
            f"flowra_otel cannot trace this flowra: its HooksImpl lacks a known handler storage ({known}) "
            "(flowra 0.0.47 - 0.0.93 expected); nothing was patched"
        ]
        * 2
    )
