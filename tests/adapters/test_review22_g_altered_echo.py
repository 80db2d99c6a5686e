"""check_request (D24) refuses a history that replays the model's own call altered: another name or
other arguments than the turn being answered holds (D8), compared as the wire echoes them (a string
byte for byte, an object by value), and an Interactions function_result naming another function than
its call. A provider rejects or misreads such a history; a ScriptedModel test must fail on it too."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from callbound.adapters import get
from callbound.core.errors import ProtocolViolation
from callbound.core.types import Finish, ModelTurn, ok_result

OSLO = '{"city": "Oslo"}'

BODIES: dict[str, dict[str, Any]] = {
    "openai-chat": {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": OSLO},
                        },
                        {
                            "id": "call_2",
                            "type": "function",
                            "function": {"name": "get_time", "arguments": "{}"},
                        },
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    },
    "openai-responses": {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5",
        "output": [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": OSLO,
                "status": "completed",
            },
            {
                "type": "function_call",
                "id": "fc_2",
                "call_id": "call_2",
                "name": "get_time",
                "arguments": "{}",
                "status": "completed",
            },
        ],
        "usage": {"input_tokens": 5, "output_tokens": 5},
    },
    "anthropic-messages": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "call_2", "name": "get_time", "input": {}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 5},
    },
    "gemini-interactions": {
        "id": "v1_A",
        "status": "requires_action",
        "steps": [
            {"type": "thought", "signature": "CtkB"},
            {"type": "function_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Oslo"}},
            {"type": "function_call", "id": "call_2", "name": "get_time", "arguments": {}},
        ],
    },
}
APIS = list(BODIES)


def answered(api: str) -> tuple[ModelTurn, dict[str, Any]]:
    adapter = get(api)
    turn = adapter.parse_response(copy.deepcopy(BODIES[api]))
    assert turn.finish is Finish.TOOL_PROPOSALS and len(turn.calls) == 2
    results = adapter.result_items(turn, [(c, ok_result({"n": i})) for i, c in enumerate(turn.calls)])
    items = [*adapter.initial_items("Weather?", []), *adapter.turn_items(turn), *results]
    body = adapter.build_request(items=items, tools=[], settings={}, instructions=None, stream=False)
    return turn, json.loads(json.dumps(body))  # a copy shares nothing with the turn


def alter(api: str, body: dict[str, Any], change: Callable[[dict[str, Any], str], None]) -> None:
    field = {"openai-chat": "arguments", "openai-responses": "arguments"}.get(api)
    for item in body.get("messages") or body.get("input") or []:
        for part in item.get("tool_calls") or []:
            if part["id"] == "call_1":
                change(part["function"], "arguments")
                return
        content = item.get("content") if isinstance(item.get("content"), list) else []
        for part in [item, *content]:
            if part.get("type") in ("tool_use", "function_call") and "call_1" in (
                part.get("id"),
                part.get("call_id"),
            ):
                change(part, field or ("input" if api == "anthropic-messages" else "arguments"))
                return
    raise AssertionError("no replayed call_1")


@pytest.mark.parametrize("api", APIS)
def test_the_unchanged_replay_passes(api: str) -> None:
    turn, body = answered(api)
    get(api).check_request(body, turn)


@pytest.mark.parametrize("api", APIS)
def test_a_replayed_call_under_another_name_is_refused(api: str) -> None:
    turn, body = answered(api)
    alter(api, body, lambda call, _: call.__setitem__("name", "get_time"))
    with pytest.raises(
        ProtocolViolation,
        match=r"'call_1' is replayed with name 'get_time', but the model called 'get_weather'",
    ):
        get(api).check_request(body, turn)


@pytest.mark.parametrize("api", APIS)
def test_a_replayed_call_with_other_arguments_is_refused(api: str) -> None:
    turn, body = answered(api)
    string = api.startswith("openai")
    rome: Any = '{"city": "Rome"}' if string else {"city": "Rome"}
    alter(api, body, lambda call, field: call.__setitem__(field, rome))
    with pytest.raises(
        ProtocolViolation, match=r"'call_1' is replayed with arguments .*Rome.*Oslo.*unchanged \(D8\)"
    ):
        get(api).check_request(body, turn)


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses"])
def test_an_arguments_string_is_compared_byte_for_byte(api: str) -> None:
    # The API echoes the text: the same object respaced is not the model's call.
    turn, body = answered(api)
    alter(api, body, lambda call, field: call.__setitem__(field, '{"city":"Oslo"}'))
    with pytest.raises(ProtocolViolation, match="'call_1' is replayed with arguments"):
        get(api).check_request(body, turn)


@pytest.mark.parametrize("api", ["anthropic-messages", "gemini-interactions"])
def test_an_arguments_object_is_compared_by_value(api: str) -> None:
    turn, body = answered(api)
    alter(api, body, lambda call, field: call.__setitem__(field, json.loads('{ "city" :"Oslo" }')))
    get(api).check_request(body, turn)


def test_a_chat_call_without_an_id_is_compared_by_position() -> None:
    raw = copy.deepcopy(BODIES["openai-chat"])
    for call in raw["choices"][0]["message"]["tool_calls"]:
        call["id"] = ""  # Gemini's OpenAI-compatible endpoint (WIRE.md 2.6)
    adapter = get("openai-chat")
    turn = adapter.parse_response(raw)
    results = adapter.result_items(turn, [(c, ok_result(1)) for c in turn.calls])
    items = [*adapter.initial_items("Weather?", []), *adapter.turn_items(turn), *results]
    body = json.loads(json.dumps({"messages": items}))
    adapter.check_request(body, turn)
    body["messages"][1]["tool_calls"][1]["function"]["arguments"] = '{"zone": "UTC"}'
    with pytest.raises(ProtocolViolation, match=r"messages\[1\]: tool call '' is replayed with arguments"):
        adapter.check_request(body, turn)


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses"])
def test_a_call_id_used_twice_compares_each_replay_in_order(api: str) -> None:
    raw = copy.deepcopy(BODIES[api])
    calls = raw["choices"][0]["message"]["tool_calls"] if api == "openai-chat" else raw["output"]
    calls[1]["id" if api == "openai-chat" else "call_id"] = "call_1"  # D7: one id, two calls
    adapter = get(api)
    turn = adapter.parse_response(raw)
    results = adapter.result_items(turn, [(turn.calls[0], ok_result(1))])  # a repeated id: one answer
    items = [*adapter.initial_items("Weather?", []), *adapter.turn_items(turn), *results]
    body = json.loads(json.dumps({"messages" if api == "openai-chat" else "input": items}))
    adapter.check_request(body, turn)
    twin = body["messages"][1]["tool_calls"][1]["function"] if api == "openai-chat" else body["input"][2]
    twin["name"] = "get_weather"
    with pytest.raises(
        ProtocolViolation,
        match="'call_1' is replayed with name 'get_weather', but the model called 'get_time'",
    ):
        adapter.check_request(body, turn)


def test_an_interactions_result_naming_another_function_is_refused() -> None:
    turn, body = answered("gemini-interactions")
    [result] = [i for i in body["input"] if i.get("type") == "function_result" and i["call_id"] == "call_1"]
    assert result.get("name") == "get_weather"
    result["name"] = "get_time"
    with pytest.raises(
        ProtocolViolation,
        match=r"function_result 'call_1' names 'get_time', but its function_call called 'get_weather'",
    ):
        get("gemini-interactions").check_request(body, turn)


def test_an_interactions_result_naming_another_function_is_refused_when_chained() -> None:
    turn, body = answered("gemini-interactions")
    results = [i for i in body["input"] if i.get("type") == "function_result"]
    chained = {"model": body.get("model"), "previous_interaction_id": "v1_A", "input": results}
    get("gemini-interactions").check_request(chained, turn)
    results[1]["name"] = "get_weather"
    with pytest.raises(ProtocolViolation, match=r"function_result 'call_2' names 'get_weather'"):
        get("gemini-interactions").check_request(chained, turn)


def test_a_gemini_replay_names_the_altered_call() -> None:
    # generateContent already refused any altered part; the message now names the call and what differs.
    raw = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"functionCall": {"id": "call_1", "name": "get_weather", "args": {"city": "Oslo"}}}
                    ],
                },
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 5},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r1",
    }
    adapter = get("gemini-generate")
    turn = adapter.parse_response(raw)
    results = adapter.result_items(turn, [(turn.calls[0], ok_result(1))])
    items = [*adapter.initial_items("Weather?", []), *adapter.turn_items(turn), *results]
    body = json.loads(json.dumps({"contents": items}))
    adapter.check_request(body, turn)
    body["contents"][1]["parts"][0]["functionCall"]["args"] = {"city": "Rome"}
    with pytest.raises(
        ProtocolViolation, match=r"functionCall 'call_1' is replayed with arguments \{'city': 'Rome'\}"
    ):
        adapter.check_request(body, turn)
