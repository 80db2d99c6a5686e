"""Review 22 (d): a Gemini ``functionCall`` without a name reads the same streamed as plain.

The Gemini API streams each call whole, one part per chunk. A plain body whose call has no name fails
its turn ``API_FAILURE(malformed_response)``, ``call_without_name``, not retried (an id-less call is
answered by name and position, so it never could be; review round 15, r9). Streamed, the same part was
taken for a Vertex ``partialArgs`` piece with no open call: ``malformed_stream``, retryable, so the
request was sent again and paid for up to ``Budgets.max_retries`` times before the operation failed.
Now the streamed part is kept whole, as the plain body keeps it. A real ``partialArgs`` piece with no
open call is still a malformed stream (tests/adapters/test_gemini_generate.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.core.types import Finish
from callbound.testing import ScriptedModel, Stream
from tests.adapters import streaming

GEMINI = get("gemini-generate")
NAMED = {"functionCall": {"name": "f", "args": {"order_id": "A1"}}}
FINAL = {"candidates": [{"content": {"role": "model", "parts": [{"text": "done"}]}, "finishReason": "STOP"}]}


def _nameless(name: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"args": {"order_id": "B2"}}
    if name is not None:
        call["name"] = name
    return {"functionCall": call}


def _chunk(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    return {"candidates": [cand], "responseId": "g1"}


def _plain(name: Any) -> dict[str, Any]:
    return _chunk([NAMED, _nameless(name)], "STOP")


def _stream(name: Any) -> str:
    chunks = [_chunk([NAMED]), _chunk([_nameless(name)]), _chunk([{"text": ""}], "STOP")]
    return "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks)


class Args(BaseModel):
    order_id: str


def _run(first: Any) -> tuple[cb.Outcome, list[str], int]:
    ran: list[str] = []

    def handler(args: Args, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.order_id)
        return {"ok": 1}

    spec = cb.ToolSpec(name="f", description="t", params=Args, handler=handler, schema_version="v1")
    model = ScriptedModel("gemini-generate", [first, first, first, first, FINAL])
    out = cb.Runner(model=model, registry=cb.Registry([spec])).run_sync(input="go", tenant="t", subject="s")
    return out, ran, len(model.requests)


@pytest.mark.parametrize("name", [None, 5, ""], ids=["missing", "number", "empty"])
def test_a_nameless_call_fails_the_turn_alike_plain_and_streamed(name: Any) -> None:
    plain = GEMINI.parse_response(json.dumps(_plain(name)).encode())
    streamed, _ = streaming.fed(GEMINI, _stream(name).encode())
    for turn in (plain, streamed):
        assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "malformed_response")
        assert turn.failure is not None and turn.failure.error_code == "call_without_name"
        assert not turn.failure.retryable
    assert GEMINI.turn_items(plain)[0]["parts"] == [NAMED, _nameless(name)]
    assert [p for p in GEMINI.turn_items(streamed)[0]["parts"] if "functionCall" in p] == [
        NAMED,
        _nameless(name),
    ]


def test_the_run_fails_at_once_without_retrying_or_running_the_named_call() -> None:
    for first in (_plain(None), Stream(_stream(None))):
        out, ran, requests = _run(first)
        assert (out.state.value, out.reason, ran, requests) == ("FAILED", "MALFORMED_RESPONSE", [], 1)
