"""The tool-calling loops under test, each driven by an instant in-process fake model.

Every loop runs one operation of ``n`` turns; turn k proposes ``par`` calls of the read tool
``get_order`` with order ids no other turn uses (so no repeat guard trips), and turn n answers with
final text. ``build_*`` does the setup (imports, registries, graphs) outside the clock and returns a
``run_once()`` that times one whole operation and returns ``(elapsed_s, wire_s)``: ``wire_s`` is the
time spent in ``json.dumps`` of the request body where the loop serialises its history for the wire
(callbound's fake client does what an HTTP transport must; frameworks' fake models receive objects).

Framework modules are imported inside their builders so that this file imports with callbound alone.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from collections.abc import Callable
from typing import Any

RunOnce = Callable[[], tuple[float, float]]


def order_id(k: int, j: int) -> str:
    return f"A{k:05d}-{j}"


def get_order_result(oid: str) -> dict[str, Any]:
    return {"order_id": oid, "status": "shipped"}


# ---- Responses-shaped bodies, shared by callbound's fake client and the dict loops -----------------


def responses_body(k: int, n: int, par: int) -> dict[str, Any]:
    if k < n:
        output: list[dict[str, Any]] = [
            {
                "type": "function_call",
                "id": f"fc_{k}_{j}",
                "call_id": f"call_{k}_{j}",
                "name": "get_order",
                "arguments": f'{{"order_id":"{order_id(k, j)}"}}',
                "status": "completed",
            }
            for j in range(par)
        ]
    else:
        output = [
            {
                "type": "message",
                "id": f"msg_{k}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "All orders shipped.", "annotations": []}],
            }
        ]
    return {
        "id": f"resp_{k}",
        "object": "response",
        "status": "completed",
        "model": "fake-model",
        "output": output,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


# ---- callbound ------------------------------------------------------------------------------------


class FakeResponsesClient:
    """A ``ModelClient`` (core/model.py) that answers instantly. It serialises the request body as an
    HTTP transport must (timed separately as wire time) and builds the turn with the real adapter's
    ``parse_response(dict)``; no ScriptedModel request checking (that deep-copies every request)."""

    api = "openai-responses"

    def __init__(self, n: int, par: int, *, wire: bool = True) -> None:
        from callbound.adapters import get as get_adapter

        self._adapter = get_adapter(self.api)
        self.n = n
        self.par = par
        self.wire = wire
        self.wire_s = 0.0
        self.wire_bytes = 0
        self.requests = 0

    @property
    def adapter(self) -> Any:
        return self._adapter

    async def complete(
        self, body: dict[str, Any], *, stream: bool, meta: Any, on_progress: Any = None
    ) -> Any:
        if self.wire:
            t0 = time.perf_counter()
            text = json.dumps(body)
            size = len(text)
            del text  # freeing a large string is wire work too (at 1,000 turns it is megabytes)
            self.wire_s += time.perf_counter() - t0
            self.wire_bytes += size
        self.requests += 1
        return self._adapter.parse_response(responses_body(meta.index, self.n, self.par))


def callbound_registry(*, async_handler: bool = False, risk: str = "read") -> Any:
    from pydantic import BaseModel

    import callbound as cb

    class GetOrder(BaseModel):
        order_id: str

    if async_handler:

        async def get_order(args: GetOrder, ctx: cb.CallContext) -> dict[str, Any]:
            return get_order_result(args.order_id)

    else:

        def get_order(args: GetOrder, ctx: cb.CallContext) -> dict[str, Any]:  # type: ignore[misc]
            return get_order_result(args.order_id)

    return cb.Registry(
        [
            cb.ToolSpec(
                name="get_order",
                description="Look up an order",
                params=GetOrder,
                handler=get_order,
                schema_version="get-order-v1",
                risk=risk,  # type: ignore[arg-type]
                timeout_ms=5_000,
            )
        ]
    )


def callbound_budgets(n: int, par: int) -> Any:
    import callbound as cb

    return cb.Budgets(
        max_model_turns=n + 5,
        max_tool_calls=n * par + 5,
        deadline_s=3600.0,
        max_no_progress_turns=n + 5,
        max_parallel=max(4, par),
    )


def build_callbound(
    n: int,
    par: int,
    *,
    continuation: str | None = None,
    async_handler: bool = False,
    store_factory: Callable[[], Any] | None = None,
    on_store: Callable[[Any], None] | None = None,
    wire: bool = True,
    close_store: bool = True,
) -> RunOnce:
    import callbound as cb
    from callbound.runtime.tools import ToolExecutor
    from callbound.stores.memory import MemoryStore

    registry = callbound_registry(async_handler=async_handler)
    budgets = callbound_budgets(n, par)
    executor = ToolExecutor()
    settings = {"continuation": continuation} if continuation else None
    factory = store_factory or MemoryStore

    def run_once() -> tuple[float, float]:
        model = FakeResponsesClient(n, par, wire=wire)
        store = factory()
        if on_store is not None:
            on_store(store)
        runner = cb.Runner(
            model=model, registry=registry, budgets=budgets, store=store, settings=settings, executor=executor
        )
        t0 = time.perf_counter()
        outcome = runner.run_sync("Where are my orders?", tenant="acme", subject="user-1")
        elapsed = time.perf_counter() - t0
        if outcome.state.value != "COMPLETED" or model.requests != n + 1:
            raise RuntimeError(
                f"callbound ended {outcome.state.value} {outcome.reason} after {model.requests}"
            )
        close = getattr(store, "close", None) if close_store else None
        if close is not None:
            close()
        return elapsed, model.wire_s

    return run_once


# ---- hand-written dict loops ----------------------------------------------------------------------


class FakeDictModel:
    async def complete(self, body: dict[str, Any], k: int, n: int, par: int) -> dict[str, Any]:
        return responses_body(k, n, par)


TOOLS_DECL = [
    {
        "type": "function",
        "name": "get_order",
        "description": "Look up an order",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
        "strict": True,
    }
]


def build_dict_loop(n: int, par: int, *, sha256: bool = False) -> RunOnce:
    """The least a hand-written loop does: parse arguments, dispatch by name, append the output.
    With ``sha256``: also SHA-256 of the canonical JSON (sorted keys) of each call and its result."""

    def get_order(order_id: str) -> dict[str, Any]:
        return get_order_result(order_id)

    tools: dict[str, Callable[..., Any]] = {"get_order": get_order}
    model = FakeDictModel()

    async def loop() -> list[str]:
        items: list[dict[str, Any]] = [{"role": "user", "content": "Where are my orders?"}]
        digests: list[str] = []
        k = 0
        while True:
            resp = await model.complete({"input": items, "tools": TOOLS_DECL}, k, n, par)
            k += 1
            output = resp["output"]
            calls = [o for o in output if o.get("type") == "function_call"]
            if not calls:
                return digests
            items.extend(output)
            for c in calls:
                args = json.loads(c["arguments"])
                result = tools[c["name"]](**args)
                if sha256:
                    record = {"call_id": c["call_id"], "name": c["name"], "arguments": args, "result": result}
                    canon = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                    digests.append(hashlib.sha256(canon.encode()).hexdigest())
                items.append(
                    {"type": "function_call_output", "call_id": c["call_id"], "output": json.dumps(result)}
                )

    def run_once() -> tuple[float, float]:
        t0 = time.perf_counter()
        asyncio.run(loop())
        return time.perf_counter() - t0, 0.0

    return run_once


# ---- LangGraph: StateGraph + ToolNode with a fake chat model --------------------------------------


def build_langgraph(n: int, par: int, *, checkpointer_factory: Callable[[], Any] | None = None) -> RunOnce:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    @tool
    def get_order(order_id: str) -> dict[str, Any]:
        """Look up an order"""
        return get_order_result(order_id)

    class FakeChat(BaseChatModel):
        k: int = 0

        @property
        def _llm_type(self) -> str:
            return "fake"

        def _generate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            k = self.k
            self.k += 1
            if k < n:
                msg = AIMessage(
                    content="",
                    tool_calls=[
                        {"name": "get_order", "args": {"order_id": order_id(k, j)}, "id": f"call_{k}_{j}"}
                        for j in range(par)
                    ],
                )
            else:
                msg = AIMessage(content="All orders shipped.")
            return ChatResult(generations=[ChatGeneration(message=msg)])

    model = FakeChat()

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([get_order]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    counter = {"run": 0}

    def run_once() -> tuple[float, float]:
        model.k = 0
        saver = checkpointer_factory() if checkpointer_factory else None
        app = g.compile(checkpointer=saver) if saver is not None else g.compile()
        counter["run"] += 1
        config: dict[str, Any] = {"recursion_limit": 2 * n + 10}
        if saver is not None:
            config["configurable"] = {"thread_id": f"t{counter['run']}"}
        t0 = time.perf_counter()
        out = app.invoke({"messages": [("user", "Where are my orders?")]}, config)
        elapsed = time.perf_counter() - t0
        if out["messages"][-1].content != "All orders shipped." or model.k != n + 1:
            raise RuntimeError("langgraph run did not finish as scripted")
        conn = getattr(saver, "conn", None)
        if conn is not None:
            conn.close()
        return elapsed, 0.0

    return run_once


# ---- Pydantic AI: FunctionModel --------------------------------------------------------------------


def build_pydantic_ai(n: int, par: int) -> RunOnce:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    state = {"k": 0}

    def fn(messages: Any, info: AgentInfo) -> ModelResponse:
        k = state["k"]
        state["k"] += 1
        if k < n:
            return ModelResponse(
                parts=[
                    ToolCallPart("get_order", {"order_id": order_id(k, j)}, tool_call_id=f"call_{k}_{j}")
                    for j in range(par)
                ]
            )
        return ModelResponse(parts=[TextPart("All orders shipped.")])

    agent = Agent(FunctionModel(fn))

    @agent.tool_plain
    def get_order(order_id: str) -> dict[str, Any]:
        """Look up an order"""
        return get_order_result(order_id)

    limits = UsageLimits(request_limit=n + 5, tool_calls_limit=None)

    def run_once() -> tuple[float, float]:
        state["k"] = 0
        t0 = time.perf_counter()
        result = agent.run_sync("Where are my orders?", usage_limits=limits)
        elapsed = time.perf_counter() - t0
        if result.output != "All orders shipped." or state["k"] != n + 1:
            raise RuntimeError("pydantic-ai run did not finish as scripted")
        return elapsed, 0.0

    return run_once


# ---- OpenAI Agents SDK: a Model subclass ----------------------------------------------------------


def build_agents(n: int, par: int, *, session_factory: Callable[[], Any] | None = None) -> RunOnce:
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)  # no exporter: nothing leaves the process, nothing to time

    class FakeModel(Model):
        def __init__(self) -> None:
            self.k = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            k = self.k
            self.k += 1
            out: list[Any]
            if k < n:
                out = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        id=f"fc_{k}_{j}",
                        call_id=f"call_{k}_{j}",
                        name="get_order",
                        arguments=f'{{"order_id":"{order_id(k, j)}"}}',
                        status="completed",
                    )
                    for j in range(par)
                ]
            else:
                out = [
                    ResponseOutputMessage(
                        type="message",
                        id=f"msg_{k}",
                        role="assistant",
                        status="completed",
                        content=[
                            ResponseOutputText(type="output_text", text="All orders shipped.", annotations=[])
                        ],
                    )
                ]
            return ModelResponse(output=out, usage=Usage(), response_id=f"resp_{k}")

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def get_order(order_id: str) -> dict[str, Any]:
        """Look up an order"""
        return get_order_result(order_id)

    def run_once() -> tuple[float, float]:
        model = FakeModel()
        agent = Agent(name="orders", model=model, tools=[get_order])
        session = session_factory() if session_factory else None
        t0 = time.perf_counter()
        result = Runner.run_sync(agent, "Where are my orders?", max_turns=n + 5, session=session)
        elapsed = time.perf_counter() - t0
        if result.final_output != "All orders shipped." or model.k != n + 1:
            raise RuntimeError("agents run did not finish as scripted")
        close = getattr(session, "close", None)
        if close is not None:
            close()
        return elapsed, 0.0

    return run_once


IMPLS = {
    "callbound": lambda n, par: build_callbound(n, par),
    "callbound-prev-id": lambda n, par: build_callbound(n, par, continuation="previous_response_id"),
    "callbound-async-handler": lambda n, par: build_callbound(n, par, async_handler=True),
    "dict": lambda n, par: build_dict_loop(n, par),
    "dict-sha256": lambda n, par: build_dict_loop(n, par, sha256=True),
    "langgraph": build_langgraph,
    "pydantic-ai": build_pydantic_ai,
    "agents": build_agents,
}

# callbound's loops without the request's json.dumps: its own work alone. Subtracting the time inside
# json.dumps from a run with the wire step is not enough: in stateless replay that step writes megabytes
# per request at 1,000 turns, and what it does to caches and the allocator lands in the work after it.
IMPLS_NO_WIRE = {
    "callbound": lambda n, par: build_callbound(n, par, wire=False),
    "callbound-prev-id": lambda n, par: build_callbound(
        n, par, continuation="previous_response_id", wire=False
    ),
    "callbound-async-handler": lambda n, par: build_callbound(n, par, async_handler=True, wire=False),
}

# module each impl needs, checked before spawning a worker
REQUIRES = {
    "langgraph": "langgraph",
    "pydantic-ai": "pydantic_ai",
    "agents": "agents",
}

IMPORT_CODE = {
    "callbound": "import callbound",
    "dict": "import asyncio, json, hashlib",
    "langgraph": "from langgraph.graph import StateGraph; from langgraph.prebuilt import ToolNode; "
    "from langchain_core.language_models.chat_models import BaseChatModel",
    "pydantic-ai": "from pydantic_ai import Agent; from pydantic_ai.models.function import FunctionModel",
    "agents": "import agents",
}


# ---- where callbound's own time goes ----------------------------------------------------------------

# (label, module, attribute, is_async): the runtime's steps of one round trip, timed by wrapping them.
PHASES = (
    (
        "parse the response (adapter)",
        "callbound.adapters.openai_responses",
        "OpenAIResponsesAdapter.parse_response",
        False,
    ),
    ("validate + plan the calls (pydantic, dispatch)", "callbound.runtime.requesting", "plan", False),
    ("run the handler (async, with timeout)", "callbound.runtime.tools", "ToolExecutor.run", True),
    ("seal the result envelope (binding)", "callbound.runtime.execute", "seal", False),
    ("verify bindings from trusted context", "callbound.runtime.results", "verify_results_hashed", False),
    ("4 journaled, audited transitions", "callbound.runtime.operation", "Operation.move", False),
    ("2 commits: head row + audit link", "callbound.runtime.operation", "Operation.take_commit", False),
    (
        "build the next request (adapter)",
        "callbound.adapters.openai_responses",
        "OpenAIResponsesAdapter.build_request",
        False,
    ),
    (
        "turn + result items for the transcript (adapter)",
        "callbound.adapters.openai_responses",
        "OpenAIResponsesAdapter.result_items",
        False,
    ),
)


def phase_breakdown(n: int) -> dict[str, Any]:
    """µs per round trip in each step of callbound's loop (async handler, no wire json.dumps, GC off so
    collections are not charged to whichever step triggers them), and Python function calls per round
    trip (cProfile, a separate run). Wrapping costs about a microsecond per wrapped call, so the steps
    add up to a little more than an unwrapped run."""
    import cProfile
    import gc
    import importlib
    import pstats

    acc: dict[str, float] = {}

    def wrap(label: str, module: str, path: str, is_async: bool) -> None:
        owner: Any = importlib.import_module(module)
        *parents, name = path.split(".")
        for p in parents:
            owner = getattr(owner, p)
        fn = getattr(owner, name)
        acc[label] = 0.0
        if is_async:

            async def awrapped(*a: Any, **k: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return await fn(*a, **k)
                finally:
                    acc[label] += time.perf_counter() - t0

            setattr(owner, name, awrapped)
        else:

            def wrapped(*a: Any, **k: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return fn(*a, **k)
                finally:
                    acc[label] += time.perf_counter() - t0

            setattr(owner, name, wrapped)

    run_plain = build_callbound(n, 1, async_handler=True, wire=False)
    run_plain()
    pr = cProfile.Profile()
    pr.enable()
    run_plain()
    pr.disable()
    calls = sum(nc for (_, nc, _, _, _) in pstats.Stats(pr).stats.values())  # type: ignore[attr-defined]
    gc.disable()
    try:
        plain = min(run_plain()[0] for _ in range(3))
        for phase in PHASES:
            wrap(*phase)
        run = build_callbound(n, 1, async_handler=True, wire=False)
        run()
        best: dict[str, float] | None = None
        total = math.inf
        for _ in range(3):
            for k in acc:
                acc[k] = 0.0
            elapsed = run()[0]
            if elapsed < total:
                total, best = elapsed, dict(acc)
    finally:
        gc.enable()
    assert best is not None
    return {
        "phases_us": {k: v / n * 1e6 for k, v in best.items()},
        "wrapped_total_us": total / n * 1e6,
        "plain_total_us": plain / n * 1e6,
        "calls_per_rt": calls / n,
    }
