"""Review 14: Anthropic Messages, non-finite numbers in tool_use input, server tool input under the
stream caps, and the beta ``compaction`` stop.

1. A tool_use input holding a number a double cannot hold (``1e400``: valid JSON a model may write) or
   ``NaN`` / ``Infinity`` reads as a Python inf/nan. D5 refuses the call (INVALID_ARGUMENTS), and the
   block goes back as input that never parsed, ``{"INVALID_JSON": "<text>"}`` (Anthropic's fine-grained
   tool streaming docs, "Handling invalid JSON in tool responses"): kept, it put a bare ``Infinity`` in
   the next request, which is no JSON (the API's 400; through the SDK a ValueError before sending).
   Plain and streamed; the run ends COMPLETED with the model told its call was invalid.
2. A streamed ``server_tool_use`` / ``mcp_tool_use`` input is no call: its ``input_json_delta`` does not
   count against ``max_call_bytes`` / ``max_response_bytes`` (a plain body's ``capped()`` counts only
   tool_use), only against ``max_body_bytes``. Shape: pydantic-ai cassette
   tests/models/cassettes/test_anthropic/test_anthropic_mcp_servers_stream.yaml (mcp_tool_use input
   streamed as input_json_delta).
3. Beta stop_reason ``compaction`` (``pause_after_compaction: true``; anthropic-sdk-python
   ``BetaStopReason``, and ``lib/tools/_beta_runner.py`` resumes it beside ``pause_turn``) is D1's
   explicit continue: CONTINUE, the content resent unchanged.

All bodies below are synthetic, written in the shapes those sources show.
"""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

import callbound as cb
from callbound import stores
from callbound.adapters import get
from callbound.adapters.base import StreamCaps, capped
from callbound.core.types import Finish
from callbound.testing import FakeClock
from callbound.transports.http import HttpModel
from tests.adapters import streaming

ANTHROPIC = get("anthropic-messages")


def _strict(raw: str) -> Any:
    """JSON as a strict server reads it: NaN, Infinity and -Infinity are no JSON tokens."""

    def refuse(token: str) -> Any:
        raise ValueError(f"{token} is not JSON")

    return json.loads(raw, parse_constant=refuse)


def _message(content: list[dict[str, Any]], stop: str = "tool_use", mid: str = "msg_1") -> dict[str, Any]:
    return {
        "id": mid, "type": "message", "role": "assistant", "model": "claude-x", "content": content,
        "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 4, "output_tokens": 9},
    }  # fmt: skip


def _sse(events: list[dict[str, Any]]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def _stream(
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]], stop: str = "tool_use", mid: str = "msg_s"
) -> str:
    """message_start, each (content_block_start, deltas) with its stop, then message_delta and stop."""
    start = {**_message([], None, mid), "stop_reason": None}  # type: ignore[arg-type]
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, (block, deltas) in enumerate(blocks):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events += [
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    return _sse(events)


def _plain_tool_use(text: str) -> str:
    """A plain body whose tool_use input is ``text``, written in by hand (json.dumps cannot write 1e400)."""
    body = json.dumps(_message([{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": "@"}]))
    return body.replace('"@"', text)


def _streamed_tool_use(text: str) -> str:
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    return _stream([(tool_use, [{"type": "input_json_delta", "partial_json": text}])])


# ---- 1. non-finite numbers in tool_use input --------------------------------------------------------

NON_FINITE = [
    '{"city": "Oslo", "n": 1e400}',
    '{"city": "Oslo", "n": -1e400}',
    '{"city": "Oslo", "n": NaN}',
    '{"city": "Oslo", "deep": [{"n": [Infinity]}]}',
]


def test_the_walk_finds_a_non_finite_number_at_any_depth() -> None:
    from callbound.adapters.finite import has_non_finite, invalid_json, json_text  # new in this fix

    assert not has_non_finite({"a": [1, 2.5, {"b": "inf"}], "c": None, "d": True})
    assert has_non_finite({"a": [1, {"b": [math.inf]}]})
    assert has_non_finite([{"x": math.nan}])
    assert has_non_finite(-math.inf)
    deep: Any = math.nan
    for _ in range(5000):  # deeper than the recursion limit: the walk is iterative
        deep = [deep]
    assert has_non_finite({"a": deep})
    assert invalid_json("x") == {"INVALID_JSON": "x"}
    assert json_text({"n": math.inf, "m": math.nan}) == '{"n":Infinity,"m":NaN}'


@pytest.mark.parametrize("text", NON_FINITE)
def test_plain_non_finite_input_goes_back_wrapped_and_the_call_is_refused(text: str) -> None:
    turn = ANTHROPIC.parse_response(_plain_tool_use(text))
    assert turn.finish is Finish.TOOL_PROPOSALS
    [call] = turn.calls
    assert call.arguments is None and call.arguments_error  # D5: never runs
    [sent] = ANTHROPIC.turn_items(turn)
    wrapped = sent["content"][0]["input"]
    assert set(wrapped) == {"INVALID_JSON"} and isinstance(wrapped["INVALID_JSON"], str)
    assert sent["content"][0]["id"] == "toolu_1" and sent["content"][0]["name"] == "get_weather"
    _strict(json.dumps(sent))  # the next request is JSON
    assert call.arguments_raw == wrapped["INVALID_JSON"]  # text a store can hold, as a stream's


@pytest.mark.parametrize("text", NON_FINITE)
def test_streamed_non_finite_input_goes_back_as_the_text_sent(text: str) -> None:
    turn, _ = streaming.fed(ANTHROPIC, _streamed_tool_use(text).encode())
    assert turn.finish is Finish.TOOL_PROPOSALS
    [call] = turn.calls
    assert call.arguments is None and call.arguments_error
    [sent] = ANTHROPIC.turn_items(turn)
    assert sent["content"][0]["input"] == {"INVALID_JSON": text}
    _strict(json.dumps(sent))


def test_a_finite_input_is_sent_back_as_received() -> None:
    small = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"n": 2.5}}
    # 1.5e300 is over ±(2^53-1), so D5 refuses the call, but it is JSON: sent back as received
    big = {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"n": 1.5e300}}
    body = _message([small, big])
    turn = ANTHROPIC.parse_response(body)
    assert turn.calls[0].arguments == {"n": 2.5} and turn.calls[1].arguments_error
    assert ANTHROPIC.turn_items(turn)[0]["content"] == [small, big]
    assert turn.calls[1].arguments_raw == {"n": 1.5e300}


def test_the_callers_message_is_not_changed() -> None:
    block = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"n": math.inf}}
    body = _message([block])
    turn = ANTHROPIC.parse_response(body)
    assert body["content"] == [block] and block["input"] == {"n": math.inf}
    assert ANTHROPIC.turn_items(turn)[0]["content"][0]["input"] == {"INVALID_JSON": '{"n":Infinity}'}


class Weather(BaseModel):
    city: str


def _final(stream: bool) -> bytes:
    if not stream:
        return json.dumps(_message([{"type": "text", "text": "ok"}], "end_turn", "msg_2")).encode()
    text = {"type": "text", "text": ""}
    return _stream([(text, [{"type": "text_delta", "text": "ok"}])], "end_turn", "msg_2").encode()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("text", ['{"city": "Oslo", "n": 1e400}', '{"city": "Oslo", "n": NaN}'])
def test_a_run_with_a_non_finite_input_completes(text: str, stream: bool, tmp_path: Any) -> None:
    seen: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        try:
            seen.append(_strict(request.content.decode()))
        except ValueError as exc:  # what the Messages API answers to a body that is no JSON
            error = {
                "type": "invalid_request_error",
                "message": f"There was an error parsing the body: {exc}",
            }
            return httpx.Response(400, json={"type": "error", "error": error})
        first = _streamed_tool_use(text).encode() if stream else _plain_tool_use(text).encode()
        ctype = "text/event-stream" if stream else "application/json"
        return httpx.Response(
            200, content=first if len(seen) == 1 else _final(stream), headers={"content-type": ctype}
        )

    ran: list[str] = []

    def weather(args: Weather, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.city)
        return {"t": 3}

    registry = cb.Registry(
        [
            cb.ToolSpec(
                name="get_weather", description="w", params=Weather, handler=weather, schema_version="v1"
            )
        ]
    )
    model = HttpModel(
        "anthropic-messages", base_url="http://test", api_key="k", transport=httpx.MockTransport(handler)
    )
    store = stores.open(f"sqlite:///{tmp_path}/cb.db")  # the turn and its calls must be storable
    runner = cb.Runner(
        model=model,
        registry=registry,
        store=store,
        settings={"model": "m", "stream": stream},
        clock=FakeClock(),
    )
    out = runner.run_sync("go", tenant="t", subject="s")
    assert out.state.value == "COMPLETED", out.reason
    assert ran == [] and len(seen) == 2
    tool_use, answer = seen[1]["messages"][1]["content"][0], seen[1]["messages"][2]["content"][0]
    assert set(tool_use["input"]) == {"INVALID_JSON"}
    assert answer["is_error"] is True and "INVALID_ARGUMENTS" in answer["content"]


# ---- 2. server tool input and the stream caps ------------------------------------------------------

CAPS = StreamCaps(max_call_bytes=4096, max_response_bytes=8192)


def _server_tool_turn(kind: str, stop: str) -> tuple[dict[str, Any], bytes]:
    """A plain body and its stream: a server-side tool input of ~11 kB (over both argument caps), its
    result, text, and (with ``stop`` tool_use) a small client tool_use."""
    code = "print('x')\n" * 1000
    server = {"type": kind, "id": "srvtoolu_1", "name": "code_execution", "input": {"code": code}}
    if kind == "mcp_tool_use":
        server["server_name"] = "deepwiki"
    result = {"type": "mcp_tool_result", "tool_use_id": "srvtoolu_1", "is_error": False, "content": []}
    if kind == "server_tool_use":
        result = {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_1",
                  "content": {"type": "code_execution_result", "stdout": "x\n", "stderr": "", "return_code": 0,
                              "content": []}}  # fmt: skip
    text = {"type": "text", "text": "Done."}
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}
    content = [server, result, text, *([tool_use] if stop == "tool_use" else [])]
    body = _message(content, stop)
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for block in content:
        if "input" in block:
            pieces = json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": pieces[k : k + 200]}
                for k in range(0, len(pieces), 200)
            ]
            blocks.append(({**block, "input": {}}, deltas))
        elif block["type"] == "text":
            blocks.append(({"type": "text", "text": ""}, [{"type": "text_delta", "text": block["text"]}]))
        else:
            blocks.append((block, []))
    return body, _stream(blocks, stop).encode()


@pytest.mark.parametrize("kind", ["server_tool_use", "mcp_tool_use"])
@pytest.mark.parametrize("stop", ["tool_use", "end_turn"])
def test_a_streamed_server_tool_input_is_no_call_under_the_caps(kind: str, stop: str) -> None:
    body, raw = _server_tool_turn(kind, stop)
    plain = capped(ANTHROPIC.parse_response(body), CAPS)
    turn, progress = streaming.fed(ANTHROPIC, raw, CAPS)
    assert plain.finish is turn.finish
    assert turn.finish is (Finish.TOOL_PROPOSALS if stop == "tool_use" else Finish.FINAL_TEXT)
    assert [c.name for c in turn.calls] == [c.name for c in plain.calls]
    assert turn.text == plain.text == "Done."
    assert ANTHROPIC.turn_items(turn) == ANTHROPIC.turn_items(plain)  # the server input, as received
    assert {p.call_id for p in progress if type(p).__name__ == "ArgumentsProgress"} <= {"toolu_1"}


def test_a_client_tool_use_over_the_call_cap_still_trips() -> None:
    big = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    raw = _stream([(big, [{"type": "input_json_delta", "partial_json": '{"city": "' + "x" * 5000 + '"}'}])])
    turn, _ = streaming.fed(ANTHROPIC, raw.encode(), CAPS)
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "arguments_too_large")
    assert turn.failure is not None and turn.failure.error_code == "max_call_bytes"


def test_server_tool_input_is_bounded_by_the_body_cap() -> None:
    """Memory stays bounded: server tool input past max_body_bytes (all such blocks together) stops
    the stream as a plain body that large is stopped, TRUNCATED(response_too_large)."""
    caps = StreamCaps(max_call_bytes=4096, max_response_bytes=8192, max_body_bytes=6000)
    server = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "code_execution", "input": {}}
    second = {**server, "id": "srvtoolu_2"}
    piece = {"type": "input_json_delta", "partial_json": '{"code": "' + "x" * 3500 + '"}'}
    fits, _ = streaming.fed(ANTHROPIC, _stream([(server, [piece])], "end_turn").encode(), caps)
    assert fits.finish is Finish.FINAL_TEXT
    turn, _ = streaming.fed(
        ANTHROPIC, _stream([(server, [piece]), (second, [piece])], "end_turn").encode(), caps
    )
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "response_too_large")
    assert turn.failure is not None and turn.failure.error_code == "max_body_bytes"
    assert not turn.calls and not turn.executable


# ---- 3. beta stop_reason "compaction" --------------------------------------------------------------


def test_the_compaction_stop_continues_with_the_content_resent() -> None:
    compaction = {"type": "compaction", "content": "Summary of the conversation so far ..."}
    body = {**_message([compaction], "compaction"), "usage": {"input_tokens": 180000, "output_tokens": 900}}
    for turn in (
        ANTHROPIC.parse_response(body),
        streaming.fed(
            ANTHROPIC,
            _stream(
                [
                    (
                        {"type": "compaction", "content": ""},
                        [{"type": "compaction_delta", "content": compaction["content"]}],
                    )
                ],
                "compaction",
            ).encode(),
        )[0],
    ):
        assert (turn.finish, turn.reason, turn.raw_stop_reason) == (Finish.CONTINUE, None, "compaction")
        assert ANTHROPIC.turn_items(turn) == [{"role": "assistant", "content": [compaction]}]
        assert not turn.executable
