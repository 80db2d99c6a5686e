"""A plain (not streamed) response gets the argument byte caps a stream gets (StreamCaps): a call over
the per-call cap, or calls over the per-response cap together, make the turn TRUNCATED
(arguments_too_large) with no calls, on every API, and nothing runs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get as get_adapter
from callbound.adapters.base import StreamCaps, capped
from callbound.testing import FakeClock, ScriptedModel
from tests.docs.stop_reason_bodies import BUILDERS
from tests.runtime.test_every_api_loop import CALLS, FINAL

APIS = list(BUILDERS)


class GetOrder(BaseModel):
    order_id: str


def _registry(ran: list[str]) -> cb.Registry:
    def get_order(args: GetOrder, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.order_id)
        return {"order_id": args.order_id}

    spec = cb.ToolSpec(
        name="get_order", description="d", params=GetOrder, handler=get_order, schema_version="1", risk="read"
    )
    return cb.Registry([spec])


def _call_bytes(api: str) -> int:
    """The call's argument bytes as ``capped`` measures them: text as received, an object as compact
    JSON, what a stream counts for it (review 3; default separators, with spaces, before)."""
    turn = get_adapter(api).parse_response(BUILDERS[api](CALLS[api]))
    (call,) = turn.calls
    raw = call.arguments_raw
    return len(
        (raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, separators=(",", ":"))).encode()
    )


@pytest.mark.parametrize("api", APIS)
def test_a_call_over_the_cap_in_a_plain_body_never_runs(api: str) -> None:
    size = _call_bytes(api)
    ran: list[str] = []
    model = ScriptedModel(
        api, [BUILDERS[api](CALLS[api]), BUILDERS[api](FINAL[api])], caps=StreamCaps(max_call_bytes=size - 1)
    )
    runner = cb.Runner(model=model, registry=_registry(ran), clock=FakeClock())
    out = runner.run_sync("where is A1?", tenant="t", subject="s")
    assert out.state == "INCOMPLETE" and out.reason == "ARGUMENTS_TOO_LARGE"
    assert ran == []
    # at the cap exactly, it runs
    model = ScriptedModel(
        api, [BUILDERS[api](CALLS[api]), BUILDERS[api](FINAL[api])], caps=StreamCaps(max_call_bytes=size)
    )
    out = cb.Runner(model=model, registry=_registry(ran), clock=FakeClock()).run_sync(
        "x", tenant="t", subject="s"
    )
    assert out.state == "COMPLETED" and len(ran) == 1


@pytest.mark.parametrize("api", APIS)
def test_capped_keeps_the_raw_stop_reason_and_checks_the_response_total(api: str) -> None:
    turn = get_adapter(api).parse_response(BUILDERS[api](CALLS[api]))
    size = _call_bytes(api)
    assert capped(turn, StreamCaps(max_call_bytes=size, max_response_bytes=size)) is turn
    over = capped(turn, StreamCaps(max_call_bytes=size, max_response_bytes=size - 1))
    assert over.finish is cb.Finish.TRUNCATED and over.reason == "arguments_too_large"
    assert over.calls == () and over.continuation == ()
    assert over.raw_stop_reason == turn.raw_stop_reason and over.response_id == turn.response_id
    assert over.failure is not None and not over.failure.retryable
    # a body no larger than the caps cannot hold an argument over them: no walk over the calls
    assert capped(turn, StreamCaps(max_call_bytes=1, max_response_bytes=1), body_bytes=1) is turn
