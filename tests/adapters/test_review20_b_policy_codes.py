"""An OpenAI error whose code names a safety policy is a provider policy stop, D1's REFUSAL (review round
20, b).

openai-python's ``ResponseError.code`` (the ``error`` of a ``failed`` response) lists ``bio_policy``,
``misalignment_policy_violation`` ("The request was blocked by the safety systems") and
``image_content_policy_violation``; its session errors add ``cyber_policy`` ("The request was rejected by
a safety policy"). Read as any other failed response they ended FAILED(API_ERROR), as if the server had
broken; no retry changes a policy stop, and it is no fault either. They read as Azure's ``content_filter``
400 does: REFUSAL, the code as reason (``REFUSED(BIO_POLICY)``), not retried, none of the turn's calls
runs (D31), however the error comes: a plain ``failed`` body, a stream's ``error`` event and
``response.failed``, an HTTP 400 body, on both OpenAI APIs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.adapters.failures import POLICY_CODES
from callbound.core.machine import classify_turn
from callbound.core.states import State
from callbound.core.types import Finish, RawFailure
from callbound.testing import ApiError, FakeClock, ScriptedModel
from tests.adapters import streaming

CODES = sorted(POLICY_CODES)


def failed(code: str, *output: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_p",
        "object": "response",
        "status": "failed",
        "model": "gpt-5",
        "output": list(output),
        "error": {"code": code, "message": "This request was blocked by our safety systems."},
    }


CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "lookup",
    "arguments": "{}",
    "status": "completed",
}


def test_the_codes_are_the_sdk_policy_codes() -> None:
    response_error = pytest.importorskip("openai.types.responses.response_error")
    listed = response_error.ResponseError.model_fields["code"].annotation.__args__
    assert {"bio_policy", "misalignment_policy_violation", "image_content_policy_violation"} <= set(listed)
    assert set(CODES) - set(listed) == {"cyber_policy"}  # the SDK's session errors name it


@pytest.mark.parametrize("code", CODES)
def test_a_failed_response_with_a_policy_code_is_a_refusal(code: str) -> None:
    turn = get("openai-responses").parse_response(failed(code, CALL))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.REFUSAL, code, code)
    assert not turn.executable  # D31: the call beside it never runs
    assert turn.failure is not None and not turn.failure.retryable and turn.failure.error_code == code
    verdict = classify_turn(turn)
    assert (verdict.target, verdict.reason) == (State.REFUSED, code.upper())


def test_other_failed_codes_still_fail() -> None:
    turn = get("openai-responses").parse_response(failed("invalid_prompt"))
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "api_error")


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


@pytest.mark.parametrize("code", CODES)
def test_the_same_code_streamed_is_a_refusal(code: str) -> None:
    created = {
        "type": "response.created",
        "response": {"id": "resp_p", "status": "in_progress", "output": []},
    }
    error = {"type": "error", "error": {"type": "invalid_request_error", "code": code, "message": "blocked"}}
    done = {"type": "response.failed", "response": failed(code)}
    for raw in (_sse(created, error, done), _sse(created, done), _sse(created, error)):
        turn, _ = streaming.fed(get("openai-responses"), raw)
        assert (turn.finish, turn.reason) == (Finish.REFUSAL, code)
        assert turn.failure is not None and not turn.failure.retryable


@pytest.mark.parametrize("api", ["openai-responses", "openai-chat"])
@pytest.mark.parametrize("code", CODES)
def test_an_http_400_with_a_policy_code_is_a_refusal(api: str, code: str) -> None:
    body = {"error": {"type": "invalid_request_error", "code": code, "message": "blocked", "param": None}}
    turn = get(api).map_error(RawFailure("http", 400, json.dumps(body).encode(), {}))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.REFUSAL, "400", code)  # D32
    assert turn.failure is not None and (turn.failure.status, turn.failure.error_code) == (400, code)
    assert not turn.failure.retryable
    # a 5xx keeps its status's reading (D26): the server failed, whatever code it names
    server = get(api).map_error(RawFailure("http", 503, json.dumps(body).encode(), {}))
    assert (server.finish, server.failure is not None and server.failure.retryable) == (
        Finish.API_FAILURE,
        True,
    )


def test_a_run_ends_refused_without_retrying_or_running_the_call() -> None:
    ran: list[str] = []

    class Args(BaseModel):
        pass

    def lookup(args: Args, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(ctx.call_id)
        return {}

    registry = cb.Registry(
        [cb.ToolSpec(name="lookup", description="d", params=Args, handler=lookup, schema_version="1")]
    )
    for script in ([failed("bio_policy", CALL)], [ApiError(400, {"error": {"code": "bio_policy"}})]):
        model = ScriptedModel("openai-responses", script)
        runner = cb.Runner(model=model, registry=registry, clock=FakeClock())
        outcome = runner.run_sync(input="help", tenant="t", subject="s")
        assert (outcome.state, outcome.reason) == (State.REFUSED, "BIO_POLICY")
        assert len(model.requests) == 1 and ran == []
