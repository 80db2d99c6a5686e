"""Review 10: byte caps, streamed and plain.

1. A Responses stream whose call only the terminal snapshot carries, over ``max_call_bytes``: the turn
   keeps the raw stop reason and the usage the terminal event reported (D27), as the same response read
   as a plain body does (``base.over_byte_cap``).
2. A cap trip names the ``StreamCaps`` setting that tripped, as the turn's ``failure.error_code``
   (``max_call_bytes``, ``max_response_bytes``, ``max_body_bytes``), on every API, streamed and plain,
   and a run copies it into the history of the operation that ended INCOMPLETE.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.adapters.base import StreamCaps, capped
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn, RawFailure
from callbound.testing import FakeClock, ScriptedModel, Stream

N = 40  # argument bytes of one call in the streams below


def _args(nbytes: int) -> str:
    """Compact argument text of exactly ``nbytes`` bytes: ``{"location":"xx..."}``."""
    pad = nbytes - len('{"location":""}')
    assert pad >= 0
    return json.dumps({"location": "x" * pad}, separators=(",", ":"))


def _sse(events: list[dict[str, Any] | str], named: bool = False) -> bytes:
    out = []
    for ev in events:
        text = ev if isinstance(ev, str) else json.dumps(ev, separators=(",", ":"))
        head = f"event: {ev['type']}\n" if named and isinstance(ev, dict) else ""
        out.append(f"{head}data: {text}\n\n")
    return "".join(out).encode()


def _halves(text: str) -> list[str]:
    return [text[: len(text) // 2], text[len(text) // 2 :]]


def _responses(args: list[str]) -> bytes:
    items = [
        {"type": "function_call", "id": f"fc_{k}", "call_id": f"call_{k}", "name": "getWeather"}
        for k in range(len(args))
    ]
    evs: list[dict[str, Any] | str] = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}
    ]
    for k, item in enumerate(items):
        evs.append(
            {
                "type": "response.output_item.added",
                "output_index": k,
                "item": {**item, "arguments": "", "status": "in_progress"},
            }
        )
        evs += [
            {
                "type": "response.function_call_arguments.delta",
                "output_index": k,
                "item_id": item["id"],
                "delta": d,
            }
            for d in _halves(args[k])
        ]
    done = [{**item, "arguments": a, "status": "completed"} for item, a in zip(items, args, strict=True)]
    evs += [{"type": "response.output_item.done", "output_index": k, "item": d} for k, d in enumerate(done)]
    evs.append(
        {
            "type": "response.completed",
            "response": {
                "id": "resp_1",
                "status": "completed",
                "output": done,
                "usage": {"input_tokens": 5, "output_tokens": 5},
            },
        }
    )
    return _sse(evs, named=True)


def _chat(args: list[str]) -> bytes:
    def chunk(delta: dict[str, Any], fin: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "model": "gpt-x",
            "choices": [{"index": 0, "delta": delta, "finish_reason": fin}],
        }

    evs: list[dict[str, Any] | str] = []
    for k, a in enumerate(args):
        start = {"index": k, "id": f"call_{k}", "type": "function", "function": {"name": "getWeather"}}
        evs.append(
            chunk(
                {
                    "role": "assistant",
                    "tool_calls": [{**start, "function": {**start["function"], "arguments": ""}}],
                }
            )
        )
        evs += [chunk({"tool_calls": [{"index": k, "function": {"arguments": d}}]}) for d in _halves(a)]
    evs += [chunk({}, "tool_calls"), "[DONE]"]
    return _sse(evs)


_ANTHROPIC_MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [],
    "stop_reason": None,
    "usage": {"input_tokens": 5, "output_tokens": 1},
}


def _anthropic(args: list[str]) -> bytes:
    evs: list[dict[str, Any] | str] = [{"type": "message_start", "message": dict(_ANTHROPIC_MESSAGE)}]
    for k, a in enumerate(args):
        block = {"type": "tool_use", "id": f"toolu_{k}", "name": "getWeather", "input": {}}
        evs.append({"type": "content_block_start", "index": k, "content_block": block})
        evs += [
            {
                "type": "content_block_delta",
                "index": k,
                "delta": {"type": "input_json_delta", "partial_json": d},
            }
            for d in _halves(a)
        ]
        evs.append({"type": "content_block_stop", "index": k})
    evs += [
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    return _sse(evs, named=True)


def _anthropic_whole(args: list[str]) -> bytes:
    """Arguments that arrive whole in content_block_start: the finished turn gets the plain caps."""
    evs: list[dict[str, Any] | str] = [{"type": "message_start", "message": dict(_ANTHROPIC_MESSAGE)}]
    for k, a in enumerate(args):
        block = {"type": "tool_use", "id": f"toolu_{k}", "name": "getWeather", "input": json.loads(a)}
        evs += [
            {"type": "content_block_start", "index": k, "content_block": block},
            {"type": "content_block_stop", "index": k},
        ]
    evs += [
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    return _sse(evs, named=True)


def _gemini(args: list[str]) -> bytes:
    def chunk(parts: list[dict[str, Any]], fin: str | None = None) -> dict[str, Any]:
        cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
        if fin:
            cand["finishReason"] = fin
        return {
            "candidates": [cand],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 5},
            "responseId": "r1",
        }

    evs: list[dict[str, Any] | str] = [
        chunk([{"functionCall": {"name": "getWeather", "args": json.loads(a)}}]) for a in args
    ]
    evs.append(chunk([{"text": ""}], "STOP"))
    return _sse(evs)


def _interactions(args: list[str]) -> bytes:
    evs: list[dict[str, Any] | str] = [
        {"interaction": {"id": "v1_x", "status": "in_progress"}, "event_type": "interaction.created"}
    ]
    for k, a in enumerate(args):
        step = {"id": f"c{k}", "type": "function_call", "name": "getWeather", "arguments": {}}
        evs.append({"index": k, "step": step, "event_type": "step.start"})
        evs += [
            {"index": k, "delta": {"arguments": d, "type": "arguments_delta"}, "event_type": "step.delta"}
            for d in _halves(a)
        ]
        evs.append({"index": k, "event_type": "step.stop"})
    evs.append(
        {
            "interaction": {
                "id": "v1_x",
                "status": "requires_action",
                "usage": {"total_input_tokens": 5, "total_output_tokens": 5},
            },
            "event_type": "interaction.completed",
        }
    )
    return _sse(evs)


STREAMS = [
    pytest.param("openai-responses", _responses, id="openai-responses"),
    pytest.param("openai-chat", _chat, id="openai-chat"),
    pytest.param("anthropic-messages", _anthropic, id="anthropic-messages"),
    pytest.param("anthropic-messages", _anthropic_whole, id="anthropic-messages-whole-input"),
    pytest.param("gemini-generate", _gemini, id="gemini-generate"),
    pytest.param("gemini-interactions", _interactions, id="gemini-interactions"),
]

# (argument sizes of the calls, caps, the setting that trips)
TRIPS = [
    pytest.param([N + 1, N], StreamCaps(max_call_bytes=N), "max_call_bytes", id="call"),
    pytest.param(
        [N, N + 1],
        StreamCaps(max_call_bytes=N + 1, max_response_bytes=2 * N),
        "max_response_bytes",
        id="response",
    ),
]


def _turn(api: str, raw: bytes, caps: StreamCaps, *, bytewise: bool = False) -> ModelTurn:
    feed = StreamFeed(get(api).stream_assembler(caps), max_event=caps.max_body_bytes)
    for chunk in [raw[i : i + 1] for i in range(len(raw))] if bytewise else [raw]:
        feed.feed(chunk)
        if feed.aborted:
            break
    else:
        feed.close()
    return feed.finish()


# ---- 1. Responses: a trip at the terminal event keeps its usage and raw stop reason ----------------


def _snapshot_only(arguments: str) -> tuple[dict[str, Any], bytes]:
    fc = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "getWeather",
        "arguments": arguments,
        "status": "completed",
    }
    resp = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "output": [fc],
        "usage": {"input_tokens": 1000, "output_tokens": 500},
    }
    stream = _sse(
        [
            {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
            {"type": "response.completed", "response": resp},
        ],
        named=True,
    )
    return resp, stream


@pytest.mark.parametrize(
    ("sizes", "caps", "setting"),
    [
        pytest.param([301], StreamCaps(max_call_bytes=300), "max_call_bytes", id="call"),
        pytest.param(
            [300], StreamCaps(max_call_bytes=300, max_response_bytes=299), "max_response_bytes", id="response"
        ),
    ],
)
def test_responses_cap_at_the_terminal_event_keeps_usage_and_raw_stop_reason(
    sizes: list[int], caps: StreamCaps, setting: str
) -> None:
    resp, stream = _snapshot_only(_args(sizes[0]))
    streamed = _turn("openai-responses", stream, caps)
    plain = capped(get("openai-responses").parse_response(json.dumps(resp)), caps)
    assert (streamed.finish, streamed.reason, streamed.calls, streamed.continuation) == (
        Finish.TRUNCATED,
        "arguments_too_large",
        (),
        (),
    )
    assert streamed.raw_stop_reason == "completed"
    assert (streamed.usage.input_tokens, streamed.usage.output_tokens) == (1000, 500)
    assert streamed.response_id == "resp_1"
    assert streamed.failure is not None and streamed.failure.error_code == setting
    for field in (
        "finish",
        "reason",
        "raw_stop_reason",
        "usage",
        "response_id",
        "failure",
        "text",
        "refusal",
    ):
        assert getattr(streamed, field) == getattr(plain, field), field
    # still aborted: a reader may stop
    asm = get("openai-responses").stream_assembler(caps)
    feed = StreamFeed(asm, max_event=caps.max_body_bytes)
    feed.feed(stream)
    feed.finish()
    assert asm.aborted


def test_responses_cap_at_the_terminal_event_counts_its_tokens_in_a_run() -> None:
    """The tokens the cut-off turn reported are spent (D12, D27): a budget below them trips on them."""
    _, stream = _snapshot_only(_args(301))
    model = ScriptedModel("openai-responses", [Stream(stream)], caps=StreamCaps(max_call_bytes=300))
    runner = cb.Runner(model=model, registry=_registry(), clock=FakeClock(), settings={"stream": True})
    out = runner.run_sync("hi", tenant="t", subject="s")
    assert (out.state, out.reason) == ("INCOMPLETE", "ARGUMENTS_TOO_LARGE")
    assert (out.usage.input_tokens, out.usage.output_tokens) == (1000, 500)
    assert out.spent["output_tokens"] == 500


# ---- 2. a cap trip names its setting ------------------------------------------------------------


@pytest.mark.parametrize(("api", "build"), STREAMS)
@pytest.mark.parametrize(("sizes", "caps", "setting"), TRIPS)
@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
def test_a_streamed_trip_names_the_setting(
    api: str, build: Any, sizes: list[int], caps: StreamCaps, setting: str, bytewise: bool
) -> None:
    raw = build([_args(n) for n in sizes])
    turn = _turn(api, raw, caps, bytewise=bytewise)
    assert (turn.finish, turn.reason, turn.calls) == (Finish.TRUNCATED, "arguments_too_large", ())
    assert turn.failure is not None and turn.failure.kind == "byte_cap" and not turn.failure.retryable
    assert turn.failure.error_code == setting
    # at the caps exactly, every call runs
    ok = _turn(api, build([_args(N), _args(N)]), StreamCaps(max_call_bytes=N, max_response_bytes=2 * N))
    assert ok.finish is Finish.TOOL_PROPOSALS and len(ok.calls) == 2 and ok.failure is None


def _plain(api: str, args: list[str]) -> dict[str, Any]:
    if api == "openai-responses":
        output = [
            {
                "type": "function_call",
                "id": f"fc_{k}",
                "call_id": f"call_{k}",
                "name": "getWeather",
                "arguments": a,
                "status": "completed",
            }
            for k, a in enumerate(args)
        ]
        return {"id": "resp_1", "object": "response", "status": "completed", "output": output}
    if api == "openai-chat":
        calls = [
            {"id": f"call_{k}", "type": "function", "function": {"name": "getWeather", "arguments": a}}
            for k, a in enumerate(args)
        ]
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        return {
            "id": "c1",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        }
    if api == "anthropic-messages":
        content = [
            {"type": "tool_use", "id": f"toolu_{k}", "name": "getWeather", "input": json.loads(a)}
            for k, a in enumerate(args)
        ]
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": content,
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    if api == "gemini-generate":
        parts = [{"functionCall": {"name": "getWeather", "args": json.loads(a)}} for a in args]
        return {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
            "responseId": "r1",
        }
    steps = [
        {"type": "function_call", "id": f"c{k}", "name": "getWeather", "arguments": json.loads(a)}
        for k, a in enumerate(args)
    ]
    return {"id": "v1_x", "status": "requires_action", "steps": steps}


APIS = ["openai-responses", "openai-chat", "anthropic-messages", "gemini-generate", "gemini-interactions"]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(("sizes", "caps", "setting"), TRIPS)
def test_a_plain_body_trip_names_the_setting(
    api: str, sizes: list[int], caps: StreamCaps, setting: str
) -> None:
    turn = get(api).parse_response(_plain(api, [_args(n) for n in sizes]))
    assert turn.finish is Finish.TOOL_PROPOSALS and len(turn.calls) == 2
    over = capped(turn, caps)
    assert (over.finish, over.reason, over.calls) == (Finish.TRUNCATED, "arguments_too_large", ())
    assert over.failure is not None and over.failure.error_code == setting
    assert over.raw_stop_reason == turn.raw_stop_reason


@pytest.mark.parametrize("api", APIS)
def test_a_body_or_event_over_max_body_bytes_names_it(api: str) -> None:
    """A plain body the transport stopped reading, and a stream event that outgrew the cap."""
    turn = get(api).map_error(RawFailure("too_large"))
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "response_too_large")
    assert turn.failure is not None and turn.failure.error_code == "max_body_bytes"
    raw = {
        "openai-responses": _responses,
        "openai-chat": _chat,
        "anthropic-messages": _anthropic,
        "gemini-generate": _gemini,
        "gemini-interactions": _interactions,
    }[api]([_args(200)])
    streamed = _turn(api, raw, StreamCaps(max_body_bytes=150))
    assert (streamed.finish, streamed.reason) == (Finish.TRUNCATED, "response_too_large")
    assert streamed.failure is not None and streamed.failure.error_code == "max_body_bytes"


class _Weather(BaseModel):
    location: str


def _registry() -> cb.Registry:
    def handler(args: _Weather, ctx: cb.CallContext) -> dict[str, Any]:
        raise AssertionError("a call over a byte cap must never run")

    spec = cb.ToolSpec(
        name="getWeather", description="d", params=_Weather, handler=handler, schema_version="1", risk="read"
    )
    return cb.Registry([spec])


def _run(api: str, response: Any, caps: StreamCaps, stream: bool) -> dict[str, Any]:
    model = ScriptedModel(api, [response], caps=caps)
    runner = cb.Runner(model=model, registry=_registry(), clock=FakeClock(), settings={"stream": stream})
    out = runner.run_sync("weather?", tenant="t", subject="s")
    assert out.state == "INCOMPLETE"
    return out.to_dict()


@pytest.mark.parametrize(("api", "build"), STREAMS)
@pytest.mark.parametrize(("sizes", "caps", "setting"), TRIPS)
def test_a_run_records_which_setting_tripped(
    api: str, build: Any, sizes: list[int], caps: StreamCaps, setting: str
) -> None:
    """End to end: the history's last transition carries the setting as ``error_code``, streamed and
    plain, so the user knows which StreamCaps field to raise."""
    args = [_args(n) for n in sizes]
    for response, stream in ((Stream(build(args)), True), (_plain(api, args), False)):
        out = _run(api, response, caps, stream)
        assert out["reason"] == "ARGUMENTS_TOO_LARGE"
        last = out["history"][-1]
        assert last["cause"] == "arguments_too_large"
        assert last["details"]["error_code"] == setting


def test_a_run_records_max_body_bytes() -> None:
    raw = _chat([_args(200)])
    out = _run("openai-chat", Stream(raw), StreamCaps(max_body_bytes=150), True)
    assert out["reason"] == "RESPONSE_TOO_LARGE"
    assert out["history"][-1]["details"]["error_code"] == "max_body_bytes"
    body = json.dumps(_plain("openai-chat", [_args(200)]))
    out = _run("openai-chat", body, StreamCaps(max_body_bytes=150), False)
    assert out["reason"] == "RESPONSE_TOO_LARGE"
    assert out["history"][-1]["details"]["error_code"] == "max_body_bytes"
