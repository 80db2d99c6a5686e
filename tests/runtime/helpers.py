"""Shared builders for the runtime tests: Responses wire bodies, tools with call counters, runners.

Everything is scripted against the OpenAI Responses wire format (``openai-responses``) and runs on a
``FakeClock`` with ``SequentialIds`` so outcomes are deterministic.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

import callbound as cb
from callbound.core.ids import SequentialIds
from callbound.runtime.tools import ToolExecutor
from callbound.stores.memory import MemoryStore
from callbound.testing import FakeClock, ScriptedModel

API = "openai-responses"
MODEL = "gpt-test"

# ---- wire bodies ---------------------------------------------------------------------------------


def usage(input_tokens: int = 10, output_tokens: int = 5) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


def fc(call_id: str, name: str, arguments: Any = None, *, raw: str | None = None) -> dict[str, Any]:
    """A ``function_call`` output item. ``arguments`` is JSON-encoded unless ``raw`` text is given."""
    text = raw if raw is not None else json.dumps(arguments if arguments is not None else {})
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": text,
        "status": "completed",
    }


def msg(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def refusal_msg(text: str = "I can't help with that.") -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_r",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": text}],
    }


def response(
    rid: str,
    output: Sequence[dict[str, Any]],
    *,
    status: str = "completed",
    incomplete_reason: str | None = None,
    tokens: tuple[int, int] = (10, 5),
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": rid,
        "object": "response",
        "model": MODEL,
        "status": status,
        "output": list(output),
        "usage": usage(*tokens),
    }
    if incomplete_reason is not None:
        body["incomplete_details"] = {"reason": incomplete_reason}
    if error is not None:
        body["error"] = error
    return body


def calls(rid: str, *items: dict[str, Any], tokens: tuple[int, int] = (10, 5)) -> dict[str, Any]:
    """A completed response proposing the given function calls."""
    return response(rid, items, tokens=tokens)


def final(rid: str, text: str = "Done.", tokens: tuple[int, int] = (10, 5)) -> dict[str, Any]:
    return response(rid, [msg(text)], tokens=tokens)


def stream_events(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The Responses stream events that carry ``body`` (created, item added/done, completed)."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**body, "status": "in_progress", "output": []}}
    ]
    for i, item in enumerate(body["output"]):
        added = {**item, "arguments": ""} if item.get("type") == "function_call" else item
        events.append({"type": "response.output_item.added", "output_index": i, "item": added})
        if item.get("type") == "function_call":
            events.append(
                {
                    "type": "response.function_call_arguments.delta",
                    "output_index": i,
                    "item_id": item["id"],
                    "delta": item["arguments"],
                }
            )
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    events.append({"type": f"response.{body['status']}", "response": body})
    return events


# ---- request inspection --------------------------------------------------------------------------


def outputs(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every function_call_output of a request, with ``output`` decoded from its JSON text."""
    found = []
    for item in request.get("input", []):
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            found.append({"call_id": item["call_id"], "result": json.loads(item["output"])})
    return found


def last_outputs(model: ScriptedModel) -> dict[str, dict[str, Any]]:
    """call_id -> model_result of the newest request's outputs that answer the previous response."""
    return {o["call_id"]: o["result"] for o in outputs(model.requests[-1])}


def error_code(result: dict[str, Any]) -> str | None:
    return None if result.get("ok") else result["error"]["code"]


# ---- tools ---------------------------------------------------------------------------------------


class OrderArgs(BaseModel):
    order_id: str


class RefundArgs(BaseModel):
    order_id: str
    amount: float


class EchoArgs(BaseModel):
    n: int


@dataclass
class Counter:
    """Counts handler runs and records the arguments each run saw."""

    calls: list[Any] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.calls)


def get_order_tool(counter: Counter | None = None, **overrides: Any) -> cb.ToolSpec:
    counter = counter if counter is not None else Counter()

    def get_order(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        counter.calls.append(args.order_id)
        return {"order_id": args.order_id, "status": "shipped"}

    kw: dict[str, Any] = {
        "name": "get_order",
        "description": "Look up an order",
        "params": OrderArgs,
        "handler": get_order,
        "schema_version": "get-order-v1",
        "risk": "read",
        "timeout_ms": 2000,
    }
    kw.update(overrides)
    return cb.ToolSpec(**kw)


def refund_tool(counter: Counter | None = None, **overrides: Any) -> cb.ToolSpec:
    """An irreversible refund (needs approval by default)."""
    counter = counter if counter is not None else Counter()

    def refund(args: RefundArgs, ctx: cb.CallContext) -> dict[str, Any]:
        counter.calls.append((args.order_id, args.amount, ctx.idempotency_key))
        return {"refund_id": f"rf_{args.order_id}", "amount": args.amount}

    kw: dict[str, Any] = {
        "name": "refund",
        "description": "Refund an order",
        "params": RefundArgs,
        "handler": refund,
        "schema_version": "refund-v1",
        "risk": "irreversible",
        "timeout_ms": 2000,
    }
    kw.update(overrides)
    return cb.ToolSpec(**kw)


def write_tool(counter: Counter | None = None, **overrides: Any) -> cb.ToolSpec:
    """A write tool (no approval by default): ``set_note(order_id)``."""
    counter = counter if counter is not None else Counter()

    def set_note(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        counter.calls.append((args.order_id, ctx.idempotency_key, ctx.call_id))
        return {"noted": args.order_id}

    kw: dict[str, Any] = {
        "name": "set_note",
        "description": "Write a note on an order",
        "params": OrderArgs,
        "handler": set_note,
        "schema_version": "set-note-v1",
        "risk": "write",
        "timeout_ms": 2000,
    }
    kw.update(overrides)
    return cb.ToolSpec(**kw)


def sleepy_sync(seconds: float, counter: Counter | None = None) -> Callable[[Any, cb.CallContext], Any]:
    """A sync handler that sleeps for real (keep ``seconds`` tiny)."""

    def handler(args: Any, ctx: cb.CallContext) -> dict[str, Any]:
        if counter is not None:
            counter.calls.append(args)
        time.sleep(seconds)
        return {"slept": seconds}

    return handler


@dataclass
class Concurrency:
    """Records how many async handlers ran at once, and the order they started and finished."""

    active: int = 0
    peak: int = 0
    started: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)

    async def enter(self, name: str, hold_s: float = 0.01) -> None:
        self.active += 1
        self.peak = max(self.peak, self.active)
        self.started.append(name)
        try:
            await asyncio.sleep(hold_s)
        finally:
            self.active -= 1
            self.finished.append(name)


# ---- runners -------------------------------------------------------------------------------------


@dataclass
class Harness:
    runner: cb.Runner
    model: ScriptedModel
    clock: FakeClock
    store: MemoryStore

    async def run(self, input: str = "Where is order A1?", **kw: Any) -> cb.Outcome:
        kw.setdefault("tenant", "acme")
        kw.setdefault("subject", "user-1")
        return await self.runner.run(input, **kw)


def echo_runner(handler: Any, grace_s: float, *, timeout_ms: int = 100) -> tuple[cb.Runner, ScriptedModel]:
    """A runner with one read tool ``echo`` run by ``handler`` under ``timeout_ms``, an executor with
    ``grace_s``, and a script of one call of it, then a final answer."""
    tool = cb.ToolSpec(
        name="echo",
        description="Echo",
        params=EchoArgs,
        handler=handler,
        schema_version="v1",
        risk="read",
        timeout_ms=timeout_ms,
    )
    model = ScriptedModel(API, [calls("r1", fc("c1", "echo", {"n": 1})), final("r2")])
    r = cb.Runner(
        model=model, registry=cb.Registry([tool]), clock=FakeClock(), executor=ToolExecutor(grace_s=grace_s)
    )
    return r, model


def make(
    script: Sequence[Any],
    tools: Sequence[cb.ToolSpec] | cb.Registry,
    *,
    budgets: cb.Budgets | None = None,
    store: MemoryStore | None = None,
    clock: FakeClock | None = None,
    policy: cb.Policy | None = None,
    settings: dict[str, Any] | None = None,
    ids: Any = None,
    grace_s: float = 0.5,
    **runner_kw: Any,
) -> Harness:
    """A Runner over a ScriptedModel (Responses), FakeClock, MemoryStore and deterministic ids."""
    model = ScriptedModel(API, list(script))
    clock = clock or FakeClock()
    store = store if store is not None else MemoryStore()
    registry = tools if isinstance(tools, cb.Registry) else cb.Registry(list(tools))
    runner = cb.Runner(
        model=model,
        registry=registry,
        budgets=budgets,
        store=store,
        clock=clock,
        policy=policy,
        settings={"model": MODEL, **(settings or {})},
        ids=ids if ids is not None else SequentialIds(),
        executor=ToolExecutor(grace_s=grace_s),
        **runner_kw,
    )
    return Harness(runner, model, clock, store)


def rebuild(
    h: Harness,
    tools: Sequence[cb.ToolSpec] | cb.Registry,
    *,
    script: Sequence[Any] | None = None,
    policy: cb.Policy | None = None,
    **kw: Any,
) -> Harness:
    """A NEW Runner (and a new ScriptedModel with the same script) over the same store and clock, as a
    second process would build it."""
    return make(
        script if script is not None else h.model.responses,
        tools,
        store=h.store,
        clock=h.clock,
        policy=policy,
        **kw,
    )


def states(outcome: cb.Outcome) -> list[str]:
    return [t.state for t in outcome.history]
