"""``HttpModel(model=...)`` names the model of a request body that has none, as the SDK clients do
(review round 20, f F1).

``OpenAIModel`` and ``AnthropicModel`` fill ``model`` into a body without one; ``HttpModel`` sent the body
as built, with no model, so ``make_client(api, transport="http", model="gpt-4o")`` under a Runner whose
settings name no model sent every request without one: the provider answers 400 ("model required"), a
fatal failure, where the SDK transport completed. gemini-generate names its model in the URL, so its body
stays as built; a body's own model wins on every transport.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from callbound.core.model import RequestMeta
from callbound.transports.http import HttpModel
from tests.transports.test_loopback import SCENARIOS, Loopback, make_model

KEY = "test-key-not-secret"
BODY_APIS = ["openai-responses", "openai-chat", "anthropic-messages", "gemini-interactions"]


def _body(model: HttpModel | Any, settings: dict[str, Any]) -> dict[str, Any]:
    adapter = model.adapter
    body: dict[str, Any] = adapter.build_request(
        items=adapter.initial_items("hi", []), tools=[], settings=settings, instructions=None, stream=False
    )
    return body


def _capturing(api: str, model: str) -> tuple[HttpModel, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []
    answer = SCENARIOS[(api, False)]().first.body

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, content=answer, headers={"content-type": "application/json"})

    client = HttpModel(api, api_key=KEY, model=model, transport=httpx.MockTransport(handler))
    return client, sent


@pytest.mark.parametrize("api", BODY_APIS)
async def test_a_body_without_a_model_gets_the_clients_model(api: str) -> None:
    client, sent = _capturing(api, "model-of-the-client")
    body = _body(client, {})
    assert "model" not in body

    turn = await client.complete(body, stream=False, meta=RequestMeta("op", 0, None, timeout_s=5))

    assert sent[0]["model"] == "model-of-the-client"
    assert turn.failure is None
    assert "model" not in body, "the caller's body is not changed"


@pytest.mark.parametrize("api", BODY_APIS)
async def test_a_body_naming_its_model_keeps_it(api: str) -> None:
    client, sent = _capturing(api, "model-of-the-client")

    await client.complete(
        _body(client, {"model": "model-of-the-settings"}),
        stream=False,
        meta=RequestMeta("op", 0, None, timeout_s=5),
    )

    assert sent[0]["model"] == "model-of-the-settings"


async def test_an_interactions_body_naming_an_agent_gets_no_model() -> None:
    client, sent = _capturing("gemini-interactions", "model-of-the-client")
    body = {**_body(client, {}), "agent": "deep-research-pro-preview-12-2025"}

    await client.complete(body, stream=False, meta=RequestMeta("op", 0, None, timeout_s=5))

    assert "model" not in sent[0] and sent[0]["agent"] == "deep-research-pro-preview-12-2025"


async def test_gemini_generate_names_the_model_in_the_url_only() -> None:
    seen: list[httpx.Request] = []
    answer = SCENARIOS[("gemini-generate", False)]().first.body

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=answer)

    client = HttpModel(
        "gemini-generate", api_key=KEY, model="gemini-x", transport=httpx.MockTransport(handler)
    )
    await client.complete(_body(client, {}), stream=False, meta=RequestMeta("op", 0, None, timeout_s=5))

    assert seen[0].url.path == "/v1beta/models/gemini-x:generateContent"
    assert "model" not in json.loads(seen[0].content)


@pytest.mark.parametrize("api", ["openai-responses", "openai-chat", "anthropic-messages"])
async def test_both_transports_send_the_same_model(api: str) -> None:
    server = Loopback()
    try:
        models: dict[str, Any] = {}
        for transport in ("sdk", "http"):
            client = make_model(transport, api, server.root, "model-of-the-client")
            server.script(SCENARIOS[(api, False)]().first)
            turn = await client.complete(
                _body(client, {}), stream=False, meta=RequestMeta("op", 0, None, timeout_s=5)
            )
            assert turn.failure is None
            models[transport] = server.seen[0].json().get("model")
    finally:
        server.close()
    assert models == {"sdk": "model-of-the-client", "http": "model-of-the-client"}
