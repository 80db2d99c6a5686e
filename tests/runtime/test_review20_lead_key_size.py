"""A tenant or operation id longer than every store can key by is a UsageError when the operation is
made, on every store alike (D4; review round 20, lead, found by a).

PostgreSQL keeps an index row in at most 2704 bytes: a tenant or operation id of about 2.6 KB failed
the first commit with a StoreError there, while SQLite and memory took it. Up to 1024 bytes of UTF-8
(runtime.checks.MAX_KEY_BYTES) each, with an intent key of up to 1024 bytes, every store holds them."""

from __future__ import annotations

import pytest

import callbound as cb
from callbound.runtime.checks import MAX_KEY_BYTES
from callbound.stores.base import Store

from .helpers import Counter, OrderArgs, calls, fc, final, make, write_tool


@pytest.fixture
def store(each_store: Store) -> Store:
    return each_store  # memory, SQLite and PostgreSQL (tests/conftest.py)


def _longest(ch: str) -> str:
    """The longest text of ``ch`` that fits MAX_KEY_BYTES (a character may take several bytes)."""
    return ch * (MAX_KEY_BYTES // len(ch.encode("utf-8")))


def _intent(args: OrderArgs, ctx: cb.CallContext) -> str:
    return "k" * 1024  # the longest intent key (core.dispatch.MAX_INTENT_KEY_BYTES)


@pytest.mark.parametrize("ch", ["t", "é", "€"])
async def test_the_longest_ids_run_on_every_store(store: Store, ch: str) -> None:
    notes = Counter()
    h = make(
        [calls("r1", fc("c1", "set_note", {"order_id": "A1"})), final("r2")],
        [write_tool(notes, intent_key=_intent)],
        store=store,
    )
    out = await h.run(tenant=_longest(ch), operation_id=_longest(ch) if ch != "t" else "o" * MAX_KEY_BYTES)
    assert out.state == cb.State.COMPLETED
    assert notes.n == 1
    assert store.load_operation(out.operation_id) is not None


@pytest.mark.parametrize("field", ["tenant", "operation_id"])
@pytest.mark.parametrize("size", [MAX_KEY_BYTES + 1, 2_700, 10_000])
async def test_a_longer_tenant_or_operation_id_is_a_usage_error(store: Store, field: str, size: int) -> None:
    h = make([final("r1")], [write_tool()], store=store)
    kw = {field: "x" * size}
    with pytest.raises(cb.UsageError, match=f"{field} is {size} bytes of UTF-8, over the {MAX_KEY_BYTES}"):
        await h.run(**kw)
    with pytest.raises(cb.UsageError, match="over the"):
        h.runner.submit("Hi", **{"tenant": "acme", "subject": "u", **kw})
    assert h.model.requests == []


async def test_a_multibyte_id_is_measured_in_bytes(store: Store) -> None:
    h = make([final("r1")], [write_tool()], store=store)
    with pytest.raises(cb.UsageError, match="over the"):
        await h.run(tenant="€" * (MAX_KEY_BYTES // 3 + 1))  # 342 characters, 1026 bytes
