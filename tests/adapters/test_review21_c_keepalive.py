"""An SSE event with empty or blank data is a keep-alive, skipped like a comment (review round 21, c).

Relays and OpenAI-compatible gateways keep a long stream open with ``data:`` and a blank line (public
reports: NousResearch/hermes-agent issue 111887, omnigent-ai/omnigent PR 1474, openai-python issue
2722); the anthropic SDK skips an event without data (``if not sse.data: continue`` in its
``_streaming.py``). The stream feed decoded it as an event whose data is "", which is no JSON:
``ProtocolViolation`` ended the stream there, TRUNCATED(stream_interrupted), so the whole answer was
retried and paid for again, until INCOMPLETE when every attempt met the keep-alive. No JSON payload is
blank, so such an event carries nothing and is skipped wherever it comes and however the bytes are
chunked (the SSE reader itself still dispatches it, as the SSE standard says).
"""

from __future__ import annotations

import json

import pytest

from callbound.adapters import get
from callbound.adapters.sse import SSEReader, iter_payloads
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn

CHAT = [
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": None}],
    },
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "note", "arguments": '{"a":'},
                        }
                    ]
                },
                "finish_reason": None,
            }
        ],
    },
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]},
                "finish_reason": None,
            }
        ],
    },
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
    },
]

KEEPALIVES = [
    "data:\n\n",
    "data: \n\n",
    "data:  \t\n\n",
    "data:\ndata:\n\n",
    "id: 7\ndata:\n\n",
    "event: ping\ndata:\n\n",
    "event: message\ndata: \n\n",
    "data:\r\n\r\n",
    "retry: 3000\ndata: \r\n\r\n",
]


def _stream(keepalive: str) -> bytes:
    parts = [f"data: {json.dumps(c)}\n\n" for c in CHAT]
    text = keepalive + keepalive.join(parts) + keepalive + "data: [DONE]\n\n"
    return text.encode()


def _turn(raw: bytes, cut: int | None) -> ModelTurn:
    adapter = get("openai-chat")
    feed = StreamFeed(adapter.stream_assembler(None))
    chunks = [raw] if cut is None else [raw[:cut], raw[cut:]]
    for chunk in chunks:
        if chunk:
            feed.feed(chunk)
    feed.close()
    return feed.finish()


@pytest.mark.parametrize("keepalive", KEEPALIVES)
def test_a_keepalive_with_empty_data_leaves_the_turn_as_without_it(keepalive: str) -> None:
    plain = _turn(_stream(""), None)
    assert plain.finish is Finish.TOOL_PROPOSALS
    raw = _stream(keepalive)
    for cut in [None, *range(0, len(raw) + 1, 3)]:
        turn = _turn(raw, cut)
        assert (turn.finish, turn.reason, turn.text) == (plain.finish, plain.reason, plain.text), cut
        assert [(c.call_id, c.arguments) for c in turn.calls] == [("call_1", {"a": 1})], cut


def test_the_reader_keeps_the_event_and_the_payload_readers_skip_it() -> None:
    """The SSE reader dispatches an event with empty data, as the standard says; ``iter_payloads``
    (``callbound parse``, error bodies framed as a stream) skips it, as ``StreamFeed`` does."""
    raw = b'data:\n\ndata: \n\nevent: x\ndata:\n\ndata: {"a":1}\n\ndata:  \n\n'
    reader = SSEReader()
    assert [e.data for e in reader.feed(raw) + reader.close()] == ["", "", "", '{"a":1}', " "]
    assert list(iter_payloads([raw])) == [{"a": 1}]


@pytest.mark.parametrize("api", ["openai-responses", "anthropic-messages", "gemini-generate"])
def test_a_keepalive_at_the_end_of_a_cut_stream_is_still_a_cut_stream(api: str) -> None:
    """Skipping keep-alives changes nothing else: a stream of keep-alives only is a stream cut before
    its terminal event, as a stream of comments is."""
    adapter = get(api)
    feed = StreamFeed(adapter.stream_assembler(None))
    feed.feed(b"data:\n\n: ping\n\ndata: \n\n")
    feed.close()
    turn = feed.finish()
    assert turn.finish is Finish.TRUNCATED and turn.reason == "stream_interrupted"
