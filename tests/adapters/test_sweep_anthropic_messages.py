"""Anthropic Messages: regressions found by sweeping real recorded traffic (synthetic bodies that mirror
the shape of the public recordings named in each test)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.anthropic_stream import _DELTA_DATA
from callbound.core.types import CallReady, CallStarted, Finish, ok_result
from tests.adapters import streaming

A = get("anthropic-messages")


def sse(*events: dict[str, Any], compact: bool = True) -> bytes:
    seps = (",", ":") if compact else (", ", ": ")
    out = [
        f"event: {e['type']}\ndata: {json.dumps(e, separators=seps, ensure_ascii=False)}\n\n" for e in events
    ]
    return "".join(out).encode("utf-8")


def start(content: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    message = {"id": "msg_S", "type": "message", "role": "assistant", "model": "claude-x", "content": content or [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 30, "output_tokens": 1}, **extra}  # fmt: skip
    return {"type": "message_start", "message": message}


def delta(index: int, **fields: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": fields}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(reason: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": usage or {"output_tokens": 8}}  # fmt: skip


END = {"type": "message_stop"}


# ---- message_start that already carries content --------------------------------------------------
# Mirrors vercel/ai packages/anthropic/src/__fixtures__/anthropic-message-start-prepopulated-content.chunks.txt:
# a turn resumed inside a code execution container starts with its results and the pending tool_use,
# and the stream is message_start, message_stop (stop_reason already in message_start).

RESULT = {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_r1",
          "content": {"type": "code_execution_result", "stdout": "one\n", "stderr": "", "return_code": 0, "content": []}}  # fmt: skip
PENDING = {"type": "tool_use", "id": "toolu_f", "name": "lookup_customer", "input": {"id": "c_1"},
           "caller": {"type": "code_execution_20250825", "tool_id": "srvtoolu_other"}}  # fmt: skip


def test_message_start_content_is_kept_and_its_tool_use_is_a_call() -> None:
    raw = sse(start([RESULT, PENDING], stop_reason="tool_use"), END)
    turn, progress = streaming.fed(A, raw)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.name, c.call_id, c.arguments) for c in turn.calls] == [
        ("lookup_customer", "toolu_f", {"id": "c_1"})
    ]
    assert turn.continuation == ({"role": "assistant", "content": [RESULT, PENDING]},)  # D8: as received
    assert progress == [CallStarted("toolu_f", "lookup_customer"), CallReady("toolu_f")]
    results = A.result_items(turn, [(turn.calls[0], ok_result({"name": "Ada"}))])
    assert [b["tool_use_id"] for b in results[0]["content"]] == ["toolu_f"]
    body = A.build_request(items=[{"role": "user", "content": "go"}, *A.turn_items(turn), *results], tools=[],
                           settings={}, instructions=None, stream=True)  # fmt: skip
    A.check_request(body, turn)


def test_blocks_streamed_after_message_start_content_follow_it() -> None:
    # The SDK's accumulator appends content_block_start blocks after message_start's content: indices count on.
    raw = sse(
        start([RESULT]),
        block_start(1, {"type": "tool_use", "id": "toolu_n", "name": "lookup", "input": {}}),
        delta(1, type="input_json_delta", partial_json='{"q": "x"}'),
        stop(1),
        message_delta("tool_use"),
        END,
    )
    turn, _ = streaming.fed(A, raw)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.call_id, c.arguments, c.output_index) for c in turn.calls] == [("toolu_n", {"q": "x"}, 1)]
    assert turn.continuation[0]["content"] == [RESULT, {"type": "tool_use", "id": "toolu_n", "name": "lookup", "input": {"q": "x"}}]  # fmt: skip


# ---- compaction blocks -----------------------------------------------------------------------------
# Mirrors anthropics/anthropic-sdk-python tests/lib/streaming/fixtures/compaction_multi_delta_response.txt
# and vercel/ai packages/anthropic/src/__fixtures__/anthropic-compaction.1.chunks.txt: the block starts with
# content null, compaction_delta carries the summary (appended) and may carry encrypted_content (whole).


@pytest.mark.parametrize("compact", [True, False])
def test_compaction_summary_is_kept_for_the_continuation(compact: bool) -> None:
    raw = sse(
        start(),
        block_start(0, {"type": "compaction", "content": None, "encrypted_content": None}),
        delta(0, type="compaction_delta", content="Earlier conversation ", encrypted_content="Epw_one"),
        delta(0, type="compaction_delta", content="summarized in full.", encrypted_content="Epw_two"),
        stop(0),
        block_start(1, {"type": "text", "text": ""}),
        delta(1, type="text_delta", text="Hello there!"),
        stop(1),
        message_delta("end_turn"),
        END,
        compact=compact,
    )
    turn, _ = streaming.fed(A, raw)
    assert turn.finish is Finish.FINAL_TEXT
    assert turn.text == "Hello there!"
    assert turn.continuation[0]["content"] == [
        {
            "type": "compaction",
            "content": "Earlier conversation summarized in full.",
            "encrypted_content": "Epw_two",
        },
        {"type": "text", "text": "Hello there!"},
    ]


@pytest.mark.parametrize("compact", [True, False])
def test_compaction_summary_in_one_delta(compact: bool) -> None:
    summary = '## Summary\n\nThe user asked about \U0001f4e6 "data" structures.'
    raw = sse(
        start(),
        block_start(0, {"type": "compaction", "content": None}),
        {"type": "ping"},
        delta(0, type="compaction_delta", content=summary),
        stop(0),
        message_delta("end_turn"),
        END,
        compact=compact,
    )
    turn, _ = streaming.fed(A, raw)
    assert turn.continuation[0]["content"] == [{"type": "compaction", "content": summary}]


def test_compact_compaction_delta_takes_the_fast_path() -> None:
    line = (
        '{"type":"content_block_delta","index":0,"delta":{"type":"compaction_delta","content":"a \\"b\\""}}'
    )
    found = _DELTA_DATA.fullmatch(line)
    assert found is not None and found.group(2) == 'compaction_delta","content'


def test_a_null_compaction_fragment_keeps_what_the_block_has() -> None:
    raw = sse(
        start(),
        block_start(0, {"type": "compaction", "content": "kept"}),
        delta(0, type="compaction_delta", content=None),
        stop(0),
        message_delta("end_turn"),
        END,
    )
    turn, _ = streaming.fed(A, raw)
    assert turn.continuation[0]["content"] == [{"type": "compaction", "content": "kept"}]


# ---- usage.iterations ------------------------------------------------------------------------------
# Mirrors vercel/ai packages/anthropic/src/__fixtures__/anthropic-compaction.1.chunks.txt (message_delta usage
# with iterations [compaction, message]) and anthropic-advisor-20260301.1.json: the top-level counts cover the
# final sampling step only; D27 wants every prompt and generated token of the request.

ITERATIONS = [
    {"type": "compaction", "input_tokens": 60385, "output_tokens": 522, "cache_read_input_tokens": 0,
     "cache_creation_input_tokens": 0},
    {"type": "message", "input_tokens": 612, "output_tokens": 2819, "cache_read_input_tokens": 100,
     "cache_creation_input_tokens": 20},
]  # fmt: skip


def test_usage_sums_the_iterations_of_a_plain_body() -> None:
    body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{"type": "compaction", "content": "summary"}, {"type": "text", "text": "Based on it"}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 612, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20,
                      "output_tokens": 2819, "iterations": ITERATIONS}}  # fmt: skip
    turn = A.parse_response(body)
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (60385 + 612 + 100 + 20, 522 + 2819)


def test_streamed_usage_sums_the_iterations_of_message_delta() -> None:
    usage = {"input_tokens": 612, "cache_creation_input_tokens": 20, "cache_read_input_tokens": 100,
             "output_tokens": 2819, "iterations": ITERATIONS}  # fmt: skip
    raw = sse(
        start(usage={"input_tokens": 60385, "output_tokens": 5}),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, type="text_delta", text="ok"),
        stop(0),
        message_delta("end_turn", usage),
        END,
    )
    turn, _ = streaming.fed(A, raw)
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (61117, 3341)


def test_usage_without_iterations_is_the_top_level() -> None:
    body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 7, "output_tokens": 3, "iterations": None}}  # fmt: skip
    turn = A.parse_response(body)
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (7, 3)
