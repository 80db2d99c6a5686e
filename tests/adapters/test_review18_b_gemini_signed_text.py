"""Gemini generateContent stream: text parts that carry a ``thoughtSignature`` are answer text too
(review round 18, b).

A stream's text is held to ``StreamCaps.max_body_bytes`` across its events, as a plain body is
(review round 17, r4 F2; docs/reference.md: every assembler counts "answer text, refusal, reasoning
and thought summaries"). The Gemini assembler counted only parts of exactly ``text``/``thought``: a
text part with any other member, the ``thoughtSignature`` Gemini 3 puts on a text part (WIRE.md 4.6;
vercel/ai ``google-reasoning-gemini3.chunks.txt`` signs one), was kept whole without being counted, so
signed text streamed past the cap finished as a final answer holding all of it, while the same parts
in one plain body were cut at ``max_body_bytes``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.base import StreamCaps
from callbound.core.types import Finish
from callbound.transports import plain_turn
from tests.adapters import streaming

API = "gemini-generate"
CAPS = StreamCaps(max_body_bytes=64 * 1024)
PIECE = "y" * 16_000


def _part(thought: bool) -> dict[str, Any]:
    return {"text": PIECE, **({"thought": True} if thought else {}), "thoughtSignature": "c2lnbmF0dXJl"}


def _chunk(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    return {"candidates": [cand], "modelVersion": "m", "responseId": "r1"}


def _stream(thought: bool, n: int) -> bytes:
    chunks = [_chunk([_part(thought)]) for _ in range(n)] + [_chunk([{"text": ""}], "STOP")]
    return "".join(f"data: {json.dumps(c, separators=(',', ':'))}\n\n" for c in chunks).encode()


@pytest.mark.parametrize("thought", [False, True])
def test_signed_text_past_the_body_cap_is_cut(thought: bool) -> None:
    turn, _ = streaming.fed(get(API), _stream(thought, 13), CAPS)  # ~208 KB of signed text
    assert (turn.finish, turn.reason, turn.calls, turn.text) == (
        Finish.TRUNCATED,
        "response_too_large",
        (),
        "",
    )
    assert turn.failure is not None
    assert (turn.failure.kind, turn.failure.error_code, turn.failure.retryable) == (
        "byte_cap",
        "max_body_bytes",
        False,
    )
    # the same parts in one plain body: cut at the same cap
    body = _chunk([_part(thought) for _ in range(13)], "STOP")
    plain = plain_turn(get(API), json.dumps(body).encode(), CAPS, None)
    assert (plain.finish, plain.reason) == (Finish.TRUNCATED, "response_too_large")


def test_signed_text_under_the_body_cap_completes_with_its_signatures() -> None:
    turn, _ = streaming.fed(get(API), _stream(False, 3), CAPS)
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, PIECE * 3)
    parts = turn.continuation[0]["parts"]
    assert [p.get("thoughtSignature") for p in parts] == ["c2lnbmF0dXJl"] * 3  # kept on their parts (D8)
