"""openai-chat: regressions found by sweeping real recorded traffic. Every body here is a small
synthetic one written for the test; the comment above each test names the public recording whose
shape it mirrors (repository and path). No recording is copied into this repository."""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.core.types import Finish, ok_result
from tests.adapters.streaming import fed

A = get("openai-chat")


def sse(*events: dict[str, Any] | str, done: bool = True) -> bytes:
    out = "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events)
    return (out + ("data: [DONE]\n\n" if done else "")).encode()


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **top: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m", "choices": choices, **top}


def call_start(index: int | None, cid: str, name: str) -> dict[str, Any]:
    frag: dict[str, Any] = {"id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
    if index is not None:
        frag["index"] = index
    return frag


def calls_of(turn: Any) -> list[tuple[str, str, Any]]:
    return [(c.call_id, c.name, c.arguments) for c in turn.calls]


def next_request_ok(turn: Any) -> dict[str, Any]:
    items = [{"role": "user", "content": "q"}, *A.turn_items(turn)]
    items += A.result_items(turn, [(c, ok_result({"n": i})) for i, c in enumerate(turn.calls)])
    body = A.build_request(items=items, tools=[], settings={}, instructions=None, stream=False)
    A.check_request(body, turn)
    return body


# openai/openai-python .inline-snapshot/external/7ae6c1a2631b….bin (max_tokens=1): the stream opens
# with "refusal": "" and ends on "length". An empty refusal is no refusal (D1, D31).
def test_empty_refusal_then_length_is_truncated_not_refusal() -> None:
    raw = sse(chunk({"role": "assistant", "content": None, "refusal": ""}), chunk({}, "length"))
    turn, _ = fed(A, raw)
    assert (turn.finish, turn.raw_stop_reason, turn.reason, turn.refusal) == (
        Finish.TRUNCATED,
        "length",
        "max_tokens",
        None,
    )
    plain = {
        "id": "c",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok", "refusal": ""},
                     "finish_reason": "stop"}],
    }  # fmt: skip
    assert A.parse_response(plain).finish is Finish.FINAL_TEXT
    real = sse(chunk({"role": "assistant", "refusal": ""}), chunk({"refusal": "No."}), chunk({}, "stop"))
    assert fed(A, real)[0].finish is Finish.REFUSAL


# vercel/ai packages/moonshotai/src/__fixtures__/moonshotai-stream-indexless-tool-calls.chunks.txt:
# two calls opened in one delta without "index", then one delta with both argument fragments.
def test_indexless_fragments_continue_the_open_calls_in_order() -> None:
    raw = sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"tool_calls": [call_start(None, "w0", "weather"), call_start(None, "t1", "time")]}),
        chunk({"tool_calls": [{"function": {"arguments": '{"city":"Oslo"}'}},
                              {"function": {"arguments": '{"zone":"UTC"}'}}]}),
        chunk({}, "tool_calls"),
    )  # fmt: skip
    turn, _ = fed(A, raw)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert calls_of(turn) == [("w0", "weather", {"city": "Oslo"}), ("t1", "time", {"zone": "UTC"})]
    next_request_ok(turn)


def test_indexless_fragment_repeating_its_id_stays_on_its_call() -> None:
    raw = sse(
        chunk({"tool_calls": [call_start(None, "a", "f")]}),
        chunk({"tool_calls": [{"id": "a", "function": {"arguments": '{"x":'}}]}),
        chunk({"tool_calls": [{"id": "a", "function": {"arguments": "1}"}}]}),
        chunk({}, "tool_calls"),
    )
    turn, _ = fed(A, raw)
    assert calls_of(turn) == [("a", "f", {"x": 1})]


# vercel/ai packages/moonshotai/src/__fixtures__/moonshotai-stream-choice-usage.chunks.txt and
# moonshotai-stream-usage-precedence.chunks.txt: usage on the finishing choice; a top-level usage wins.
def test_choice_level_usage_is_read_and_top_level_usage_wins() -> None:
    finishing = {"index": 0, "delta": {}, "finish_reason": "stop",
                 "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}  # fmt: skip
    only_choice = sse(chunk({"content": "OK"}), {**chunk(), "choices": [finishing]})
    turn, _ = fed(A, only_choice)
    assert (turn.finish, turn.usage.input_tokens, turn.usage.output_tokens) == (Finish.FINAL_TEXT, 12, 5)
    top = chunk(usage={"prompt_tokens": 99, "completion_tokens": 33, "total_tokens": 132})
    both = sse(chunk({"content": "OK"}), {**chunk(), "choices": [finishing]}, top)
    turn, _ = fed(A, both)
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (99, 33)


# vercel/ai packages/moonshotai/src/__fixtures__/moonshotai-stream-error.chunks.txt: an error event
# {"type": "server_error", "code": "stream_failure"}; the type makes it retryable (D26).
def test_error_event_with_server_error_type_is_retryable_whatever_the_code() -> None:
    err = {"error": {"message": "Stream failed", "type": "server_error", "code": "stream_failure"}}
    turn, _ = fed(A, sse(chunk({"role": "assistant", "content": "Partial"}), err, done=False))
    assert (turn.finish, turn.raw_stop_reason) == (Finish.API_FAILURE, "stream_failure")  # D32: the code
    assert turn.failure is not None and turn.failure.kind == "error_event" and turn.failure.retryable


# pydantic/pydantic-ai tests/models/cassettes/test_openrouter/test_openrouter_stream_error.yaml:
# OpenRouter puts {"error": {"code": 400, "message": ...}} (an integer, HTTP-like) on a chunk.
@pytest.mark.parametrize(
    ("code", "retryable", "reason"),
    [(400, False, "api_error"), (502, True, "api_error"), (429, True, "rate_limited")],
)
def test_openrouter_error_chunk_with_integer_code(code: int, retryable: bool, reason: str) -> None:
    err = {**chunk({"role": "assistant", "content": ""}), "error": {"code": code, "message": "x"}}
    turn, _ = fed(A, sse(chunk({"role": "assistant", "content": ""}, "length"), err))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.API_FAILURE, str(code), reason)
    assert turn.failure is not None and turn.failure.retryable is retryable
    assert turn.failure.error_code == str(code)


# vercel/ai packages/deepseek/src/chat/__fixtures__/deepseek-tool-call.chunks.txt and
# packages/openai-compatible/src/chat/__fixtures__/xai-tool-call.chunks.txt: reasoning_content
# streamed before the call. DeepSeek and Kimi answer 400 when an assistant tool-call message comes
# back without it (pydantic-ai test_deepseek_deferred_capability_with_thinking.yaml sends it back).
def test_streamed_reasoning_content_travels_in_the_continuation() -> None:
    raw = sse(
        chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
        chunk({"content": None, "reasoning_content": "Use the "}),
        chunk({"content": None, "reasoning_content": "tool."}),
        chunk({"tool_calls": [{"index": 0, **call_start(None, "call_0", "weather")}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":"SF"}'}}]}),
        chunk({"content": "", "reasoning_content": None}, "tool_calls"),
    )
    turn, _ = fed(A, raw)
    assert turn.finish is Finish.TOOL_PROPOSALS
    message = turn.continuation[0]
    assert message["reasoning_content"] == "Use the tool."
    assert message["tool_calls"][0]["id"] == "call_0"
    assert next_request_ok(turn)["messages"][1]["reasoning_content"] == "Use the tool."


# pydantic/pydantic-ai tests/models/cassettes/test_groq/test_tool_use_failed_error_streaming.yaml:
# Groq streams "reasoning"; Groq rejects that field on a request, so a stream does not carry it.
def test_groq_streamed_reasoning_is_not_carried() -> None:
    raw = sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning": "think", "channel": "analysis"}),
        chunk({"content": "done"}),
        chunk({}, "stop"),
    )
    turn, _ = fed(A, raw)
    assert turn.continuation == ({"role": "assistant", "content": "done"},)


# pydantic/pydantic-ai tests/models/cassettes/test_openrouter/test_openrouter_stream_error.yaml
# (reasoning.text pieces of one index) and test_openrouter_stream_with_reasoning.yaml
# (one reasoning.encrypted item): OpenRouter wants reasoning_details back as the plain body has them.
def test_openrouter_reasoning_details_are_merged_into_the_continuation() -> None:
    def details(*items: dict[str, Any]) -> dict[str, Any]:
        return chunk({"role": "assistant", "content": "", "reasoning_details": list(items)})

    raw = sse(
        details({"type": "reasoning.text", "text": "We need", "index": 0, "format": None}),
        details({"type": "reasoning.text", "text": " to answer.", "index": 0, "format": None}),
        details({"type": "reasoning.text", "text": "", "index": 0, "signature": "sig"}),
        details({"type": "reasoning.encrypted", "data": "gAAA", "id": "rs_1", "index": 1}),
        details(),
        chunk({"content": "Hi"}),
        chunk({"content": ""}, "stop"),
    )
    turn, _ = fed(A, raw)
    assert turn.finish is Finish.FINAL_TEXT and turn.text == "Hi"
    assert turn.continuation[0]["reasoning_details"] == [
        {
            "type": "reasoning.text",
            "index": 0,
            "format": None,
            "signature": "sig",
            "text": "We need to answer.",
        },
        {"type": "reasoning.encrypted", "data": "gAAA", "id": "rs_1", "index": 1},
    ]


# vercel/ai packages/moonshotai/src/moonshotai-chat-language-model.test.ts ("should tolerate null
# streamed response metadata fields"): a choice with "index": null is the only choice.
def test_choice_with_null_or_missing_index_is_the_turn() -> None:
    null_index = {
        **chunk(),
        "choices": [{"index": None, "delta": {"content": "Hello"}, "finish_reason": "stop"}],
    }
    turn, _ = fed(A, sse(null_index))
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "Hello")
    plain = {
        "id": "c",
        "choices": [{"message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
    }
    assert A.parse_response(plain).text == "Hi"
    other = {"id": "c", "choices": [{"index": 1, "message": {"role": "assistant", "content": "Hi"},
                                     "finish_reason": "stop"}]}  # fmt: skip
    assert A.parse_response(other).finish is Finish.API_FAILURE
