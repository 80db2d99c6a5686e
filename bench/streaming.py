"""Streaming assembly: synthetic SSE streams carrying one tool call with a large argument string.

For each API the stream has the provider's real event shapes (WIRE.md 1.6, 2.4, 3.4, 4.7, 5.6) and one
function call ``get_order`` whose argument text is ``{"text": "..."}`` of exactly ``size`` bytes, sent in
argument deltas of ``DELTA[api]`` bytes each. callbound's cell: bytes in 16 KiB reads → ``StreamFeed``
(``SSEReader`` → the adapter's stream assembler, the path the transports use) → ``finish`` (which
parses the arguments with the D5 parser), plus SHA-256 of the raw bytes (D7). The SDK cells take the
same bytes through the SDK's own SSE decoder, ``json.loads``, ``construct_type`` (what the SDK's
``Stream`` does) and the SDK accumulator, and then read the arguments as a dict; each stops after
``SDK_LIMIT_S`` and reports "> 60 s".
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from typing import Any

READ_SIZE = 16 * 1024  # bytes per network read fed to the SSE decoders
SDK_LIMIT_S = 60.0
SIZES = (10_000, 100_000, 1_000_000, 10_000_000)
QUICK_SIZES = (10_000, 100_000, 1_000_000)
# Argument bytes per delta event, per API. Fixed, so events per MB are the same in every cell:
# 32 B is ~8 tokens, a typical fragment for OpenAI and Anthropic tool-argument streams. Gemini
# streams partialArgs (Vertex) string pieces of the same size; Interactions arguments_delta likewise.
DELTA = {
    "openai-responses": 32,
    "openai-chat": 32,
    "anthropic-messages": 32,
    "gemini-generate": 32,
    "gemini-interactions": 32,
}
APIS = tuple(DELTA)
SDKS = {
    "openai-chat": "openai ChatCompletionStreamState",
    "openai-responses": "openai ResponseStreamState",
    "anthropic-messages": "anthropic accumulate_event",
}
_WORDS = [
    "order",
    "shipped",
    "parcel",
    "refund",
    "invoice",
    "customer",
    "address",
    "tracking",
    "status",
    "warehouse",
]


def argument_value(size: int) -> tuple[str, str]:
    """(argument JSON text of exactly ``size`` bytes, the string value inside it)."""
    head, tail = '{"text":"', '"}'
    room = size - len(head) - len(tail)
    parts: list[str] = []
    length = 0
    i = 0
    while length < room:
        w = _WORDS[i % len(_WORDS)] + " "
        parts.append(w)
        length += len(w)
        i += 1
    value = "".join(parts)[:room]
    return head + value + tail, value


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def events(api: str, size: int) -> tuple[list[tuple[str | None, Any]], str]:
    """(list of (event name, payload), the expected string value). Payload "[DONE]" is a sentinel."""
    args, value = argument_value(size)
    d = DELTA[api]
    ev: list[tuple[str | None, Any]] = []
    if api == "openai-responses":
        item = {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "get_order",
            "arguments": "",
            "status": "in_progress",
        }
        done = {**item, "arguments": args, "status": "completed"}
        resp = {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "gpt-x",
            "status": "in_progress",
        }
        seq = 0

        def add(payload: dict[str, Any]) -> None:
            nonlocal seq
            ev.append((None, {**payload, "sequence_number": seq}))
            seq += 1

        add({"type": "response.created", "response": {**resp, "output": [], "usage": None}})
        add({"type": "response.in_progress", "response": {**resp, "output": []}})
        add({"type": "response.output_item.added", "output_index": 0, "item": item})
        for frag in _chunks(args, d):
            add(
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": "fc_1",
                    "output_index": 0,
                    "delta": frag,
                }
            )
        add(
            {
                "type": "response.function_call_arguments.done",
                "item_id": "fc_1",
                "output_index": 0,
                "arguments": args,
                "name": "get_order",
            }
        )
        add({"type": "response.output_item.done", "output_index": 0, "item": done})
        usage = {
            "input_tokens": 50,
            "output_tokens": 12,
            "total_tokens": 62,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        add(
            {
                "type": "response.completed",
                "response": {**resp, "status": "completed", "output": [done], "usage": usage},
            }
        )
    elif api == "openai-chat":
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-x"}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        ev.append((None, chunk({"role": "assistant", "content": None})))
        first = {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_order", "arguments": ""},
        }
        ev.append((None, chunk({"tool_calls": [first]})))
        for frag in _chunks(args, d):
            ev.append((None, chunk({"tool_calls": [{"index": 0, "function": {"arguments": frag}}]})))
        ev.append((None, chunk({}, "tool_calls")))
        ev.append(
            (
                None,
                {
                    **base,
                    "choices": [],
                    "usage": {"prompt_tokens": 80, "completion_tokens": 40, "total_tokens": 120},
                },
            )
        )
        ev.append((None, "[DONE]"))
    elif api == "anthropic-messages":
        msg = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 300, "output_tokens": 1},
        }
        ev.append(("message_start", {"type": "message_start", "message": msg}))
        block = {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {}}
        ev.append(
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})
        )
        for frag in ["", *_chunks(args, d)]:
            delta = {"type": "input_json_delta", "partial_json": frag}
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        ev.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {"output_tokens": 60},
                },
            )
        )
        ev.append(("message_stop", {"type": "message_stop"}))
    elif api == "gemini-generate":
        # Vertex streamFunctionCallArguments: the value arrives as partialArgs string pieces, each
        # chunk with the top-level members of the recorded stream (WIRE.md 4.7).
        def cand(parts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
            return {
                "candidates": [{"content": {"role": "model", "parts": parts}, **extra}],
                "usageMetadata": {"trafficType": "ON_DEMAND"},
                "modelVersion": "gemini-x",
                "createTime": "2026-04-02T17:03:50.399550Z",
                "responseId": "gresp_1",
            }

        ev.append((None, cand([{"functionCall": {"name": "get_order", "willContinue": True}}])))
        for piece in _chunks(value, d):
            pa = [{"jsonPath": "$.text", "stringValue": piece, "willContinue": True}]
            ev.append((None, cand([{"functionCall": {"partialArgs": pa, "willContinue": True}}])))
        ev.append(
            (
                None,
                cand(
                    [
                        {
                            "functionCall": {
                                "partialArgs": [{"jsonPath": "$.text", "stringValue": ""}],
                                "willContinue": True,
                            }
                        }
                    ]
                ),
            )
        )
        ev.append((None, cand([{"functionCall": {}}])))
        final = cand([{"text": ""}], finishReason="STOP")
        final["usageMetadata"] = {"promptTokenCount": 50, "candidatesTokenCount": 40, "totalTokenCount": 90}
        ev.append((None, final))
    elif api == "gemini-interactions":
        ev.append(
            (
                "interaction.created",
                {
                    "interaction": {
                        "id": "v1_1",
                        "status": "in_progress",
                        "object": "interaction",
                        "model": "gemini-x",
                    },
                    "event_type": "interaction.created",
                },
            )
        )
        step = {"id": "call_1", "type": "function_call", "name": "get_order", "arguments": {}}
        ev.append(("step.start", {"index": 0, "step": step, "event_type": "step.start"}))
        for frag in _chunks(args, d):
            delta = {"arguments": frag, "type": "arguments_delta"}
            ev.append(("step.delta", {"index": 0, "delta": delta, "event_type": "step.delta"}))
        ev.append(("step.stop", {"index": 0, "event_type": "step.stop"}))
        usage = {"total_input_tokens": 50, "total_output_tokens": 40, "total_tokens": 90}
        ev.append(
            (
                "interaction.completed",
                {
                    "interaction": {"id": "v1_1", "status": "requires_action", "usage": usage},
                    "event_type": "interaction.completed",
                },
            )
        )
    else:
        raise KeyError(api)
    return ev, value


def sse_bytes(evs: list[tuple[str | None, Any]]) -> bytes:
    out: list[str] = []
    for name, payload in evs:
        if name:
            out.append(f"event: {name}\n")
        data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
        out.append(f"data: {data}\n\n")
    return "".join(out).encode("utf-8")


def reads(raw: bytes) -> list[bytes]:
    return [raw[i : i + READ_SIZE] for i in range(0, len(raw), READ_SIZE)]


def adapter_available(api: str) -> bool:
    from callbound.adapters import get

    try:
        get(api)
    except Exception:
        return False
    return True


# ---- callbound -----------------------------------------------------------------------------------


def assemble_callbound(api: str, chunks: list[bytes]) -> Any:
    from callbound.adapters import get
    from callbound.adapters.base import StreamCaps
    from callbound.adapters.stream import StreamFeed

    # The transports' path (callbound.transports.feed_stream): SSE reader → assembler, SHA-256 included.
    caps = StreamCaps(max_call_bytes=64_000_000, max_response_bytes=64_000_000, max_body_bytes=256_000_000)
    stream = StreamFeed(get(api).stream_assembler(caps), max_event=caps.max_body_bytes)
    for chunk in chunks:
        stream.feed(chunk)
    stream.close()
    return stream.finish()


def measure_callbound(api: str, size: int, runs: int) -> dict[str, Any]:
    evs, value = events(api, size)
    raw = sse_bytes(evs)
    chunks = reads(raw)
    del evs
    turn = assemble_callbound(api, chunks)  # warm-up and correctness check
    if turn.finish.value != "TOOL_PROPOSALS" or not turn.calls or turn.calls[0].arguments != {"text": value}:
        err = turn.calls[0].arguments_error if turn.calls else turn.reason
        raise RuntimeError(f"{api}: assembled turn is {turn.finish.value} ({err})")
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        assemble_callbound(api, chunks)
        times.append(time.perf_counter() - t0)
    return {
        "seconds": statistics.median(times),
        "samples": times,
        "events": raw.count(b"data: "),
        "wire_bytes": len(raw),
    }


# ---- SDK accumulators ----------------------------------------------------------------------------


def _sdk_openai_chat(chunks: list[bytes], deadline: float) -> Any:
    from openai._models import construct_type
    from openai._streaming import SSEDecoder
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    state: Any = ChatCompletionStreamState()
    for n, sse in enumerate(SSEDecoder().iter_bytes(iter(chunks))):
        if sse.data.startswith("[DONE]"):
            break
        state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=sse.json()))
        if n % 256 == 0 and time.perf_counter() > deadline:
            return None
    completion = state.get_final_completion()
    return json.loads(completion.choices[0].message.tool_calls[0].function.arguments)


def _sdk_openai_responses(chunks: list[bytes], deadline: float) -> Any:
    from openai._models import construct_type
    from openai._streaming import SSEDecoder
    from openai.lib.streaming.responses._responses import ResponseStreamState
    from openai.types.responses import ResponseStreamEvent

    state: Any = ResponseStreamState(input_tools=[], text_format=None)  # type: ignore[arg-type]
    snapshot = None
    for n, sse in enumerate(SSEDecoder().iter_bytes(iter(chunks))):
        event = construct_type(type_=ResponseStreamEvent, value=sse.json())
        state.handle_event(event)
        if getattr(event, "type", "") == "response.completed":
            snapshot = event.response  # type: ignore[attr-defined]
        if n % 256 == 0 and time.perf_counter() > deadline:
            return None
    assert snapshot is not None
    return json.loads(snapshot.output[0].arguments)


def _sdk_anthropic(chunks: list[bytes], deadline: float) -> Any:
    from anthropic._models import construct_type
    from anthropic._streaming import SSEDecoder
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent

    snapshot: Any = None
    bufs: dict[int, bytes] = {}
    for n, sse in enumerate(SSEDecoder().iter_bytes(iter(chunks))):
        event = construct_type(type_=RawMessageStreamEvent, value=sse.json())
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)  # type: ignore[arg-type]
        if n % 256 == 0 and time.perf_counter() > deadline:
            return None
    return snapshot.content[0].input


_SDK_FUNCS = {
    "openai-chat": _sdk_openai_chat,
    "openai-responses": _sdk_openai_responses,
    "anthropic-messages": _sdk_anthropic,
}
SDK_REQUIRES = {"openai-chat": "openai", "openai-responses": "openai", "anthropic-messages": "anthropic"}


def measure_sdk(api: str, size: int) -> dict[str, Any]:
    evs, value = events(api, size)
    raw = sse_bytes(evs)
    chunks = reads(raw)
    del evs
    fn = _SDK_FUNCS[api]
    fn(reads(sse_bytes(events(api, 2_000)[0])), time.perf_counter() + 60)  # import and warm up
    t0 = time.perf_counter()
    args = fn(chunks, t0 + SDK_LIMIT_S)
    elapsed = time.perf_counter() - t0
    if args is None:
        return {"timeout": True, "seconds": elapsed}
    if args != {"text": value}:
        raise RuntimeError(f"{api} SDK assembled different arguments")
    return {"timeout": False, "seconds": elapsed, "events": raw.count(b"data: ")}


def iter_sizes(quick: bool) -> Iterator[int]:
    yield from QUICK_SIZES if quick else SIZES
