"""Every streamed recording, read as a stream, against the same response read whole (review round 20, c).

1. The streamed turn equals the turn the plain adapter builds from the SDK's own accumulation of the
   stream (openai's ``ChatCompletionStreamState``, anthropic's ``accumulate_event``) or from the
   Responses terminal snapshot: calls, arguments, finish, raw stop reason, usage, text and refusal.
2. Any re-framing of the same events (LF, CRLF or CR line ends, comments, ``id:``/``retry:`` lines,
   data split over several ``data:`` lines, a byte-order mark) cut into chunks anywhere, inside
   multi-byte characters included, gives the same turn.
3. A stream cut before its terminal event is TRUNCATED(stream_interrupted), retryable, with no call.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.sse import iter_payloads
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn
from tests.recordings import fixtures_dir, load_cassette, response_body

_API = {
    "openai-chat": "openai-chat",
    "openai-responses": "openai-responses",
    "anthropic": "anthropic-messages",
    "gemini": "gemini-generate",
    "gemini-interactions": "gemini-interactions",
}
_STREAM_FILES = (".chunks.txt", ".sse.bin", ".sse")


def _recorded() -> list[tuple[str, int]]:
    """(relative path, interaction) of each streamed recording, or [] where the recordings are absent
    (each test then skips through ``fixtures_dir``)."""
    try:
        root = fixtures_dir()
    except pytest.skip.Exception:
        return []
    found: list[tuple[str, int]] = []
    for path in sorted(root.rglob("*")):
        if path.parent.name not in _API:
            continue
        rel = str(path.relative_to(root))
        if path.suffix == ".yaml":
            for i, interaction in enumerate(load_cassette(rel)):
                body = response_body(interaction)
                if isinstance(body, str) and body.lstrip().startswith(("data:", "event:")):
                    found.append((rel, i))
        elif path.name.endswith(_STREAM_FILES) or (path.parent.name == "anthropic" and path.suffix == ".txt"):
            found.append((rel, -1))
    return found


RECORDED = _recorded()
_ACCUMULATED = ("openai-chat", "openai-responses", "anthropic-messages")  # APIs whose SDK accumulates


def _raw(rel: str, index: int) -> bytes:
    if index < 0:
        return (fixtures_dir() / rel).read_bytes()
    return str(response_body(load_cassette(rel)[index])).encode()


def _api(rel: str) -> str:
    return _API[Path(rel).parent.name]


def _streamed(api: str, chunks: list[bytes]) -> tuple[ModelTurn, StreamFeed]:
    feed = StreamFeed(get(api).stream_assembler())
    for chunk in chunks:
        feed.feed(chunk)
    feed.close()
    return feed.finish(), feed


def _essence(turn: ModelTurn) -> dict[str, Any]:
    return {
        "finish": turn.finish,
        "raw_stop_reason": turn.raw_stop_reason,
        "reason": turn.reason,
        "response_id": turn.response_id,
        "calls": [(c.call_id, c.name, c.arguments, c.arguments_error) for c in turn.calls],
        "text": turn.text,
        "refusal": turn.refusal,
        "usage": turn.usage,
    }


def _accumulated(api: str, raw: bytes) -> dict[str, Any] | None:
    """The response the provider's SDK builds from the stream, as a plain body (the Responses SDK takes
    the terminal event's snapshot; None: no SDK accumulator for this API)."""
    payloads = [p for p in iter_payloads([raw]) if isinstance(p, dict)]
    if api == "openai-chat":
        from openai.lib.streaming.chat._completions import ChatCompletionStreamState
        from openai.types.chat import ChatCompletionChunk

        state: Any = ChatCompletionStreamState()
        for payload in payloads:
            state.handle_chunk(ChatCompletionChunk.model_validate(payload))
        final: dict[str, Any] = state.get_final_completion().model_dump(mode="json", exclude_unset=True)
        return final
    if api == "anthropic-messages":
        from anthropic.lib.streaming._messages import accumulate_event

        snapshot: Any = None
        buffers: dict[int, bytes] = {}
        for payload in payloads:
            if payload.get("type") not in ("ping", "error"):
                snapshot = accumulate_event(event=payload, current_snapshot=snapshot, json_bufs=buffers)  # type: ignore[arg-type]
        message: dict[str, Any] = snapshot.model_dump(mode="json", exclude_unset=True)
        return message
    if api == "openai-responses":
        terminal = ("response.completed", "response.incomplete", "response.failed")
        return next(p["response"] for p in payloads if p.get("type") in terminal)
    return None


@pytest.mark.parametrize(("rel", "index"), [r for r in RECORDED if _api(r[0]) in _ACCUMULATED])
def test_the_streamed_turn_is_the_turn_of_the_sdk_accumulated_response(rel: str, index: int) -> None:
    api = _api(rel)
    raw = _raw(rel, index)
    body = _accumulated(api, raw)
    assert body is not None
    streamed, _ = _streamed(api, [raw])
    plain = get(api).parse_response(body)
    assert streamed.finish is not Finish.TRUNCATED
    assert _essence(streamed) == _essence(plain)


def _reframed(payloads: list[dict[str, Any] | str], rng: random.Random) -> bytes:
    eol = rng.choice(["\n", "\r\n", "\r"])
    out = ["\ufeff" if rng.random() < 0.3 else ""]
    for payload in payloads:
        if rng.random() < 0.3:
            out.append(":" + eol)
        if rng.random() < 0.3:
            out.append(f"id: {rng.randrange(1000)}{eol}retry: 1500{eol}")
        if isinstance(payload, dict) and isinstance(payload.get("type"), str) and rng.random() < 0.5:
            out.append(f"event: {payload['type']}{eol}")
        if payload == "[DONE]":
            out.append(f"data: [DONE]{eol}{eol}")
            continue
        # indent=1 splits the JSON only between tokens: each of its lines is one data: line
        text = json.dumps(payload, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1]))
        for line in text.split("\n"):
            out.append(rng.choice(["data: ", "data:"]) + line + eol)
        out.append(eol)
    return "".join(out).encode()


def _chunked(raw: bytes, rng: random.Random) -> list[bytes]:
    if rng.random() < 0.1:
        return [raw[i : i + 1] for i in range(len(raw))]
    marks = sorted(rng.sample(range(1, len(raw)), min(len(raw) - 1, rng.choice([1, 3, 20, 200]))))
    return [raw[a:b] for a, b in zip([0, *marks], [*marks, len(raw)], strict=True)]


@pytest.mark.parametrize(("rel", "index"), RECORDED)
def test_any_reframing_and_chunking_of_a_recording_gives_the_same_turn(rel: str, index: int) -> None:
    api = _api(rel)
    raw = _raw(rel, index)
    expected, _ = _streamed(api, [raw])
    payloads = list(iter_payloads([raw]))
    adapter = get(api)
    for seed in range(25):
        rng = random.Random(seed)
        turn, _ = _streamed(api, _chunked(_reframed(payloads, rng), rng))
        assert _essence(turn) == _essence(expected), seed
        assert adapter.turn_items(turn) == adapter.turn_items(expected), seed


@pytest.mark.parametrize(("rel", "index"), RECORDED)
def test_a_recording_cut_before_its_terminal_event_runs_nothing(rel: str, index: int) -> None:
    api = _api(rel)
    raw = _raw(rel, index)
    rng = random.Random(rel)
    cuts = set(rng.sample(range(len(raw)), min(len(raw), 150)))
    cuts |= {i for i in range(len(raw)) if raw[i : i + 1] == b"\n"}  # at and after every line end
    cuts |= {i + 1 for i in range(len(raw)) if raw[i : i + 1] == b"\n"}
    for cut in sorted(c for c in cuts if c < len(raw)):
        turn, feed = _streamed(api, [raw[:cut]])
        if feed.complete:
            continue  # its terminal event came whole (only trailing framing was cut)
        if api == "gemini-generate" and turn.raw_stop_reason is not None:
            continue  # Gemini's stream has no terminal event: its finishReason chunk ends the turn
        assert (turn.finish, turn.reason, turn.calls) == (Finish.TRUNCATED, "stream_interrupted", ()), cut
        assert turn.failure is not None and turn.failure.retryable, cut
