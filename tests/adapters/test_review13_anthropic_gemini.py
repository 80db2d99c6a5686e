"""Review 13: Anthropic and Gemini requests the providers would refuse, and extra tools.

1. Anthropic: an empty (or whitespace-only) text block, which Claude returns beside tool_use blocks
   (anthropic-sdk-python issue 461: ``TextBlock(text='')`` then three tool_use blocks), is a 400 when sent
   back ("messages: text content blocks must be non-empty"; "... must contain non-whitespace text"). It
   is left out of the assistant message sent back (the provider's rule wins over D8's "unchanged"), and
   ``check_request`` (ScriptedModel, D24) refuses it.
2. gemini-generate: two functionCall parts sharing one id each get a functionResponse carrying that id's
   one DUPLICATE_CALL_ID result (D7): Gemini refuses fewer response parts than call parts, 400
   INVALID_ARGUMENT "Please ensure that the number of function response parts is equal to the number of
   function call parts of the function call turn" (google-gemini/gemini-cli issues 5443, 4217, 16984).
3. Anthropic fine-grained tool streaming: a tool_use whose input never parses goes back as
   ``{"INVALID_JSON": "<the text>"}`` (Anthropic's fine-grained tool streaming docs), not as ``{}``; the
   call still never runs. Stream shape: anthropic-sdk-python
   tests/lib/streaming/fixtures/tool_use_invalid_json_response.txt.
4. Vertex partialArgs string pieces are joined by ``join_fragments``: a surrogate pair split over two
   pieces is one character again (chunk shape: vercel/ai packages/google/src/__fixtures__/
   google-stream-tool-call-array-arguments-missing-terminal-function-call.chunks.txt).
5. ``settings["extra"]["tools"]`` is added after the registry's tools (anthropic-messages, gemini-generate,
   gemini-interactions), never in their place; a name clash or a non-list is a ``UsageError``.

All bodies below are synthetic, written in the shapes those sources show.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.adapters.gemini_schema import PartialArgs
from callbound.core.errors import ProtocolViolation, UsageError
from callbound.core.registry import ToolDeclaration
from callbound.core.types import Finish
from callbound.testing import FakeClock, ScriptedModel, Stream
from tests.adapters import streaming

ANTHROPIC = get("anthropic-messages")
GEMINI = get("gemini-generate")
INTERACTIONS = get("gemini-interactions")


class Order(BaseModel):
    order_id: str


def _registry(ran: list[str]) -> cb.Registry:
    def get_order(args: Order, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.order_id)
        return {"status": "shipped"}

    return cb.Registry(
        [
            cb.ToolSpec(
                name="get_order", description="Look up an order", params=Order, handler=get_order,
                schema_version="v1",
            )
        ]
    )  # fmt: skip


def _anthropic_sse(events: list[dict[str, Any]]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def _anthropic_stream(blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> str:
    """message_start, each (content_block_start, deltas) with its stop, then tool_use and message_stop."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_s", "type": "message", "role": "assistant", "model": "claude-x", "content": [],
                "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 1},
            },
        }
    ]  # fmt: skip
    for index, (start, deltas) in enumerate(blocks):
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events += [
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    return _anthropic_sse(events)


def _message(content: list[dict[str, Any]], stop: str = "tool_use", mid: str = "msg_1") -> dict[str, Any]:
    return {
        "id": mid, "type": "message", "role": "assistant", "model": "claude-x", "content": content,
        "stop_reason": stop, "usage": {"input_tokens": 4, "output_tokens": 9},
    }  # fmt: skip


TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {"order_id": "A1"}}
FINAL = _message([{"type": "text", "text": "Done."}], "end_turn", "msg_f")


# ---- 1. Anthropic blank text blocks ---------------------------------------------------------------


@pytest.mark.parametrize("blank", ["", " ", "\n\n"])
def test_blank_text_blocks_are_left_out_of_the_message_sent_back(blank: str) -> None:
    content = [
        {"type": "thinking", "thinking": "Need the order.", "signature": "EqQsig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": blank},
        {"type": "text", "text": "Checking."},
        TOOL_USE,
    ]
    turn = ANTHROPIC.parse_response(_message(content))
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert turn.continuation[0]["content"] == content  # the turn keeps every block as received (D8)
    [sent] = ANTHROPIC.turn_items(turn)
    assert sent == {"role": "assistant", "content": [content[0], content[1], content[3], TOOL_USE]}


def test_a_streamed_empty_text_block_is_left_out_too() -> None:
    # A text block started with "" that gets no text_delta before its stop (BerriAI/litellm 26554).
    raw = _anthropic_stream(
        [
            ({"type": "text", "text": ""}, []),
            (
                {"type": "tool_use", "id": "toolu_2", "name": "get_order", "input": {}},
                [{"type": "input_json_delta", "partial_json": '{"order_id":"A1"}'}],
            ),
        ]
    )
    turn, _ = streaming.fed(ANTHROPIC, raw.encode())
    assert turn.finish is Finish.TOOL_PROPOSALS
    [sent] = ANTHROPIC.turn_items(turn)
    assert [b["type"] for b in sent["content"]] == ["tool_use"]


def test_a_message_left_with_no_block_is_not_sent() -> None:
    # "all messages must have non-empty content except for the optional final assistant message"
    turn = ANTHROPIC.parse_response(_message([{"type": "text", "text": "  "}], "pause_turn"))
    assert turn.finish is Finish.CONTINUE
    assert ANTHROPIC.turn_items(turn) == []


def _request(assistant: list[dict[str, Any]], user: list[dict[str, Any]]) -> dict[str, Any]:
    items = [
        {"role": "user", "content": "Where is A1?"},
        {"role": "assistant", "content": assistant},
        {"role": "user", "content": user},
    ]
    return ANTHROPIC.build_request(items=items, tools=[], settings={}, instructions=None, stream=False)


RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "shipped", "is_error": False}


@pytest.mark.parametrize("blank", ["", " \n"])
def test_check_request_refuses_blank_text_blocks(blank: str) -> None:
    ANTHROPIC.check_request(_request([TOOL_USE], [RESULT]))
    with pytest.raises(ProtocolViolation, match="text content blocks must be non-empty"):
        ANTHROPIC.check_request(_request([{"type": "text", "text": blank}, TOOL_USE], [RESULT]))
    with pytest.raises(ProtocolViolation, match="text content blocks must be non-empty"):
        ANTHROPIC.check_request(_request([TOOL_USE], [RESULT, {"type": "text", "text": blank}]))


def test_check_request_refuses_empty_content_but_for_a_final_assistant_message() -> None:
    items = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": []}]
    body = ANTHROPIC.build_request(items=items, tools=[], settings={}, instructions=None, stream=False)
    ANTHROPIC.check_request(body)  # the optional final assistant message may be empty
    body["messages"].append({"role": "user", "content": "Again"})
    with pytest.raises(ProtocolViolation, match="non-empty content"):
        ANTHROPIC.check_request(body)


@pytest.mark.parametrize("stream", [False, True])
def test_a_run_sends_no_blank_text_block_back(stream: bool) -> None:
    content = [{"type": "text", "text": ""}, TOOL_USE]
    first: Any = (
        Stream(
            _anthropic_stream(
                [
                    ({"type": "text", "text": ""}, []),
                    (
                        {**TOOL_USE, "input": {}},
                        [{"type": "input_json_delta", "partial_json": '{"order_id": "A1"}'}],
                    ),
                ]
            )
        )
        if stream
        else _message(content)
    )
    ran: list[str] = []
    model = ScriptedModel("anthropic-messages", [first, FINAL])  # provider checks on (D24)
    runner = cb.Runner(
        model=model,
        registry=_registry(ran),
        settings={"model": "claude-x", "stream": stream},
        clock=FakeClock(),
    )
    outcome = runner.run_sync("Where is A1?", tenant="t", subject="s")
    assert outcome.state.value == "COMPLETED" and ran == ["A1"]
    assistant = model.requests[1]["messages"][1]
    assert [b["type"] for b in assistant["content"]] == ["tool_use"]


# ---- 2. Gemini: a repeated call id is answered once per functionCall part --------------------------


def _gemini(parts: list[dict[str, Any]], rid: str) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
        "responseId": rid, "modelVersion": "gemini-3-pro",
    }  # fmt: skip


def test_each_part_of_a_repeated_call_id_gets_the_duplicate_call_id_result() -> None:
    first = _gemini(
        [
            {
                "functionCall": {"id": "k1", "name": "get_order", "args": {"order_id": "A1"}},
                "thoughtSignature": "U0lH",
            },
            {"functionCall": {"id": "k1", "name": "get_order", "args": {"order_id": "B2"}}},
            {"functionCall": {"id": "k2", "name": "get_order", "args": {"order_id": "C3"}}},
        ],
        "R1",
    )
    ran: list[str] = []
    model = ScriptedModel("gemini-generate", [first, _gemini([{"text": "Done."}], "R2")])
    outcome = cb.Runner(model=model, registry=_registry(ran), clock=FakeClock()).run_sync(
        "Orders?", tenant="t", subject="s"
    )
    assert outcome.state.value == "COMPLETED" and ran == ["C3"]  # D7: neither k1 call ran
    answers = [p["functionResponse"] for p in model.requests[1]["contents"][2]["parts"]]
    assert [(a["id"], a["name"]) for a in answers] == [
        ("k1", "get_order"),
        ("k1", "get_order"),
        ("k2", "get_order"),
    ]
    assert answers[0]["response"] == answers[1]["response"]
    assert answers[0]["response"]["error"]["code"] == "DUPLICATE_CALL_ID"
    assert answers[2]["response"]["ok"] is True


def test_check_request_counts_function_response_parts_per_call_part() -> None:
    turn = GEMINI.parse_response(
        _gemini(
            [
                {"functionCall": {"id": "k1", "name": "f", "args": {}}},
                {"functionCall": {"id": "k1", "name": "g", "args": {}}},
            ],
            "R1",
        )
    )

    def request(answers: list[tuple[str, str]]) -> dict[str, Any]:
        parts = [{"functionResponse": {"id": i, "name": n, "response": {"ok": False}}} for i, n in answers]
        items = [*GEMINI.initial_items("Go", []), *GEMINI.turn_items(turn), {"role": "user", "parts": parts}]
        return GEMINI.build_request(items=items, tools=[], settings={}, instructions=None, stream=False)

    GEMINI.check_request(request([("k1", "f"), ("k1", "g")]), previous=turn)
    for wrong in ([("k1", "f")], [("k1", "f"), ("k1", "f")], [("k1", "f"), ("k1", "g"), ("k1", "g")]):
        with pytest.raises(ProtocolViolation, match="need one functionResponse each"):
            GEMINI.check_request(request(wrong), previous=turn)


# ---- 3. Anthropic: invalid streamed JSON goes back wrapped -----------------------------------------

INVALID = '{"location": "Paris", "unit": celsius}'  # as joined in tool_use_invalid_json_response.txt


@pytest.mark.parametrize("text", [INVALID, "[1, 2]"])
def test_a_streamed_input_that_never_parses_goes_back_wrapped(text: str) -> None:
    raw = _anthropic_stream(
        [
            (
                {"type": "tool_use", "id": "toolu_w", "name": "get_weather", "input": {}},
                [
                    {"type": "input_json_delta", "partial_json": text[:12]},
                    {"type": "input_json_delta", "partial_json": text[12:]},
                ],
            )
        ]
    )
    turn, _ = streaming.fed(ANTHROPIC, raw.encode())
    assert turn.finish is Finish.TOOL_PROPOSALS
    [call] = turn.calls
    assert call.arguments is None and call.arguments_error  # the call still never runs
    [sent] = ANTHROPIC.turn_items(turn)
    assert sent["content"][0]["input"] == {"INVALID_JSON": text}


def test_a_run_shows_the_model_the_text_it_sent() -> None:
    raw = _anthropic_stream(
        [
            (
                {"type": "tool_use", "id": "toolu_w", "name": "get_order", "input": {}},
                [{"type": "input_json_delta", "partial_json": '{"order_id": A1}'}],
            )
        ]
    )
    ran: list[str] = []
    model = ScriptedModel("anthropic-messages", [Stream(raw), FINAL])
    runner = cb.Runner(
        model=model,
        registry=_registry(ran),
        settings={"model": "claude-x", "stream": True},
        clock=FakeClock(),
    )
    assert runner.run_sync("A1?", tenant="t", subject="s").state.value == "COMPLETED"
    assert ran == []
    tool_use = model.requests[1]["messages"][1]["content"][0]
    assert tool_use["input"] == {"INVALID_JSON": '{"order_id": A1}'}


# ---- 4. Gemini partialArgs: a surrogate pair split over two pieces ---------------------------------


def test_partial_args_rejoin_a_surrogate_pair_split_over_two_pieces() -> None:
    args = PartialArgs()
    # JSON "\ud83d" and "\ude00" in two stringValue pieces decode to two lone surrogates
    for piece, more in (("I \ud83d", True), ("\ude00 it", True), ("", False)):
        args.apply({"jsonPath": "$.note", "stringValue": piece, "willContinue": more})
    assert args.finalise() == ({"note": "I \U0001f600 it"}, None)


def test_a_vertex_stream_with_a_split_surrogate_pair_is_a_valid_call() -> None:
    def chunk(fc: dict[str, Any], extra: str = "") -> str:
        part = json.dumps({"functionCall": fc})[:-1] + extra + "}"
        return f'data: {{"candidates":[{{"content":{{"role":"model","parts":[{part}]}}}}],"responseId":"R"}}\r\n\r\n'

    def piece(value: str, more: bool = True) -> str:
        cont = ',"willContinue":true' if more else ""
        entry = '{"jsonPath":"$.order_id","stringValue":"' + value + '"' + cont + "}"
        return f'data: {{"candidates":[{{"content":{{"role":"model","parts":[{{"functionCall":{{"partialArgs":[{entry}],"willContinue":true}}}}]}}}}],"responseId":"R"}}\r\n\r\n'

    raw = (
        chunk({"name": "get_order", "willContinue": True}, ',"thoughtSignature":"SIG"')
        + piece(r"A \ud83d")
        + piece(r"\ude00 1")
        + piece("", more=False)
        + 'data: {"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"STOP"}],"responseId":"R"}\r\n\r\n'
    )
    turn, _ = streaming.fed(GEMINI, raw.encode())
    assert turn.finish is Finish.TOOL_PROPOSALS
    [call] = turn.calls
    assert call.arguments_error is None and call.arguments == {"order_id": "A \U0001f600 1"}


# ---- 5. extra tools are added after the registry's -------------------------------------------------

DECL = ToolDeclaration(
    "get_order", "Look up an order", {"type": "object", "properties": {"order_id": {"type": "string"}}}
)

CASES = [
    (
        "anthropic-messages",
        [
            {"type": "code_execution_20250825", "name": "code_execution"},
            {"type": "web_search_20250305", "name": "web_search"},
        ],
        {"type": "custom", "name": "get_order", "input_schema": {"type": "object"}},
    ),
    (
        "gemini-generate",
        [{"googleSearch": {}}, {"codeExecution": {}}],
        {"functionDeclarations": [{"name": "other"}, {"name": "get_order"}]},
    ),
    (
        "gemini-interactions",
        [{"type": "google_search"}, {"type": "code_execution"}],
        {"type": "function", "name": "get_order", "parameters": {"type": "object"}},
    ),
]


def _build(api: str, extra: dict[str, Any]) -> dict[str, Any]:
    adapter = get(api)
    return adapter.build_request(  # type: ignore[no-any-return]
        items=[],
        tools=adapter.render_tools([DECL]),
        settings={"extra": extra},
        instructions=None,
        stream=False,
    )


@pytest.mark.parametrize(("api", "added", "clash"), CASES)
def test_extra_tools_are_added_after_the_registry_tools(
    api: str, added: list[dict[str, Any]], clash: Any
) -> None:
    rendered = get(api).render_tools([DECL])
    body = _build(api, {"tools": added, "temperature_hint": 1})
    assert body["tools"] == [*rendered, *added]
    assert body["temperature_hint"] == 1  # the rest of extra is still merged
    assert _build(api, {})["tools"] == rendered
    no_registry = get(api).build_request(
        items=[], tools=[], settings={"extra": {"tools": added}}, instructions=None, stream=False
    )
    assert no_registry["tools"] == added


@pytest.mark.parametrize(("api", "added", "clash"), CASES)
def test_an_extra_tool_named_as_a_registry_tool_is_a_usage_error(
    api: str, added: list[dict[str, Any]], clash: Any
) -> None:
    with pytest.raises(UsageError, match="get_order"):
        _build(api, {"tools": [*added, clash]})
    with pytest.raises(UsageError, match="get_order"):
        cb.Runner(
            model=ScriptedModel(api, []), registry=_registry([]), settings={"extra": {"tools": [clash]}}
        )


@pytest.mark.parametrize("api", [c[0] for c in CASES])
@pytest.mark.parametrize("bad", [{"googleSearch": {}}, "web_search", None, [["nested"]]])
def test_extra_tools_that_are_no_list_of_objects_are_a_usage_error(api: str, bad: Any) -> None:
    with pytest.raises(UsageError, match=r"extra'\]\['tools'\] must be a list"):
        _build(api, {"tools": bad})
    with pytest.raises(UsageError):
        cb.Runner(model=ScriptedModel(api, []), registry=_registry([]), settings={"extra": {"tools": bad}})


def test_a_run_offers_the_registry_tools_and_the_server_tool() -> None:
    model = ScriptedModel("anthropic-messages", [FINAL])
    server = {"type": "code_execution_20250825", "name": "code_execution"}
    runner = cb.Runner(
        model=model, registry=_registry([]), clock=FakeClock(),
        settings={"model": "claude-x", "extra": {"tools": [server]}},
    )  # fmt: skip
    assert runner.run_sync("Roll", tenant="t", subject="s").state.value == "COMPLETED"
    assert [t["name"] for t in model.requests[0]["tools"]] == ["get_order", "code_execution"]
