"""Review 9: what one streamed turn says.

- D31: a refusal signal wins over everything else in the turn, even when a later stop signal of the
  same stream says otherwise (Gemini finishReason, Anthropic message_delta, Chat finish_reason).
- D27, D12: usage a stream already reported counts even when the stream is cut or carries an error
  event: every prompt token counts, and token budgets are cumulative across retried requests.
- D1: only an explicit completion is success: a Responses terminal ``response.failed`` or
  ``response.incomplete`` whose snapshot says "completed" is no success.
- D8, WIRE.md 5.5/5.6: an Interactions function_call step goes back with ``arguments`` as an object
  (the SDK's FunctionCallStepParam requires one), even when its streamed text does not parse; the
  raw text stays on the call for its INVALID_ARGUMENTS envelope (D5).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn, Usage
from callbound.testing import FakeClock, ScriptedModel, Stream

ANTHROPIC = "anthropic-messages"
CHAT = "openai-chat"
GENERATE = "gemini-generate"
INTERACTIONS = "gemini-interactions"
RESPONSES = "openai-responses"

Event = dict[str, Any] | str


def sse(events: list[Event]) -> bytes:
    out = []
    for e in events:
        data = e if isinstance(e, str) else json.dumps(e, separators=(",", ":"))
        out.append(f"data: {data}\n\n")
    return "".join(out).encode()


def read(api: str, events: list[Event]) -> ModelTurn:
    """The turn read from bytes (StreamFeed) and from payloads (feed); they must agree."""
    feed = StreamFeed(get(api).stream_assembler())
    feed.feed(sse(events))
    feed.close()
    turn = feed.finish()
    asm = get(api).stream_assembler()
    for event in events:
        asm.feed(event)
    other = asm.finish(turn.raw_sha256)
    assert other == turn
    return turn


class Args(BaseModel):
    a: int


RAN: list[int] = []


def handler(args: Args, ctx: cb.CallContext) -> dict[str, Any]:
    RAN.append(args.a)
    return {"ok": 1}


REGISTRY = cb.Registry(
    [cb.ToolSpec(name="f", description="d", params=Args, handler=handler, schema_version="v1", risk="read")]
)

# ---- D31: a refusal is sticky -----------------------------------------------------------------------

GEM_REFUSED_THEN_CALL: list[Event] = [
    {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "I can't"}]}, "finishReason": "SAFETY"}
        ],
        "responseId": "g1",
    },
    {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"a": 7}}}]},
                "finishReason": "STOP",
            }
        ],
        "responseId": "g1",
    },
]
A_START = {
    "type": "message_start",
    "message": {
        "id": "msg_S",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 400, "output_tokens": 1},
    },
}
A_TOOL: list[Event] = [
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"a":7}'},
    },
    {"type": "content_block_stop", "index": 0},
]
A_REFUSED_THEN_TOOL_USE: list[Event] = [
    A_START,
    *A_TOOL,
    {
        "type": "message_delta",
        "delta": {"stop_reason": "refusal", "stop_details": {"type": "refusal", "category": "cyber"}},
        "usage": {"output_tokens": 5},
    },
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 6}},
    {"type": "message_stop"},
]


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


CHAT_CALL_THEN_FILTER: list[Event] = [
    chunk(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"a":7}'},
                }
            ],
        }
    ),
    chunk({}, "tool_calls"),
    chunk({}, "content_filter"),
    "[DONE]",
]
FINAL: dict[str, dict[str, Any]] = {
    GENERATE: {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}]
    },
    ANTHROPIC: {
        "id": "m2",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
    CHAT: {
        "id": "c2",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
    },
}
REFUSALS = [
    (GENERATE, GEM_REFUSED_THEN_CALL, "SAFETY"),
    (ANTHROPIC, A_REFUSED_THEN_TOOL_USE, "refusal"),
    (CHAT, CHAT_CALL_THEN_FILTER, "content_filter"),
]


@pytest.mark.parametrize(("api", "events", "raw"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_a_refusal_earlier_in_the_stream_wins(api: str, events: list[Event], raw: str) -> None:
    turn = read(api, events)
    assert (turn.finish, turn.raw_stop_reason) == (Finish.REFUSAL, raw)
    RAN.clear()
    model = ScriptedModel(api, [Stream(sse(events).decode()), FINAL[api]], check_requests=False)
    outcome = cb.Runner(model=model, registry=REGISTRY).run_sync(input="x", tenant="t", subject="s")
    assert outcome.state == "REFUSED" and RAN == []


def test_anthropic_a_refusal_keeps_its_stop_details() -> None:
    msg_delta = A_REFUSED_THEN_TOOL_USE[4]
    assert isinstance(msg_delta, dict)
    asm = get(ANTHROPIC).stream_assembler()
    for event in A_REFUSED_THEN_TOOL_USE:
        asm.feed(event)
    message, _ = asm.message()
    assert message["stop_reason"] == "refusal"
    assert message["stop_details"] == msg_delta["delta"]["stop_details"]
    assert message["usage"]["output_tokens"] == 6  # usage is still cumulative (D27)


def test_gemini_a_later_refusal_still_wins() -> None:
    first, second = GEM_REFUSED_THEN_CALL
    turn = read(GENERATE, [second, first])
    assert turn.finish is Finish.REFUSAL


# ---- D27: usage already reported survives a cut or an error ----------------------------------------

A_TEXT: list[Event] = [
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "partial"}},
]
ERR_A = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
GEM_USAGE = {"promptTokenCount": 120000, "candidatesTokenCount": 50, "totalTokenCount": 120050}
GEM_PARTIAL = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "partial"}]}}],
    "usageMetadata": GEM_USAGE,
    "responseId": "g",
}
GEM_ERROR = {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
CHAT_USAGE = {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 80, "completion_tokens": 40}}
I_CREATED = {"event_type": "interaction.created", "interaction": {"id": "v1_X", "status": "in_progress"}}
I_TEXT: list[Event] = [
    {"event_type": "step.start", "index": 0, "step": {"type": "model_output", "content": []}},
    {
        "event_type": "step.delta",
        "index": 0,
        "delta": {"type": "text", "text": "hi"},
        "metadata": {"total_usage": {"total_input_tokens": 900, "total_output_tokens": 4}},
    },
]
I_ERROR = {"event_type": "error", "error": {"code": "internal", "message": "x"}}
R_CREATED = {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}
R_ERROR = {"type": "error", "code": "server_error", "message": "boom"}
R_COMPLETED = {
    "type": "response.completed",
    "response": {
        "id": "resp_1",
        "status": "completed",
        "output": [],
        "usage": {"input_tokens": 70, "output_tokens": 9},
    },
}
CUT_OR_FAILED = [
    ("anthropic cut", ANTHROPIC, [A_START, *A_TEXT], Finish.TRUNCATED, Usage(400, 1)),
    ("anthropic error", ANTHROPIC, [A_START, *A_TEXT, ERR_A], Finish.API_FAILURE, Usage(400, 1)),
    (
        "anthropic cut after message_delta",
        ANTHROPIC,
        [
            A_START,
            *A_TEXT,
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 900}},
        ],
        Finish.TRUNCATED,
        Usage(400, 900),
    ),
    ("gemini cut", GENERATE, [GEM_PARTIAL], Finish.TRUNCATED, Usage(120000, 50)),
    ("gemini error", GENERATE, [GEM_PARTIAL, GEM_ERROR], Finish.API_FAILURE, Usage(120000, 50)),
    (
        "chat cut before [DONE]",
        CHAT,
        [chunk({"content": "hi"}, "stop"), CHAT_USAGE],
        Finish.TRUNCATED,
        Usage(80, 40),
    ),
    (
        "chat error",
        CHAT,
        [chunk({"content": "hi"}, "stop"), CHAT_USAGE, {"error": {"message": "x", "type": "server_error"}}],
        Finish.API_FAILURE,
        Usage(80, 40),
    ),
    ("interactions cut", INTERACTIONS, [I_CREATED, *I_TEXT], Finish.TRUNCATED, Usage(900, 4)),
    ("interactions error", INTERACTIONS, [I_CREATED, *I_TEXT, I_ERROR], Finish.API_FAILURE, Usage(900, 4)),
    (
        "responses error then completed",
        RESPONSES,
        [R_CREATED, R_ERROR, R_COMPLETED],
        Finish.API_FAILURE,
        Usage(70, 9),
    ),
]


@pytest.mark.parametrize(
    ("api", "events", "finish", "usage"), [c[1:] for c in CUT_OR_FAILED], ids=[c[0] for c in CUT_OR_FAILED]
)
def test_usage_already_reported_is_kept(api: str, events: list[Event], finish: Finish, usage: Usage) -> None:
    turn = read(api, events)
    assert turn.finish is finish
    assert turn.usage == usage


def test_a_cut_stream_retried_counts_every_attempt_against_the_token_budget() -> None:
    """D12: token budgets are cumulative; D26: retries are not model turns, but their tokens are spent."""
    cut = Stream(sse([A_START, *A_TEXT]).decode())
    final = {**FINAL[ANTHROPIC], "usage": {"input_tokens": 400, "output_tokens": 5}}
    model = ScriptedModel(ANTHROPIC, [cut, cut, cut, final], check_requests=False)
    runner = cb.Runner(
        model=model, registry=REGISTRY, budgets=cb.Budgets(max_input_tokens=1000), clock=FakeClock()
    )
    outcome = runner.run_sync(input="x", tenant="t", subject="s")
    # Three cut attempts of 400 prompt tokens each: the third goes over 1000, and no fourth is sent.
    assert (outcome.state, outcome.reason) == ("STOPPED", "MAX_INPUT_TOKENS")
    assert outcome.usage.input_tokens == 1200
    assert len(model.requests) == 3


# ---- D1: the Responses terminal event's name is the provider's signal --------------------------------

MSG = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "hi", "annotations": []}],
}


@pytest.mark.parametrize(
    ("kind", "status", "finish"),
    [
        ("response.failed", "completed", Finish.API_FAILURE),
        ("response.incomplete", "completed", Finish.API_FAILURE),
        ("response.completed", "failed", Finish.API_FAILURE),
        ("response.completed", "in_progress", Finish.API_FAILURE),
        ("response.completed", "completed", Finish.FINAL_TEXT),
    ],
)
def test_a_contradicted_terminal_event_is_never_success(kind: str, status: str, finish: Finish) -> None:
    events: list[Event] = [
        R_CREATED,
        {"type": "response.output_item.added", "output_index": 0, "item": MSG},
        {"type": "response.output_item.done", "output_index": 0, "item": MSG},
        {"type": kind, "response": {"id": "resp_1", "status": status, "output": [MSG], "error": None}},
    ]
    assert read(RESPONSES, events).finish is finish


def test_an_incomplete_event_with_a_completed_snapshot_keeps_its_details() -> None:
    snapshot = {
        "id": "resp_1",
        "status": "completed",
        "output": [MSG],
        "incomplete_details": {"reason": "max_output_tokens"},
    }
    turn = read(RESPONSES, [R_CREATED, {"type": "response.incomplete", "response": snapshot}])
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "max_tokens")


# ---- D8/D5: an Interactions call goes back with an object ------------------------------------------


def interactions_call(text: str) -> list[Event]:
    return [
        I_CREATED,
        {
            "event_type": "step.start",
            "index": 0,
            "step": {"type": "function_call", "id": "c1", "name": "f", "arguments": {}},
        },
        {"event_type": "step.delta", "index": 0, "delta": {"type": "arguments_delta", "arguments": text}},
        {"event_type": "step.stop", "index": 0},
        {"event_type": "interaction.completed", "interaction": {"id": "v1_X", "status": "requires_action"}},
    ]


@pytest.mark.parametrize(
    ("text", "echoed"),
    [
        ('{"a": 7', {"INVALID_JSON": '{"a": 7'}),  # cut JSON: the text, wrapped (review 22, d)
        ("[7]", {"INVALID_JSON": "[7]"}),  # JSON, but no object: as a plain body's [7] goes back
        ('{"a": 1, "a": 7}', {"a": 7}),  # duplicate keys: the object as the lenient body reader reads it
        ('{"a": 9007199254740993}', {"a": 9007199254740993}),  # beyond 2^53-1
    ],
)
def test_unusable_streamed_arguments_go_back_as_an_object(text: str, echoed: dict[str, Any]) -> None:
    turn = read(INTERACTIONS, interactions_call(text))
    (call,) = turn.calls
    assert call.arguments_raw == text and call.arguments is None and call.arguments_error
    (step,) = [item for item in turn.continuation if item.get("type") == "function_call"]
    assert step["arguments"] == echoed and isinstance(step["arguments"], dict)


def test_an_unusable_call_is_answered_and_echoed_as_an_object() -> None:
    final = {
        "id": "v1_F",
        "status": "completed",
        "steps": [{"type": "model_output", "content": [{"type": "text", "text": "ok"}]}],
    }
    model = ScriptedModel(INTERACTIONS, [Stream(sse(interactions_call('{"a": 7')).decode()), final])
    runner = cb.Runner(
        model=model, registry=REGISTRY, settings={"model": "m", "stream": True}, clock=FakeClock()
    )
    outcome = runner.run_sync(input="x", tenant="t", subject="s")
    assert outcome.state == "COMPLETED"
    echoed = [x for x in model.requests[1]["input"] if x.get("type") == "function_call"]
    assert echoed[0]["arguments"] == {"INVALID_JSON": '{"a": 7'}
    assert "INVALID_ARGUMENTS" in json.dumps(model.requests[1]["input"][-1])  # the function_result
