"""A Chat stream that ends with ``[DONE]`` but never names a finish_reason is no cut stream (D1).

Shape from a real stream recorded by a public test suite (simonw/llm cassette
tests/cassettes/test_tools_streaming/test_tools_streaming_variant_b.yaml: OpenRouter routing
moonshotai/kimi-k2 to Novita): a tool-call delta, a usage chunk, then ``data: [DONE]``, with
``finish_reason`` null in every chunk. It read as TRUNCATED(stream_interrupted) and was retried three
times (paid requests), ending INCOMPLETE(STREAM_INTERRUPTED), while the same response as a plain body is
API_FAILURE(unknown_stop_reason). The stream did end at its terminal event; what is missing is the stop
reason, and D1 never reads a missing one as success: FAILED(UNKNOWN_STOP_REASON), not retried, and the
call does not run. Ids are synthetic.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn
from callbound.testing import FakeClock, ScriptedModel, Stream


class Empty(BaseModel):
    pass


API = "openai-chat"


def _chunk(delta: dict[str, Any], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": "gen-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "moonshotai/kimi-k2",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        **({"usage": usage} if usage else {}),
    }


CALL = {"index": 0, "id": "0", "type": "function", "function": {"name": "llm_version", "arguments": "{}"}}
USAGE = {"prompt_tokens": 60, "completion_tokens": 12, "total_tokens": 72}


def _sse(done: bool) -> str:
    chunks = [_chunk({"role": "assistant", "content": ""}), _chunk({"tool_calls": [CALL]}), _chunk({}, USAGE)]
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return text + ("data: [DONE]\n\n" if done else "")


def _read(text: str) -> ModelTurn:
    feed = StreamFeed(get(API).stream_assembler())
    feed.feed(text.encode())
    feed.close()
    return feed.finish()


def test_done_without_a_finish_reason_is_an_unknown_stop_reason() -> None:
    turn = _read(_sse(done=True))
    assert (turn.finish, turn.reason, turn.raw_stop_reason) == (
        Finish.API_FAILURE,
        "unknown_stop_reason",
        None,
    )
    assert turn.failure is not None and turn.failure.retryable is False
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (60, 12)
    plain = {
        "id": "gen-1",
        "object": "chat.completion",
        "model": "moonshotai/kimi-k2",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "", "tool_calls": [CALL]},
                "finish_reason": None,
            }
        ],
        "usage": USAGE,
    }
    same = get(API).parse_response(plain)
    assert (same.finish, same.reason) == (turn.finish, turn.reason)


def test_without_done_it_is_still_a_cut_stream() -> None:
    turn = _read(_sse(done=False))
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "stream_interrupted")
    assert turn.failure is not None and turn.failure.retryable is True


def test_the_run_fails_after_one_request_and_runs_no_call() -> None:
    ran: list[Any] = []
    tool = cb.ToolSpec(
        name="llm_version",
        description="Version",
        params=Empty,
        handler=lambda args, ctx: ran.append(args) or {"version": "1"},
        schema_version="v1",
        risk="read",
    )
    model = ScriptedModel(API, [Stream(_sse(done=True))])
    runner = cb.Runner(model=model, registry=cb.Registry([tool]), clock=FakeClock(), settings={"model": "m"})
    out = runner.run_sync("which version?", tenant="t", subject="s")
    assert (out.state, out.reason) == (cb.State.FAILED, "UNKNOWN_STOP_REASON")
    assert len(model.requests) == 1 and ran == []
