"""Review 3 findings: a call runs only after its done event, a stream reads as the same plain body
would, a refusal signal wins even when no item carries it, and ``callbound parse`` finds Chat's end
marker by line.

Issue 3 §4: "Arguments are parsed only after the provider's done event for that call". D31: "A refusal
signal wins over everything else". Every stream here is read twice, event by event through ``feed``
and as bytes through ``StreamFeed`` (the fast paths): both must give the turn asserted.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.sse import iter_payloads
from callbound.cli.parse import parse_input
from callbound.core.machine import classify_turn
from callbound.core.states import State
from callbound.core.types import Finish, ModelTurn
from tests.adapters import streaming

RESPONSES = "openai-responses"
ANTHROPIC = "anthropic-messages"
INTERACTIONS = "gemini-interactions"


def sse(events: list[dict[str, Any]]) -> bytes:
    """Compact JSON, as the APIs send it, so argument deltas take the fast paths."""
    return "".join(f"data: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events).encode()


def turns(api: str, events: list[dict[str, Any]]) -> list[ModelTurn]:
    """The stream's turn through ``feed`` and through ``StreamFeed``; they must agree."""
    raw = sse(events)
    asm = get(api).stream_assembler()
    for payload in iter_payloads([raw]):
        asm.feed(payload)
    by_feed = asm.finish(hashlib.sha256(raw).hexdigest())
    by_bytes, _ = streaming.fed(get(api), raw)
    assert by_feed == by_bytes
    return [by_feed, by_bytes]


def never_runs(turn: ModelTurn, reason: str) -> None:
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, reason), turn
    assert classify_turn(turn).target is State.INCOMPLETE  # no call of the turn is dispatched


# ---- OpenAI Responses ------------------------------------------------------------------------------

CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "refund"}
ARGS = '{"order":1}'


def r_created() -> dict[str, Any]:
    return {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}


def r_added(idx: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.added", "output_index": idx, "item": item}


def r_delta(idx: int, item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "response.function_call_arguments.delta",
        "item_id": item_id,
        "output_index": idx,
        "delta": text,
    }


def r_done(idx: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.done", "output_index": idx, "item": item}


def r_completed(output: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    resp = {
        "id": "resp_1",
        "status": "completed",
        "output": output or [],
        "usage": {"input_tokens": 5, "output_tokens": 3},
    }
    return {"type": "response.completed", "response": resp}


def r_call_start() -> list[dict[str, Any]]:
    return [
        r_created(),
        r_added(0, {**CALL, "arguments": "", "status": "in_progress"}),
        r_delta(0, "fc_1", '{"order":'),
        r_delta(0, "fc_1", "1}"),
    ]


@pytest.mark.parametrize("status", ["incomplete", "in_progress"])
@pytest.mark.parametrize("where", ["done", "snapshot", "both"])
def test_responses_stream_judges_a_call_status_as_the_plain_body_does(status: str, where: str) -> None:
    item = {**CALL, "arguments": ARGS, "status": status}
    plain = get(RESPONSES).parse_response(
        json.dumps(
            {
                "id": "resp_1",
                "status": "completed",
                "output": [item],
                "usage": {"input_tokens": 5, "output_tokens": 3},
            }
        )
    )
    never_runs(plain, "call_incomplete")
    done = [r_done(0, item)] if where in ("done", "both") else []
    snapshot = [item] if where in ("snapshot", "both") else []
    for turn in turns(RESPONSES, [*r_call_start(), *done, r_completed(snapshot)]):
        never_runs(turn, "call_incomplete")
        assert [(c.call_id, c.arguments) for c in turn.calls] == [("call_1", {"order": 1})]  # display only


def test_responses_call_without_any_done_event_never_runs() -> None:
    """No output_item.done, no function_call_arguments.done, an empty terminal snapshot: the call never
    got its done event, though its deltas parse (issue 3 §4)."""
    for turn in turns(RESPONSES, [*r_call_start(), r_completed()]):
        never_runs(turn, "call_incomplete")
    # one finished call beside it does not let the turn run either
    other = {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_2",
        "name": "refund",
        "arguments": ARGS,
        "status": "completed",
    }
    events = [*r_call_start(), r_added(1, {**other, "arguments": ""}), r_done(1, other), r_completed()]
    for turn in turns(RESPONSES, events):
        never_runs(turn, "call_incomplete")


@pytest.mark.parametrize(
    "finish_event",
    [
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 0,
            "arguments": ARGS,
        },
        r_done(0, {**CALL, "arguments": ARGS, "status": "completed"}),
    ],
    ids=["arguments.done", "output_item.done"],
)
def test_responses_either_done_event_finishes_the_call(finish_event: dict[str, Any]) -> None:
    for turn in turns(RESPONSES, [*r_call_start(), finish_event, r_completed()]):
        assert turn.finish is Finish.TOOL_PROPOSALS
        assert [(c.call_id, c.arguments) for c in turn.calls] == [("call_1", {"order": 1})]


def test_responses_a_snapshot_holding_the_call_elsewhere_finishes_it() -> None:
    """The terminal snapshot is the response's own final word on an item, even at another position
    than its output_index (streams whose indices leave gaps)."""
    final = {**CALL, "arguments": ARGS, "status": "completed"}
    events = [
        r_created(),
        r_added(2, {**CALL, "arguments": "", "status": "in_progress"}),
        r_delta(2, "fc_1", ARGS),
        r_completed([final]),
    ]
    for turn in turns(RESPONSES, events):
        assert turn.finish is Finish.TOOL_PROPOSALS
        assert list(turn.continuation) == [final]  # once, from the snapshot


REFUSAL_TEXT = "I can't help with that."


def refusal_events() -> dict[str, dict[str, Any]]:
    at = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    return {
        "part.added": {
            "type": "response.content_part.added",
            **at,
            "part": {"type": "refusal", "refusal": ""},
        },
        "delta": {"type": "response.refusal.delta", **at, "delta": REFUSAL_TEXT},
        "refusal.done": {"type": "response.refusal.done", **at, "refusal": REFUSAL_TEXT},
        "part.done": {
            "type": "response.content_part.done",
            **at,
            "part": {"type": "refusal", "refusal": REFUSAL_TEXT},
        },
    }


@pytest.mark.parametrize(
    "kinds",
    [
        ["part.added", "delta", "refusal.done", "part.done"],
        ["part.added"],
        ["delta"],
        ["refusal.done"],
        ["part.done"],
    ],
    ids="+".join,
)
def test_responses_refusal_events_win_without_a_done_item(kinds: list[str]) -> None:
    """A refusal told only by its events (no output_item.done, an empty terminal snapshot) is still a
    refusal signal, and it wins over everything else in the turn, a finished call included (D31)."""
    message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
    call = {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_2",
        "name": "refund",
        "arguments": ARGS,
        "status": "completed",
    }
    by_kind = refusal_events()
    events = [
        r_created(),
        r_added(0, message),
        *(by_kind[k] for k in kinds),
        r_added(1, {**call, "arguments": ""}),
        r_done(1, call),
        r_completed(),
    ]
    for turn in turns(RESPONSES, events):
        assert (turn.finish, turn.reason) == (Finish.REFUSAL, "refusal"), turn
        assert turn.refusal == ("" if kinds == ["part.added"] else REFUSAL_TEXT)


def test_responses_refusal_in_the_done_item_is_read_once() -> None:
    part = {"type": "refusal", "refusal": REFUSAL_TEXT}
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }
    events = [
        r_created(),
        r_added(0, {**message, "status": "in_progress", "content": []}),
        *refusal_events().values(),
        r_done(0, message),
        r_completed(),
    ]
    for turn in turns(RESPONSES, events):
        assert (turn.finish, turn.refusal) == (Finish.REFUSAL, REFUSAL_TEXT)


def test_responses_a_refusal_event_placed_at_no_item_still_wins() -> None:
    """An event that names no item (no output_index, an unknown item_id) is still a refusal signal;
    its text counts only when no item carries a refusal of its own."""
    stray = {
        "type": "response.refusal.done",
        "item_id": "msg_unknown",
        "content_index": 0,
        "refusal": REFUSAL_TEXT,
    }
    for turn in turns(RESPONSES, [r_created(), stray, r_completed()]):
        assert (turn.finish, turn.refusal) == (Finish.REFUSAL, REFUSAL_TEXT)
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "No."}],
    }
    for turn in turns(RESPONSES, [r_created(), stray, r_done(0, message), r_completed()]):
        assert (turn.finish, turn.refusal) == (Finish.REFUSAL, "No.")


# ---- Anthropic Messages ----------------------------------------------------------------------------


def a_start() -> dict[str, Any]:
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    return {"type": "message_start", "message": message}


def a_tool(index: int, tool_id: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": tool_id, "name": "f", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": '{"a":'},
        },
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": "1}"},
        },
    ]


def a_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def a_end(stop_reason: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]


def test_anthropic_tool_use_without_content_block_stop_never_runs() -> None:
    for turn in turns(ANTHROPIC, [a_start(), *a_tool(0, "toolu_a"), *a_end("tool_use")]):
        never_runs(turn, "arguments_incomplete")
        assert [(c.call_id, c.arguments) for c in turn.calls] == [("toolu_a", {"a": 1})]  # display only
    # parallel calls: one stopped, one not; none runs
    events = [a_start(), *a_tool(0, "toolu_a"), a_stop(0), *a_tool(1, "toolu_b"), *a_end("tool_use")]
    for turn in turns(ANTHROPIC, events):
        never_runs(turn, "arguments_incomplete")
    events = [
        a_start(),
        *a_tool(0, "toolu_a"),
        a_stop(0),
        *a_tool(1, "toolu_b"),
        a_stop(1),
        *a_end("tool_use"),
    ]
    for turn in turns(ANTHROPIC, events):
        assert turn.finish is Finish.TOOL_PROPOSALS and len(turn.calls) == 2


@pytest.mark.parametrize(
    ("stop", "finish", "reason"),
    [("max_tokens", Finish.TRUNCATED, "max_tokens"), ("refusal", Finish.REFUSAL, "refusal")],
)
def test_anthropic_an_open_block_keeps_the_stop_reason_that_wins(
    stop: str, finish: Finish, reason: str
) -> None:
    """A max_tokens cut skips content_block_stop (WIRE.md 3.4) and stays max_tokens; a refusal still
    wins over everything (D31)."""
    for turn in turns(ANTHROPIC, [a_start(), *a_tool(0, "toolu_a"), *a_end(stop)]):
        assert (turn.finish, turn.reason) == (finish, reason)


# ---- Gemini Interactions ---------------------------------------------------------------------------


def i_created() -> dict[str, Any]:
    return {
        "event_type": "interaction.created",
        "interaction": {"id": "v1_x", "status": "in_progress", "model": "gemini-x"},
    }


def i_call(index: int, call_id: str) -> list[dict[str, Any]]:
    return [
        {
            "index": index,
            "step": {"type": "function_call", "id": call_id, "name": "f", "arguments": {}},
            "event_type": "step.start",
        },
        {
            "index": index,
            "delta": {"arguments": '{"a":', "type": "arguments_delta"},
            "event_type": "step.delta",
        },
        {"index": index, "delta": {"arguments": "1}", "type": "arguments_delta"}, "event_type": "step.delta"},
    ]


def i_stop(index: int) -> dict[str, Any]:
    return {"index": index, "event_type": "step.stop"}


def i_end(status: str) -> dict[str, Any]:
    return {"event_type": "interaction.completed", "interaction": {"id": "v1_x", "status": status}}


@pytest.mark.parametrize("status", ["requires_action", "completed"])
def test_interactions_call_without_step_stop_never_runs(status: str) -> None:
    for turn in turns(INTERACTIONS, [i_created(), *i_call(0, "c1"), i_end(status)]):
        never_runs(turn, "arguments_incomplete")
        assert [(c.call_id, c.arguments) for c in turn.calls] == [("c1", {"a": 1})]  # display only
    events = [i_created(), *i_call(0, "c1"), i_stop(0), *i_call(1, "c2"), i_end(status)]
    for turn in turns(INTERACTIONS, events):
        never_runs(turn, "arguments_incomplete")
    events = [i_created(), *i_call(0, "c1"), i_stop(0), *i_call(1, "c2"), i_stop(1), i_end(status)]
    for turn in turns(INTERACTIONS, events):
        assert turn.finish is Finish.TOOL_PROPOSALS and len(turn.calls) == 2


def test_interactions_legacy_call_without_content_stop_never_runs() -> None:
    start = {"event_type": "interaction.start", "interaction": {"id": "v1_x", "status": "in_progress"}}
    call = [
        {"index": 0, "content": {"type": "function_call", "id": "c1"}, "event_type": "content.start"},
        {
            "index": 0,
            "delta": {"type": "function_call", "id": "c1", "name": "f", "arguments": {"a": 1}},
            "event_type": "content.delta",
        },
    ]
    end = {"event_type": "interaction.complete", "interaction": {"id": "v1_x", "status": "requires_action"}}
    for turn in turns(INTERACTIONS, [start, *call, end]):
        never_runs(turn, "arguments_incomplete")
    stop = {"index": 0, "event_type": "content.stop"}
    for turn in turns(INTERACTIONS, [start, *call, stop, end]):
        assert turn.finish is Finish.TOOL_PROPOSALS


# ---- callbound parse: Chat JSON-lines -------------------------------------------------------------


def chat_chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-x",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


@pytest.mark.parametrize("content", ["say [DONE]", "[DONE]", "x\\n[DONE]\\n"])
@pytest.mark.parametrize("marker", [False, True], ids=["no-marker-line", "marker-line"])
def test_parse_chat_jsonl_finds_the_end_marker_by_line(content: str, marker: bool) -> None:
    """Model text holding the characters "[DONE]" is no end marker: only a line that is one counts,
    so a finished JSON-lines stream reads as finished either way."""
    chunks = [
        chat_chunk({"role": "assistant", "content": json.loads(f'"{content}"')}, None),
        chat_chunk({}, "stop"),
    ]
    text = "".join(json.dumps(c) + "\n" for c in chunks) + ("[DONE]\n" if marker else "")
    out = parse_input("openai-chat", text.encode())
    assert (out["finish"], out["reason"], out["text"]) == ("FINAL_TEXT", None, json.loads(f'"{content}"'))
