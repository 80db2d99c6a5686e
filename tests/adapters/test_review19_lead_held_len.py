"""What a piece given whole holds, for max_body_bytes (review round 19, e F2 follow-up).

e F2 counted every block or step given whole as compact JSON, framing included, so an Anthropic text
block's usual start ({"type": "text", "text": ""}) cost 24 bytes and a stream whose text alone fits
max_body_bytes exactly was cut (tests/runtime/test_review13_scripted.py caught it). A piece now counts
as the deltas that fill it would: strings by UTF-8 bytes, other values as compact JSON, type and empty
members nothing."""

from __future__ import annotations

from callbound.adapters.base import held_len


def test_a_usual_start_holds_nothing_yet() -> None:
    assert held_len({"type": "text", "text": ""}) == 0
    assert held_len({"type": "thinking", "thinking": "", "signature": ""}) == 0
    assert held_len({"type": "text", "text": "", "citations": []}) == 0
    assert held_len({"type": "model_output", "content": None}) == 0


def test_strings_count_their_utf8_bytes_and_other_values_compact_json() -> None:
    assert held_len({"type": "redacted_thinking", "data": "é" * 10}) == 20
    assert held_len({"thoughtSignature": "abc", "inlineData": {"mimeType": "x", "data": "y"}}) == 3 + len(
        '{"mimeType":"x","data":"y"}'
    )
    assert held_len({"type": "web_search_tool_result", "content": [{"a": 1}]}) == len('[{"a":1}]')
