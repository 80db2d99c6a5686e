"""No environment variable turns the idempotency ledger off (D9, D22).

The crash matrix's negative control ran its processes with CALLBOUND_UNSAFE_NO_LEDGER=1, and callbound read
that variable in every process: one stray export (a copied .env file, a CI variable) ran every write of a
production worker with no replay, no reconcile and no IN_PROGRESS. The control's driver now turns the
ledger off in code (callbound.runtime.crash.bypass_ledger_for_negative_control); the variable does nothing."""

from __future__ import annotations

import pytest

import callbound as cb
from callbound.testing import FakeClock, ScriptedModel
from tests.runtime.helpers import API, Counter, calls, fc, final, write_tool


def _note_a1(store: cb.Store, counter: Counter) -> cb.Outcome:
    script = [  # the model proposes the same note twice: the second is the first's replay (D13)
        calls("r1", fc("c1", "set_note", {"order_id": "A1"})),
        calls("r2", fc("c2", "set_note", {"order_id": "A1"})),
        final("r3"),
    ]
    runner = cb.Runner(
        model=ScriptedModel(API, script),
        registry=cb.Registry([write_tool(counter)]),
        store=store,
        clock=FakeClock(),
    )
    return runner.run_sync("note A1", tenant="acme", subject="u1")


def test_the_old_variable_no_longer_bypasses_the_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLBOUND_UNSAFE_NO_LEDGER", "1")
    from callbound.stores.memory import MemoryStore

    store = MemoryStore()
    counter = Counter()
    outcome = _note_a1(store, counter)
    assert outcome.state is cb.State.COMPLETED
    assert counter.n == 1, "bypassed, the ledger was not read and the write ran again"
    (entry,) = store.ledger_list(tenant="acme")
    assert entry.operation_id == outcome.operation_id
