"""An intent key every store can key its ledger by: ToolSpec.intent_key's text is at most
MAX_INTENT_KEY_BYTES of UTF-8, else it names no intent (HANDLER_ERROR, nothing runs), the same on
every store (D4, D13); review round 20 (a).

PostgreSQL keys the ledger by (tenant, key) in a btree whose rows hold at most 2704 bytes: an
intent_key of 3000 characters (``f"refund:{args.note}"`` with a long note from the model) failed the
commit with a StoreError out of ``run()`` after the paid model turn, on every resume; SQLite and the
memory store took it."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

import callbound as cb
from callbound.core.dispatch import (
    HANDLER_ERROR,
    MAX_INTENT_KEY_BYTES,
    Execute,
    Reject,
    TrustedOperation,
    plan_call,
)
from callbound.core.registry import CallContext, Registry, ToolSpec
from callbound.core.types import ToolCall
from callbound.stores.base import Store

from ..runtime.helpers import Counter, OrderArgs, calls, error_code, fc, final, last_outputs, make, write_tool

OP = TrustedOperation("op-1", "acme", "u1", None)


class Note(BaseModel):
    text: str


def plan(key: str) -> Execute | Reject:
    def intent(args: Any, ctx: CallContext) -> str:
        return key

    spec = ToolSpec("note", "d", Note, lambda a, c: None, "note-v1", risk="write", intent_key=intent)
    call = ToolCall("p", "api", "r1", "c1", "note", '{"text":"x"}', {"text": "x"}, None, 0)
    item = plan_call(call, Registry([spec]), None, OP)
    assert isinstance(item, Execute | Reject)
    return item


@given(
    st.text(
        alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=40
    ),
    st.integers(-3, 3),
)
def test_the_limit_counts_utf8_bytes_exactly(unit: str, delta: int) -> None:
    size = len(unit.encode())
    key = unit * max(1, (MAX_INTENT_KEY_BYTES + delta * size) // size)
    item = plan(key)
    if len(key.encode()) <= MAX_INTENT_KEY_BYTES:
        assert isinstance(item, Execute)
        assert item.idempotency_key == f"ik_{key}"
    else:
        assert isinstance(item, Reject)
        assert (item.code, item.message) == (HANDLER_ERROR, "the tool could not name the intent of this call")


def test_exactly_at_the_limit_and_one_byte_over() -> None:
    assert isinstance(plan("k" * MAX_INTENT_KEY_BYTES), Execute)
    assert isinstance(plan("é" * (MAX_INTENT_KEY_BYTES // 2)), Execute)
    assert isinstance(plan("k" * (MAX_INTENT_KEY_BYTES + 1)), Reject)
    assert isinstance(plan("k" * (MAX_INTENT_KEY_BYTES - 1) + "é"), Reject)  # 1025 bytes, 1024 characters


@pytest.fixture
def store(each_store: Store) -> Store:
    return each_store  # memory, SQLite and PostgreSQL (tests/conftest.py)


LONG = secrets.token_hex(1500)  # 3000 characters that do not compress below the btree's limit


def long_intent(args: OrderArgs, ctx: cb.CallContext) -> str:
    return f"{args.order_id}:{LONG}"


def short_intent(args: OrderArgs, ctx: cb.CallContext) -> str:
    return f"{args.order_id}:{LONG[:900]}"


async def test_a_key_too_long_for_a_store_names_no_intent_on_every_store(store: Store) -> None:
    notes = Counter()
    h = make(
        [calls("r1", fc("c1", "set_note", {"order_id": "A1"})), final("r2")],
        [write_tool(notes, intent_key=long_intent)],
        store=store,
    )
    out = await h.run()  # was: StoreError on PostgreSQL, after the paid turn; the write ran elsewhere
    assert out.state == cb.State.COMPLETED
    assert notes.n == 0
    result = last_outputs(h.model)["c1"]
    assert error_code(result) == "HANDLER_ERROR"
    assert result["error"]["message"] == "the tool could not name the intent of this call"


async def test_a_key_within_the_limit_runs_on_every_store(store: Store) -> None:
    notes = Counter()
    h = make(
        [calls("r1", fc("c1", "set_note", {"order_id": "A1"})), final("r2")],
        [write_tool(notes, intent_key=short_intent)],
        store=store,
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert notes.n == 1
    assert last_outputs(h.model)["c1"]["ok"] is True
