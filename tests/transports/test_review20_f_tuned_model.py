"""A gemini-generate model named ``tunedModels/<id>`` reaches the same URL on every transport (review
round 20, f).

google-genai sends a tuned model to ``/v1beta/tunedModels/<id>:generateContent``; ``HttpModel`` sent it to
``/v1beta/models/tunedModels%2F<id>:...``, a model that does not exist. So ``GeminiModel`` answered a plain
request and failed a streamed one (its streams go over ``HttpModel``), and ``transport="http"`` failed
both.
"""

from __future__ import annotations

import httpx
import pytest

from callbound.core.model import RequestMeta
from callbound.transports.http import HttpModel
from tests.transports.test_loopback import SCENARIOS, Loopback, make_model

KEY = "test-key-not-secret"


def _body(client: object) -> dict[str, object]:
    adapter = client.adapter  # type: ignore[attr-defined]
    body: dict[str, object] = adapter.build_request(
        items=adapter.initial_items("hi", []), tools=[], settings={}, instructions=None, stream=False
    )
    return body


@pytest.mark.parametrize(
    ("model", "stream", "path"),
    [
        ("tunedModels/my-tuned-01", False, "/v1beta/tunedModels/my-tuned-01:generateContent"),
        ("tunedModels/my-tuned-01", True, "/v1beta/tunedModels/my-tuned-01:streamGenerateContent"),
        ("models/gemini-2.5-flash", False, "/v1beta/models/gemini-2.5-flash:generateContent"),
        ("gemini-2.5-flash", True, "/v1beta/models/gemini-2.5-flash:streamGenerateContent"),
    ],
)
async def test_httpmodel_sends_a_model_to_its_collection(model: str, stream: bool, path: str) -> None:
    seen: list[httpx.Request] = []
    answer = SCENARIOS[("gemini-generate", stream)]().first.body

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=answer)

    client = HttpModel("gemini-generate", api_key=KEY, model=model, transport=httpx.MockTransport(handler))
    turn = await client.complete(_body(client), stream=stream, meta=RequestMeta("op", 0, None, timeout_s=5))

    assert seen[0].url.path == path
    assert turn.failure is None


async def test_both_transports_send_a_tuned_model_to_one_path() -> None:
    pytest.importorskip("google.genai", reason="google-genai (extra 'gemini') is not installed")
    server = Loopback()
    try:
        paths = {}
        for transport in ("sdk", "http"):
            client = make_model(transport, "gemini-generate", server.root, "tunedModels/my-tuned-01")
            server.script(SCENARIOS[("gemini-generate", False)]().first)
            turn = await client.complete(
                _body(client), stream=False, meta=RequestMeta("op", 0, None, timeout_s=5)
            )
            assert turn.failure is None
            paths[transport] = server.seen[0].path
    finally:
        server.close()
    assert paths["http"] == paths["sdk"] == "/v1beta/tunedModels/my-tuned-01:generateContent"
