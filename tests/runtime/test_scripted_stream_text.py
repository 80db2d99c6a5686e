"""Issue 3 §4: ScriptedModel accepts streams as lists of events or as raw SSE text. Raw SSE (or
JSON-lines) text given as a plain str or bytes plays as a stream; before, it was parsed as one JSON body,
"failed" as a connection error, and was retried until the script ran out (review round 13). Text that is
one JSON body, or no JSON at all (a malformed body on purpose), is still a plain body."""

from __future__ import annotations

import json
from typing import Any

import pytest

import callbound as cb
from callbound.testing import FakeClock, ScriptedModel

from .helpers import final, stream_events

GEMINI_SSE = (
    'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]}}],"responseId":"r1"}\r\n\r\n'
    'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"lo"}]},"finishReason":"STOP"}],'
    '"responseId":"r1"}\r\n\r\n'
)


def run(api: str, item: Any) -> tuple[cb.Outcome, ScriptedModel]:
    model = ScriptedModel(api, [item, item, item, item])
    out = cb.Runner(model=model, registry=cb.Registry([]), clock=FakeClock()).run_sync(
        "hi", tenant="t", subject="s"
    )
    return out, model


@pytest.mark.parametrize("kind", [str, bytes])
def test_raw_sse_text_plays_as_a_stream(kind: type) -> None:
    item = GEMINI_SSE if kind is str else GEMINI_SSE.encode()
    out, model = run("gemini-generate", item)
    assert (out.state, out.text) == (cb.State.COMPLETED, "Hello")
    assert len(model.requests) == 1


def test_event_named_sse_and_json_lines_play_as_streams() -> None:
    events = stream_events(final("r1", "Done here."))
    sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    jsonl = "".join(json.dumps(e) + "\n" for e in events)
    for item in (sse, jsonl):
        out, model = run("openai-responses", item)
        assert (out.state, out.text) == (cb.State.COMPLETED, "Done here.")
        assert len(model.requests) == 1


def test_a_json_body_and_a_malformed_body_as_text_stay_plain_bodies() -> None:
    out, _ = run("openai-responses", json.dumps(final("r1", "plain")))
    assert (out.state, out.text) == (cb.State.COMPLETED, "plain")
    out, model = run("openai-responses", "this is no JSON")
    assert out.state == cb.State.FAILED  # a malformed body, retried, as before
    assert len(model.requests) == 4
