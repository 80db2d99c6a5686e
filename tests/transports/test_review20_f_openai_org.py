"""The organization and project the openai SDK names from ``OPENAI_ORG_ID`` and ``OPENAI_PROJECT_ID`` go
with the request over ``HttpModel`` too (review round 20, f).

``OpenAIModel`` sends ``OpenAI-Organization`` and ``OpenAI-Project`` from those variables; ``HttpModel``
sent neither, so the same request from the same environment was billed, rate-limited and allowed models
by another organization (a user key belongs to several) depending on the transport.
"""

from __future__ import annotations

from typing import Any

import pytest

from callbound.core.model import RequestMeta
from callbound.transports import make_client
from tests.transports.test_loopback import SCENARIOS, Loopback

KEY = "test-key-not-secret"


def _body(client: Any, model: str) -> dict[str, Any]:
    adapter = client.adapter
    body: dict[str, Any] = adapter.build_request(
        items=adapter.initial_items("hi", []),
        tools=[],
        settings={"model": model},
        instructions=None,
        stream=False,
    )
    return body


@pytest.mark.parametrize("api", ["openai-responses", "openai-chat"])
async def test_both_transports_name_the_same_organization_and_project(
    monkeypatch: pytest.MonkeyPatch, api: str
) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-test123")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj_test456")
    server = Loopback()
    try:
        seen = {}
        sc = SCENARIOS[(api, False)]()
        for transport in ("sdk", "http"):
            base = f"{server.root}/v1" if transport == "sdk" else server.root
            client = make_client(api, transport=transport, model=sc.model, api_key=KEY, base_url=base)
            server.script(sc.first)
            turn = await client.complete(
                _body(client, sc.model), stream=False, meta=RequestMeta("op", 0, None, timeout_s=5)
            )
            assert turn.failure is None
            headers = server.seen[0].headers
            seen[transport] = (headers.get("openai-organization"), headers.get("openai-project"))
    finally:
        server.close()
    assert seen == {"sdk": ("org-test123", "proj_test456"), "http": ("org-test123", "proj_test456")}


async def test_unset_variables_send_neither_header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_ORG_ID", raising=False)
    monkeypatch.delenv("OPENAI_PROJECT_ID", raising=False)
    client = make_client("openai-chat", transport="http", model="m", api_key=KEY)
    headers = client.request_headers(stream=False)  # type: ignore[attr-defined]
    assert "openai-organization" not in headers and "openai-project" not in headers
