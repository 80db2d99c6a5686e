"""Review round 18, c F2: a response holding a number JSON cannot carry ends the run with an Outcome,
never a StoreError (D4).

Provider bodies are read as Python's json reads them: ``1e400`` (valid JSON, no double holds it),
``NaN`` and ``Infinity`` become float infinity or NaN. A turn keeps the provider's items as received
(D8), to save (C1, D18) and send back, and no store can write those values: a message item's logprob, a
citation's score or a Retry-After of ``inf`` made the commit fail, and ``StoreError`` ("not plain JSON
data") escaped ``run`` after the paid request as if the store were down; the operation stayed
MODEL_REQUESTED and every resume paid for the same response again. Now a turn that would be resent
(its calls run, or CONTINUE) fails API_FAILURE(malformed_response) before any call runs, an answer keeps
its text without the items nothing sends back, and an infinite Retry-After is the longest wait."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.runtime.verify import verify_store
from callbound.stores import open as open_store
from callbound.stores.base import Store
from callbound.testing import ApiError, ScriptedModel, Stream

from .helpers import Counter, calls, fc, final, get_order_tool, make, msg, stream_events, write_tool

LOGPROB = '"annotations": [], "logprobs": [{"token": "Done", "logprob": -1e400}]'


def _store(kind: str, tmp_path: Path) -> Store:
    return open_store("memory:" if kind == "memory" else f"sqlite:///{tmp_path / 'cb.db'}")


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return _store(request.param, tmp_path)


def _tool_turn_with_logprob() -> str:
    body = calls("r1", fc("c1", "set_note", {"order_id": "A1"}))
    body["output"].insert(0, msg("Refunding now."))
    text = json.dumps(body)
    assert '"annotations": []' in text
    return text.replace('"annotations": []', LOGPROB)


async def test_a_tool_turn_holding_infinity_fails_before_its_calls_run(store: Store) -> None:
    notes = Counter()
    h = make([_tool_turn_with_logprob(), final("r2")], [write_tool(notes)], store=store)
    out = await h.run()  # was: StoreError "not plain JSON data" (SQLite, PostgreSQL)
    assert (out.state, out.reason) == (cb.State.FAILED, "MALFORMED_RESPONSE")
    assert notes.n == 0
    assert len(h.model.requests) == 1
    assert h.runner.outcome(out.operation_id).state == cb.State.FAILED  # stored, ended
    with pytest.raises(cb.UsageError):
        await h.runner.resume(out.operation_id)
    assert verify_store(store) == []


async def test_a_streamed_tool_turn_holding_infinity_fails_before_its_calls_run(store: Store) -> None:
    notes = Counter()
    events = stream_events(calls("r1", fc("c1", "set_note", {"order_id": "A1"})))
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    text = text.replace('"name": "set_note"', '"name": "set_note", "score": 1e400')
    h = make(
        [Stream(text), stream_events(final("r2"))],
        [write_tool(notes)],
        store=store,
        settings={"stream": True},
    )
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.FAILED, "MALFORMED_RESPONSE")
    assert notes.n == 0


async def test_an_answer_holding_infinity_completes_with_its_text(store: Store) -> None:
    text = json.dumps(final("r1", "Done.")).replace('"annotations": []', LOGPROB)
    h = make([text], [get_order_tool()], store=store)
    out = await h.run()
    assert (out.state, out.text) == (cb.State.COMPLETED, "Done.")
    assert verify_store(store) == []


async def test_an_anthropic_answer_with_a_citation_score_of_infinity_completes(store: Store) -> None:
    body: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": "Sunny.", "citations": [{"type": "x", "score": "SCORE"}]}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }
    model = ScriptedModel("anthropic-messages", [json.dumps(body).replace('"SCORE"', "1e400")])
    runner = cb.Runner(
        model=model, registry=cb.Registry([get_order_tool()]), store=store, settings={"model": "claude-test"}
    )
    out = await runner.run("Weather?", tenant="acme", subject="u")
    assert (out.state, out.text) == (cb.State.COMPLETED, "Sunny.")


@pytest.mark.parametrize("header", ["inf", "1e400"])
async def test_a_retry_after_of_infinity_stops_at_the_deadline(header: str, store: Store) -> None:
    h = make([ApiError(429, None, {"retry-after": header}), final("r1")], [get_order_tool()], store=store)
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "DEADLINE")
    assert len(h.model.requests) == 1
