"""The README's complete app runs, unchanged, on the flowra line it is shown for, against a loopback
OpenAI (tests/fake_model_api.py; the real ``openai`` client and flowra's own ``OpenAIProvider``,
pointed there by ``OPENAI_BASE_URL``): it answers, and with no ``OTEL_*`` variable its run prints as a
tree. The README's first app is today's flowra's (``runtime.hooks``), the second the ``HookRegistry``
line's (with the one change the README names for 0.0.3 and 0.0.4); this module runs on every era
boundary of both lines, so the range the README states for each is the range this proves (a run
of it on every release 0.0.56 - 0.0.93 found the same); on 0.0.47 - 0.0.55 it runs with exactly the
changes the README names for them (the provider as a service; 0.0.47's ``ChatSpec``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Final

from flowra_otel.adapters import flowra_version
from tests.both_lines.line import S
from tests.examples_run import ROOT
from tests.fake_model_api import FakeOpenAI, openai_text

APP_BLOCK: Final = re.compile(r"```python\n(import asyncio\n.*?asyncio\.run\(main\(\)\)\n)```", re.DOTALL)


def readme_apps() -> list[str]:
    """The README's complete apps, in order (each a block that starts ``import asyncio``)."""
    return APP_BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8"))


def run_app(code: str) -> subprocess.CompletedProcess[str]:
    with FakeOpenAI() as openai:
        openai.replies.append(openai_text("Hello! How can I help?", model="gpt-4o"))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
        env.update(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=openai.url + "/v1")
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert openai.requests, proc.stderr  # the app reached the model
        return proc


def test_the_readme_shows_one_app_per_line() -> None:
    apps = readme_apps()
    assert len(apps) == 2
    assert "flowra.lib.chat" in apps[0] and "flowra.lib.tool_loop" in apps[1]


STARTS_AT_A_STEP: Final = ("0.0.3", "0.0.4")
"""The README says it: on these, ``runtime.run`` also takes ``step="start"``."""
RUN_CALL: Final = 'spec=ToolLoopSpec(user_message="Hello!"))'
PROVIDER_AS_SERVICE: Final = (
    ('llm_config=LLMConfig(provider=provider, model="gpt-4o"),', 'llm_config=LLMConfig(model="gpt-4o"),'),
    ("services={\n", "services={\n                LLMProvider: provider,\n"),
    ("from flowra.llm import SystemMessage", "from flowra.llm import LLMProvider, SystemMessage"),
)
"""What the README says to write on 0.0.47 - 0.0.55, whose ``LLMConfig`` has no ``provider``."""
SPEC_0047: Final = ('spec=ChatSpec.text("Hello!")', 'spec=ChatSpec(user_message="Hello!")')


def in_the_readmes_words_for_this_release(app: str) -> str:
    """The first app with the changes the README names for flowra 0.0.47 - 0.0.55 (none on 0.0.56+)."""
    from flowra.lib import LLMConfig
    from flowra.lib.chat import ChatSpec

    if "provider" not in LLMConfig.__dataclass_fields__:
        for old, new in PROVIDER_AS_SERVICE:
            assert old in app
            app = app.replace(old, new)
    if "messages" not in ChatSpec.__dataclass_fields__:
        assert SPEC_0047[0] in app
        app = app.replace(*SPEC_0047)
    return app


def test_the_readme_app_of_this_line_runs_unchanged() -> None:
    app = readme_apps()[0 if S.LINE == "runtime_hooks" else 1]
    if flowra_version() in STARTS_AT_A_STEP:
        assert RUN_CALL in app
        app = app.replace(RUN_CALL, RUN_CALL[:-1] + ', step="start")')
    if S.LINE == "runtime_hooks":
        app = in_the_readmes_words_for_this_release(app)
    proc = run_app(app)
    assert proc.returncode == 0, proc.stderr
    assert "Hello! How can I help?" in proc.stdout
    assert "invoke_agent" in proc.stdout and "chat gpt-4o" in proc.stdout  # the trace, as a tree on stdout
