"""A missing real backend: skipped on a developer machine, a failure in CI (tests/backend_env.py)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from tests import backend_env
from tests.backend_env import MISSING_ENV, REQUIRE_ENV, home_releases, require_executable

MISSING = "FLOWRA_OTEL_TEST_NO_SUCH_BACKEND"


@pytest.fixture(autouse=True)
def plain_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CI", REQUIRE_ENV, MISSING_ENV, MISSING):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(backend_env, "on_home_release", lambda: True)


def test_the_home_releases_are_the_locked_flowra_and_the_old_lines_last() -> None:
    lock = (Path(__file__).resolve().parent.parent / "requirements" / "dev.lock").read_text(encoding="utf-8")
    match = re.search(r"^flowra==(\S+)$", lock, re.MULTILINE)
    assert match is not None
    assert home_releases() == {match.group(1), "0.0.8"}


def test_a_configured_executable_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MISSING, sys.executable)
    assert require_executable(MISSING, "python") == sys.executable


def test_missing_on_a_developer_machine_is_a_skip_that_says_why() -> None:
    with pytest.raises(pytest.skip.Exception, match=f"{MISSING} is not set: the thing is missing"):
        require_executable(MISSING, "the thing")


@pytest.mark.parametrize(
    ("variable", "value"), [("CI", "true"), (REQUIRE_ENV, "1"), (MISSING_ENV, "Collector/Jaeger")], ids=str
)
def test_missing_in_ci_is_a_failure(monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(pytest.fail.Exception, match="not skipping"):
        require_executable(MISSING, "the thing")


def test_not_an_executable_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plain = tmp_path / "not-executable"
    plain.write_text("")
    os.chmod(plain, 0o644)
    monkeypatch.setenv(MISSING, str(plain))
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="is not an executable file"):
        require_executable(MISSING, "the thing")


def test_releases_that_never_get_the_backends_skip_even_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """``./dev test`` hands the backends to the home releases only: CI must not fail the others."""
    monkeypatch.setattr(backend_env, "on_home_release", lambda: False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.skip.Exception, match="gives the backends to flowra"):
        require_executable(MISSING, "the thing")
    monkeypatch.setenv(REQUIRE_ENV, "1")  # ... unless asked for explicitly
    with pytest.raises(pytest.fail.Exception):
        require_executable(MISSING, "the thing")


def test_a_backend_dev_meant_for_another_release_fails_when_it_could_not_be_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``./dev`` gives the MCP server to two releases besides the home ones; when it could not build
    it, it says so to their runs (FLOWRA_OTEL_BACKENDS_MISSING), and their MCP tests fail, not skip."""
    monkeypatch.setattr(backend_env, "on_home_release", lambda: False)
    monkeypatch.setenv(MISSING_ENV, "MCP")
    with pytest.raises(pytest.fail.Exception, match="could not build: MCP"):
        require_executable(MISSING, "the thing")
