"""Review 13 (g1): adapter fixes for chaining, usage, the SSE reader and progress ids.

1. gemini-interactions: ``settings["extra"]["previous_interaction_id"]`` seeds the first request only;
   with ``continuation = "previous_response_id"`` the runner's chain wins from the second request on
   (extra was deep-merged after the chain and pinned every request to the seed, so function_results
   answered calls the seed never made). ``check_request`` (ScriptedModel, D24) refuses a chain id that
   is not the interaction being answered, as openai-responses' does.
2. A negative token count (a compatible server's -1 for "unknown") is unknown (None, D27) on every API,
   never a count that lowers the spend and lets a token budget pass.
3. Gemini totals: whatever ``total_tokens`` (Interactions) / ``totalTokenCount`` (generateContent) holds
   beyond the input is output (D27: output counts every generated token). Shape: Google's Interactions
   quickstart response (total_tokens 197, total_input_tokens 8, total_output_tokens 12, a ``thought``
   step, no thought count).
4. ``SSEReader`` keeps the lines of an SSE stream that are no field (to find a raw error object at its
   end) within ``max_event`` characters in all, not 256 lines of up to ``max_event`` each.
5. Progress events name a call the provider sent without an id by the turn's D7 id
   (``response_id:index``), not ``#index`` (openai-chat, anthropic-messages, openai-responses).
6. Anthropic's streamed ``partial_json`` counts its whitespace for ``max_call_bytes`` (the running count
   bounds what the stream buffers): documented in ``base.capped`` as the second difference from a plain
   body, pinned here with the shape of anthropic-sdk-python tests/lib/streaming/fixtures/
   tool_use_response.txt (input ``{"location": "Paris"}``: 21 bytes streamed, 20 as compact JSON).

All bodies and streams below are synthetic, written in the shapes those sources show.
"""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.adapters.base import StreamCaps, capped
from callbound.adapters.sse import SSEReader
from callbound.adapters.stream import StreamFeed
from callbound.core.errors import ProtocolViolation
from callbound.core.types import CallReady, CallStarted, Finish, Progress
from callbound.testing import ScriptedModel
from tests.adapters import streaming

INTERACTIONS = "gemini-interactions"


class OrderArgs(BaseModel):
    order_id: str


def _get_order(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
    return {"order_id": args.order_id, "status": "shipped"}


def _registry() -> cb.Registry:
    return cb.Registry(
        [
            cb.ToolSpec(
                name="get_order",
                description="Look up an order",
                params=OrderArgs,
                handler=_get_order,
                schema_version="v1",
                risk="read",
            )
        ]
    )


# --- 1. gemini-interactions: the runner's chain wins over a seed in extra ---------------------------


def _interaction_call(iid: str, cid: str, order: str) -> dict[str, Any]:
    return {
        "id": iid,
        "object": "interaction",
        "status": "requires_action",
        "steps": [
            {"type": "function_call", "id": cid, "name": "get_order", "arguments": {"order_id": order}}
        ],
        "usage": {"total_input_tokens": 10, "total_output_tokens": 5, "total_tokens": 15},
    }


_INTERACTION_FINAL = {
    "id": "v1_3",
    "object": "interaction",
    "status": "completed",
    "steps": [{"type": "model_output", "content": [{"type": "text", "text": "Done."}]}],
    "usage": {"total_input_tokens": 10, "total_output_tokens": 5, "total_tokens": 15},
}


def test_interactions_chain_replaces_the_seed_after_the_first_request() -> None:
    model = ScriptedModel(
        INTERACTIONS,
        [_interaction_call("v1_1", "c1", "A"), _interaction_call("v1_2", "c2", "B"), _INTERACTION_FINAL],
    )
    runner = cb.Runner(
        model=model,
        registry=_registry(),
        settings={
            "model": "m",
            "continuation": "previous_response_id",
            "extra": {"previous_interaction_id": "v1_seed"},
        },
    )
    outcome = runner.run_sync(input="go", tenant="t", subject="s")
    assert outcome.state.value == "COMPLETED"
    chains = [body.get("previous_interaction_id") for body in model.requests]
    assert chains == ["v1_seed", "v1_1", "v1_2"]
    answered = [
        [i.get("call_id") for i in body["input"] if i.get("type") == "function_result"]
        for body in model.requests
    ]
    assert answered == [[], ["c1"], ["c2"]]


def test_interactions_build_request_sets_the_chain_after_extra() -> None:
    body = get(INTERACTIONS).build_request(
        items=[],
        tools=[],
        settings={"model": "m", "extra": {"previous_interaction_id": "v1_seed", "store": True}},
        instructions=None,
        stream=False,
        previous_response_id="v1_1",
        new_items=[{"type": "function_result", "call_id": "c1", "name": "get_order", "result": "{}"}],
    )
    assert body["previous_interaction_id"] == "v1_1"
    assert body["store"] is True  # the rest of extra still merges
    assert [i["call_id"] for i in body["input"]] == ["c1"]


def test_interactions_seed_alone_goes_on_the_first_request() -> None:
    body = get(INTERACTIONS).build_request(
        items=[{"type": "user_input", "content": [{"type": "text", "text": "hi"}]}],
        tools=[],
        settings={"model": "m", "extra": {"previous_interaction_id": "v1_seed"}},
        instructions=None,
        stream=False,
    )
    assert body["previous_interaction_id"] == "v1_seed"


def _previous_turn() -> Any:
    return get(INTERACTIONS).parse_response(_interaction_call("v1_1", "c1", "A"))


def test_interactions_check_refuses_a_chain_to_another_interaction() -> None:
    body = {
        "model": "m",
        "previous_interaction_id": "v1_seed",
        "input": [{"type": "function_result", "call_id": "c1", "name": "get_order", "result": "{}"}],
    }
    with pytest.raises(ProtocolViolation, match="not the interaction being answered"):
        get(INTERACTIONS).check_request(body, _previous_turn())
    body["previous_interaction_id"] = "v1_1"
    get(INTERACTIONS).check_request(body, _previous_turn())  # the right chain passes


def test_interactions_check_accepts_full_replay_over_a_seed() -> None:
    # Stateless replay (the default) with a seed in extra: every request chains to the seed and resends
    # the whole transcript, so the server knows every call from the input.
    previous = _previous_turn()
    body = {
        "model": "m",
        "previous_interaction_id": "v1_seed",
        "input": [
            {"type": "user_input", "content": [{"type": "text", "text": "go"}]},
            *previous.continuation,
            {"type": "function_result", "call_id": "c1", "name": "get_order", "result": "{}"},
        ],
    }
    get(INTERACTIONS).check_request(body, previous)


def test_interactions_stateless_run_with_a_seed_completes() -> None:
    model = ScriptedModel(INTERACTIONS, [_interaction_call("v1_1", "c1", "A"), _INTERACTION_FINAL])
    runner = cb.Runner(
        model=model,
        registry=_registry(),
        settings={"model": "m", "extra": {"previous_interaction_id": "v1_s"}},
    )
    assert runner.run_sync(input="go", tenant="t", subject="s").state.value == "COMPLETED"
    assert [body.get("previous_interaction_id") for body in model.requests] == ["v1_s", "v1_s"]


# --- 2. negative token counts are unknown --------------------------------------------------------------

_NEGATIVE = {
    "openai-chat": {
        "id": "c",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": -1, "completion_tokens": -1, "total_tokens": -1},
    },
    "anthropic-messages": {
        "id": "msg",
        "type": "message",
        "role": "assistant",
        "model": "c",
        "content": [{"type": "text", "text": "x"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": -1, "output_tokens": -1},
    },
    "gemini-generate": {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": -1, "candidatesTokenCount": -1, "totalTokenCount": -1},
    },
    "gemini-interactions": {
        "id": "v1_x",
        "status": "completed",
        "steps": [{"type": "model_output", "content": [{"type": "text", "text": "x"}]}],
        "usage": {"total_input_tokens": -1, "total_output_tokens": -1, "total_tokens": -1},
    },
}


@pytest.mark.parametrize("api", sorted(_NEGATIVE))
def test_negative_counts_are_unknown(api: str) -> None:
    usage = get(api).parse_response(_NEGATIVE[api]).usage
    assert (usage.input_tokens, usage.output_tokens) == (None, None)


def test_chat_negative_prompt_with_positive_total_is_unknown_input() -> None:
    body = json.loads(json.dumps(_NEGATIVE["openai-chat"]))
    body["usage"] = {"prompt_tokens": -5000, "completion_tokens": 5, "total_tokens": -4995}
    usage = get("openai-chat").parse_response(body).usage
    assert (usage.input_tokens, usage.output_tokens) == (None, 5)


def test_anthropic_negative_cache_count_leaves_input_unknown() -> None:
    body = json.loads(json.dumps(_NEGATIVE["anthropic-messages"]))
    body["usage"] = {"input_tokens": 10, "cache_read_input_tokens": -3, "output_tokens": 4}
    assert get("anthropic-messages").parse_response(body).usage.input_tokens is None
    body["usage"] = {"input_tokens": 10, "cache_read_input_tokens": None, "output_tokens": 4}
    assert get("anthropic-messages").parse_response(body).usage.input_tokens == 10  # null: nothing cached


def test_gemini_negative_part_of_a_sum_makes_it_unknown() -> None:
    body = json.loads(json.dumps(_NEGATIVE["gemini-generate"]))
    body["usageMetadata"] = {"promptTokenCount": 20, "toolUsePromptTokenCount": -1, "candidatesTokenCount": 5}
    usage = get("gemini-generate").parse_response(body).usage
    assert (usage.input_tokens, usage.output_tokens) == (None, 5)


def test_negative_prompt_count_stops_a_token_budget_as_unknown() -> None:
    body = json.loads(json.dumps(_NEGATIVE["openai-chat"]))
    body["usage"] = {"prompt_tokens": -5000, "completion_tokens": 5, "total_tokens": -4995}
    runner = cb.Runner(
        model=ScriptedModel("openai-chat", [body]),
        registry=cb.Registry([]),
        settings={"model": "m"},
        budgets=cb.Budgets(max_input_tokens=1000),
    )
    outcome = runner.run_sync("hi", tenant="t", subject="s")
    assert (outcome.state.value, outcome.reason) == ("STOPPED", "USAGE_UNKNOWN")


def _sse(events: list[dict[str, Any]]) -> bytes:
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()


def test_anthropic_stream_negative_output_count_is_unknown() -> None:
    raw = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
        b'"role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":7,'
        b'"output_tokens":1}}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
        b'"usage":{"output_tokens":-1}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    turn, _ = streaming.fed(get("anthropic-messages"), raw)
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (7, None)


def test_gemini_stream_last_negative_counts_are_not_replaced_by_an_earlier_chunk() -> None:
    # Running totals: the last chunk's counts are the turn's; -1 there is unknown, not the first chunk's.
    chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}}], "responseId": "r"}
    last = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "y"}]}, "finishReason": "STOP"}],
        "responseId": "r",
        "usageMetadata": {"promptTokenCount": -1, "candidatesTokenCount": -1},
    }
    first = {**chunk, "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1}}
    turn, _ = streaming.fed(get("gemini-generate"), _sse([first, last]))
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (None, None)


# --- 3. Gemini totals beyond input + output are output ----------------------------------------------

_QUICKSTART = {
    "id": "v1_ChdpQUFvYXI",
    "status": "completed",
    "usage": {"total_tokens": 197, "total_input_tokens": 8, "total_output_tokens": 12},
    "steps": [
        {"type": "thought", "signature": "EvEFCu4FAQw"},
        {"type": "model_output", "content": [{"type": "text", "text": "AI learns patterns from data."}]},
    ],
}


def test_interactions_total_beyond_the_counts_is_output() -> None:
    usage = get(INTERACTIONS).parse_response(_QUICKSTART).usage
    assert (usage.input_tokens, usage.output_tokens) == (8, 189)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        # WIRE.md 5 fixture: total includes thoughts; nothing counted twice
        (
            {
                "total_input_tokens": 53,
                "total_output_tokens": 15,
                "total_thought_tokens": 41,
                "total_tokens": 109,
            },
            (53, 56),
        ),
        (
            {
                "total_input_tokens": 50,
                "total_tool_use_tokens": 3,
                "total_output_tokens": 5,
                "total_tokens": 58,
            },
            (53, 5),
        ),
        ({"total_input_tokens": 8, "total_tokens": 8}, (8, 0)),
        ({"total_input_tokens": 8, "total_output_tokens": 12}, (8, 12)),
        ({"total_input_tokens": 8, "total_output_tokens": 12, "total_tokens": 15}, (8, 12)),
    ],
    ids=["thoughts counted", "tool-use prompt", "no output count", "no total", "total below"],
)
def test_interactions_total_rule(usage: dict[str, Any], expected: tuple[int, int]) -> None:
    turn = get(INTERACTIONS).parse_response({**_QUICKSTART, "usage": usage})
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == expected


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"promptTokenCount": 8, "candidatesTokenCount": 12, "totalTokenCount": 197}, (8, 189)),
        # WIRE.md 4: totalTokenCount includes thoughts (29 + 15 + 80 = 124): no double count
        (
            {
                "promptTokenCount": 29,
                "candidatesTokenCount": 15,
                "thoughtsTokenCount": 80,
                "totalTokenCount": 124,
            },
            (29, 95),
        ),
        (
            {
                "promptTokenCount": 80,
                "toolUsePromptTokenCount": 3,
                "candidatesTokenCount": 5,
                "thoughtsTokenCount": 10,
                "totalTokenCount": 98,
            },
            (83, 15),
        ),
    ],
    ids=["total above", "thoughts counted", "tool-use prompt"],
)
def test_generate_total_rule(meta: dict[str, Any], expected: tuple[int, int]) -> None:
    body = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}, "finishReason": "STOP"}],
        "usageMetadata": meta,
    }
    usage = get("gemini-generate").parse_response(body).usage
    assert (usage.input_tokens, usage.output_tokens) == expected


def test_interactions_total_counts_against_the_output_budget() -> None:
    runner = cb.Runner(
        model=ScriptedModel(INTERACTIONS, [_QUICKSTART]),
        registry=cb.Registry([]),
        settings={"model": "gemini-x"},
        budgets=cb.Budgets(max_output_tokens=100),
    )
    outcome = runner.run_sync("Explain how AI works in a few words", tenant="t", subject="s")
    assert (outcome.state.value, outcome.reason) == ("STOPPED", "MAX_OUTPUT_TOKENS")


# --- 4. stray lines held by the SSE reader are bounded in characters ----------------------------------


def test_stray_lines_are_bounded_by_max_event_characters() -> None:
    reader = SSEReader(max_event=1000)
    reader.feed(b'data: {"a":1}\n\n')
    for _ in range(300):
        reader.feed(b"x" * 999 + b"\n")
    held = sum(len(line) for line in reader._stray)
    assert held <= 1000


def test_stray_lines_memory_stays_near_the_cap() -> None:
    # /tmp/s13/h10/repro_stray_lines.py: 300 lines each just under the cap held ~259x the cap.
    cap = 100_000
    start = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
        b'"role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":1,'
        b'"output_tokens":1}}}\n\n'
    )
    end = (
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
        b'"usage":{"output_tokens":1}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    feed = StreamFeed(
        get("anthropic-messages").stream_assembler(StreamCaps(max_body_bytes=cap)), max_event=cap
    )
    line = b"x" * (cap - 1) + b"\n"
    tracemalloc.start()
    try:
        feed.feed(start)
        for _ in range(300):
            feed.feed(line)
        feed.feed(end)
        feed.close()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert feed.finish().finish is Finish.FINAL_TEXT
    assert peak < 20 * cap


def test_raw_error_object_is_still_read_within_the_bound() -> None:
    # googleapis/js-genai issue 461: Gemini ends a failed stream with a raw, multi-line error object.
    error = '{\n  "error": {\n    "code": 429,\n    "message": "quota",\n    "status": "RESOURCE_EXHAUSTED"\n  }\n}\n'
    reader = SSEReader(max_event=200)
    events = reader.feed(b'data: {"a":1}\n\n' + error.encode())
    events += reader.close()
    assert json.loads(events[-1].data)["error"]["code"] == 429


def test_error_object_past_the_bound_is_not_read() -> None:
    error = '{\n  "error": {\n    "code": 429,\n    "message": "' + "q" * 300 + '"\n  }\n}\n'
    reader = SSEReader(max_event=200)
    events: list[Any] = []
    # a line past the bound stops the reader whether it came whole or in pieces (review round 21, c:
    # it used to be dropped when whole); the events before it are read, the error object is not
    with pytest.raises(ProtocolViolation, match="grew past 200"):
        reader.read_into(b'data: {"a":1}\n\n' + error.encode(), None, events)
    assert [data for _name, data in events] == ['{"a":1}']


# --- 5. progress ids of calls sent without an id are the turn's -----------------------------------------


def _chat_stream(compact: bool, rid: str) -> bytes:
    sep = (",", ":") if compact else (", ", ": ")
    base = {"id": rid, "object": "chat.completion.chunk", "created": 1, "model": "m"}
    events: list[Any] = [
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "index": 0,
                                "type": "function",
                                "function": {"name": "get_order", "arguments": ""},
                            },
                            {
                                "index": 1,
                                "type": "function",
                                "function": {"name": "get_order", "arguments": ""},
                            },
                        ],
                    },
                    "finish_reason": None,
                }
            ],
        },
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"order_id":"A"}'}}]},
                    "finish_reason": None,
                }
            ],
        },
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 1, "function": {"arguments": '{"order_id":"B"}'}}]},
                    "finish_reason": None,
                }
            ],
        },
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        "[DONE]",
    ]
    return "".join(
        "data: " + (e if isinstance(e, str) else json.dumps(e, separators=sep)) + "\n\n" for e in events
    ).encode()


def _ids(progress: list[Progress]) -> set[str]:
    return {e.call_id for e in progress}


@pytest.mark.parametrize("compact", [True, False], ids=["fast path", "decoded"])
def test_chat_progress_ids_are_the_turn_call_ids(compact: bool) -> None:
    turn, progress = streaming.fed(get("openai-chat"), _chat_stream(compact, "chatcmpl-1"))
    assert [c.call_id for c in turn.calls] == ["chatcmpl-1:0", "chatcmpl-1:1"]
    assert _ids(progress) == {"chatcmpl-1:0", "chatcmpl-1:1"}
    assert [e.call_id for e in progress if isinstance(e, CallReady)] == ["chatcmpl-1:0", "chatcmpl-1:1"]


def test_chat_legacy_function_call_progress_id() -> None:
    base = {"id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    raw = (
        _sse(
            [
                {
                    **base,
                    "choices": [
                        {"index": 0, "delta": {"function_call": {"name": "get_order", "arguments": "{}"}}}
                    ],
                },
                {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "function_call"}]},
            ]
        )
        + b"data: [DONE]\n\n"
    )
    turn, progress = streaming.fed(get("openai-chat"), raw)
    assert [c.call_id for c in turn.calls] == ["chatcmpl-9:0"]
    assert _ids(progress) == {"chatcmpl-9:0"}


def test_anthropic_progress_id_of_a_tool_use_without_id() -> None:
    events = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_7",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "m",
                "stop_reason": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Looking."}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "name": "get_order", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"order_id":"A"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    for sep in ((",", ":"), (", ", ": ")):  # the compact delta takes the fast path
        raw = "".join(f"data: {json.dumps(e, separators=sep)}\n\n" for e in events).encode()
        turn, progress = streaming.fed(get("anthropic-messages"), raw)
        assert [c.call_id for c in turn.calls] == ["msg_7:1"]
        assert _ids(progress) == {"msg_7:1"}
        assert any(isinstance(e, CallStarted) for e in progress)


def test_responses_progress_id_of_a_call_without_call_id() -> None:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "name": "get_order",
        "arguments": "",
        "status": "in_progress",
    }
    done = {**item, "arguments": '{"order_id":"A"}', "status": "completed"}
    events = [
        {"type": "response.created", "response": {"id": "resp_5", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "item_id": "fc_1",
            "delta": '{"order_id":"A"}',
        },
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": {"id": "resp_5", "status": "completed", "output": [done]}},
    ]
    turn, progress = streaming.fed(get("openai-responses"), _sse(events))
    assert [c.call_id for c in turn.calls] == ["resp_5:0"]
    assert _ids(progress) == {"resp_5:0"}


# --- 6. Anthropic streamed partial_json counts its whitespace (documented) ------------------------------


def test_anthropic_streamed_whitespace_counts_for_max_call_bytes() -> None:
    # anthropic-sdk-python tests/lib/streaming/fixtures/tool_use_response.txt streams
    # '{"location": "Paris"}' (21 bytes); the plain body's input {"location":"Paris"} is 20 compact.
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    events = [
        {"type": "message_start", "message": message},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
        },
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": p},
            }
            for p in ('{"locati', 'on": "P', "ar", 'is"}')
        ),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    raw = "".join(f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events)
    plain = {
        **message,
        "stop_reason": "tool_use",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}}
        ],
    }
    adapter = get("anthropic-messages")
    for cap, streamed_finish in ((20, Finish.TRUNCATED), (21, Finish.TOOL_PROPOSALS)):
        caps = StreamCaps(max_call_bytes=cap)
        assert streaming.fed(adapter, raw.encode(), caps)[0].finish is streamed_finish
        assert capped(adapter.parse_response(plain), caps).finish is Finish.TOOL_PROPOSALS
