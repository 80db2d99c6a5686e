"""Review round 17, r2 F2 and F3.

F2: the default intent key (D13 (1)) and the identical-call guard (D13 (2)) are derived from the arguments
as validated, defaults filled in and validators applied, which is what the handler runs on, not from the
arguments as sent (review round 17, r2 F2). A refund sent once without its default currency and once with
it ran twice under two keys; four spellings of one read were four different calls to the guard.

F3: ``Outcome.usage`` is the operation's total, and a count (or cost) one counted turn lacks makes it
unknown (None), never the sum of the turns that had it (D27: missing usage is null, never 0)."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, SecretStr, field_validator

import callbound as cb
from callbound.core.canonical import canonical_json
from callbound.core.dispatch import Execute, TrustedOperation, plan_call
from callbound.core.idempotency import arguments_identity, default_intent_key_json
from callbound.core.ids import default_intent_key
from callbound.core.types import ToolCall, Usage
from callbound.testing import ApiError

from .helpers import MODEL, calls, error_code, fc, final, get_order_tool, last_outputs, make, outputs


class Refund(BaseModel):
    order_id: str
    amount: int
    currency: str = "USD"


def refund_tool(
    runs: list[tuple[dict[str, Any], str | None]], params: type[BaseModel] = Refund
) -> cb.ToolSpec:
    def refund(args: Any, ctx: cb.CallContext) -> dict[str, Any]:
        runs.append((args.model_dump(), ctx.idempotency_key))
        return {"refund_id": f"rf_{len(runs)}"}

    return cb.ToolSpec(
        name="refund",
        description="Refund an order",
        params=params,
        handler=refund,
        schema_version="refund-v1",
        risk="write",
    )


def turns(name: str, spellings: list[dict[str, Any]]) -> list[Any]:
    return [calls(f"r{i}", fc(f"c{i}", name, a)) for i, a in enumerate(spellings)] + [final("rf")]


async def test_a_default_left_out_then_sent_is_one_refund_the_second_replays_the_first() -> None:
    """D13 (1), issue 2 §6: the same intent proposed again with a new call id returns the recorded result
    without a second execution. The handler got identical arguments both times: one refund."""
    runs: list[tuple[dict[str, Any], str | None]] = []
    script = turns(
        "refund",
        [{"order_id": "A1", "amount": 40}, {"order_id": "A1", "amount": 40, "currency": "USD"}],
    )
    h = make(script, [refund_tool(runs)])
    out = await h.run()
    assert out.state == cb.State.COMPLETED, out.reason
    assert runs == [({"order_id": "A1", "amount": 40, "currency": "USD"}, runs[0][1])]
    first = outputs(h.model.requests[1])[-1]["result"]
    assert first == {"ok": True, "data": {"refund_id": "rf_1"}}
    assert last_outputs(h.model)["c1"] == first  # replayed, not run again
    (entry,) = h.store.ledger_list()
    assert entry.key == runs[0][1] and entry.attempts == 1


async def test_a_normalising_validator_gives_one_intent() -> None:
    """The handler runs on what the validator made of the value: " a1" and "A1" are one order."""

    class Normalised(Refund):
        @field_validator("order_id")
        @classmethod
        def _norm(cls, v: str) -> str:
            return v.strip().upper()

    runs: list[tuple[dict[str, Any], str | None]] = []
    script = turns(
        "refund",
        [{"order_id": " a1", "amount": 40}, {"order_id": "A1", "amount": 40, "currency": "USD"}],
    )
    h = make(script, [refund_tool(runs, Normalised)])
    out = await h.run()
    assert out.state == cb.State.COMPLETED, out.reason
    assert [r[0]["order_id"] for r in runs] == ["A1"]
    assert len(h.store.ledger_list()) == 1


class Lookup(BaseModel):
    order_id: str
    verbose: bool = False
    page: int = 1


SPELLINGS = [
    {"order_id": "A1"},
    {"order_id": "A1", "verbose": False},
    {"order_id": "A1", "page": 1},
    {"page": 1, "verbose": False, "order_id": "A1"},
]


def lookup_tool(seen: list[dict[str, Any]]) -> cb.ToolSpec:
    def lookup(args: Lookup, ctx: cb.CallContext) -> dict[str, Any]:
        seen.append(args.model_dump())
        return {"n": len(seen)}

    return cb.ToolSpec(
        name="lookup", description="Look up", params=Lookup, handler=lookup, schema_version="v1"
    )


async def test_four_spellings_of_one_read_trip_the_identical_call_guard() -> None:
    """D13 (2) counts runs of (tool, schema_version, canonical arguments): with max_identical_calls=1 the
    second spelling is told NO_PROGRESS, the third (a repeat after that) stops the operation (D13 (3))."""
    seen: list[dict[str, Any]] = []
    h = make(turns("lookup", SPELLINGS), [lookup_tool(seen)], budgets=cb.Budgets(max_identical_calls=1))
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "NO_PROGRESS")
    assert len(seen) == 1
    assert error_code(outputs(h.model.requests[2])[-1]["result"]) == "NO_PROGRESS"
    assert len(h.model.requests) == 3  # the third spelling stopped it before another request


async def test_spellings_of_one_read_in_one_turn_run_once() -> None:
    """Reads of one turn run side by side (D15); the repeat guard still sees one call."""
    seen: list[dict[str, Any]] = []
    script = [calls("r1", *(fc(f"c{i}", "lookup", a) for i, a in enumerate(SPELLINGS[:2]))), final("r2")]
    h = make(script, [lookup_tool(seen)], budgets=cb.Budgets(max_identical_calls=1))
    out = await h.run()
    assert out.state == cb.State.COMPLETED, out.reason
    assert len(seen) == 1
    assert sorted(error_code(r) or "ok" for r in last_outputs(h.model).values()) == ["NO_PROGRESS", "ok"]


class Many(BaseModel):
    order_id: str
    amount: int
    currency: str = "USD"
    note: str | None = None
    notify: bool = True
    reason_code: int = 0
    tags: list[str] = Field(default_factory=list)


DEFAULTS: dict[str, Any] = {"currency": "USD", "note": None, "notify": True, "reason_code": 0, "tags": []}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sets(st.sampled_from(sorted(DEFAULTS))), min_size=2, max_size=4), st.randoms())
def test_optional_fields_sent_at_their_defaults_or_left_out_run_a_write_once(
    included: list[set[str]], rnd: Any
) -> None:
    """Property: however many optional fields each proposal sends at their default values (and in
    whatever order), the same refund runs once; every later proposal replays its result."""
    spellings = []
    for fields in included:
        items = [("order_id", "A1"), ("amount", 40), *((f, DEFAULTS[f]) for f in fields)]
        rnd.shuffle(items)
        spellings.append(dict(items))
    runs: list[tuple[dict[str, Any], str | None]] = []
    # replays return a result seen before: D13 (3) would stop a third such turn in a row
    h = make(
        turns("refund", spellings), [refund_tool(runs, Many)], budgets=cb.Budgets(max_no_progress_turns=5)
    )
    out = h.runner.run_sync("refund A1", "acme", "u")
    assert out.state == cb.State.COMPLETED, out.reason
    assert len(runs) == 1
    assert all(r == {"ok": True, "data": {"refund_id": "rf_1"}} for r in last_outputs(h.model).values())


# ---- where the key stays what it was: arguments as sent ----------------------------------------------

OP = TrustedOperation("op-1", "acme", "u", None)


def key_for(spec: cb.ToolSpec, arguments: dict[str, Any], call_id: str = "c1") -> str:
    raw = json.dumps(arguments)
    call = ToolCall("prov", "api", "r1", call_id, spec.name, raw, json.loads(raw), None, 0)
    item = plan_call(call, cb.Registry([spec]), None, OP)
    assert isinstance(item, Execute), item
    assert item.idempotency_key is not None
    return item.idempotency_key


def test_every_field_sent_keeps_the_key_of_earlier_versions() -> None:
    """An approval paused before this change, for a call that sent every field, resumes under the same key
    (the key now also covers defaults left out: such a call gets a new one, APPROVAL_STALE on resume)."""
    spec = refund_tool([])
    sent = {"order_id": "A1", "amount": 40, "currency": "USD"}
    assert key_for(spec, sent) == default_intent_key("refund", "refund-v1", sent, "op-1")
    assert key_for(spec, {"order_id": "A1", "amount": 40}) == key_for(spec, sent)
    assert default_intent_key_json("t", "v", '{"a":[1,"x"]}', "op") == default_intent_key(
        "t", "v", {"a": [1, "x"]}, "op"
    )


class Secret(BaseModel):
    order_id: str
    token: SecretStr  # dumps as "**********" whatever the secret


class Excluded(BaseModel):
    order_id: str
    note: str = Field(default="", exclude=True)


class Stamped(BaseModel):
    order_id: str
    request_id: str = Field(default_factory=lambda: uuid.uuid4().hex)


class Labels(BaseModel):
    order_id: str
    labels: set[str] = set()


@pytest.mark.parametrize(
    ("params", "a", "b"),
    [
        (Secret, {"order_id": "A1", "token": "s1"}, {"order_id": "A1", "token": "s2"}),
        (Excluded, {"order_id": "A1", "note": "x"}, {"order_id": "A1", "note": "y"}),
    ],
)
def test_a_dump_that_hides_what_the_handler_gets_keeps_distinct_calls_distinct(
    params: type[BaseModel], a: dict[str, Any], b: dict[str, Any]
) -> None:
    """Two calls whose handlers get different values are never one intent: where the validated dump
    leaves something out, the key falls back to the arguments as sent."""
    spec = refund_tool([], params)
    assert key_for(spec, a) != key_for(spec, b)
    assert arguments_identity(spec, canonical_json(a)) == canonical_json(a)


@pytest.mark.parametrize(
    ("params", "sent"),
    [
        (Stamped, {"order_id": "A1"}),  # a default that differs on each validation
        (Labels, {"order_id": "A1", "labels": ["x", "y", "z", "w"]}),  # a set dumps in hash order
    ],
)
def test_a_validated_form_that_may_change_between_validations_is_not_the_key(
    params: type[BaseModel], sent: dict[str, Any]
) -> None:
    """The key must be the same when the call is planned again (an approval's resume compares them,
    D17): a validated form that can differ from one validation or process to the next is not used."""
    spec = refund_tool([], params)
    assert key_for(spec, sent) == key_for(spec, sent, "c2")
    assert arguments_identity(spec, canonical_json(sent)) == canonical_json(sent)


# ---- F3: Outcome.usage ---------------------------------------------------------------------------

PRICES = {MODEL: cb.Price(Decimal(1), Decimal(1))}


def without_usage(body: dict[str, Any], *counts: str) -> dict[str, Any]:
    """``body`` with its usage gone (no counts named) or with the named counts left out."""
    body = dict(body)
    if counts:
        body["usage"] = {k: v for k, v in body["usage"].items() if k not in counts}
    else:
        body.pop("usage")
    return body


def lookup_then(last: dict[str, Any]) -> list[Any]:
    return [calls("r1", fc("c1", "get_order", {"order_id": "A1"}), tokens=(10, 5)), last]


@pytest.mark.parametrize("prices", [None, PRICES])
async def test_a_turn_without_usage_makes_the_operations_usage_unknown(prices: Any) -> None:
    """Turn 1 reported (10, 5), turn 2 nothing: the operation's total is unknown, not (10, 5), and its
    cost is not turn 1's alone (D27)."""
    h = make(lookup_then(without_usage(final("r2"))), [get_order_tool()], prices=prices)
    out = await h.run()
    assert out.state == cb.State.COMPLETED, out.reason
    assert out.usage == Usage(None, None, None)


async def test_a_turn_missing_one_count_makes_that_count_and_the_cost_unknown() -> None:
    h = make(lookup_then(without_usage(final("r2"), "output_tokens")), [get_order_tool()], prices=PRICES)
    out = await h.run()
    assert out.usage == Usage(20, None, None)


async def test_turns_that_all_report_usage_are_summed_and_priced() -> None:
    h = make(lookup_then(final("r2", tokens=(7, 3))), [get_order_tool()], prices=PRICES)
    out = await h.run()
    assert out.usage == Usage(17, 8, Decimal("0.000025"))


async def test_a_failed_request_that_reported_no_usage_is_not_a_turn_whose_usage_is_missing() -> None:
    """A retried 503 (and a first request that failed) got no response, so no usage is missing: the
    total is the answered turns' (budgets do not ask a failed request for usage either)."""
    script = [ApiError(503), *lookup_then(final("r2", tokens=(7, 3)))]
    script.insert(2, ApiError(500))
    h = make(script, [get_order_tool()], prices=PRICES)
    out = await h.run()
    assert out.state == cb.State.COMPLETED, out.reason
    assert len(h.model.requests) == 4
    assert out.usage == Usage(17, 8, Decimal("0.000025"))
