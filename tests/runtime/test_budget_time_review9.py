"""Review 9: budgets that cannot be counted, and the absolute ``not_after`` (D12, D14, D26, D27).

- A token or cost budget with a turn whose usage lacks the count it needs (D27: missing usage is null,
  never 0) stopped nothing: the turn counted as 0 tokens. Such a turn now ends STOPPED(USAGE_UNKNOWN)
  before any of its calls runs (fail closed, like D12's max_cost without a price).
- ``not_after`` ends the operation regardless (D14), but retry backoff (D26), handler timeouts,
  ``CallContext.deadline`` and the request's deadline (``RequestMeta.timeout_s``) looked only at the
  active deadline. They now use min(deadline_s - active_s, not_after - now); a backoff that would end
  past it stops STOPPED(DEADLINE) instead of sleeping.
- A final answer that arrived after the deadline ended COMPLETED, while a tool turn in the same case
  ended STOPPED(DEADLINE) (D14); it now stops too, keeping the answer's text.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import yaml

import callbound as cb
from callbound import adapters
from callbound.core.guards import Budgets, Stop
from callbound.core.model import RequestMeta
from callbound.core.types import Finish, ModelTurn
from callbound.runtime.verify import verify_store
from callbound.testing import ApiError, FakeClock, ScriptedModel
from tests.adapters.streaming import fed
from tests.recordings import fixtures_dir

from .helpers import MODEL, Counter, OrderArgs, calls, fc, final, get_order_tool, last_outputs, make

A1 = {"order_id": "A1"}
PRICES = {MODEL: cb.Price(input_per_mtok=Decimal("1"), output_per_mtok=Decimal("1"))}


def without_usage(body: dict[str, Any], *drop: str) -> dict[str, Any]:
    """The body with its usage removed (``drop`` empty), or only the named counts removed."""
    body = dict(body)
    if not drop:
        body.pop("usage")
    else:
        body["usage"] = {k: v for k, v in body["usage"].items() if k not in drop}
    return body


def assert_stopped(out: cb.Outcome, reason: str) -> None:
    assert (out.state, out.reason) == (cb.State.STOPPED, reason), (out.state, out.reason)
    assert out.escalation is not None and out.escalation["reason"] == reason


# ---- D12/D27: a budget that cannot be counted stops the operation ---------------------------------


@pytest.mark.parametrize(
    ("budgets", "drop"),
    [
        ({"max_input_tokens": 1000}, ()),
        ({"max_output_tokens": 1000}, ()),
        ({"max_cost": Decimal("5")}, ()),
        ({"max_output_tokens": 1000}, ("output_tokens",)),
        ({"max_input_tokens": 1000}, ("input_tokens",)),
        ({"max_cost": Decimal("5")}, ("output_tokens",)),  # a cost from half the counts is no cost
    ],
)
async def test_a_tool_turn_without_the_usage_a_budget_needs_stops_before_its_calls(
    budgets: dict[str, Any], drop: tuple[str, ...]
) -> None:
    """D12 fails closed on a budget it cannot enforce; D27 says missing usage is null, never 0."""
    runs = Counter()
    script = [without_usage(calls("resp_1", fc("call_1", "get_order", A1)), *drop), final("resp_2")]
    h = make(script, [get_order_tool(runs)], budgets=cb.Budgets(**budgets), prices=PRICES)
    out = await h.run()
    assert_stopped(out, "USAGE_UNKNOWN")
    assert out.escalation is not None and "usage" in out.escalation["detail"]
    assert runs.n == 0 and len(h.model.requests) == 1
    assert verify_store(h.store) == []


async def test_a_final_answer_without_usage_under_a_budget_stops_and_keeps_its_text() -> None:
    """D12/D27, as check_spend does for a final turn over a budget: the answer came, but uncounted."""
    h = make([without_usage(final("resp_1", "Shipped."))], [], budgets=cb.Budgets(max_output_tokens=50))
    out = await h.run()
    assert_stopped(out, "USAGE_UNKNOWN")
    assert out.text == "Shipped."
    assert verify_store(h.store) == []


async def test_a_continue_turn_without_usage_under_a_budget_stops_before_the_next_request() -> None:
    """D1: CONTINUE is a model turn, so it is counted like one; uncounted, it stops (D12, D27)."""
    paused = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": "Searching..."}],
        "stop_reason": "pause_turn",
    }
    model = ScriptedModel(
        "anthropic-messages", [paused, {**paused, "id": "msg_2", "stop_reason": "end_turn"}]
    )
    runner = cb.Runner(
        model=model,
        registry=cb.Registry([]),
        clock=FakeClock(),
        budgets=cb.Budgets(max_output_tokens=500),
        settings={"model": "claude-test", "max_output_tokens": 100},
    )
    out = await runner.run("hi", tenant="acme", subject="u")
    assert_stopped(out, "USAGE_UNKNOWN")
    assert len(model.requests) == 1
    assert verify_store(runner.store) == []


async def test_a_count_no_budget_needs_may_be_missing() -> None:
    """Only the count a budget needs matters (D27): max_input_tokens does not need output tokens."""
    runs = Counter()
    script = [
        without_usage(calls("resp_1", fc("call_1", "get_order", A1)), "output_tokens"),
        final("resp_2"),
    ]
    h = make(script, [get_order_tool(runs)], budgets=cb.Budgets(max_input_tokens=1000))
    out = await h.run()
    assert out.state == cb.State.COMPLETED and runs.n == 1


async def test_without_a_token_or_cost_budget_missing_usage_changes_nothing() -> None:
    runs = Counter()
    script = [without_usage(calls("resp_1", fc("call_1", "get_order", A1))), without_usage(final("resp_2"))]
    h = make(script, [get_order_tool(runs)])
    out = await h.run()
    assert out.state == cb.State.COMPLETED and runs.n == 1


async def test_a_retryable_failure_has_no_usage_and_is_still_retried_under_a_budget() -> None:
    """D26: an HTTP 429 carries no usage; it is retried, not stopped as USAGE_UNKNOWN."""
    h = make([ApiError(429), final("resp_1")], [], budgets=cb.Budgets(max_output_tokens=50))
    out = await h.run()
    assert out.state == cb.State.COMPLETED and len(h.model.requests) == 2


_APIS = {
    "anthropic": "anthropic-messages",
    "gemini": "gemini-generate",
    "gemini-interactions": "gemini-interactions",
    "openai-chat": "openai-chat",
    "openai-responses": "openai-responses",
}


def _recorded_turns() -> list[tuple[str, ModelTurn]]:
    root = fixtures_dir()
    found: list[tuple[str, ModelTurn]] = []
    for folder, api in _APIS.items():
        adapter = adapters.get(api)
        for path in sorted((root / folder).iterdir()):
            bodies: list[tuple[str, bytes, bool]] = []
            if path.suffix == ".yaml":
                for i, it in enumerate(yaml.safe_load(path.read_text())["interactions"]):
                    resp = it["response"]
                    if int(resp["status"]["code"]) != 200:
                        continue
                    if "parsed_body" in resp:
                        bodies.append((f"{path.name}#{i}", json.dumps(resp["parsed_body"]).encode(), False))
                    else:
                        bodies.append((f"{path.name}#{i}", resp["body"]["string"].encode(), True))
            else:
                bodies.append((path.name, path.read_bytes(), not path.name.endswith(".json")))
            for name, raw, streamed in bodies:
                try:
                    turn = fed(adapter, raw)[0] if streamed else adapter.parse_response(raw)
                except Exception:  # a .txt recording may be either; the other reading must work
                    turn = adapter.parse_response(raw) if streamed else fed(adapter, raw)[0]
                found.append((f"{folder}/{name}", turn))
    return found


def test_every_recorded_turn_that_goes_on_reports_the_usage_every_budget_needs() -> None:
    """USAGE_UNKNOWN must not stop normal runs: every real recording whose turn continues the loop or
    answers (final text, tool proposals, continue) carries both token counts (D27, WIRE.md usage
    sections), so a run under every budget can count it."""
    from callbound.core.guards import check_usage_known

    everything = Budgets(max_input_tokens=10**9, max_output_tokens=10**9, max_cost=Decimal("1000"))
    goes_on = (Finish.FINAL_TEXT, Finish.TOOL_PROPOSALS, Finish.CONTINUE)
    turns = [(name, t) for name, t in _recorded_turns() if t.finish in goes_on]
    assert len(turns) >= 50
    unknown = [name for name, t in turns if isinstance(check_usage_known(everything, t.usage), Stop)]
    assert unknown == []


# ---- D14/D26: not_after bounds retries, handlers and requests --------------------------------------


async def test_a_retry_after_past_not_after_stops_at_once_instead_of_sleeping() -> None:
    """D14: not_after ends the operation regardless; D26: backoff only within the deadline."""
    clock = FakeClock()
    not_after = clock.now() + timedelta(seconds=5)
    script = [ApiError(429, headers={"retry-after": "60"}), final("resp_1")]
    h = make(script, [], clock=clock, budgets=cb.Budgets(not_after=not_after))
    out = await h.run()
    assert_stopped(out, "DEADLINE")
    assert clock.slept == [] and clock.now() < not_after
    assert len(h.model.requests) == 1


async def test_a_retry_after_past_the_active_deadline_stops_deadline_without_sleeping() -> None:
    """D26: a retry that cannot happen within the deadline is the deadline's stop (D14), not the
    provider's failure; nothing sleeps."""
    h = make(
        [ApiError(429, headers={"retry-after": "60"}), final("resp_1")], [], budgets=cb.Budgets(deadline_s=5)
    )
    out = await h.run()
    assert_stopped(out, "DEADLINE")
    assert h.clock.slept == [] and len(h.model.requests) == 1


async def test_a_retry_that_fits_before_not_after_still_happens() -> None:
    clock = FakeClock()
    script = [ApiError(429, headers={"retry-after": "2"}), final("resp_1")]
    budgets = cb.Budgets(not_after=clock.now() + timedelta(seconds=30))
    h = make(script, [], clock=clock, budgets=budgets)
    out = await h.run()
    assert out.state == cb.State.COMPLETED and clock.slept and clock.slept[0] >= 2


async def test_call_context_deadline_is_not_after_when_it_comes_first() -> None:
    """D14: the handler's deadline is the nearer of the active deadline and not_after."""
    seen: list[datetime] = []

    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        seen.append(ctx.deadline)
        return {}

    clock = FakeClock()
    not_after = clock.now() + timedelta(seconds=5)
    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")],
        [get_order_tool(handler=handler, timeout_ms=60_000)],
        clock=clock,
        budgets=cb.Budgets(not_after=not_after, deadline_s=300),
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert seen == [not_after]


async def test_a_handler_timeout_is_capped_by_not_after() -> None:
    """D14: a tool with a 60 s timeout is cut at not_after (0.2 s away), not 60 s later."""

    async def slow(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        await asyncio.sleep(30)
        return {}

    clock = FakeClock()
    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")],
        [get_order_tool(handler=slow, timeout_ms=60_000)],
        clock=clock,
        budgets=cb.Budgets(not_after=clock.now() + timedelta(seconds=0.2), deadline_s=300),
    )
    started = time.monotonic()
    await h.run()
    assert time.monotonic() - started < 10
    assert last_outputs(h.model)["call_1"]["error"]["code"] == "TIMEOUT"


class _MetaModel(ScriptedModel):
    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.metas: list[RequestMeta] = []

    async def complete(
        self, body: dict[str, Any], *, stream: bool, meta: RequestMeta, **kw: Any
    ) -> ModelTurn:
        self.metas.append(meta)
        return await super().complete(body, stream=stream, meta=meta, **kw)


async def test_the_request_deadline_is_capped_by_not_after() -> None:
    """D26: SDK clients get a timeout equal to the remaining deadline, which not_after shortens (D14)."""
    clock = FakeClock()
    model = _MetaModel("openai-responses", [final("resp_1")])
    runner = cb.Runner(
        model=model,
        registry=cb.Registry([]),
        clock=clock,
        budgets=cb.Budgets(not_after=clock.now() + timedelta(seconds=7), deadline_s=300),
        settings={"model": MODEL},
    )
    out = await runner.run("hi", tenant="acme", subject="u")
    assert out.state == cb.State.COMPLETED
    assert [m.timeout_s for m in model.metas] == [7.0]


# ---- D14: a final answer after the deadline ---------------------------------------------------------


@pytest.mark.parametrize("by", ["deadline_s", "not_after"])
async def test_a_final_answer_arriving_after_the_deadline_is_stopped_with_its_text(by: str) -> None:
    """D14: the final turn checks time as a tool turn does; the answer's text stays on the outcome, as
    for a final turn over a token budget (check_spend)."""
    clock = FakeClock()

    def slow(request: dict[str, Any]) -> dict[str, Any]:
        clock.advance(11)  # the request takes 11 s of a 10 s budget
        return final("resp_1", "Shipped.")

    budgets = (
        cb.Budgets(deadline_s=10)
        if by == "deadline_s"
        else cb.Budgets(not_after=clock.now() + timedelta(seconds=10))
    )
    h = make([slow], [], clock=clock, budgets=budgets)
    out = await h.run()
    assert_stopped(out, "DEADLINE")
    assert out.text == "Shipped."
    assert verify_store(h.store) == []


async def test_a_final_answer_in_time_completes() -> None:
    h = make([final("resp_1", "Shipped.")], [], budgets=cb.Budgets(deadline_s=10))
    out = await h.run()
    assert (out.state, out.text) == (cb.State.COMPLETED, "Shipped.")
