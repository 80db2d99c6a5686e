"""The requests callbound builds, read by the official SDKs' own request types (review round 20, b).

Every recording with calls (plain and streamed, ``CALLBOUND_FIXTURES``) is answered the way the runner
answers it: the turn's items sent back unchanged (D8) and one result per call, one ``ok`` and one error
envelope in turn; the request is then checked against the request types of the installed SDKs:
openai-python ``ResponseCreateParamsNonStreaming`` / ``CompletionCreateParamsNonStreaming``,
anthropic-sdk-python ``MessageCreateParamsNonStreaming``, python-genai ``types.Content`` / ``types.Tool``
(pydantic models that forbid unknown fields) and its Interactions ``CreateModelInteractionParam``. The
TypedDicts are read strictly: a key the type does not declare, a missing required key, a value of
another JSON type or outside a ``Literal`` fails. The OpenAI Responses API refuses unknown members
("Unknown parameter: 'input[1].metadata'"); Chat Completions ignores them, and its assistant message is
sent back as received (D8), so only ``annotations`` (which the response carries) is let through there.

Beside the shapes, the ordering rules each API states (WIRE.md 1.5, 2.3, 3.3, 4.5, 5.5) are asserted on
the same requests, and the tool declarations each adapter renders (D9) are read by the SDKs' tool types.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime
import enum
import json
import os
import types
import typing
import uuid
from pathlib import Path
from typing import Any, Literal, Optional, Union, get_args, get_origin, get_type_hints

import pytest
import typing_extensions as te
from pydantic import BaseModel, Field

from callbound.adapters import get
from callbound.core.registry import ToolDeclaration
from callbound.core.types import Finish, ModelTurn
from tests.adapters import streaming
from tests.recordings import fixtures_dir, load_cassette, response_body, status_code

openai_responses = pytest.importorskip("openai.types.responses.response_create_params")
openai_chat = pytest.importorskip("openai.types.chat.completion_create_params")
anthropic_params = pytest.importorskip("anthropic.types.message_create_params")
genai_types = pytest.importorskip("google.genai.types")
interactions_params = pytest.importorskip("google.genai._gaos.types.interactions.createmodelinteraction")

from anthropic.types.tool_param import ToolParam  # noqa: E402
from google.genai._gaos.types.interactions.function import FunctionParam  # noqa: E402
from openai.types.chat.chat_completion_function_tool_param import (  # noqa: E402
    ChatCompletionFunctionToolParam,
)
from openai.types.responses.function_tool_param import FunctionToolParam  # noqa: E402

REQUEST_TYPES: dict[str, Any] = {
    "openai-responses": openai_responses.ResponseCreateParamsNonStreaming,
    "openai-chat": openai_chat.CompletionCreateParamsNonStreaming,
    "anthropic-messages": anthropic_params.MessageCreateParamsNonStreaming,
    "gemini-interactions": interactions_params.CreateModelInteractionParam,
}
# Members Chat Completions ignores on a message and that its own response message carries (sent back as
# received, D8; openai-python's function-calling guide appends the response message itself).
CHAT_IGNORED = frozenset({"annotations"})
FOLDERS = {
    "openai-responses": "openai-responses",
    "openai-chat": "openai-chat",
    "anthropic-messages": "anthropic",
    "gemini-generate": "gemini",
    "gemini-interactions": "gemini-interactions",
}
MODEL = "gemini-2.5-flash"  # the Interactions model type is a Literal of known names (or any other str)

# ---- a strict reading of the SDKs' TypedDicts ------------------------------------------------------

_WRAPPERS = (te.Required, te.NotRequired, te.Annotated, te.ReadOnly, typing.Annotated)


def _unwrap(tp: Any) -> Any:
    """The type under Required/NotRequired/Annotated and under a named alias (python-genai's
    ``TypeAliasType``: ``InteractionsInputParam`` is one)."""
    while get_origin(tp) in _WRAPPERS or isinstance(tp, te.TypeAliasType):
        tp = tp.__value__ if isinstance(tp, te.TypeAliasType) else get_args(tp)[0]
    return tp


def _declared_total(td: Any, key: str) -> bool:
    """Whether the TypedDict that declares ``key`` (``td`` or the base it inherits it from) is total:
    openai-python's ``ResponseCreateParamsStreaming`` is total but adds only ``stream`` to a
    ``total=False`` base, whose keys stay optional."""
    for base in getattr(td, "__orig_bases__", ()):
        if te.is_typeddict(base) and key in getattr(base, "__annotations__", {}):
            return _declared_total(base, key)
    return bool(getattr(td, "__total__", True))


def _required(td: Any, hints: dict[str, Any]) -> list[str]:
    """Keys the TypedDict requires: read from the annotations (``__required_keys__`` is wrong for SDK
    modules written with ``from __future__ import annotations``), each by the totality of the class
    that declares it."""
    out = []
    for key, hint in hints.items():
        origin = get_origin(hint)
        if origin is te.NotRequired:
            continue
        if origin is te.Required or _declared_total(td, key):
            out.append(key)
    return out


def violations(value: Any, tp: Any, path: str = "$", ignored: frozenset[str] = frozenset()) -> list[str]:
    """Where ``value`` (JSON) departs from the SDK type ``tp``; ``[]`` when it fits."""
    tp = _unwrap(tp)
    if tp is Any or tp is object or isinstance(tp, typing.TypeVar):
        return []
    if te.is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: not an object ({tp.__name__})"]
        hints = get_type_hints(tp, include_extras=True)
        out = [f"{path}.{k}: no field of {tp.__name__}" for k in value if k not in hints and k not in ignored]
        out += [f"{path}: {tp.__name__} needs {k!r}" for k in _required(tp, hints) if k not in value]
        for key, item in value.items():
            if key in hints:
                out += violations(item, hints[key], f"{path}.{key}", ignored)
        return out
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        tried = [violations(value, member, path, ignored) for member in get_args(tp)]
        return [] if any(not t for t in tried) else min(tried, key=len)
    if origin is Literal:
        return [] if value in get_args(tp) else [f"{path}: {value!r} is none of {get_args(tp)}"]
    if tp is type(None):
        return [] if value is None else [f"{path}: not null"]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{path}: not a boolean"]
    if tp in (int, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok and (tp is float or isinstance(value, int)) else [f"{path}: not a {tp.__name__}"]
    if tp is str or (isinstance(tp, type) and issubclass(tp, str)):
        # a str subclass: python-genai's UnrecognizedStr, the open end of an enum (its Interactions
        # ``model`` is a Literal of known names or any other string), which the SDK takes in lax mode
        return [] if isinstance(value, str) else [f"{path}: not a string"]
    if origin in (list, tuple, cabc.Iterable, cabc.Sequence):
        if not isinstance(value, list):
            return [f"{path}: not a list"]
        item_type = (get_args(tp) or (Any,))[0]
        return [e for i, v in enumerate(value) for e in violations(v, item_type, f"{path}[{i}]", ignored)]
    if origin in (dict, cabc.Mapping):
        if not isinstance(value, dict):
            return [f"{path}: not an object"]
        args = get_args(tp)
        item_type = args[1] if len(args) == 2 else Any
        return [e for k, v in value.items() for e in violations(v, item_type, f"{path}.{k}", ignored)]
    if origin in (typing.IO, os.PathLike) or tp in (typing.IO, os.PathLike):
        # python-genai's Base64FileInput (a file or a path the SDK reads): no JSON value is one; a union
        # member judged "not judged here" would let any value through the union (a thought signature)
        return [f"{path}: not a file"]
    if isinstance(tp, type):  # list, dict, or an SDK response model (which no JSON value is)
        return [] if isinstance(value, tp) else [f"{path}: not a {tp.__name__}"]
    return []  # SequenceNotStr and other generic protocols: not judged here


def sdk_violations(api: str, body: dict[str, Any]) -> list[str]:
    if api == "gemini-generate":
        found = []
        models = {"systemInstruction": genai_types.Content, "toolConfig": genai_types.ToolConfig}
        models["generationConfig"] = genai_types.GenerationConfig
        checks = [(f"contents[{i}]", genai_types.Content, c) for i, c in enumerate(body["contents"])]
        checks += [(f"tools[{i}]", genai_types.Tool, t) for i, t in enumerate(body.get("tools", []))]
        checks += [(key, model, body[key]) for key, model in models.items() if key in body]
        for where, model, value in checks:
            try:
                model.model_validate(value)
            except ValueError as exc:
                found.append(f"{where}: {exc}")
        return found
    return violations(body, REQUEST_TYPES[api], ignored=CHAT_IGNORED if api == "openai-chat" else frozenset())


def test_the_reader_refuses_what_the_sdks_refuse() -> None:
    # The reader itself: an unknown member, a missing required key and a wrong Literal each fail.
    chat = REQUEST_TYPES["openai-chat"]
    good = {"model": "m", "messages": [{"role": "tool", "tool_call_id": "c", "content": "x"}]}
    assert violations(good, chat) == []
    assert violations({**good, "extra": 1}, chat) == [
        "$.extra: no field of CompletionCreateParamsNonStreaming"
    ]
    assert violations({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, chat)
    assert violations({**good, "tool_choice": "sometimes"}, chat)
    assert violations({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": 3}]},
                      REQUEST_TYPES["anthropic-messages"])  # fmt: skip
    # an Interactions model the SDK does not list is an open enum's string (UnrecognizedStr)
    interactions = REQUEST_TYPES["gemini-interactions"]
    assert violations({"model": "gemini-next-preview", "input": "hi"}, interactions) == []
    assert violations({"model": 3, "input": "hi"}, interactions)
    # a thought signature is a string (or a file python-genai reads): a number is neither
    thought = {"model": "gemini-2.5-flash", "input": [{"type": "thought", "signature": 5}]}
    assert violations(thought, interactions)
    assert violations({**thought, "input": [{"type": "thought", "signature": "c2ln"}]}, interactions) == []
    # a total TypedDict over a total=False base: only its own keys are required
    streaming = openai_chat.CompletionCreateParamsStreaming
    assert violations({**good, "stream": True}, streaming) == []
    assert violations(good, streaming) == ["$: CompletionCreateParamsStreaming needs 'stream'"]


# ---- every recording with calls, answered ----------------------------------------------------------


def _stream_bytes(path: Path) -> bytes:
    text = path.read_text(encoding="utf-8")
    if path.name.endswith(".chunks.txt"):  # one event payload a line, SSE framing stripped
        return "".join(f"data: {line}\n\n" for line in text.splitlines() if line.strip()).encode()
    return text.encode()


def recorded_turns(api: str, *, legacy: bool = True) -> list[tuple[str, ModelTurn]]:
    """(name, turn) of every 200 response recorded for ``api``, plain or streamed. ``legacy=False``
    leaves out the Interactions recordings in the legacy ``outputs`` schema (WIRE.md 5.0): their
    answers are legacy turns, which only the API without ``Api-Revision`` reads, not today's types."""
    adapter = get(api)
    folder = fixtures_dir() / FOLDERS[api]
    found: list[tuple[str, ModelTurn]] = []
    for path in sorted(folder.iterdir()):
        if not legacy and path.name.startswith("ai__legacy-outputs__"):
            continue
        if path.suffix == ".yaml":
            for k, interaction in enumerate(load_cassette(f"{FOLDERS[api]}/{path.name}")):
                if "oauth2" in interaction["request"]["uri"] or status_code(interaction) != 200:
                    continue
                body = response_body(interaction)
                turn = (
                    streaming.fed(adapter, body.encode())[0]
                    if isinstance(body, str)
                    else adapter.parse_response(body)
                )
                found.append((f"{path.name}#{k}", turn))
        elif path.suffix == ".json":
            found.append((path.name, adapter.parse_response(path.read_bytes())))
        else:
            found.append((path.name, streaming.fed(adapter, _stream_bytes(path))[0]))
    return found


def envelope(k: int) -> dict[str, Any]:
    if k % 2:
        return {"ok": False, "error": {"code": "HANDLER_ERROR", "message": "the tool failed"}}
    return {"ok": True, "data": {"n": k, "text": "Zürich"}}


def answered(api: str, turn: ModelTurn, settings: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """The follow-up request the runner sends for ``turn`` (D8), and the result items in it."""
    adapter = get(api)
    results = adapter.result_items(turn, [(c, envelope(k)) for k, c in enumerate(turn.calls)])
    items = [*adapter.initial_items("Weather in Oslo?", []), *adapter.turn_items(turn), *results]
    chained = settings.get("continuation") == "previous_response_id"
    body = adapter.build_request(
        items=items,
        tools=adapter.render_tools([ToolDeclaration("get_weather", "Weather", CITY)]),
        settings={"model": MODEL, **{k: v for k, v in settings.items() if k != "continuation"}},
        instructions="Answer briefly.",
        stream=False,
        previous_response_id=turn.response_id if chained else None,
        new_items=results,
    )
    adapter.check_request(body, previous=turn)  # the rules ScriptedModel applies (D24) hold too
    return body, results


CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
MODES = {
    "openai-responses": [{}, {"store": False}, {"continuation": "previous_response_id"}],
    "openai-chat": [{}],
    "anthropic-messages": [{}],
    "gemini-generate": [{}],
    "gemini-interactions": [{}, {"store": False}, {"continuation": "previous_response_id"}],
}


@pytest.mark.parametrize("api", sorted(FOLDERS))
def test_recorded_turns_are_answered_in_the_sdk_request_shape(api: str) -> None:
    checked = 0
    for name, turn in recorded_turns(api, legacy=False):
        if turn.finish is not Finish.TOOL_PROPOSALS:
            continue
        for settings in MODES[api]:
            body, _ = answered(api, turn, settings)
            assert sdk_violations(api, body) == [], (name, settings)
            checked += 1
    assert checked >= 3  # every folder holds several turns with calls


@pytest.mark.parametrize("api", sorted(FOLDERS))
def test_recorded_turns_resent_unanswered_fit_too(api: str) -> None:
    # A final or paused turn's items go back too (Anthropic pause_turn is resent as is, D1 CONTINUE).
    adapter = get(api)
    for name, turn in recorded_turns(api, legacy=False):
        if turn.finish not in (Finish.FINAL_TEXT, Finish.CONTINUE) or not turn.continuation:
            continue
        items = [*adapter.initial_items("Go on.", []), *adapter.turn_items(turn)]
        if api != "anthropic-messages" or turn.finish is not Finish.CONTINUE:
            items += adapter.initial_items("And tomorrow?", [])
        body = adapter.build_request(
            items=items, tools=[], settings={"model": MODEL}, instructions=None, stream=False
        )
        assert sdk_violations(api, body) == [], name


# ---- the ordering rules, on the same requests ----------------------------------------------------


def _first_parallel(api: str) -> tuple[str, ModelTurn]:
    turns = [(n, t) for n, t in recorded_turns(api) if t.finish is Finish.TOOL_PROPOSALS and len(t.calls) > 1]
    assert turns, f"no recording of {api} has parallel calls"
    return turns[0]


def test_anthropic_results_come_first_in_one_user_message_in_call_order() -> None:
    name, turn = _first_parallel("anthropic-messages")  # four parallel tool_use blocks
    body, results = answered("anthropic-messages", turn, {})
    assert len(results) == 1 and body["messages"][-1] is results[0]
    assert body["messages"][-2]["role"] == "assistant"
    blocks = results[0]["content"]
    assert [b["type"] for b in blocks] == ["tool_result"] * len(turn.calls)
    assert [b["tool_use_id"] for b in blocks] == [c.call_id for c in turn.calls], name
    assert [b["is_error"] for b in blocks] == [k % 2 == 1 for k in range(len(turn.calls))]
    assert [json.loads(b["content"]) for b in blocks] == [envelope(k) for k in range(len(turn.calls))]


def test_gemini_function_responses_follow_the_call_parts_in_order() -> None:
    name, turn = _first_parallel("gemini-generate")
    body, results = answered("gemini-generate", turn, {})
    [content] = results
    assert content["role"] == "user" and body["contents"][-1] is content
    calls = [p["functionCall"] for p in body["contents"][-2]["parts"] if "functionCall" in p]
    responses = [p["functionResponse"] for p in content["parts"]]
    assert [r["name"] for r in responses] == [c["name"] for c in calls], name
    assert [r.get("id") for r in responses] == [c.get("id") for c in calls]  # echoed only when sent
    assert [r["response"] for r in responses] == [envelope(k) for k in range(len(calls))]  # objects (D8)


def test_gemini_ids_are_echoed_where_the_model_gave_them() -> None:
    with_ids = [
        t
        for _, t in recorded_turns("gemini-generate")
        if t.calls and not any(c.synthetic_id for c in t.calls)
    ]
    assert with_ids  # gemini-3.6-flash sends call ids
    for turn in with_ids:
        _, [content] = answered("gemini-generate", turn, {})
        assert [p["functionResponse"]["id"] for p in content["parts"]] == [c.call_id for c in turn.calls]


def test_chat_tool_messages_follow_their_assistant_message_one_per_call() -> None:
    name, turn = _first_parallel("openai-chat")
    body, results = answered("openai-chat", turn, {})
    messages = body["messages"]
    at = next(i for i, m in enumerate(messages) if m.get("tool_calls"))
    assert messages[at + 1 :] == results
    assert [m["role"] for m in results] == ["tool"] * len(turn.calls)
    assert [m["tool_call_id"] for m in results] == [tc["id"] for tc in messages[at]["tool_calls"]], name


def test_responses_outputs_follow_the_replayed_calls_in_order() -> None:
    name, turn = _first_parallel("openai-responses")
    body, results = answered("openai-responses", turn, {})
    kinds = [item.get("type") for item in body["input"]]
    calls = [i for i, k in enumerate(kinds) if k == "function_call"]
    outputs = [i for i, k in enumerate(kinds) if k == "function_call_output"]
    assert max(calls) < min(outputs), name
    assert [body["input"][i]["call_id"] for i in outputs] == [c.call_id for c in turn.calls]
    assert all(isinstance(r["output"], str) for r in results)  # canonical JSON text (D8)


def test_interactions_results_are_function_result_steps_after_the_replayed_steps() -> None:
    [(name, turn)] = [
        (n, t) for n, t in recorded_turns("gemini-interactions") if n == "ai__steps__tool-call-step1.json"
    ]
    body, results = answered("gemini-interactions", turn, {})
    assert body["input"][-len(results) :] == results
    assert body["input"][1 : 1 + len(turn.continuation)] == list(turn.continuation)  # thought steps too
    assert [(r["type"], r["call_id"], r["name"]) for r in results] == [
        ("function_result", c.call_id, c.name) for c in turn.calls
    ], name


# ---- tool declarations (D9) ----------------------------------------------------------------------


class Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str
    postcode: Optional[str] = None  # noqa: UP045 (as users write it)


class Line(BaseModel):
    sku: str = Field(description="stock unit", pattern="^[A-Z]+$")
    quantity: int = Field(ge=1, le=10)
    tags: list[str] = []


class Cat(BaseModel):
    kind: Literal["cat"]
    indoor: bool


class Dog(BaseModel):
    kind: Literal["dog"]
    barks: int


class Order(BaseModel):
    """An order with most of what pydantic writes into a schema."""

    customer: str
    colour: Colour
    address: Address
    lines: list[Line]
    note: Optional[int] = None  # noqa: UP045
    placed: datetime.datetime
    ref: uuid.UUID
    pet: Union[Cat, Dog] = Field(discriminator="kind")  # noqa: UP007
    either: Union[int, str]  # noqa: UP007
    level: Literal[1, 2, 3]
    pair: tuple[int, str]


class Nothing(BaseModel):
    pass


TOOL_TYPES = {
    "openai-responses": FunctionToolParam,
    "openai-chat": ChatCompletionFunctionToolParam,
    "anthropic-messages": ToolParam,
    "gemini-interactions": FunctionParam,
}


@pytest.mark.parametrize("api", sorted(FOLDERS))
@pytest.mark.parametrize("params", [Order, Address, Nothing], ids=lambda m: m.__name__)
def test_rendered_tools_fit_the_sdk_tool_types(api: str, params: type[BaseModel]) -> None:
    declaration = ToolDeclaration(params.__name__.lower(), "A tool.", params.model_json_schema())
    rendered = get(api).render_tools([declaration])
    if api == "gemini-generate":
        [tool] = rendered
        genai_types.Tool.model_validate(tool)  # unknown Schema keywords are refused (extra="forbid")
        return
    [tool] = rendered
    assert violations(tool, TOOL_TYPES[api]) == []
    if api.startswith("openai"):
        function = tool.get("function", tool)
        # strict only where every object lists all its properties and closes itself (D9)
        assert function["strict"] is (params is not Order)
