"""Misuse is a UsageError before anything is stored or sent (D4, reference.md "Errors").

Found by reviewers:
- settings of the wrong type went on the wire as they were (``max_output_tokens: "1024"``,
  ``temperature: "0.2"``) or were read by their truth: ``stream: "false"`` streamed, ``store: 0`` was
  dropped so the provider kept the conversation;
- text with a lone surrogate (half of an emoji's UTF-16 pair) in the input raised UnicodeEncodeError
  out of ``run``; in the instructions or a tool's description every request failed to encode and was
  retried as a "connection error", ending FAILED(CONNECTION_ERROR) with nothing ever sent;
- ``Worker(lease_s=nan)`` was accepted: SQLite stored its expiry as NULL, a free lease, and a second
  worker drove the operation while the first was inside its write (paid twice); ``inf`` never expires.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

import callbound as cb
from callbound.runtime.app import App
from callbound.runtime.worker import Worker
from callbound.stores.memory import MemoryStore
from callbound.testing import FakeClock, ScriptedModel

from .helpers import OrderArgs, final, get_order_tool


def _runner(**kw: Any) -> cb.Runner:
    tools = kw.pop("tools", [get_order_tool()])
    return cb.Runner(
        model=ScriptedModel("openai-responses", [final("r1")]),
        registry=cb.Registry(tools),
        clock=FakeClock(),
        **kw,
    )


@pytest.mark.parametrize(
    "settings",
    [
        {"max_output_tokens": "1024"},
        {"max_output_tokens": True},
        {"max_output_tokens": 0},
        {"temperature": "0.2"},
        {"temperature": math.nan},
        {"temperature": -1},
        {"stream": "false"},
        {"store": 0},
        {"store": "false"},
        {"model": ""},
        {"model": 4},
    ],
)
def test_settings_of_the_wrong_type_are_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(cb.UsageError, match="settings\\["):
        _runner(settings={"model": "m", **settings})


@pytest.mark.parametrize(
    "settings",
    [
        {"max_output_tokens": 1024, "temperature": 0, "stream": False, "store": False},
        {"temperature": 0.7, "stream": True},
    ],
)
def test_settings_of_the_right_type_are_taken(settings: dict[str, Any]) -> None:
    assert _runner(settings={"model": "m", **settings}).settings["model"] == "m"


HALF = "Refund \ud83d please"


def test_a_lone_surrogate_in_the_input_is_a_usage_error_and_nothing_is_stored() -> None:
    store = MemoryStore()
    runner = _runner(store=store)
    with pytest.raises(cb.UsageError, match="lone surrogate"):
        runner.run_sync(HALF, tenant="t", subject="s", operation_id="op_1")
    assert store.load_operation("op_1") is None


def test_a_lone_surrogate_in_instructions_or_a_description_is_refused_at_construction() -> None:
    with pytest.raises(cb.UsageError, match=r"instructions.*lone surrogate"):
        _runner(instructions=HALF)
    tool = cb.ToolSpec(name="get_order", description=HALF, params=OrderArgs, handler=lambda a, c: {},
                       schema_version="1", risk="read")  # fmt: skip
    with pytest.raises(cb.UsageError, match=r"description of tool 'get_order'.*lone surrogate"):
        _runner(tools=[tool])


@pytest.mark.parametrize("value", [math.nan, math.inf, 0, -1, True])
def test_a_worker_lease_must_be_positive_and_finite(value: float) -> None:
    with pytest.raises(cb.UsageError, match="lease_s"):
        Worker(App(registry=cb.Registry([get_order_tool()]), model=ScriptedModel("openai-responses", [])),
               MemoryStore(), lease_s=value)  # fmt: skip


APIS = ["openai-responses", "openai-chat", "anthropic-messages", "gemini-generate", "gemini-interactions"]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("tools", "choice", "says"),
    [
        (True, {"name": "get_ordr"}, "not in the registry"),
        (False, {"name": "get_order"}, "not in the registry"),
        (False, "required", "offers no tool"),
        (True, {"name": ""}, "tool_choice"),
        (True, {"name": "get_order", "x": 1}, "tool_choice"),
    ],
    ids=["misspelled", "empty registry", "required, no tool", "empty name", "extra key"],
)
def test_a_forced_choice_must_name_an_offered_tool(api: str, tools: bool, choice: Any, says: str) -> None:
    """A forced tool_choice naming no declared tool was sent on every API (Gemini's allowedFunctionNames
    named a function it was never given); only anthropic-messages refused an empty name or an extra key."""
    registry = cb.Registry([get_order_tool()] if tools else [])
    with pytest.raises(cb.UsageError, match=says):
        cb.Runner(
            model=ScriptedModel(api, []), registry=registry, settings={"model": "m", "tool_choice": choice}
        )


@pytest.mark.parametrize("api", APIS)
def test_a_forced_choice_of_an_offered_tool_is_taken(api: str) -> None:
    registry = cb.Registry([get_order_tool()])
    for choice in ({"name": "get_order"}, "required", "auto", "none"):
        cb.Runner(
            model=ScriptedModel(api, []), registry=registry, settings={"model": "m", "tool_choice": choice}
        )
