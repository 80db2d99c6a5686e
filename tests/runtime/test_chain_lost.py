"""continuation="previous_response_id" when the provider no longer holds the response a request continues
from (its retention ran out, or it was deleted): OpenAI's 400 previous_response_not_found (quoted in
maximhq/bifrost issue 2441), Gemini Interactions' 404. The whole transcript is saved (D8), so the request
goes again replayed in full, once; it used to end FAILED(API_ERROR) with the results of calls that had run
(a paid refund's) never sent to the model, and a FAILED operation cannot be resumed."""

from __future__ import annotations

import pytest

import callbound as cb
from callbound.testing import ApiError, FakeClock, ScriptedModel

from .test_every_api_loop import registry, scripted

LOST = {
    "openai-responses": ApiError(
        400,
        {
            "error": {
                "message": "Previous response with id 'resp_1' not found.",
                "type": "invalid_request_error",
                "param": "previous_response_id",
                "code": "previous_response_not_found",
            }
        },
    ),
    "gemini-interactions": ApiError(
        404, {"error": {"code": 404, "message": "Interaction not found.", "status": "NOT_FOUND"}}
    ),
}
CHAIN_FIELD = {"openai-responses": "previous_response_id", "gemini-interactions": "previous_interaction_id"}


@pytest.mark.parametrize("api", list(LOST))
def test_a_lost_chain_is_replayed_once(api: str) -> None:
    call, answer = scripted(api)
    model = ScriptedModel(api, [call, LOST[api], answer])
    runner = cb.Runner(model=model, registry=registry(), clock=FakeClock(),
                       settings={"model": "m", "continuation": "previous_response_id"})  # fmt: skip
    out = runner.run_sync("where is A1?", tenant="t", subject="s")
    assert out.state == cb.State.COMPLETED, (out.state, out.reason)
    chained, replayed = model.requests[1], model.requests[2]
    assert CHAIN_FIELD[api] in chained
    assert CHAIN_FIELD[api] not in replayed
    assert len(replayed["input"]) > len(chained["input"])  # the whole transcript, the call's output in it
    assert [t.state for t in out.history].count("RETRY") == 1


@pytest.mark.parametrize("api", list(LOST))
def test_a_chain_lost_again_after_the_replay_is_not_replayed_forever(api: str) -> None:
    call, _ = scripted(api)
    model = ScriptedModel(api, [call, LOST[api], LOST[api], LOST[api]])
    runner = cb.Runner(model=model, registry=registry(), clock=FakeClock(),
                       settings={"model": "m", "continuation": "previous_response_id"})  # fmt: skip
    out = runner.run_sync("where is A1?", tenant="t", subject="s")
    assert (out.state, out.reason) == (cb.State.FAILED, "API_ERROR")
    assert len(model.requests) == 3  # the chained request, one replay, and no more


def test_without_a_chain_the_same_error_stays_fatal() -> None:
    """Replay mode sends no chain: a previous_response_not_found there is the provider's word on
    something else, and a 4xx stays fatal (D26)."""
    api = "openai-responses"
    call, answer = scripted(api)
    model = ScriptedModel(api, [call, LOST[api], answer])
    out = cb.Runner(model=model, registry=registry(), clock=FakeClock(), settings={"model": "m"}).run_sync(
        "where is A1?", tenant="t", subject="s"
    )
    assert (out.state, out.reason) == (cb.State.FAILED, "API_ERROR")
    assert len(model.requests) == 2
