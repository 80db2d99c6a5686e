"""An ``intent_key`` hook names the intent with text (reference.md, "Tool handlers": the key is "``ik_``
and the text of ``ToolSpec.intent_key``"): a hook that returns anything but a non-empty ``str`` (an
int, a tuple, an object whose ``str()`` holds its address) is ``HANDLER_ERROR`` before the handler
runs, as ``None`` and ``""`` already were. An int 5 was the key ``ik_5``, one intent with a hook
returning ``"5"`` (review round 16, F12)."""

from __future__ import annotations

from typing import Any

import pytest

import callbound as cb

from .helpers import Counter, calls, error_code, fc, final, last_outputs, make, write_tool


def _script() -> list[Any]:
    return [calls("r1", fc("c1", "set_note", {"order_id": "A1"})), final("r2"), final("r3")]


@pytest.mark.parametrize("key", [5, 0, ("A1", 5), b"A1", object(), None, ""])
def test_an_intent_key_that_is_not_text_is_a_handler_error_before_the_handler_runs(key: Any) -> None:
    counter = Counter()
    h = make(_script(), [write_tool(counter, intent_key=lambda a, c: key)])
    out = h.runner.run_sync("note A1", "acme", "u")
    assert out.state == cb.State.COMPLETED, out.reason
    result = last_outputs(h.model)["c1"]
    assert error_code(result) == "HANDLER_ERROR"
    assert "could not name the intent" in result["error"]["message"]
    assert counter.n == 0 and h.store.ledger_list() == []


def test_an_intent_key_that_is_text_names_the_intent() -> None:
    counter = Counter()
    h = make(_script(), [write_tool(counter, intent_key=lambda a, c: f"note:{a.order_id}")])
    out = h.runner.run_sync("note A1", "acme", "u")
    assert out.state == cb.State.COMPLETED, out.reason
    assert counter.calls == [("A1", "ik_note:A1", "c1")]
