"""Review 10: ``callbound parse`` shows the turn a run would get.

- A JSON-lines recording cut after its first event is one JSON object, as a plain body is: when that
  object is one of the API's stream events (and no body of the API looks like it), it is read as the cut
  stream it is, TRUNCATED(stream_interrupted) as in a run, not as a body (API_FAILURE). A Gemini
  generateContent chunk and body have the same shape: only the request says which was asked for, so a
  single one is read as a body, as parse's docstring says.
- Input without a single complete event stays exit 2, and says what a run would make of it.
- A byte cap trip prints the ``StreamCaps`` setting that tripped as ``error_code``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.base import StreamCaps
from callbound.adapters.sse import iter_payloads
from callbound.adapters.stream import StreamFeed
from callbound.cli.parse import parse_input, turn_json
from callbound.core.errors import UsageError
from tests.recordings import load_cassette, read_bytes, response_body

CLI = [sys.executable, "-m", "callbound.cli", "parse"]


def _cli(api: str, data: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, "--api", api, "-"], input=data, capture_output=True, timeout=60)


def _run_turn(api: str, data: bytes) -> dict[str, Any]:
    """The turn a run gets from these bytes read as a stream (the transports' StreamFeed)."""
    feed = StreamFeed(get(api).stream_assembler(), max_event=StreamCaps().max_body_bytes)
    feed.feed(data)
    feed.close()
    return turn_json(feed.finish())


def _stream(api: str) -> bytes:
    if api == "openai-responses":
        text = response_body(
            load_cassette("openai-responses/pydantic-ai__test_openai_responses_stream.yaml")[0]
        )
        assert isinstance(text, str)
        return text.encode()
    return read_bytes(
        {
            "openai-chat": "openai-chat/openai-python__a247c49c5fcd__parse_strict_tools.sse.bin",
            "anthropic-messages": "anthropic/ai__anthropic-refusal.chunks.txt",
            "gemini-generate": "gemini/ai__google-tool-call.chunks.txt",
            "gemini-interactions": "gemini-interactions/ai__legacy-outputs__tool-call-step1.chunks.txt",
            "gemini-interactions-steps": "gemini-interactions/ai__steps__tool-call-step2.chunks.txt",
        }[api]
    )


def _lines(api: str) -> list[bytes]:
    """The recording in JSON-lines form (the form SOURCES.md stores streams in), one event a line."""
    payloads = [p for p in iter_payloads([_stream(api)]) if isinstance(p, dict)]
    return [json.dumps(p, separators=(",", ":")).encode() + b"\n" for p in payloads]


STREAM_APIS = [
    "openai-responses",
    "openai-chat",
    "anthropic-messages",
    "gemini-interactions",
    "gemini-interactions-steps",
]


@pytest.mark.parametrize("name", STREAM_APIS)
def test_a_recording_cut_after_its_first_event_is_a_cut_stream(name: str) -> None:
    api = name.removesuffix("-steps")
    first = _lines(name)[0]
    out = parse_input(api, first)
    assert (out["finish"], out["reason"]) == ("TRUNCATED", "stream_interrupted")
    if api != "openai-chat":  # Chat's JSON-lines get their [DONE] supplied: the run below has none
        assert out == _run_turn(api, first)
    for data in (first.rstrip(b"\n"), first.replace(b"\n", b"\r\n"), b"\n" + first):
        assert parse_input(api, data)["finish"] == "TRUNCATED"
    r = _cli(api, first)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == out


@pytest.mark.parametrize("name", STREAM_APIS)
def test_every_cut_of_a_json_lines_recording_reads_as_a_run_reads_it(name: str) -> None:
    api = name.removesuffix("-steps")
    lines = _lines(name)
    for k in range(1, len(lines) + 1):
        data = b"".join(lines[:k])
        out = parse_input(api, data)
        # Chat's JSON-lines get the [DONE] parse supplies (which never makes a stream without its
        # finish_reason a success)
        run = _run_turn(api, data + b"\n[DONE]\n" if api == "openai-chat" else data)
        assert out == run, k


def test_a_single_responses_terminal_event_is_the_whole_turn() -> None:
    """The terminal event alone carries the response: read as a stream, it is the turn a run gets."""
    lines = _lines("openai-responses")
    last = lines[-1]
    assert json.loads(last)["type"] == "response.completed"
    out = parse_input("openai-responses", last)
    assert out == _run_turn("openai-responses", last)
    assert out["finish"] in ("FINAL_TEXT", "TOOL_PROPOSALS")


def test_a_single_chat_chunk_with_its_finish_reason_is_a_whole_stream() -> None:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    }
    out = parse_input("openai-chat", json.dumps(chunk).encode())
    assert (out["finish"], out["text"]) == ("FINAL_TEXT", "hi")
    assert out == _run_turn("openai-chat", b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n")


def test_a_single_gemini_generate_chunk_is_read_as_a_body() -> None:
    """A streamGenerateContent chunk is a GenerateContentResponse, as the plain body is: nothing in
    the bytes tells them apart (a run knows from its request), so parse reads one object as the body."""
    first = _lines("gemini-generate")[0]
    out = parse_input("gemini-generate", first)
    assert out == turn_json(get("gemini-generate").parse_response(first))
    assert out != _run_turn("gemini-generate", first)
    # two or more lines are a stream, cut or not
    two = b"".join(_lines("gemini-generate")[:2])
    assert parse_input("gemini-generate", two) == _run_turn("gemini-generate", two)


PLAIN = {
    "openai-responses": {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            }
        ],
    },
    "openai-chat": {
        "id": "c1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    },
    "anthropic-messages": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
    "gemini-generate": {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}]
    },
    "gemini-interactions": {
        "id": "v1_x",
        "status": "completed",
        "steps": [{"type": "model_output", "content": [{"type": "text", "text": "hi"}]}],
    },
}
ERRORS = {
    "openai-responses": {
        "error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": "m"}
    },
    "openai-chat": {"error": {"type": "server_error", "code": None, "message": "m"}},
    # an error event in an Anthropic stream has the shape of an error body: read as the body
    "anthropic-messages": {"type": "error", "error": {"type": "overloaded_error", "message": "m"}},
    "gemini-generate": {"error": {"code": 500, "status": "INTERNAL", "message": "m"}},
    "gemini-interactions": {"error": {"code": 500, "status": "INTERNAL", "message": "m"}},
}


@pytest.mark.parametrize("api", sorted(PLAIN))
def test_plain_bodies_are_still_read_as_bodies(api: str) -> None:
    for body in (PLAIN[api], ERRORS[api]):
        for data in (json.dumps(body).encode(), json.dumps(body, indent=2).encode() + b"\n"):
            assert parse_input(api, data) == turn_json(get(api).parse_response(data))
    assert parse_input(api, json.dumps(PLAIN[api]).encode())["finish"] == "FINAL_TEXT"


def test_one_stream_event_written_over_several_lines_is_unreadable() -> None:
    """JSON-lines hold one event a line, and a run could not read this either: exit 2, saying why."""
    event = json.loads(_lines("anthropic-messages")[0])
    data = json.dumps(event, indent=2).encode()
    with pytest.raises(UsageError, match="one anthropic-messages stream event over several lines"):
        parse_input("anthropic-messages", data)
    r = _cli("anthropic-messages", data)
    assert r.returncode == 2 and r.stdout == b""
    assert len(r.stderr.decode().strip().splitlines()) == 1


@pytest.mark.parametrize(
    "data",
    [
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1"',
        b": keep-alive\n\n",
    ],
)
def test_input_without_a_complete_event_is_exit_2_and_says_what_a_run_gets(data: bytes) -> None:
    """A run reading these bytes gets TRUNCATED(stream_interrupted): nothing in them says anything, and
    parse says so rather than print a turn made of nothing (the docstring now says this)."""
    assert _run_turn("anthropic-messages", data)["reason"] == "stream_interrupted"
    with pytest.raises(UsageError, match=r"no stream events found.*TRUNCATED\(stream_interrupted\)"):
        parse_input("anthropic-messages", data)
    r = _cli("anthropic-messages", data)
    assert r.returncode == 2 and r.stdout == b""


# ---- the cap that tripped ----------------------------------------------------------------------


def _chat_call_stream(arguments: str) -> bytes:
    def chunk(delta: dict[str, Any], fin: str | None = None) -> str:
        body = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": fin}],
        }
        return "data: " + json.dumps(body) + "\n\n"

    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    return (
        chunk({"role": "assistant", "tool_calls": [call]}) + chunk({}, "tool_calls") + "data: [DONE]\n\n"
    ).encode()


def test_parse_prints_the_cap_that_tripped() -> None:
    over = json.dumps({"a": "x" * (StreamCaps().max_call_bytes)})
    out = parse_input("openai-chat", _chat_call_stream(over))
    assert (out["finish"], out["reason"], out["error_code"]) == (
        "TRUNCATED",
        "arguments_too_large",
        "max_call_bytes",
    )
    body = {
        "id": "c1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": over}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
    r = _cli("openai-chat", json.dumps(body).encode())
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    assert (printed["reason"], printed["error_code"]) == ("arguments_too_large", "max_call_bytes")
    # a turn that is no failure prints no error_code; the keys test_parse checks stay as they were
    ok = parse_input("openai-chat", _chat_call_stream("{}"))
    assert ok["finish"] == "TOOL_PROPOSALS" and "error_code" not in ok


def test_turn_json_names_max_body_bytes() -> None:
    feed = StreamFeed(get("openai-chat").stream_assembler(), max_event=100)
    feed.feed(_chat_call_stream(json.dumps({"a": "x" * 200})))
    feed.close()
    out = turn_json(feed.finish())
    assert (out["reason"], out["error_code"]) == ("response_too_large", "max_body_bytes")


def test_a_first_event_over_max_body_bytes_is_the_turn_a_run_gets() -> None:
    """No event came before it, but a run still gets a turn: TRUNCATED(response_too_large), which
    names the setting to raise (EventTooLarge's docstring)."""
    pad = "x" * (StreamCaps().max_body_bytes + 10)
    data = b'data: {"id":"c1","object":"chat.completion.chunk","pad":"' + pad.encode() + b'"}\n\n'
    out = parse_input("openai-chat", data)
    assert (out["finish"], out["reason"], out["error_code"]) == (
        "TRUNCATED",
        "response_too_large",
        "max_body_bytes",
    )
