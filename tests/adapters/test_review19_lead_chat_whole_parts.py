"""Chat streams: a content part other than text and what a reasoning detail holds besides its text count
against max_body_bytes (review round 19, h's finding after e F2).

A Chat content part other than text (an image, kept as sent) and the encrypted data or signature of an
OpenRouter ``reasoning_details`` entry were held to the cap one event at a time only: any number of them
piled up. Each now counts as ``held_len`` measures it (strings by UTF-8 bytes, other values as compact
JSON), and past the cap the stream stops: ``TRUNCATED(response_too_large)``, no call. Synthetic data."""

from __future__ import annotations

import json
from typing import Any

from callbound.adapters import get
from callbound.adapters.base import StreamCaps
from callbound.core.types import Finish, ModelTurn
from tests.adapters import streaming

CAPS = StreamCaps(max_body_bytes=8000)
DATA = "e" * 1000  # each piece is well under the cap; ten of them are not


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return json.dumps({"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def fed(deltas: list[dict[str, Any]], caps: StreamCaps) -> ModelTurn:
    body = "".join(f"data: {chunk(d)}\n\n" for d in deltas)
    body += f"data: {chunk({}, 'stop')}\n\ndata: [DONE]\n\n"
    turn, _ = streaming.fed(get("openai-chat"), body.encode(), caps)
    return turn


def image_parts() -> list[dict[str, Any]]:
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + DATA}}
    return [{"content": [part]} for _ in range(10)]


def encrypted_details() -> list[dict[str, Any]]:
    detail = {"type": "reasoning.encrypted", "data": DATA, "format": "x", "index": 0}
    return [{"reasoning_details": [{**detail, "index": i}]} for i in range(10)]


def test_parts_and_details_held_whole_over_the_cap_cut_the_stream() -> None:
    for deltas in (image_parts(), encrypted_details()):
        turn = fed(deltas, CAPS)
        assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "response_too_large")
        assert turn.failure is not None and turn.failure.error_code == "max_body_bytes"


def test_the_same_under_a_cap_they_fit_read_as_before() -> None:
    for deltas in (image_parts(), encrypted_details()):
        assert fed(deltas, StreamCaps(max_body_bytes=64_000)).finish is Finish.FINAL_TEXT
