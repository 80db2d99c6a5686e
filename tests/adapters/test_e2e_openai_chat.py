"""openai-chat: regressions found by driving real recorded multi-turn traffic through the Runner.
Every body here is a small synthetic one written for the test; the comment above each test names the
public recording or documented shape it mirrors. No recording is copied into this repository."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.core.types import Finish
from callbound.testing import ApiError, FakeClock, ScriptedModel, Stream
from tests.adapters.streaming import fed

A = get("openai-chat")
SIG = {"google": {"thought_signature": "El4KXAER"}}


def sse(*events: dict[str, Any]) -> str:
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


def chunk(delta: dict[str, Any], finish: str | None = None, **top: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "delta": delta}
    if finish is not None:
        choice["finish_reason"] = finish
    return {
        "id": "G1",
        "object": "chat.completion.chunk",
        "model": "gemini-3-flash-preview",
        "choices": [choice],
        **top,
    }


def gemini_call(cid: str, args: str, signed: bool) -> dict[str, Any]:
    call: dict[str, Any] = {"function": {"arguments": args, "name": "bash"}, "id": cid, "type": "function"}
    if signed:
        call = {"extra_content": SIG, **call}
    return call


class Bash(BaseModel):
    command: str


def run(first: Any, stream: bool) -> list[dict[str, Any]]:
    """One tool round then a final answer, through the Runner; the requests callbound sent."""
    answer = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}
    final = {"id": "G2", "object": "chat.completion", "choices": [answer]}
    model = ScriptedModel("openai-chat", [first, final])
    spec = cb.ToolSpec(
        name="bash", description="Run", params=Bash, handler=lambda a, c: "hi", schema_version="1"
    )
    runner = cb.Runner(
        model=model, registry=cb.Registry([spec]), clock=FakeClock(), settings={"stream": stream}
    )
    outcome = runner.run_sync("run echo hi", tenant="t", subject="s")
    assert (outcome.state.value, outcome.text) == ("COMPLETED", "hi")
    return model.requests


# Gemini's OpenAI-compatible endpoint (generativelanguage.googleapis.com/v1beta/openai/chat/completions)
# streams each tool call whole, without an index, its thought signature in
# tool_calls[].extra_content.google.thought_signature, and ends with finish_reason "stop"; Gemini 3 answers
# 4xx when the signature does not come back (ai.google.dev/gemini-api/docs/openai "Thought signatures",
# ai.google.dev/gemini-api/docs/thought-signatures). The plain body kept it (the message as received);
# the stream continuation dropped it. D8: it travels back unchanged, streamed or not.
def test_streamed_gemini_thought_signature_travels_back_like_the_plain_one() -> None:
    calls = [gemini_call("function-call-1", '{"command":"echo hi"}', signed=True)]
    raw = sse(
        chunk({"role": "assistant", "tool_calls": calls}),
        chunk({"role": "assistant"}, "stop", usage={"prompt_tokens": 281, "completion_tokens": 20}),
    )
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "tool_calls": calls}}
    plain = {"id": "G1", "object": "chat.completion", "model": "gemini-3-flash-preview", "choices": [choice]}
    turn, _ = fed(A, raw.encode())
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert turn.continuation[0]["tool_calls"][0]["extra_content"] == SIG
    sent_stream = run(Stream(raw), stream=True)[1]["messages"][1]
    sent_plain = run(plain, stream=False)[1]["messages"][1]
    assert sent_stream["tool_calls"] == sent_plain["tool_calls"]
    assert sent_stream["tool_calls"][0]["extra_content"] == SIG


# Same source: parallel calls carry a signature on the first call only; each call keeps its own members,
# and a signature sent on a later fragment of a call (index-keyed deltas) is still kept with that call.
def test_each_streamed_call_keeps_its_own_provider_members() -> None:
    raw = sse(
        chunk({"role": "assistant", "tool_calls": [{**gemini_call("c1", "", signed=False), "index": 0}]}),
        chunk(
            {"tool_calls": [{"index": 0, "function": {"arguments": '{"command":"a"}'}, "extra_content": SIG}]}
        ),
        chunk({"tool_calls": [{**gemini_call("c2", '{"command":"b"}', signed=False), "index": 1}]}),
        chunk({}, "tool_calls"),
    )
    turn, _ = fed(A, raw.encode())
    sent = turn.continuation[0]["tool_calls"]
    assert [c.get("extra_content") for c in sent] == [SIG, None]
    assert [c["function"]["arguments"] for c in sent] == ['{"command":"a"}', '{"command":"b"}']
    assert [c.call_id for c in turn.calls] == ["c1", "c2"]


# Gemini's OpenAI-compatible stream can also sign a text part at the delta level
# (delta.extra_content.google.thought_signature); the rebuilt message carries it as the plain message would.
def test_streamed_message_level_extra_content_is_kept() -> None:
    raw = sse(
        chunk({"role": "assistant", "content": "Let me check."}),
        chunk({"extra_content": SIG}),
        chunk({"tool_calls": [gemini_call("c1", '{"command":"ls"}', signed=True)]}),
        chunk({}, "tool_calls"),
    )
    turn, _ = fed(A, raw.encode())
    message = turn.continuation[0]
    assert message["extra_content"] == SIG
    assert message["content"] == "Let me check."


# Mirascope/mirascope python/tests/e2e/output/cassettes/test_call_with_tools/together_deepseek_ai_DeepSeek_V3_1/
# stream.yaml: Together repeats "id": null and "function": {"name": null} on every later fragment of a call.
# Null members are not provider state: the rebuilt call holds only what the plain body would.
def test_null_members_of_later_fragments_add_nothing() -> None:
    start = {
        "id": "call_8f",
        "index": 0,
        "type": "function",
        "function": {"name": "bash", "arguments": '{"command":'},
    }
    frag = {"id": None, "index": 0, "type": "function", "function": {"name": None, "arguments": '"x"}'}}
    raw = sse(
        chunk({"role": "assistant", "content": "", "tool_calls": [start]}),
        chunk({"role": "assistant", "content": "", "tool_calls": [frag], "reasoning": None}),
        chunk({"role": "assistant", "content": "", "reasoning": None}, "tool_calls"),
    )
    turn, _ = fed(A, raw.encode())
    assert turn.continuation[0]["tool_calls"] == [
        {"id": "call_8f", "type": "function", "function": {"name": "bash", "arguments": '{"command":"x"}'}}
    ]
    assert [(c.call_id, c.arguments) for c in turn.calls] == [("call_8f", {"command": "x"})]


def mistral_chunk(content: Any, finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": finish}
    return {
        "id": "m1",
        "object": "chat.completion.chunk",
        "model": "mistral-small-latest",
        "choices": [choice],
    }


def thinking(text: str, closed: bool = True) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "thinking", "thinking": [{"type": "text", "text": text}]}
    if closed:
        part["closed"] = True
    return part


# vercel/ai packages/openai-compatible/src/chat/__fixtures__/issue-13703-mistral-thinking.chunks.txt (and the
# plain issue-13703-mistral-thinking.json): Mistral streams content as a list of parts, thinking pieces and
# then the answer's first text part in one chunk, its rest as a string. The answer is "391"; reading only
# string deltas made it "91" (a wrong final text under COMPLETED). The rebuilt message is the plain one.
def test_mistral_streamed_content_parts_give_the_plain_answer_and_message() -> None:
    raw = sse(
        mistral_chunk(""),
        mistral_chunk([thinking("17 times 23")]),
        mistral_chunk([thinking(" is", closed=False)]),
        mistral_chunk([thinking(" 391."), {"type": "text", "text": "3"}]),
        mistral_chunk("91", "stop"),
    )
    turn, _ = fed(A, raw.encode())
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "391")
    parts = [thinking("17 times 23 is 391."), {"type": "text", "text": "391"}]
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": parts}}
    plain = A.parse_response({"id": "m1", "object": "chat.completion", "choices": [choice]})
    assert plain.text == turn.text
    assert turn.continuation[0]["content"] == plain.continuation[0]["content"] == parts


# pydantic/pydantic-ai tests/cassettes/test_context_window_exceeded/test_context_window_exceeded[openai_chat].yaml:
# HTTP 400 with code context_length_exceeded. D1 lists "context window exceeded" under TRUNCATED, as
# openai-responses reads the same error: the run ends INCOMPLETE, not FAILED, and is not retried.
def test_context_window_exceeded_ends_incomplete() -> None:
    body = {"error": {"code": "context_length_exceeded", "message": "This model's maximum context length is "
            "128000 tokens.", "param": "messages", "type": "invalid_request_error"}}  # fmt: skip
    turn = A.map_error(ApiError(400, body))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
        Finish.TRUNCATED,
        "400",
        "context_window_exceeded",
    )
    assert turn.failure is not None and not turn.failure.retryable
    model = ScriptedModel("openai-chat", [ApiError(400, body)])
    runner = cb.Runner(model=model, registry=cb.Registry([]), clock=FakeClock())
    outcome = runner.run_sync("word " * 10, tenant="t", subject="s")
    assert (outcome.state.value, outcome.reason) == ("INCOMPLETE", "CONTEXT_WINDOW_EXCEEDED")
    assert len(model.requests) == 1
