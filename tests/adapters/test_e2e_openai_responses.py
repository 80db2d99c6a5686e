"""OpenAI Responses end to end: the Runner driven by ScriptedModel over conversations shaped like public
multi-turn recordings (pydantic/pydantic-ai tests/models/cassettes/test_openai_responses/ and
tests/cassettes/). Every body here is synthetic and small; each test names the recording it mirrors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters.openai_responses import ADAPTER
from callbound.core.errors import ProtocolViolation
from callbound.core.machine import classify_turn
from callbound.core.states import State
from callbound.core.types import Finish, RawFailure
from callbound.testing import ApiError, FakeClock, ScriptedModel, Stream

USER = {"role": "user", "content": "What is the weather in New York?"}


class City(BaseModel):
    city: str


def registry() -> cb.Registry:
    def weather(args: City, ctx: cb.CallContext) -> dict[str, Any]:
        return {"city": args.city, "weather": "sunny"}

    return cb.Registry(
        [
            cb.ToolSpec(
                name="get_weather", description="Weather", params=City, handler=weather, schema_version="w1"
            )
        ]
    )


def fc(n: int, city: str = "New York", **extra: Any) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{n}",
        "call_id": f"call_{n}",
        "name": "get_weather",
        "arguments": json.dumps({"city": city}),
        "status": "completed",
        **extra,
    }


def msg(text: str, n: int = 9, **extra: Any) -> dict[str, Any]:
    content = [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}]
    return {
        "type": "message",
        "id": f"msg_{n}",
        "role": "assistant",
        "status": "completed",
        "content": content,
        **extra,
    }


def resp(rid: str | None, *output: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "object": "response",
        "status": "completed",
        "model": "gpt-5",
        "output": list(output),
    }
    if rid is not None:
        body["id"] = rid
    body["usage"] = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    return body


def run(script: list[Any], **settings: Any) -> tuple[cb.Outcome, ScriptedModel]:
    model = ScriptedModel("openai-responses", script)
    runner = cb.Runner(model=model, registry=registry(), clock=FakeClock(), settings=settings)
    return runner.run_sync(input=USER["content"], tenant="t", subject="s"), model


# ---- context window exceeded is TRUNCATED (D1), not an API failure ---------------------------------
# Mirrors pydantic/pydantic-ai tests/cassettes/test_context_window_exceeded/
# test_openai_responses_context_window_exceeded.yaml (HTTP 400, code context_length_exceeded).
CONTEXT_ERROR = {
    "error": {
        "code": "context_length_exceeded",
        "message": "Your input exceeds the context window of this model.",
        "param": "input",
        "type": "invalid_request_error",
    }
}


def test_context_length_exceeded_is_truncated() -> None:
    turn = ADAPTER.map_error(RawFailure("http", 400, CONTEXT_ERROR, {}))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
        Finish.TRUNCATED,
        "400",
        "context_window_exceeded",
    )
    assert turn.failure is not None and not turn.failure.retryable
    assert (turn.failure.status, turn.failure.error_code) == (400, "context_length_exceeded")
    verdict = classify_turn(turn)
    assert (verdict.target, verdict.reason) == (State.INCOMPLETE, "CONTEXT_WINDOW_EXCEEDED")
    body_turn = ADAPTER.parse_response(CONTEXT_ERROR)  # the same error as a body without a status
    assert (body_turn.finish, body_turn.reason) == (Finish.TRUNCATED, "context_window_exceeded")


def test_context_length_exceeded_ends_the_run_incomplete_without_retries() -> None:
    outcome, model = run([ApiError(400, CONTEXT_ERROR)])
    assert (outcome.state, outcome.reason) == (State.INCOMPLETE, "CONTEXT_WINDOW_EXCEEDED")
    assert len(model.requests) == 1


def test_other_400_errors_still_fail() -> None:
    # pydantic/pydantic-ai tests/models/cassettes/test_openai_responses/test_openai_responses_model_http_error.yaml
    error = {
        "error": {"code": "decimal_below_min_value", "param": "temperature", "type": "invalid_request_error"}
    }
    outcome, _ = run([ApiError(400, error)])
    assert (outcome.state, outcome.reason) == (State.FAILED, "API_ERROR")


# ---- a conversation seeded with extra["previous_response_id"] ----------------------------------------
# Mirrors pydantic/pydantic-ai tests/models/cassettes/test_openai_responses/
# test_openai_previous_response_id_seed_auto_chains_through_retries.yaml: the first request carries the
# seed (an earlier response), the next ones chain to the previous turn and send only the outputs.
SEEDED = [resp("resp_1", fc(1)), resp("resp_2", fc(2, "New York City")), resp("resp_3", msg("Sunny, 72°F."))]


def test_seeded_chain_continues_from_the_previous_turn() -> None:
    outcome, model = run(
        SEEDED, continuation="previous_response_id", extra={"previous_response_id": "resp_seed"}
    )
    assert (outcome.state, outcome.text) == (State.COMPLETED, "Sunny, 72°F.")
    first, second, third = model.requests
    assert (first["previous_response_id"], first["input"]) == ("resp_seed", [USER])
    assert second["previous_response_id"] == "resp_1"
    assert [(i["type"], i["call_id"]) for i in second["input"]] == [("function_call_output", "call_1")]
    assert third["previous_response_id"] == "resp_2"
    assert [i["call_id"] for i in third["input"]] == ["call_2"]


def test_seed_with_stateless_replay_is_a_valid_request() -> None:
    # Every request keeps the seed as older context and replays this operation's turns in full.
    outcome, model = run(SEEDED, extra={"previous_response_id": "resp_seed"})
    assert outcome.state is State.COMPLETED
    last = model.requests[-1]
    assert last["previous_response_id"] == "resp_seed"
    assert [i.get("type", "user") for i in last["input"]] == [
        "user",
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
    ]


def test_check_request_rejects_a_foreign_chain_that_does_not_replay_the_turn() -> None:
    turn = ADAPTER.parse_response(resp("resp_1", msg("narration", 1, phase="commentary"), fc(1)))
    outputs = [{"type": "function_call_output", "call_id": "call_1", "output": "x"}]
    replayed = {"previous_response_id": "resp_seed", "input": [USER, *ADAPTER.turn_items(turn), *outputs]}
    ADAPTER.check_request(replayed, turn)
    partial = {"previous_response_id": "resp_seed", "input": [USER, ADAPTER.turn_items(turn)[1], *outputs]}
    with pytest.raises(ProtocolViolation, match="previous_response_id"):  # the commentary was dropped
        ADAPTER.check_request(partial, turn)


# ---- D7: a response without an id is never chained ------------------------------------------------
def test_synthetic_response_id_is_never_sent_as_previous_response_id() -> None:
    outcome, model = run(
        [resp(None, fc(1)), resp("resp_2", msg("Sunny."))], continuation="previous_response_id"
    )
    assert outcome.state is State.COMPLETED
    second = model.requests[1]
    assert "previous_response_id" not in second
    assert [i.get("type", "user") for i in second["input"]] == [
        "user",
        "function_call",
        "function_call_output",
    ]


def test_store_false_beside_an_include_in_extra_replays_with_encrypted_reasoning() -> None:
    # store goes in settings (extra["store"] is a UsageError since review round 16); extra's include is kept
    outcome, model = run(
        [resp("resp_1", fc(1)), resp("resp_2", msg("Sunny."))],
        continuation="previous_response_id",
        store=False,
        extra={"include": ["web_search_call.action.sources"]},
    )
    assert outcome.state is State.COMPLETED
    second = model.requests[1]
    assert "previous_response_id" not in second and second["store"] is False
    assert second["include"] == ["web_search_call.action.sources", "reasoning.encrypted_content"]
    assert len(second["input"]) == 3


# ---- replay of real shapes, plain and streamed ------------------------------------------------------
def sse(*events: dict[str, Any]) -> str:
    return "".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n"
        for n, e in enumerate(events)
    )


def test_streamed_reasoning_is_replayed_from_its_done_event() -> None:
    # Mirrors pydantic/pydantic-ai tests/models/cassettes/test_openai_responses/
    # test_openai_responses_phase_streamed_on_part_start.yaml: the reasoning item's encrypted_content differs
    # between output_item.added, output_item.done and the terminal snapshot; the recorded next request
    # carried the done copy, with the commentary message (phase) and the call.
    rs = {"id": "rs_1", "type": "reasoning", "content": [], "summary": []}
    commentary = msg("I'll check.", 1, phase="commentary")
    call = fc(1)
    first = sse(
        {"type": "response.created", "response": {**resp("resp_1"), "status": "in_progress", "usage": None}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**rs, "encrypted_content": "enc-added"},
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {**rs, "encrypted_content": "enc-done"},
        },
        {"type": "response.output_item.added", "output_index": 1, "item": {**commentary, "content": []}},
        {"type": "response.output_item.done", "output_index": 1, "item": commentary},
        {"type": "response.output_item.added", "output_index": 2, "item": {**call, "arguments": ""}},
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 2,
            "item_id": "fc_1",
            "delta": call["arguments"],
        },
        {"type": "response.output_item.done", "output_index": 2, "item": call},
        {
            "type": "response.completed",
            "response": resp("resp_1", {**rs, "encrypted_content": "enc-final"}, commentary, call),
        },
    )
    final = msg("It is sunny.", 2, phase="final_answer")
    second = sse(
        {"type": "response.output_item.added", "output_index": 0, "item": {**final, "content": []}},
        {"type": "response.output_item.done", "output_index": 0, "item": final},
        {"type": "response.completed", "response": resp("resp_2", final)},
    )
    for mode in ("replay", "previous_response_id"):
        outcome, model = run([Stream(first), Stream(second)], stream=True, continuation=mode)
        assert (outcome.state, outcome.text) == (State.COMPLETED, "It is sunny.")
        request = model.requests[1]
        if mode == "previous_response_id":
            assert request["previous_response_id"] == "resp_1"
            assert [i["type"] for i in request["input"]] == ["function_call_output"]
            continue
        assert request["input"][1:4] == [{**rs, "encrypted_content": "enc-done"}, commentary, call]
        assert request["input"][4]["call_id"] == "call_1"


def test_parallel_calls_are_answered_together_in_call_order() -> None:
    # Mirrors pydantic/pydantic-ai tests/models/cassettes/test_openai_responses/test_openai_responses_model_retry.yaml:
    # two function_call items in one response, answered by two outputs in one request, in call order.
    script = [resp("resp_1", fc(1, "Londos"), fc(2, "London")), resp("resp_2", msg("London is at 51N."))]
    outcome, model = run(script)
    assert outcome.state is State.COMPLETED
    request = model.requests[1]
    assert request["input"][1:3] == [fc(1, "Londos"), fc(2, "London")]
    outputs = request["input"][3:]
    assert [(o["type"], o["call_id"]) for o in outputs] == [
        ("function_call_output", "call_1"),
        ("function_call_output", "call_2"),
    ]
    assert json.loads(outputs[0]["output"]) == {"ok": True, "data": {"city": "Londos", "weather": "sunny"}}


def test_namespaced_call_from_tool_search_is_run_and_replayed_unchanged() -> None:
    # Mirrors pydantic/pydantic-ai tests/models/cassettes/test_openai_responses/
    # test_openai_deferred_capability_keeps_native_tool_search.yaml: a deferred tool's function_call carries
    # "namespace"; the call runs under its name and the item is replayed with the namespace (D8).
    call = fc(1, namespace="get_weather")
    outcome, model = run([resp("resp_1", call), resp("resp_2", msg("Sunny.", phase="final_answer"))])
    assert outcome.state is State.COMPLETED
    assert model.requests[1]["input"][1] == call
