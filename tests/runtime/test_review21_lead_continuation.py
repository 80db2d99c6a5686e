"""settings["continuation"] takes one of its two modes or nothing (D8, D25).

A misspelt mode ("previous_responseid") used to be accepted and meant replay: every request sent the
whole transcript, paid for again each turn, with nothing to tell the user their setting was ignored."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.testing import ScriptedModel


class _Args(BaseModel):
    x: int


def _runner(settings: dict[str, Any]) -> cb.Runner:
    registry = cb.Registry(
        [
            cb.ToolSpec(
                name="t",
                description="d",
                params=_Args,
                handler=lambda a, c: {"ok": 1},
                schema_version="v1",
                risk="read",
                timeout_ms=1000,
            )
        ]
    )
    return cb.Runner(model=ScriptedModel("openai-responses", []), registry=registry, settings=settings)


@pytest.mark.parametrize(
    "value", ["previous_responseid", "previous-response-id", "stateless", "", 1, True, ["replay"]]
)
def test_an_unknown_continuation_is_a_usage_error_naming_the_modes(value: Any) -> None:
    with pytest.raises(cb.UsageError) as info:
        _runner({"continuation": value})
    message = str(info.value)
    assert "continuation" in message and "previous_response_id" in message and "replay" in message


@pytest.mark.parametrize("value", [None, "replay", "previous_response_id"])
def test_the_two_modes_and_absence_are_accepted(value: Any) -> None:
    runner = _runner({"continuation": value})
    assert runner.settings.get("continuation") == value
