"""ScriptedModel mistakes say what they are (review round 16, F9):

- ``responses`` is a list, one response per model request (reference.md, "Tool handlers" example; the
  ``callbound.testing`` docstring). One body passed without its list was iterated by its keys (a dict)
  or characters (a str), each played as a response, and ended in ``ScriptExhausted`` ("add more
  responses"); ``None`` raised a bare TypeError. Now a ``UsageError`` when the model is made.
- A response function that raises is a bug of the script, not a failed connection: it was retried as one
  (logged by exception type only), used up the next responses and ended in ``ScriptExhausted``. Now
  ``ScriptedRequestError`` (a ``UsageError``) with the function's exception in its text and as its cause,
  and no retry.
"""

from __future__ import annotations

from typing import Any

import pytest

import callbound as cb
from callbound.testing import ApiError, ScriptedModel, ScriptedRequestError, Stream

from .helpers import API, final, get_order_tool, make


@pytest.mark.parametrize(
    "responses",
    [final("r1"), '{"id": "r1"}', b'{"id": "r1"}', None, 5, {final("r1")["id"]}, ApiError(500), Stream("x")],
    ids=["dict", "str", "bytes", "none", "int", "set", "api-error", "stream"],
)
def test_responses_that_are_not_a_list_of_responses_are_a_usage_error(responses: Any) -> None:
    with pytest.raises(cb.UsageError, match=r"responses is a list with one response per model request"):
        ScriptedModel(API, responses)


@pytest.mark.parametrize(
    "make_script", [tuple, lambda items: iter(items), list], ids=["tuple", "iterator", "list"]
)
def test_a_sequence_or_iterable_of_responses_still_plays(make_script: Any) -> None:
    model = ScriptedModel(API, make_script([final("r1")]))
    assert len(model.responses) == 1


def test_a_response_function_that_raises_is_reported_with_its_exception_not_retried() -> None:
    def answer(request: dict[str, Any]) -> dict[str, Any]:
        return final("r1", text=request["inputs"][0])  # a typo: "inputs"

    h = make([answer, final("r2"), final("r3"), final("r4")], [get_order_tool()])
    with pytest.raises(ScriptedRequestError) as info:
        h.runner.run_sync("hi", "acme", "u")
    text = str(info.value)
    assert "response 0" in text and "answer" in text and "KeyError: 'inputs'" in text
    assert isinstance(info.value.__cause__, KeyError)
    assert len(h.model.requests) == 1  # asked once: not retried as a broken connection


def test_a_response_function_raising_a_usage_error_keeps_it() -> None:
    def answer(request: dict[str, Any]) -> dict[str, Any]:
        raise cb.UsageError("the script says no")

    h = make([answer], [get_order_tool()])
    with pytest.raises(cb.UsageError, match=r"^the script says no$"):
        h.runner.run_sync("hi", "acme", "u")
