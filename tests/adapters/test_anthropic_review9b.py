"""Review 9b: Anthropic ``tool_choice`` is checked, as the OpenAI and Gemini adapters check theirs.

D25 (model settings) with D4 (caller misuse is a ``UsageError``, never a live 400): an unknown string
went out as ``{"type": <value>}`` unchecked. The Messages API takes ``{"type": "auto" | "any" | "none"}``
and ``{"type": "tool", "name": ...}``, with ``disable_parallel_tool_use`` on all but ``none``
(anthropic-sdk-python ``types/tool_choice_param.py`` and ``tool_choice_*_param.py``; WIRE.md section 3).
Settings take ``"auto"``, ``"any"``, ``"none"``, ``"required"`` (the OpenAI word, sent as ``any``),
``{"name": ...}``, or one of Anthropic's own objects; anything else raises ``UsageError`` naming them.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from callbound.adapters import get
from callbound.core.errors import UsageError

ADAPTER = get("anthropic-messages")


def build(choice: Any) -> dict[str, Any]:
    return ADAPTER.build_request(
        items=[{"role": "user", "content": "x"}],
        tools=[{"name": "f", "input_schema": {"type": "object"}}],
        settings={"tool_choice": choice},
        instructions=None,
        stream=False,
    )


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("any", {"type": "any"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ({"name": "f"}, {"type": "tool", "name": "f"}),
        ({"type": "auto"}, {"type": "auto"}),
        (
            {"type": "any", "disable_parallel_tool_use": True},
            {"type": "any", "disable_parallel_tool_use": True},
        ),
        ({"type": "none"}, {"type": "none"}),
        ({"type": "tool", "name": "f"}, {"type": "tool", "name": "f"}),
        (
            {"type": "tool", "name": "f", "disable_parallel_tool_use": False},
            {"type": "tool", "name": "f", "disable_parallel_tool_use": False},
        ),
    ],
)
def test_the_tool_choices_the_api_takes(choice: Any, wire: Any) -> None:
    assert build(choice)["tool_choice"] == wire


@pytest.mark.parametrize(
    "choice",
    [
        "bogus",
        "AUTO",
        "tool",  # needs a name
        "",
        3,
        True,
        ["auto"],
        {"name": 5},
        {"name": ""},
        {"type": "bogus"},
        {"type": "tool"},
        {"type": "tool", "name": 3},
        {"type": "auto", "name": "f"},
        {"type": "none", "disable_parallel_tool_use": True},
        {"type": "any", "disable_parallel_tool_use": "yes"},
        {"type": "auto", "unknown": 1},
        {},
    ],
)
def test_a_tool_choice_the_api_refuses_is_a_usage_error(choice: Any) -> None:
    with pytest.raises(UsageError, match=re.escape("'auto', 'any', 'none', 'required' or {'name': ...}")):
        build(choice)


def test_extra_may_still_send_any_tool_choice() -> None:
    """settings["extra"] is the documented way to send what the neutral settings do not cover."""
    anything = {"type": "some_future_choice"}
    assert (
        ADAPTER.build_request(
            items=[], tools=[], settings={"extra": {"tool_choice": anything}}, instructions=None, stream=False
        )["tool_choice"]
        == anything
    )
