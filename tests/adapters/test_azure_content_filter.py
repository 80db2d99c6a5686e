"""Azure OpenAI's prompt filter answers HTTP 400 with ``code: "content_filter"``: a REFUSAL (D1).

Shape from a real Azure OpenAI answer recorded by a public test suite (Mirascope tests/e2e cassette
test_refusal/azure-openai_completions_gpt_4o_mini/stream.yaml): HTTP 400, ``error.code`` ``content_filter``,
``type`` null, ``param`` ``prompt``, ``innererror.code`` ``ResponsibleAIPolicyViolation`` with the filter
results. D1 puts provider policy stops (Chat ``content_filter``, Gemini ``promptFeedback.blockReason``)
under REFUSAL, and Azure's Responses endpoint reports its filter as ``incomplete`` + ``content_filter``,
already a REFUSAL: the same block must not end FAILED(API_ERROR) on one endpoint and REFUSED on the
other. Not retried; ``raw_stop_reason`` stays the status (D32). Texts are synthetic.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import callbound as cb
from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, RawFailure
from callbound.testing import ApiError, FakeClock, ScriptedModel

APIS = ["openai-chat", "openai-responses"]


def _filtered(*, inner: bool = True, code: str | None = "content_filter") -> dict[str, Any]:
    error: dict[str, Any] = {
        "message": "The response was filtered due to the prompt triggering the content management policy.",
        "type": None,
        "param": "prompt",
        "code": code,
        "status": 400,
    }
    if inner:
        error["innererror"] = {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": {"self_harm": {"filtered": True, "severity": "medium"}},
        }
    return {"error": error}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "body",
    [_filtered(), _filtered(inner=False), _filtered(code=None)],
    ids=["recorded", "code only", "inner code only"],
)
def test_the_filter_answer_is_a_refusal(api: str, body: dict[str, Any]) -> None:
    turn = get(api).map_error(RawFailure("http", 400, json.dumps(body), {}))
    assert (turn.finish, turn.reason, turn.raw_stop_reason) == (Finish.REFUSAL, "content_filter", "400")
    assert turn.failure is not None and turn.failure.retryable is False


@pytest.mark.parametrize("api", APIS)
def test_other_400s_stay_api_errors(api: str) -> None:
    body = {
        "error": {
            "message": "Invalid value for 'tool_choice'.",
            "type": "invalid_request_error",
            "code": None,
        }
    }
    turn = get(api).map_error(RawFailure("http", 400, json.dumps(body), {}))
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "api_error")
    # the same code under a server error status is the server's fault, retried as D26 says
    assert (
        get(api).map_error(RawFailure("http", 500, json.dumps(_filtered()), {})).finish is Finish.API_FAILURE
    )


def test_a_streamed_filter_error_reads_the_same() -> None:
    feed = StreamFeed(get("openai-chat").stream_assembler())
    feed.feed(f"data: {json.dumps(_filtered())}\n\n".encode())
    feed.close()
    turn = feed.finish()
    assert (turn.finish, turn.reason) == (Finish.REFUSAL, "content_filter")


@pytest.mark.parametrize("api", APIS)
def test_a_run_ends_refused_after_one_request(api: str) -> None:
    model = ScriptedModel(api, [ApiError(400, _filtered())])
    runner = cb.Runner(model=model, registry=cb.Registry([]), clock=FakeClock())
    out = runner.run_sync("a filtered prompt", tenant="t", subject="s")
    assert (out.state, out.reason) == (cb.State.REFUSED, "CONTENT_FILTER")
    assert len(model.requests) == 1
