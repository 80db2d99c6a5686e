"""The environment variables the transports read, checked alike on both transports (review round 21, c).

- ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID`` holding what no HTTP header can carry (a newline from a
  file, whitespace at an end, a non-ASCII character) failed every request locally as a connection error,
  retried until FAILED(CONNECTION_ERROR) after the operation was stored, or raised
  ``UnicodeEncodeError`` out of ``complete``, over ``HttpModel`` and the openai SDK alike. Now a
  ``UsageError`` naming the variable when the client is made (and at each request).
- An empty one sends no header on either transport (the SDK sent ``OpenAI-Organization:`` empty).
- The base-URL variable each SDK reads (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``,
  ``GOOGLE_GEMINI_BASE_URL``) was checked for ``HttpModel`` only (review round 20, f): over the SDK
  transport ``localhost:8080`` was a retried connection error, and an empty ``OPENAI_BASE_URL`` or
  ``ANTHROPIC_BASE_URL`` became the SDK's URL itself (every request failed) where ``HttpModel`` reads
  it as unset (the provider's URL).
"""

from __future__ import annotations

from typing import Any

import pytest

from callbound.core.errors import UsageError
from callbound.core.model import RequestMeta
from callbound.transports import make_client
from tests.transports.test_loopback import SCENARIOS, Loopback

KEY = "test-key-not-secret"
SDK = {"openai-chat": "openai", "anthropic-messages": "anthropic", "gemini-generate": "google.genai"}


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


@pytest.mark.parametrize("transport", ["http", "sdk"])
@pytest.mark.parametrize("variable", ["OPENAI_ORG_ID", "OPENAI_PROJECT_ID"])
@pytest.mark.parametrize(
    "value", ["org-secret123\n", " org-secret123", "org-secret123 ", "org-sécret", "org\x01secret"]
)
def test_an_organization_or_project_no_header_can_carry_is_a_usage_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, transport: str, variable: str, value: str
) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv(variable, value)
    with pytest.raises(UsageError, match=f"the environment variable {variable} ") as caught:
        make_client("openai-chat", transport=transport, model="m", api_key=KEY)
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize("transport", ["http", "sdk"])
async def test_a_variable_changed_after_the_client_was_made_is_a_usage_error_at_the_request(
    monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    pytest.importorskip("openai")
    monkeypatch.delenv("OPENAI_ORG_ID", raising=False)
    client = make_client(
        "openai-chat", transport=transport, model="m", api_key=KEY, base_url="http://127.0.0.1:9"
    )
    monkeypatch.setenv("OPENAI_ORG_ID", "org-x\n")
    with pytest.raises(UsageError, match="the environment variable OPENAI_ORG_ID ends with a newline"):
        await client.complete(_body(client, "m"), stream=False, meta=RequestMeta("op", 0, None, timeout_s=5))


async def test_an_empty_organization_or_project_sends_no_header_on_either_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_ORG_ID", "")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "")
    server = Loopback()
    try:
        seen = {}
        sc = SCENARIOS[("openai-chat", False)]()
        for transport in ("sdk", "http"):
            base = f"{server.root}/v1" if transport == "sdk" else server.root
            client = make_client(
                "openai-chat", transport=transport, model=sc.model, api_key=KEY, base_url=base
            )
            server.script(sc.first)
            turn = await client.complete(
                _body(client, sc.model), stream=False, meta=RequestMeta("op", 0, None, timeout_s=5)
            )
            assert turn.failure is None, (transport, turn.failure)
            headers = {k.lower() for k in server.seen[-1].headers}
            seen[transport] = sorted(headers & {"openai-organization", "openai-project"})
    finally:
        server.close()
    assert seen == {"sdk": [], "http": []}


@pytest.mark.parametrize(
    ("api", "variable"),
    [
        ("openai-chat", "OPENAI_BASE_URL"),
        ("anthropic-messages", "ANTHROPIC_BASE_URL"),
        ("gemini-generate", "GOOGLE_GEMINI_BASE_URL"),
    ],
)
@pytest.mark.parametrize("value", ["localhost:8080", "ftp://example.com", "http://"])
def test_a_base_url_variable_no_request_can_reach_is_a_usage_error_on_the_sdk_transport_too(
    monkeypatch: pytest.MonkeyPatch, api: str, variable: str, value: str
) -> None:
    pytest.importorskip(SDK[api])
    monkeypatch.setenv(variable, value)
    for transport in ("sdk", "http"):
        with pytest.raises(UsageError, match=f"the environment variable {variable} must be"):
            make_client(api, transport=transport, model="m", api_key=KEY)


@pytest.mark.parametrize(
    ("api", "variable", "provider"),
    [
        ("openai-chat", "OPENAI_BASE_URL", "https://api.openai.com/v1/"),
        ("anthropic-messages", "ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
    ],
)
def test_an_empty_base_url_variable_means_the_provider_on_the_sdk_transport_too(
    monkeypatch: pytest.MonkeyPatch, api: str, variable: str, provider: str
) -> None:
    pytest.importorskip(SDK[api])
    monkeypatch.setenv(variable, "")
    client = make_client(api, transport="sdk", model="m", api_key=KEY)
    sdk_client, _owned = client._client(5.0)  # type: ignore[attr-defined]
    assert str(sdk_client.base_url).rstrip("/") == provider.rstrip("/")
    assert make_client(api, transport="http", model="m", api_key=KEY).base_url == provider.removesuffix(
        "/v1/"
    ).rstrip("/")


def test_a_base_url_variable_still_reaches_its_server_over_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("anthropic")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:8099")
    client = make_client("anthropic-messages", transport="sdk", model="m", api_key=KEY)
    sdk_client, _owned = client._client(5.0)  # type: ignore[attr-defined]
    assert str(sdk_client.base_url).rstrip("/") == "http://127.0.0.1:8099"
