"""A plain response body sent as its API streams it (review round 22, d): the events the SDK stream types
name, in their order, as SSE ``data:`` lines, so that one body can be read both ways and the two turns
compared. Each returns None for a body no stream can carry (a Responses status no terminal event names;
an Interactions body in the legacy ``outputs`` schema)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def sse(events: list[Any]) -> bytes:
    return "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events).encode()


def responses(body: dict[str, Any]) -> bytes | None:
    if body.get("status") not in ("completed", "incomplete", "failed"):
        return None  # no terminal event carries it
    events: list[Any] = [
        {"type": "response.created", "response": {**body, "status": "in_progress", "output": []}}
    ]
    for i, item in enumerate(body["output"]):
        events.append({"type": "response.output_item.added", "output_index": i, "item": item})
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    events.append({"type": f"response.{body['status']}", "response": body})
    return sse(events)


def chat(body: dict[str, Any]) -> bytes:
    choice = body["choices"][0]
    msg = choice["message"]
    base = {"id": body["id"], "object": "chat.completion.chunk", "model": body.get("model")}
    delta: dict[str, Any] = {"role": "assistant", "content": msg.get("content")}
    if msg.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(msg["tool_calls"])]
    if msg.get("refusal"):
        delta["refusal"] = msg["refusal"]
    events: list[Any] = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        {**base, "choices": [], "usage": body.get("usage")},
        "[DONE]",
    ]
    return sse(events)


def anthropic(body: dict[str, Any]) -> bytes:
    events: list[Any] = [{"type": "message_start", "message": {**body, "content": [], "stop_reason": None}}]
    for i, block in enumerate(body["content"]):
        kind = block["type"]
        deltas: list[dict[str, Any]]
        if kind == "text":
            start = {**{k: v for k, v in block.items() if k != "citations"}, "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"]}]
            deltas += [{"type": "citations_delta", "citation": c} for c in block.get("citations") or []]
        elif kind in ("tool_use", "server_tool_use"):
            start = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": ""}
            deltas = [{"type": "thinking_delta", "thinking": block["thinking"]}]
            if "signature" in block:  # a block that lost it streams none
                start["signature"] = ""
                deltas += [{"type": "signature_delta", "signature": block["signature"]}]
        else:  # redacted_thinking, server tool results: whole in their start
            start, deltas = block, []
        events.append({"type": "content_block_start", "index": i, "content_block": start})
        events += [{"type": "content_block_delta", "index": i, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": i})
    stop = {"stop_reason": body["stop_reason"], "stop_sequence": body.get("stop_sequence")}
    events.append({"type": "message_delta", "delta": stop, "usage": body.get("usage") or {}})
    events.append({"type": "message_stop"})
    return sse(events)


def gemini(body: dict[str, Any]) -> bytes:
    return sse([body])  # a streamGenerateContent chunk is a GenerateContentResponse


def interactions(body: dict[str, Any]) -> bytes | None:
    if not isinstance(body.get("steps"), list):
        return None  # the legacy outputs schema streams content.* events
    events: list[Any] = [
        {"event_type": "interaction.created", "interaction": {"id": body.get("id"), "status": "in_progress"}}
    ]
    for i, step in enumerate(body["steps"]):
        if step.get("type") == "function_call":
            events.append({"event_type": "step.start", "index": i, "step": {**step, "arguments": {}}})
            delta = {"type": "arguments_delta", "arguments": json.dumps(step["arguments"])}
            events.append({"event_type": "step.delta", "index": i, "delta": delta})
        elif step.get("type") == "model_output":
            events.append(
                # its other members (an error) in the start, its content as deltas
                {"event_type": "step.start", "index": i, "step": {**step, "content": []}}
            )
            events += [{"event_type": "step.delta", "index": i, "delta": c} for c in step["content"]]
        else:  # thought steps and the rest: whole in their start
            events.append({"event_type": "step.start", "index": i, "step": step})
        events.append({"event_type": "step.stop", "index": i})
    final = {k: v for k, v in body.items() if k != "steps"}
    events.append({"event_type": "interaction.completed", "interaction": final})
    return sse(events)


STREAMERS: dict[str, Callable[[dict[str, Any]], bytes | None]] = {
    "openai-responses": responses,
    "openai-chat": chat,
    "anthropic-messages": anthropic,
    "gemini-generate": gemini,
    "gemini-interactions": interactions,
}
