"""Minimal synthetic response bodies per API and raw stop reason, for the rows of docs/stop-reasons.md.

Each builder takes the row's *case* (the raw value plus a variant such as ``+calls`` or ``+refusal``)
and returns a plain response body; the adapter must map it as the row says.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

CALL_ARGS = {"order_id": "A1"}


def responses(case: str) -> dict[str, Any]:
    raw, _, variant = case.partition("+")
    body: dict[str, Any] = {"id": "resp_1", "object": "response", "status": raw, "output": []}
    if raw == "incomplete" or raw in ("max_output_tokens", "content_filter", "max_messages", "steered"):
        body["status"] = "incomplete"
        body["incomplete_details"] = {"reason": raw if raw != "incomplete" else None}
    if raw == "failed":
        body["error"] = {"code": variant or "server_error", "message": "boom"}
        variant = ""
    if variant in ("calls", "nocallid"):
        call = {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "get_order",
            "arguments": json.dumps(CALL_ARGS),
        }
        if variant == "nocallid":
            del call["call_id"]
        body["output"].append(call)
    elif variant == "clientcall":
        # an item only its own output type answers (custom_tool_call_output): no function tool can
        body["output"].append(
            {
                "type": "custom_tool_call",
                "id": "ctc_1",
                "call_id": "call_1",
                "name": "sql",
                "input": "SELECT 1",
            }
        )
    elif variant == "refusal":
        body["output"].append(
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "content": [{"type": "refusal", "refusal": "I can't help with that."}],
            }
        )
    else:
        body["output"].append(
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "hello"}],
            }
        )
    if variant == "badcontainer":  # output of the wrong JSON type
        body["output"] = "hello"
    elif variant == "badentry":  # an output item of the wrong JSON type
        body["output"].append(5)
    return body


def chat(case: str) -> dict[str, Any]:
    raw, _, variant = case.partition("+")
    msg: dict[str, Any] = {"role": "assistant", "content": "hello", "refusal": None}
    if variant == "calls":
        msg["content"] = None
        msg["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_order", "arguments": json.dumps(CALL_ARGS)},
            }
        ]
    elif variant == "refusal":
        msg["content"] = None
        msg["refusal"] = "I can't help with that."
    elif variant == "legacy":
        msg["content"] = None
        msg["function_call"] = {"name": "get_order", "arguments": json.dumps(CALL_ARGS)}
    elif variant == "notassistant":
        # calls in a message of another role: only an assistant message's calls can be answered
        msg["role"] = "model"
        msg["content"] = None
        msg["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_order", "arguments": json.dumps(CALL_ARGS)},
            }
        ]
    elif variant == "custom":
        # a custom tool call (free-form input), beside a function call: the turn cannot be answered whole
        msg["content"] = None
        msg["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_order", "arguments": json.dumps(CALL_ARGS)},
            },
            {"id": "call_2", "type": "custom", "custom": {"name": "math_exp", "input": "4 + 4"}},
        ]
    elif variant == "badentry":  # a complete call beside a tool_calls entry of the wrong JSON type
        msg["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_order", "arguments": json.dumps(CALL_ARGS)},
            },
            5,
        ]
    message: Any = "hello" if variant == "badcontainer" else msg  # a message of the wrong JSON type
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-x",
        "choices": [{"index": 0, "message": message, "finish_reason": raw}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3},
    }


def anthropic(case: str) -> dict[str, Any]:
    raw, _, variant = case.partition("+")
    content: list[dict[str, Any]] = [{"type": "text", "text": "hello"}]
    if variant == "calls":
        content.append({"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": CALL_ARGS})
    elif variant == "nocallid":
        content.append({"type": "tool_use", "name": "get_order", "input": CALL_ARGS})
    elif variant in ("server", "nosignature"):
        content = [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}}
        ]
        if variant == "nosignature":
            # a thinking block that lost its signature, before a client call (tool_use) or a paused search
            thinking = {"type": "thinking", "thinking": "Let me look it up."}
            call = {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": CALL_ARGS}
            content = [thinking, call] if raw == "tool_use" else [thinking, *content]
    elif variant == "badentry":  # a complete tool_use beside a block of the wrong JSON type
        content = [{"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": CALL_ARGS}, 5]  # type: ignore[list-item]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": "hello" if variant == "badcontainer" else content,
        "stop_reason": raw,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 3},
    }


def gemini(case: str) -> dict[str, Any]:
    raw, _, variant = case.partition("+")
    if variant == "blocked":
        return {
            "promptFeedback": {"blockReason": raw},
            "responseId": "g1",
            "usageMetadata": {"promptTokenCount": 5},
        }
    parts: list[dict[str, Any]] = [{"text": "hello"}]
    if variant in ("calls", "notmodel"):
        parts = [{"functionCall": {"name": "get_order", "args": CALL_ARGS}}]
    if variant == "noname":
        parts = [{"functionCall": {"args": CALL_ARGS}}]
    if variant == "badentry":  # a complete call beside a functionCall of the wrong JSON type
        parts = [{"functionCall": {"name": "get_order", "args": CALL_ARGS}}, {"functionCall": "get_order"}]
    role = "user" if variant == "notmodel" else "model"
    cand: dict[str, Any] = {"content": {"role": role, "parts": parts}, "finishReason": raw, "index": 0}
    if variant == "noparts":
        cand = {"content": {"role": "model"}, "finishReason": raw, "index": 0}
    if variant == "badcontainer":  # parts of the wrong JSON type
        cand = {"content": {"role": "model", "parts": "hello"}, "finishReason": raw, "index": 0}
    return {
        "candidates": [cand],
        "responseId": "g1",
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3},
    }


def interactions(case: str) -> dict[str, Any]:
    raw, _, variant = case.partition("+")
    steps: list[dict[str, Any]] = [{"type": "model_output", "content": [{"type": "text", "text": "hello"}]}]
    if variant == "calls":
        steps = [{"type": "function_call", "id": "fc_1", "name": "get_order", "arguments": CALL_ARGS}]
    if variant == "noname":  # a named call beside one without a name (nor an id)
        steps = [
            {"type": "function_call", "id": "fc_1", "name": "get_order", "arguments": CALL_ARGS},
            {"type": "function_call", "arguments": CALL_ARGS},
        ]
    if variant == "nocallid":  # a named call without its id
        steps = [{"type": "function_call", "name": "get_order", "arguments": CALL_ARGS}]
    if variant == "badentry":  # a complete call beside a step of the wrong JSON type
        steps = [{"type": "function_call", "id": "fc_1", "name": "get_order", "arguments": CALL_ARGS}, 5]  # type: ignore[list-item]
    if variant == "error":  # a model_output step carrying a google.rpc.Status (14: UNAVAILABLE)
        steps = [{"type": "model_output", "content": [], "error": {"code": 14, "message": "unavailable"}}]
    body_errors: dict[str, Any] = {}
    if variant in ("rate_limit_exceeded", "quota_exceeded"):
        body_errors = {"errors": [{"code": variant, "message": "x"}]}
    return {
        **body_errors,
        "id": "int_1",
        "status": raw,
        "steps": "hello" if variant == "badcontainer" else steps,
        "usage": {"total_input_tokens": 5, "total_output_tokens": 3},
    }


BUILDERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "openai-responses": responses,
    "openai-chat": chat,
    "anthropic-messages": anthropic,
    "gemini-generate": gemini,
    "gemini-interactions": interactions,
}
