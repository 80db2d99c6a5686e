"""Chat Completions: usage counted as D27 says on compatible servers, and what goes back on a request.

Shapes from public recordings (the bodies here are synthetic):
- xAI counts ``completion_tokens_details.reasoning_tokens`` beside ``completion_tokens``, not in them:
  its ``total_tokens`` is prompt + completion + reasoning (vercel/ai packages/xai __fixtures__
  xai-tool-call). Gemini's OpenAI-compatible endpoint leaves its thinking tokens out of
  ``completion_tokens`` with no details at all: only the total has them (a pydantic-ai cassette of
  gemini-2.5-pro: 35 + 12 of 109). OpenAI, DeepSeek and Groq count them inside (total = prompt +
  completion). What the total holds beyond the prompt is output (D27).
- OpenRouter ends a stream with an error chunk that carries the request's usage (pydantic-ai cassette
  test_openrouter_stream_error): the request was paid for (D27, D12).
- Groq answers with ``message.reasoning`` (or ``delta.reasoning``) and rejects that property on a request
  (400 "property 'reasoning' is unsupported"): it never goes back, streamed or plain.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn

ADAPTER = get("openai-chat")


def _chunk(delta: dict[str, Any] | None = None, fin: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": fin}]
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m", "choices": choices, **extra}


def _streamed(events: list[Any]) -> ModelTurn:
    raw = "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events).encode()
    feed = StreamFeed(ADAPTER.stream_assembler())
    feed.feed(raw)
    feed.close()
    return feed.finish()


def _body(message: dict[str, Any], usage: dict[str, Any] | None, fin: str = "stop") -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": fin}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def _usage(prompt: int, completion: int, reasoning: int | None, total: int | None) -> dict[str, Any]:
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    if total is not None:
        usage["total_tokens"] = total
    return usage


USAGES = [
    # (usage, expected output_tokens)
    pytest.param(_usage(291, 26, 189, 506), 215, id="reasoning-beside-completion"),
    pytest.param(_usage(291, 215, 189, 506), 215, id="reasoning-inside-completion"),
    pytest.param(_usage(291, 26, 189, None), 26, id="no-total-says-nothing"),
    pytest.param(_usage(291, 26, 0, 317), 26, id="no-reasoning"),
    pytest.param(_usage(35, 12, None, 109), 74, id="thinking-only-in-the-total"),
    pytest.param(_usage(291, 26, None, 300), 26, id="total-below-the-sum-says-nothing"),
]


@pytest.mark.parametrize(("usage", "output"), USAGES)
def test_output_tokens_count_reasoning_once(usage: dict[str, Any], output: int) -> None:
    plain = ADAPTER.parse_response(json.dumps(_body({"role": "assistant", "content": "Hi."}, usage)))
    streamed = _streamed(
        [_chunk({"role": "assistant", "content": "Hi."}), _chunk({}, "stop"), _chunk(usage=usage), "[DONE]"]
    )
    for turn in (plain, streamed):
        assert (turn.usage.input_tokens, turn.usage.output_tokens) == (usage["prompt_tokens"], output)


def test_an_error_chunk_keeps_the_usage_it_carries() -> None:
    usage = {"prompt_tokens": 43, "completion_tokens": 10, "total_tokens": 53}
    error = {"code": 400, "message": "Token limit reached"}
    turn = _streamed(
        [
            _chunk({"role": "assistant", "content": "Once upon"}),
            _chunk({"content": " a time"}, "length"),
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "error": error,
                "usage": usage,
                "choices": [],
            },
            "[DONE]",
        ]
    )
    assert (turn.finish, turn.raw_stop_reason) == (Finish.API_FAILURE, "400")
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (43, 10)


def _groq_message() -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": '{"id":"A1"}'}}
    return {"role": "assistant", "content": None, "reasoning": "I should look it up.", "tool_calls": [call]}


def test_groq_reasoning_never_goes_back_plain_or_streamed() -> None:
    plain = ADAPTER.parse_response(json.dumps(_body(_groq_message(), None, "tool_calls")))
    start = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_order", "arguments": ""},
    }
    streamed = _streamed(
        [
            _chunk({"role": "assistant", "reasoning": "I should look it up."}),
            _chunk({"tool_calls": [start]}),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"id":"A1"}'}}]}),
            _chunk({}, "tool_calls"),
            "[DONE]",
        ]
    )
    for turn in (plain, streamed):
        assert turn.finish is Finish.TOOL_PROPOSALS
        [echoed] = ADAPTER.turn_items(turn)
        assert "reasoning" not in echoed
        assert echoed["tool_calls"][0]["id"] == "call_1"
    # the record keeps the message as received (D8); only the request leaves the property out
    assert plain.continuation[0]["reasoning"] == "I should look it up."


def test_reasoning_content_and_details_still_go_back() -> None:
    """DeepSeek and Kimi answer 400 without reasoning_content; OpenRouter keeps signatures in
    reasoning_details: neither is touched."""
    message = {
        **_groq_message(),
        "reasoning_content": "thinking",
        "reasoning_details": [{"type": "reasoning.text"}],
    }
    del message["reasoning"]
    turn = ADAPTER.parse_response(json.dumps(_body(message, None, "tool_calls")))
    assert ADAPTER.turn_items(turn) == [message]


def test_groq_usage_only_under_x_groq_is_read() -> None:
    """A Groq stream without a top-level usage chunk (no stream_options) still reports its usage on
    the last chunk under x_groq; a top-level usage, when it comes, wins."""
    x_groq = {"id": "req_1", "usage": {"prompt_tokens": 270, "completion_tokens": 88, "total_tokens": 358}}
    last = _chunk({}, "stop", x_groq=x_groq)
    turn = _streamed([_chunk({"role": "assistant", "content": "Hi."}), last, "[DONE]"])
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (270, 88)
    top = _chunk(usage={"prompt_tokens": 271, "completion_tokens": 89, "total_tokens": 360})
    turn = _streamed([_chunk({"role": "assistant", "content": "Hi."}), last, top, "[DONE]"])
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (271, 89)
