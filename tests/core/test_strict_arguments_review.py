"""D5 through the dispatch gate (review finding p1): a value passes only if its JSON type is one the
published schema allows, and nothing the model sent is coerced or dropped. Each rejection is an
INVALID_ARGUMENTS envelope, never an exception."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, time
from typing import Any
from uuid import UUID

import pytest
from pydantic import BaseModel, Field

from callbound.core.dispatch import INVALID_ARGUMENTS, Execute, Reject, TrustedOperation, plan_call
from callbound.core.registry import CallContext, Registry, ToolSpec
from callbound.core.types import ToolCall


class Count(BaseModel):
    n: int


class Amount(BaseModel):
    x: float


class Tags(BaseModel):
    tags: set[int]


class Names(BaseModel):
    fs: frozenset[str]


class MaybeTags(BaseModel):
    tags: set[int] | None = None


class Inner(BaseModel):
    ids: set[int]


class Nested(BaseModel):
    items: list[Inner]


class Aliased(BaseModel):
    tags: set[int] = Field(alias="Tags")


class IntMap(BaseModel):
    m: dict[int, str]


class NestedMap(BaseModel):
    m: dict[str, dict[int, str]]


class StrMap(BaseModel):
    m: dict[str, int]


class BoolMap(BaseModel):
    m: dict[bool, int]


@dataclass
class Point:
    tags: set[int]


class WithDataclass(BaseModel):
    p: Point


def handler(args: Any, ctx: CallContext) -> dict[str, Any]:
    return {}


OP = TrustedOperation("op_1", "acme", "user-1", None)


def plan(params: type[BaseModel], raw: str, *, object_style: bool = False) -> Any:
    spec = ToolSpec("t", "a tool", params, handler, "v1")
    parsed = json.loads(raw)
    # Object-style providers (Anthropic, Gemini) hand over a dict, not the text.
    arguments_raw: str | dict[str, Any] = parsed if object_style else raw
    call = ToolCall("openai", "openai-responses", "resp_1", "call_1", "t", arguments_raw, parsed, None, 0)
    return plan_call(call, Registry([spec]), None, OP)


def rejected(item: Any) -> str:
    assert isinstance(item, Reject), item
    assert item.code == INVALID_ARGUMENTS
    return item.message


# ---- integers: 1.0 is a float, even though RFC 8785 writes it as 1 --------------------------------


@pytest.mark.parametrize("raw", ['{"n": 1.0}', '{"n": 1e2}', '{"n": 100E0}', '{"n": -0.0}'])
@pytest.mark.parametrize("object_style", [False, True])
def test_a_whole_float_is_not_an_integer(raw: str, object_style: bool) -> None:
    assert "n:" in rejected(plan(Count, raw, object_style=object_style))


def test_integers_still_pass_and_floats_still_take_integers() -> None:
    ok = plan(Count, '{"n": 100}')
    assert isinstance(ok, Execute) and ok.args.n == 100  # type: ignore[attr-defined]
    for raw in ('{"x": 1}', '{"x": 1.0}'):
        item = plan(Amount, raw)
        assert isinstance(item, Execute) and item.args.x == 1.0  # type: ignore[attr-defined]
        assert item.arguments_json == '{"x":1}'  # identity is still the canonical text (D6)


# ---- uniqueItems: a set or frozenset field must not drop a repeated item ---------------------------


@pytest.mark.parametrize(
    ("params", "raw", "path"),
    [
        (Tags, '{"tags": [1, 1, 2]}', "tags:"),
        (Names, '{"fs": ["x", "x"]}', "fs:"),
        (MaybeTags, '{"tags": [3, 3]}', "tags:"),
        (Nested, '{"items": [{"ids": [1]}, {"ids": [2, 2]}]}', "items.1.ids:"),
        (Aliased, '{"Tags": [5, 5]}', "Tags:"),
        (WithDataclass, '{"p": {"tags": [7, 7]}}', "p.tags:"),
    ],
)
def test_repeated_items_of_a_unique_array_are_rejected(params: type[BaseModel], raw: str, path: str) -> None:
    message = rejected(plan(params, raw))
    assert path in message and "uniqueItems" in message


def test_the_published_schema_says_unique() -> None:
    spec = ToolSpec("t", "a tool", Tags, handler, "v1")
    assert spec.json_schema["properties"]["tags"]["uniqueItems"] is True


def test_distinct_items_pass() -> None:
    item = plan(Tags, '{"tags": [2, 1]}')
    assert isinstance(item, Execute) and item.args.tags == {1, 2}  # type: ignore[attr-defined]
    assert isinstance(plan(MaybeTags, '{"tags": null}'), Execute)
    assert isinstance(plan(Nested, '{"items": [{"ids": [1, 2]}, {"ids": [1]}]}'), Execute)


# ---- maps with int keys: "01" and "1" must not merge into one key -----------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        '{"m": {"01": "a", "1": "b"}}',  # merged to {1: "b"} before the fix: "a" was lost
        '{"m": {"1": "a", " 1": "b"}}',
        '{"m": {"01": "a"}}',  # alone it merges nothing, but another spelling of 1 could
        '{"m": {"+1": "a"}}',
        '{"m": {"1_0": "a"}}',
    ],
)
def test_int_keys_must_be_written_as_integers_are(raw: str) -> None:
    assert "m" in rejected(plan(IntMap, raw))


def test_nested_int_keyed_maps_are_checked() -> None:
    assert "m.k" in rejected(plan(NestedMap, '{"m": {"k": {"2": "a", "02": "b"}}}'))


def test_canonical_keys_pass() -> None:
    item = plan(IntMap, '{"m": {"1": "a", "-2": "b", "10": "c"}}')
    assert isinstance(item, Execute) and item.args.m == {1: "a", -2: "b", 10: "c"}  # type: ignore[attr-defined]
    assert isinstance(plan(StrMap, '{"m": {"01": 1, "1": 2}}'), Execute)  # string keys are never merged
    assert isinstance(plan(BoolMap, '{"m": {"true": 1, "false": 0}}'), Execute)


class DatetimeMap(BaseModel):
    m: dict[datetime, int]


class UuidMap(BaseModel):
    m: dict[UUID, int]


class TimeMap(BaseModel):
    m: dict[time, int]


class FloatMap(BaseModel):
    m: dict[float, int]


@pytest.mark.parametrize(
    ("params", "raw"),
    [
        (DatetimeMap, '{"m": {"2024-05-01T12:30:00+00:00": 1}}'),
        (DatetimeMap, '{"m": {"2024-01-01T00:00:00.000Z": 1}}'),
        (UuidMap, '{"m": {"6BA7B810-9DAD-11D1-80B4-00C04FD430C8": 1}}'),
        (TimeMap, '{"m": {"12:30": 1}}'),
        (FloatMap, '{"m": {"1": 1}}'),
    ],
)
def test_standard_spellings_of_other_key_types_pass(params: type[BaseModel], raw: str) -> None:
    """A reviewer's regression: these spellings ran before the fold check and were then refused as
    "not the canonical spelling"; only int keys have one spelling a model must use, and any key type
    is refused when two keys actually merge."""
    assert isinstance(plan(params, raw), Execute)


def test_merged_keys_of_other_types_are_still_refused() -> None:
    raw = '{"m": {"2024-05-01T12:30:00+00:00": 1, "2024-05-01T12:30:00Z": 2}}'
    assert "m" in rejected(plan(DatetimeMap, raw))


def test_models_that_cannot_fold_skip_the_walk() -> None:
    assert ToolSpec("t", "a tool", Count, handler, "v1").can_fold is False
    assert ToolSpec("t", "a tool", StrMap, handler, "v1").can_fold is False
    for params in (Tags, Names, Nested, IntMap, NestedMap, WithDataclass):
        assert ToolSpec("t", "a tool", params, handler, "v1").can_fold is True
