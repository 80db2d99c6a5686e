"""One environment reaches one server whichever transport carries the request (review round 20, f).

Given no ``base_url``, each SDK reads its own variable (openai ``OPENAI_BASE_URL``, anthropic
``ANTHROPIC_BASE_URL``, google-genai ``GOOGLE_GEMINI_BASE_URL``), so ``transport="sdk"`` went to the
proxy or local server it names while ``HttpModel`` sent the same request, and the key, to the
provider's public host. ``HttpModel`` reads the same variable now (OpenAI's carries ``/v1``, as the SDK
wants it); an explicit ``base_url`` wins over it, and a value no request can reach is a ``UsageError``
naming the variable.
"""

from __future__ import annotations

from typing import Any

import pytest

from callbound.core.errors import UsageError
from callbound.core.model import RequestMeta
from callbound.transports import make_client
from callbound.transports.http import HttpModel
from tests.transports.test_loopback import SCENARIOS, Loopback, expected_path

KEY = "test-key-not-secret"

CASES = [
    pytest.param("openai-responses", "OPENAI_BASE_URL", "/v1", id="openai-responses"),
    pytest.param("openai-chat", "OPENAI_BASE_URL", "/v1", id="openai-chat"),
    pytest.param("anthropic-messages", "ANTHROPIC_BASE_URL", "", id="anthropic"),
    pytest.param("gemini-generate", "GOOGLE_GEMINI_BASE_URL", "", id="gemini-generate"),
]
SDK = {"openai-responses": "openai", "openai-chat": "openai", "anthropic-messages": "anthropic"}


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


@pytest.mark.parametrize(("api", "variable", "suffix"), CASES)
async def test_both_transports_go_where_the_sdks_variable_says(
    monkeypatch: pytest.MonkeyPatch, api: str, variable: str, suffix: str
) -> None:
    pytest.importorskip(SDK.get(api, "google.genai"))
    server = Loopback()
    try:
        monkeypatch.setenv(variable, server.root + suffix)
        sc = SCENARIOS[(api, False)]()
        paths = {}
        for transport in ("sdk", "http"):
            client = make_client(api, transport=transport, model=sc.model, api_key=KEY)
            server.script(sc.first)
            turn = await client.complete(
                _body(client, sc.model), stream=False, meta=RequestMeta("op", 0, None, timeout_s=5)
            )
            assert turn.failure is None, (transport, turn.failure)
            paths[transport] = server.seen[0].path if server.seen else None
    finally:
        server.close()
    assert paths == {"sdk": expected_path(api, sc.model, False), "http": expected_path(api, sc.model, False)}


def test_a_base_url_given_wins_over_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    client = HttpModel("openai-chat", base_url="http://127.0.0.1:2", api_key=KEY)
    assert client.base_url == "http://127.0.0.1:2"
    assert HttpModel("openai-chat", api_key=KEY).base_url == "http://127.0.0.1:1"


@pytest.mark.parametrize("value", ["", None])
def test_an_unset_or_empty_variable_means_the_provider(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    else:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", value)
    assert HttpModel("anthropic-messages", api_key=KEY).base_url == "https://api.anthropic.com"


def test_a_variable_no_request_can_reach_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "localhost:8080")
    with pytest.raises(UsageError, match="the environment variable GOOGLE_GEMINI_BASE_URL must be"):
        HttpModel("gemini-interactions", api_key=KEY)
