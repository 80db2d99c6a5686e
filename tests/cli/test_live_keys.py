"""The live application (``callbound.cli.live:live_app``) is rebuilt by ``callbound approvals
approve``/``deny`` only to record a decision, which never talks to the model: it builds without the
provider's key, and the key is required when a request is made (then the same ``UsageError``, naming
the environment variable). ``callbound run`` still refuses to start without it; ``make_client`` keeps
its early check by default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import callbound as cb
from callbound.cli.live import live_app
from callbound.core.model import RequestMeta
from callbound.transports import API_KEY_ENV, make_client
from tests.transports.test_loopback import KEY, Loopback, _call, _final

KEY_VARS = sorted({name for names in API_KEY_ENV.values() for name in names})

CLIENTS = [
    *[pytest.param("http", api, id=f"http-{api}") for api in API_KEY_ENV],
    pytest.param("sdk", "openai-responses", id="sdk-openai-responses"),
    pytest.param("sdk", "anthropic-messages", id="sdk-anthropic-messages"),
    pytest.param("sdk", "gemini-generate", id="sdk-gemini-generate"),
    pytest.param("sdk", "gemini-interactions", id="sdk-gemini-interactions"),
]
SDK_MODULE = {"openai": "openai", "anthropic": "anthropic", "gemini": "google.genai"}


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("no_keys")
@pytest.mark.parametrize(("transport", "api"), CLIENTS)
@pytest.mark.parametrize("stream", [False, True])
async def test_the_live_app_builds_without_a_key_and_a_request_names_the_variable(
    tmp_path: Path, transport: str, api: str, stream: bool
) -> None:
    if transport == "sdk":
        pytest.importorskip(SDK_MODULE[api.split("-")[0]])
    app = live_app(
        api,
        "m-test",
        transport=transport,
        payments=str(tmp_path / "payments.db"),
        stream=stream,
        base_url="http://127.0.0.1:9",  # never reached: the key check comes first
    )
    body = app.model.adapter.build_request(
        items=app.model.adapter.initial_items("hi", []),
        tools=[],
        settings={"model": "m-test"},
        instructions=None,
        stream=stream,
    )
    with pytest.raises(cb.UsageError, match=API_KEY_ENV[api][0]):
        await app.model.complete(body, stream=stream, meta=RequestMeta("op_k", 0, None, timeout_s=5.0))


@pytest.mark.usefixtures("no_keys")
def test_make_client_still_checks_the_key_at_once_by_default() -> None:
    with pytest.raises(cb.UsageError, match="ANTHROPIC_API_KEY"):
        make_client("anthropic-messages", transport="http", model="m")
    make_client("anthropic-messages", transport="http", model="m", require_key=False)


def _cli(tmp_path: Path, *args: str, key: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARS}
    if key:
        env["OPENAI_API_KEY"] = KEY
    return subprocess.run(
        [sys.executable, "-m", "callbound.cli", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "COLUMNS": "200"},
        timeout=60,
    )


@pytest.mark.parametrize("transport", ["http", "sdk"])
def test_an_approval_is_decided_from_a_shell_without_the_key(tmp_path: Path, transport: str) -> None:
    if transport == "sdk":
        pytest.importorskip("openai")
    server = Loopback()
    try:
        server.script(_call("submit_refund", {"draft_id": "dr_A1"}), _final("The refund was submitted."))
        store = f"sqlite:///{tmp_path / 'live.db'}"
        base = server.root if transport == "http" else f"{server.root}/v1"
        run = _cli(
            tmp_path,
            *("run", "--api", "openai-responses", "--model", "gpt-test", "--transport", transport),
            *("--base-url", base, "--store", store, "--json", "Refund order A1"),
            key=True,
        )
        assert run.returncode == 0, run.stderr
        waiting = json.loads(run.stdout)
        assert waiting["state"] == "WAITING_APPROVAL"

        listed = _cli(tmp_path, "approvals", "list", "--json", "--store", store, key=False)
        assert listed.returncode == 0, listed.stderr
        (approval,) = json.loads(listed.stdout)
        decided = _cli(
            tmp_path,
            *("approvals", "approve", approval["approval_id"], "--approver", "alice", "--store", store),
            key=False,
        )
        assert decided.returncode == 0, decided.stderr
        assert "approved by alice" in decided.stdout
        assert len(server.seen) == 1, "recording a decision made no model request"

        keyless = _cli(tmp_path, "resume", waiting["operation_id"], "--store", store, key=False)
        assert keyless.returncode == 2 and "OPENAI_API_KEY" in keyless.stderr
        shown = _cli(tmp_path, "ops", "show", waiting["operation_id"], "--store", store, "--json", key=False)
        assert json.loads(shown.stdout)["head"]["state"] == "WAITING_APPROVAL", (
            "a resume without the key runs nothing"
        )

        resumed = _cli(tmp_path, "resume", waiting["operation_id"], "--store", store, "--json", key=True)
        assert resumed.returncode == 0, resumed.stderr
        done = json.loads(resumed.stdout)
        assert done["state"] == "COMPLETED"
        assert done["text"] == "The refund was submitted."
    finally:
        server.close()


def test_run_without_the_key_still_fails_before_starting(tmp_path: Path) -> None:
    r = _cli(
        tmp_path,
        *("run", "--api", "openai-responses", "--model", "m", "--transport", "http", "hi"),
        key=False,
    )
    assert r.returncode == 2
    assert "OPENAI_API_KEY" in r.stderr
    assert not (tmp_path / "callbound.db").exists(), "nothing was started"
