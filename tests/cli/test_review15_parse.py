"""Review 15 (r5, findings 2-3): ``callbound parse`` on hostile provider strings.

- A lone surrogate escape (``\\ud800`` with no partner) anywhere in the response, text included, made
  parse print a traceback and exit 1: the JSON it wrote had no UTF-8 form (UnicodeEncodeError). Issue 3
  §5 and D28 want exit 0 for every readable turn: the surrogate is written as its JSON escape, and the
  line loads back equal. A turn *named* by such a string (response id, call id or name, stop reason) is
  shown as a run gets it (``Runner._request_model``): API_FAILURE(malformed_response), error_code
  ``lone_surrogate``.
- A list or object where a name goes (Chat stream finish_reason, Responses event or item type) raised
  TypeError: a traceback, exit 1. Now the turn a run gets, exit 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

CLI = [sys.executable, "-m", "callbound.cli", "parse"]


def _parse(api: str, data: bytes) -> tuple[int, dict[str, Any] | None, bytes]:
    p = subprocess.run([*CLI, "--api", api, "-"], input=data, capture_output=True, timeout=60)
    return p.returncode, json.loads(p.stdout) if p.returncode == 0 else None, p.stderr


def test_a_lone_surrogate_in_text_is_printed_escaped() -> None:
    data = (
        b'{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",'
        b'"content":"a\\ud800b"},"finish_reason":"stop"}]}'
    )
    rc, out, err = _parse("openai-chat", data)
    assert (rc, err) == (0, b"")
    assert out is not None and (out["finish"], out["text"]) == ("FINAL_TEXT", "a\ud800b")


def test_a_lone_surrogate_in_a_response_id_is_the_runs_malformed_response() -> None:
    data = (
        b'data: {"type":"response.completed","response":{"id":"r\\ud800","status":"completed",'
        b'"output":[]}}\n\n'
    )
    rc, out, err = _parse("openai-responses", data)
    assert (rc, err) == (0, b"")
    assert out is not None
    assert (out["finish"], out["reason"], out["error_code"]) == (
        "API_FAILURE",
        "malformed_response",
        "lone_surrogate",
    )
    assert out["response_id"].startswith("cb:")  # D7: the id that came cannot be shown as an id


def test_a_lone_surrogate_in_a_call_id_runs_no_call() -> None:
    data = (
        b'{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",'
        b'"content":null,"tool_calls":[{"id":"call_\\ud800","type":"function","function":{"name":"f",'
        b'"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}'
    )
    rc, out, _ = _parse("openai-chat", data)
    assert rc == 0 and out is not None
    assert (out["finish"], out["reason"], out["calls"]) == ("API_FAILURE", "malformed_response", [])


def test_names_that_are_no_text_exit_0() -> None:
    chat = (
        b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"},'
        b'"finish_reason":{}}]}\n\ndata: [DONE]\n\n'
    )
    rc, out, err = _parse("openai-chat", chat)
    assert (rc, err) == (0, b"") and out is not None
    assert (out["finish"], out["reason"]) == ("API_FAILURE", "unknown_stop_reason")
    events = (
        b'data: {"type":"response.created","response":{"id":"r1","status":"in_progress","output":[]}}\n\n'
        b'data: {"type":["a"],"output_index":0}\n\n'
        b'data: {"type":"response.completed","response":{"id":"r1","status":"completed","output":[]}}\n\n'
    )
    body = b'{"id":"r1","status":"completed","output":[{"type":{},"id":"x"}]}'
    for data in (events, body):
        rc, out, err = _parse("openai-responses", data)
        assert (rc, err) == (0, b"") and out is not None and out["finish"] == "FINAL_TEXT"
