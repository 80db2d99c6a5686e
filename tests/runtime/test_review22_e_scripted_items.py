"""A script response ScriptedModel cannot play says which one it is and what to write (review round 22, e).

Found as an outside evaluator would write a script: ``[None]``, ``[5]``, a bare ``StreamCut()`` as a
whole response, or a response function that forgot its ``return``. Each was found only when an
operation reached it, as ``UsageError("ScriptedModel cannot play a NoneType")``: no index, no word of
what a response may be, and, for the items of the list, after the run had created and saved an
operation. Now the items are checked when the model is made (D24: "fails loudly"), and a function's
return value when it is called (a ``ScriptedRequestError``, as when it raises), naming the response.
"""

from __future__ import annotations

from typing import Any

import pytest

import callbound as cb
from callbound.stores.memory import MemoryStore
from callbound.testing import FakeClock, ScriptedModel, ScriptedRequestError, StreamCut

from .helpers import API, final, get_order_tool


@pytest.mark.parametrize(
    ("item", "says"),
    [
        (None, r"response 1 \(0-based\) is None \(NoneType\), which ScriptedModel cannot play: use a body"),
        (5, r"response 1 \(0-based\) is 5 \(int\), which ScriptedModel cannot play"),
        (StreamCut(), r"response 1 \(0-based\) is a bare StreamCut\(\): .*inside a list of stream events"),
    ],
    ids=["none", "int", "bare-streamcut"],
)
def test_an_item_that_cannot_be_played_is_refused_when_the_model_is_made(item: Any, says: str) -> None:
    with pytest.raises(cb.UsageError, match=says):
        ScriptedModel(API, [final("r1"), item])


def test_every_playable_shape_is_still_accepted() -> None:
    model = ScriptedModel(
        API, [final("r1"), '{"id": "r2"}', b"{}", [StreamCut()], "data: {}\n\n", lambda body: None]
    )
    assert len(model.responses) == 6


def test_a_response_function_that_returns_nothing_names_itself_and_leaves_the_operation_resumable() -> None:
    def answer(body: dict[str, Any]) -> Any:
        final("r1")  # the return forgotten

    store = MemoryStore()
    registry = cb.Registry([get_order_tool()])
    runner = cb.Runner(model=ScriptedModel(API, [answer]), registry=registry, store=store, clock=FakeClock())
    with pytest.raises(
        ScriptedRequestError,
        match=r"response 0 \(0-based\) of the script, the function .*answer, "
        r"returned None \(NoneType\), which ScriptedModel cannot play",
    ):
        runner.run_sync("x", tenant="t", subject="s", operation_id="op_forgot_return")
    fixed = cb.Runner(
        model=ScriptedModel(API, [final("r1")]), registry=registry, store=store, clock=FakeClock()
    )
    outcome = fixed.resume_sync("op_forgot_return")
    assert outcome.state == "COMPLETED", outcome
