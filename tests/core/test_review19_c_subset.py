"""Review round 19, c F4: ``Registry.subset`` takes a list of tool names and says so.

A single name (``subset("get_order")``) was read as its characters and refused as the unregistered
tools ``['g', 'e', ...]``, or for a one-letter tool name taken as that tool; None or a list holding a
non-str raised TypeError, not callbound's UsageError."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb


class Args(BaseModel):
    order_id: str


def _spec(name: str) -> cb.ToolSpec:
    return cb.ToolSpec(
        name=name,
        description=f"tool {name}",
        params=Args,
        handler=lambda args, ctx: {"ok": True},
        schema_version=f"{name}-v1",
    )


REGISTRY = cb.Registry([_spec("get_order"), _spec("a"), _spec("b")])


@pytest.mark.parametrize("names", ["get_order", "ab", b"a"])
def test_a_single_name_is_refused_saying_to_pass_a_list(names: Any) -> None:
    with pytest.raises(
        cb.UsageError, match=r"takes a list of tool names, not one .*subset\(\['get_order'\]\)"
    ):
        REGISTRY.subset(names)


@pytest.mark.parametrize("names", [None, 5, [None], ["a", 1], [["a"]]])
def test_what_is_no_list_of_names_is_a_usage_error(names: Any) -> None:
    with pytest.raises(cb.UsageError, match=r"Registry\.subset"):
        REGISTRY.subset(names)


def test_a_name_given_twice_is_named() -> None:
    with pytest.raises(cb.UsageError, match="names 'a' twice"):
        REGISTRY.subset(["a", "b", "a"])


def test_a_list_tuple_or_generator_of_names_is_taken() -> None:
    assert REGISTRY.subset(["a"]).names() == ["a"]
    assert REGISTRY.subset(("get_order", "b")).names() == ["get_order", "b"]
    assert REGISTRY.subset(n for n in ["b"]).names() == ["b"]
    with pytest.raises(cb.UsageError, match="unregistered tools: \\['zzz'\\]"):
        REGISTRY.subset(["zzz"])
