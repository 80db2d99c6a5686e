"""A response whose content or call container, or an entry of one, has the wrong JSON type is
API_FAILURE(malformed_response) → FAILED(MALFORMED_RESPONSE) on every API, plain or streamed (review round
16, F6): never a completion with empty text, never a call dropped while its siblings run.

openai-responses already read its ``output`` so (docs/stop-reasons.md); the other four read such a body
leniently: Chat ``"message": "junk"`` or Anthropic ``"content": "junk"`` completed with empty text, and a
Chat ``tool_calls: [<write call>, 5]`` ran the write and echoed the ``5`` back. D1: "Only an explicit
completion is success". The ``failure.error_code`` names the first container or entry of the wrong type
(``adapters/shapes.py``). A missing member and ``null`` still read as absent (Chat's null ``content``
beside tool calls, ``tool_calls: null``), an empty list is still an empty answer, and a turn that is no
success anyway (a length stop, a refusal) keeps its finish. Payloads are synthetic, in the shapes WIRE.md
gives.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.core.types import Finish, ModelTurn
from callbound.testing import ScriptedModel
from tests.adapters import streaming

CHAT, ANTHROPIC, GEMINI, INTERACTIONS = (
    "openai-chat",
    "anthropic-messages",
    "gemini-generate",
    "gemini-interactions",
)
CALL = {"id": "call_1", "type": "function", "function": {"name": "pay", "arguments": '{"order_id": "A1"}'}}
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "pay", "input": {"order_id": "A1"}}
FC = {"functionCall": {"name": "pay", "args": {"order_id": "A1"}}}
STEP_CALL = {"type": "function_call", "id": "c1", "name": "pay", "arguments": {"order_id": "A1"}}


def chat(message: Any, finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


def anthropic(content: Any, stop: str = "end_turn") -> dict[str, Any]:
    return {"id": "m", "type": "message", "role": "assistant", "content": content, "stop_reason": stop}


def gemini(content: Any, finish: str = "STOP") -> dict[str, Any]:
    return {"responseId": "g", "candidates": [{"content": content, "finishReason": finish}]}


def gparts(parts: Any) -> dict[str, Any]:
    return gemini({"role": "model", "parts": parts})


def inter(status: str = "completed", **members: Any) -> dict[str, Any]:
    return {"id": "v1_1", "status": status, **members}


def assistant(**members: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "ok", **members}


PLAIN = [
    (CHAT, chat("junk"), "message_not_an_object"),
    (CHAT, chat(5), "message_not_an_object"),
    (CHAT, chat({"role": "assistant", "content": 5}), "content_not_text"),
    (CHAT, chat({"role": "assistant", "content": {"type": "text", "text": "ok"}}), "content_not_text"),
    (CHAT, chat({"role": "assistant", "content": ["ok"]}), "content_part_not_an_object"),
    (CHAT, chat(assistant(tool_calls="junk")), "tool_calls_not_a_list"),
    (CHAT, chat(assistant(tool_calls={"0": CALL})), "tool_calls_not_a_list"),
    (CHAT, chat(assistant(tool_calls=[5])), "tool_call_not_an_object"),
    (CHAT, chat(assistant(tool_calls=[CALL, 5]), "tool_calls"), "tool_call_not_an_object"),
    (CHAT, chat(assistant(tool_calls=[CALL, {"id": "c2", "type": "function", "function": "junk"}]), "tool_calls"), "function_not_an_object"),
    (CHAT, chat(assistant(function_call="junk"), "function_call"), "function_call_not_an_object"),
    (ANTHROPIC, anthropic("junk"), "content_not_a_list"),
    (ANTHROPIC, anthropic({"type": "text", "text": "ok"}), "content_not_a_list"),
    (ANTHROPIC, anthropic([5]), "content_block_not_an_object"),
    (ANTHROPIC, anthropic([{"type": "text", "text": "ok"}, "junk"], "stop_sequence"), "content_block_not_an_object"),
    (ANTHROPIC, anthropic([TOOL_USE, 5], "tool_use"), "content_block_not_an_object"),
    (ANTHROPIC, anthropic("junk", "tool_use"), "content_not_a_list"),
    (ANTHROPIC, anthropic([5], "pause_turn"), "content_block_not_an_object"),
    (GEMINI, gemini("junk"), "content_not_an_object"),
    (GEMINI, gemini([{"text": "ok"}]), "content_not_an_object"),
    (GEMINI, gparts("junk"), "parts_not_a_list"),
    (GEMINI, gparts({"text": "ok"}), "parts_not_a_list"),
    (GEMINI, gparts([5]), "part_not_an_object"),
    (GEMINI, gparts([FC, "junk"]), "part_not_an_object"),
    (GEMINI, gparts([{"text": "ok"}, {"functionCall": "junk"}]), "function_call_not_an_object"),
    (GEMINI, gparts([FC, {"functionCall": ["pay"]}]), "function_call_not_an_object"),
    (INTERACTIONS, inter(steps="junk"), "steps_not_a_list"),
    (INTERACTIONS, inter(steps=[5]), "step_not_an_object"),
    (INTERACTIONS, inter("requires_action", steps=[STEP_CALL, "junk"]), "step_not_an_object"),
    (INTERACTIONS, inter(steps=[{"type": "model_output", "content": "junk"}]), "content_not_a_list"),
    (INTERACTIONS, inter(steps=[{"type": "model_output", "content": [5]}]), "content_item_not_an_object"),
    (INTERACTIONS, inter(outputs="junk"), "outputs_not_a_list"),
    (INTERACTIONS, inter(outputs=[5]), "output_not_an_object"),
    (INTERACTIONS, inter("requires_action", outputs=[STEP_CALL, 5]), "output_not_an_object"),
    # review round 17, r1 F1: a step's type of another JSON type raised TypeError (unhashable) out of
    # parse_response: a traceback from `callbound parse`, and the Runner retried it as a connection error
    (INTERACTIONS, inter(steps=[{"type": ["text"], "text": "ok"}]), "step_type_not_a_string"),
    (INTERACTIONS, inter("requires_action", steps=[{"type": {"x": 1}}, STEP_CALL]), "step_type_not_a_string"),
    (INTERACTIONS, inter(outputs=[{"type": ["text"], "text": "ok"}]), "output_type_not_a_string"),
    (INTERACTIONS, inter(steps=[{"type": 5}]), "step_type_not_a_string"),
]  # fmt: skip


def _malformed(turn: ModelTurn, code: str) -> None:
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "malformed_response")
    assert turn.failure is not None and turn.failure.error_code == code
    assert not turn.failure.retryable, "the same response would come back"
    assert not turn.executable


@pytest.mark.parametrize(
    ("api", "body", "code"), PLAIN, ids=[f"{a}-{c}-{i}" for i, (a, _, c) in enumerate(PLAIN)]
)
def test_a_plain_body_of_the_wrong_shape_is_malformed(api: str, body: dict[str, Any], code: str) -> None:
    _malformed(get(api).parse_response(json.dumps(body).encode()), code)


class Pay(BaseModel):
    order_id: str


@pytest.mark.parametrize(
    ("api", "body"),
    [
        (CHAT, chat(assistant(tool_calls=[CALL, 5]), "tool_calls")),
        (CHAT, chat(assistant(tool_calls=[CALL, {"id": "c2", "type": "function", "function": "junk"}]), "tool_calls")),
        (ANTHROPIC, anthropic([TOOL_USE, "junk"], "tool_use")),
        (GEMINI, gparts([FC, {"functionCall": "junk"}])),
        (INTERACTIONS, inter("requires_action", steps=[STEP_CALL, 5])),
        (INTERACTIONS, inter("requires_action", steps=[{"type": ["thought"]}, STEP_CALL])),
    ],
    ids=["chat-entry", "chat-function", "anthropic", "gemini", "interactions", "interactions-type"],
)  # fmt: skip
def test_no_write_runs_beside_an_entry_of_the_wrong_type(api: str, body: dict[str, Any]) -> None:
    paid: list[str] = []

    def pay(args: Pay, ctx: cb.CallContext) -> dict[str, Any]:
        paid.append(args.order_id)
        return {"paid": args.order_id}

    spec = cb.ToolSpec(
        name="pay", description="Pay", params=Pay, handler=pay, schema_version="v1", risk="write"
    )
    model = ScriptedModel(api, [body])
    out = cb.Runner(model=model, registry=cb.Registry([spec])).run_sync("pay", tenant="t", subject="s")
    assert (out.state.value, out.reason, paid) == ("FAILED", "MALFORMED_RESPONSE", [])
    assert len(model.requests) == 1  # not retried


LEGITIMATE = [
    (CHAT, chat({"role": "assistant", "content": None, "tool_calls": [CALL]}, "tool_calls"), Finish.TOOL_PROPOSALS),
    (CHAT, chat(assistant(tool_calls=None, function_call=None)), Finish.FINAL_TEXT),
    (CHAT, chat(assistant(tool_calls=[])), Finish.FINAL_TEXT),
    (CHAT, chat({"role": "assistant", "content": [{"type": "text", "text": "ok"}]}), Finish.FINAL_TEXT),
    (CHAT, chat("junk", "length"), Finish.TRUNCATED),
    (CHAT, chat(assistant(tool_calls=[5]), "content_filter"), Finish.REFUSAL),
    (ANTHROPIC, anthropic([]), Finish.FINAL_TEXT),
    (ANTHROPIC, anthropic(None), Finish.FINAL_TEXT),
    (ANTHROPIC, anthropic("junk", "max_tokens"), Finish.TRUNCATED),
    (ANTHROPIC, anthropic([5], "refusal"), Finish.REFUSAL),
    (GEMINI, gemini({}, "SAFETY"), Finish.REFUSAL),
    (GEMINI, gemini({"role": "model"}, "MAX_TOKENS"), Finish.TRUNCATED),
    (GEMINI, gemini("junk", "MAX_TOKENS"), Finish.TRUNCATED),
    (GEMINI, gparts([{"text": "ok"}, {"functionCall": None}]), Finish.FINAL_TEXT),
    (GEMINI, gparts([]), Finish.FINAL_TEXT),
    (INTERACTIONS, inter(steps=[]), Finish.FINAL_TEXT),
    (INTERACTIONS, inter(steps=[{"type": "model_output", "content": None}]), Finish.FINAL_TEXT),
    (INTERACTIONS, inter("incomplete", steps="junk"), Finish.TRUNCATED),
    (INTERACTIONS, inter("requires_action", steps=[STEP_CALL]), Finish.TOOL_PROPOSALS),
]  # fmt: skip


@pytest.mark.parametrize(
    ("api", "body", "finish"), LEGITIMATE, ids=[f"{a}-{i}" for i, (a, _, _) in enumerate(LEGITIMATE)]
)
def test_null_empty_and_non_success_turns_read_as_before(
    api: str, body: dict[str, Any], finish: Finish
) -> None:
    assert get(api).parse_response(json.dumps(body).encode()).finish is finish


# ---- streams -----------------------------------------------------------------------------------------


def _data(*events: Any) -> bytes:
    return b"".join(
        b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n" for e in events
    )


def _named(*events: dict[str, Any], key: str) -> bytes:
    return "".join(f"event: {e[key]}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _chat_chunk(delta: Any, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _chat_stream(*deltas: Any, finish: str = "stop") -> bytes:
    return _data(
        _chat_chunk({"role": "assistant", "content": "ok"}),
        *(_chat_chunk(d) for d in deltas),
        _chat_chunk({}, finish),
        b"[DONE]",
    )


FRAG = {
    "index": 0,
    "id": "call_1",
    "type": "function",
    "function": {"name": "pay", "arguments": '{"order_id":"A1"}'},
}

CHAT_STREAMS = [
    (_chat_stream("junk"), "delta_not_an_object"),
    (_chat_stream({"content": 5}), "content_not_text"),
    (_chat_stream({"tool_calls": "junk"}), "tool_calls_not_a_list"),
    (_chat_stream({"tool_calls": [FRAG]}, {"tool_calls": [5]}, finish="tool_calls"), "tool_call_not_an_object"),
    (_chat_stream({"tool_calls": [FRAG, {"index": 1, "id": "c2", "function": "junk"}]}, finish="tool_calls"), "function_not_an_object"),
    (_chat_stream({"function_call": "junk"}, finish="function_call"), "function_call_not_an_object"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "code"), CHAT_STREAMS, ids=[c for _, c in CHAT_STREAMS])
def test_a_chat_stream_of_the_wrong_shape_is_malformed(raw: bytes, code: str) -> None:
    _malformed(streaming.fed(get(CHAT), raw)[0], code)


def test_a_chat_stream_with_null_members_still_runs() -> None:
    raw = _chat_stream({"content": None, "tool_calls": None}, {"tool_calls": [FRAG]}, finish="tool_calls")
    assert streaming.fed(get(CHAT), raw)[0].finish is Finish.TOOL_PROPOSALS


def _anthropic_stream(start_content: Any, *middle: dict[str, Any]) -> bytes:
    message = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "content": start_content,
        "stop_reason": None,
    }
    return _named(
        {"type": "message_start", "message": message},
        *middle,
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
        key="type",
    )


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (_anthropic_stream("junk"), "content_not_a_list"),
        (_anthropic_stream([5]), "content_block_not_an_object"),
        (_anthropic_stream([], {"type": "content_block_start", "index": 0, "content_block": "junk"}), "content_block_not_an_object"),
    ],
    ids=["content", "start-block", "block"],
)  # fmt: skip
def test_an_anthropic_stream_of_the_wrong_shape_is_malformed(raw: bytes, code: str) -> None:
    _malformed(streaming.fed(get(ANTHROPIC), raw)[0], code)


def test_an_anthropic_stream_with_empty_content_still_completes() -> None:
    text = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
    ]
    assert streaming.fed(get(ANTHROPIC), _anthropic_stream([], *text))[0].finish is Finish.FINAL_TEXT


def _gemini_chunk(content: Any, finish: str | None = None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": content}
    if finish is not None:
        cand["finishReason"] = finish
    return {"responseId": "g", "candidates": [cand]}


GEMINI_STREAMS = [
    ("junk", "content_not_an_object"),
    ({"role": "model", "parts": "junk"}, "parts_not_a_list"),
    ({"role": "model", "parts": [5]}, "part_not_an_object"),
    ({"role": "model", "parts": [{"functionCall": "junk"}]}, "function_call_not_an_object"),
]


@pytest.mark.parametrize(("content", "code"), GEMINI_STREAMS, ids=[c for _, c in GEMINI_STREAMS])
def test_a_gemini_stream_of_the_wrong_shape_is_malformed(content: Any, code: str) -> None:
    raw = _data(
        _gemini_chunk({"role": "model", "parts": [FC]}),
        _gemini_chunk(content),
        _gemini_chunk({"role": "model", "parts": [{"text": "ok"}]}, "STOP"),
    )
    _malformed(streaming.fed(get(GEMINI), raw)[0], code)


CREATED = {"event_type": "interaction.created", "interaction": {"id": "v1_s", "status": "in_progress"}}
STARTED = {"event_type": "interaction.start", "interaction": {"id": "v1_s", "status": "in_progress"}}


def _completed(**members: Any) -> dict[str, Any]:
    return {
        "event_type": "interaction.completed",
        "interaction": {"id": "v1_s", "status": "completed", **members},
    }


INTERACTION_STREAMS = [
    ([CREATED, {"event_type": "step.start", "index": 0, "step": 5}, {"event_type": "step.stop", "index": 0}, _completed()], "step_not_an_object"),
    ([STARTED, {"event_type": "content.start", "index": 0, "content": "junk"}, {"event_type": "content.stop", "index": 0},
      {"event_type": "interaction.complete", "interaction": {"id": "v1_s", "status": "completed"}}], "output_not_an_object"),
    ([CREATED, {"event_type": "step.start", "index": 0, "step": {"type": "model_output", "content": "junk"}},
      {"event_type": "step.stop", "index": 0}, _completed()], "content_not_a_list"),
    ([CREATED, {"event_type": "step.start", "index": 0, "step": {"type": "model_output", "content": [5]}},
      {"event_type": "step.stop", "index": 0}, _completed()], "content_item_not_an_object"),
    ([CREATED, _completed(steps="junk")], "steps_not_a_list"),
    ([CREATED, {"event_type": "step.start", "index": 0, "step": {"type": ["text"]}},
      {"event_type": "step.stop", "index": 0}, _completed()], "step_type_not_a_string"),
]  # fmt: skip


@pytest.mark.parametrize(("events", "code"), INTERACTION_STREAMS, ids=[c for _, c in INTERACTION_STREAMS])
def test_an_interactions_stream_of_the_wrong_shape_is_malformed(
    events: list[dict[str, Any]], code: str
) -> None:
    _malformed(streaming.fed(get(INTERACTIONS), _named(*events, key="event_type"))[0], code)
