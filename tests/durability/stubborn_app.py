"""An application whose one async read tool ignores cancellation for a long time: the worker command
must not wait for it after its timeout and grace (D14, D16)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import BaseModel

import callbound as cb
from callbound.runtime.app import App
from callbound.runtime.tools import ToolExecutor
from callbound.testing import ScriptedModel

API = "openai-responses"
HOLD_S = 30.0


class Args(BaseModel):
    order_id: str


async def stubborn(args: Args, ctx: cb.CallContext) -> dict[str, Any]:
    end = time.monotonic() + HOLD_S
    while time.monotonic() < end:
        try:
            await asyncio.sleep(end - time.monotonic())
        except asyncio.CancelledError:
            continue  # ignores every cancel
    return {"order_id": args.order_id}


def _body(rid: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "response",
        "status": "completed",
        "output": output,
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    }


def make_app() -> App:
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_order",
        "arguments": '{"order_id": "A1"}',
        "status": "completed",
    }
    text = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
    }
    model = ScriptedModel(API, [_body("resp_1", [call]), _body("resp_2", [text])])
    tool = cb.ToolSpec(
        name="get_order",
        description="Look an order up",
        params=Args,
        handler=stubborn,
        schema_version="v1",
        risk="read",
        timeout_ms=100,
    )
    return App(
        registry=cb.Registry([tool]),
        model=model,
        settings={"model": "gpt-test"},
        runner_options={"executor": ToolExecutor(grace_s=0.2)},
    )
