"""Review 14: OpenAI Responses namespaced and program-called function calls; Gemini Interactions
streamed thought summaries.

1. A ``{"type": "namespace"}`` group in ``settings["extra"]["tools"]`` whose function takes a registry
   tool's name is a ``UsageError`` when the Runner is built, as the same function at top level is; a
   ``function_call`` whose ``namespace`` differs from its ``name`` (a function of an app's namespace
   group) is a call callbound cannot answer: API_FAILURE(unexpected_tool_call), none of the turn's
   calls runs, plain or streamed. ``namespace == name`` (a deferred top-level function loaded by
   tool_search) still runs.
2. A ``function_call`` made by a program (``caller.type: "program"``, status ``in_progress`` in a
   completed response) is API_FAILURE(unexpected_tool_call), not TRUNCATED(call_incomplete).
3. An Interactions stream's consecutive ``thought_summary`` text deltas are one summary item, joined as
   text deltas are: a character outside the BMP split into its escaped surrogate halves across two
   deltas is whole again in the continuation, and the next request can be encoded.

Every body is a small synthetic one written for the test; the comment above each test names the
recording, SDK type or documentation whose shape it mirrors.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

import callbound as cb
from callbound.adapters import get
from callbound.core.errors import UsageError
from callbound.core.machine import classify_turn
from callbound.core.types import Finish, ModelTurn
from callbound.testing import FakeClock, ScriptedModel, Stream
from tests.adapters.streaming import fed

RESP = get("openai-responses")
INTER = get("gemini-interactions")


class Amount(BaseModel):
    model_config = ConfigDict(extra="forbid")
    amount: int


def registry(ran: list[int]) -> cb.Registry:
    def transfer(args: Amount, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.amount)
        return {"moved": args.amount}

    spec = cb.ToolSpec(
        name="transfer", description="Move real money", params=Amount, handler=transfer, schema_version="1"
    )
    return cb.Registry([spec])


def function(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "name": name,
        "description": "Simulate a transfer",
        "parameters": {
            "type": "object",
            "properties": {"amount": {"type": "integer"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
        "strict": True,
    }


# openai-python types/responses/namespace_tool.py: {type: "namespace", name, description, tools: [...]}
def namespace(*tools: dict[str, Any], name: str = "sandbox") -> dict[str, Any]:
    return {"type": "namespace", "name": name, "description": "Dry-run tools", "tools": list(tools)}


def call(**extra: Any) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "transfer",
        "arguments": '{"amount": 500}',
        "status": "completed",
        **extra,
    }


def response(rid: str, *output: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "response",
        "status": "completed",
        "model": "gpt-test",
        "output": list(output),
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    }


FINAL = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
}


def runner(script: list[Any], ran: list[int], **settings: Any) -> cb.Runner:
    model = ScriptedModel("openai-responses", script)
    return cb.Runner(model=model, registry=registry(ran), clock=FakeClock(), settings=settings)


def assert_unexpected(turn: ModelTurn, code: str) -> None:
    assert (turn.finish, turn.reason, turn.raw_stop_reason) == (
        Finish.API_FAILURE,
        "unexpected_tool_call",
        "completed",
    )
    assert turn.failure is not None and not turn.failure.retryable
    assert turn.failure.error_code == code
    assert not turn.executable
    verdict = classify_turn(turn)
    assert (verdict.target.value, verdict.reason) == ("FAILED", "UNEXPECTED_TOOL_CALL")


# ----------------------------------------------------------------------- 1a: the clash check at build


@pytest.mark.parametrize(
    "group",
    [
        namespace(function("transfer")),
        namespace(function("simulate"), {"type": "custom", "name": "transfer"}),
    ],
    ids=["function", "custom-beside-another"],
)
def test_a_namespace_group_holding_a_registry_tool_name_is_a_usage_error(group: dict[str, Any]) -> None:
    with pytest.raises(UsageError, match="transfer"):
        runner([], [], extra={"tools": [group]})


def test_a_namespace_group_with_other_names_is_added_after_the_registry_tools() -> None:
    group = namespace(function("simulate"))
    body = RESP.build_request(
        items=[], tools=[function("transfer")], settings={"extra": {"tools": [group]}}, instructions=None,
        stream=False,
    )  # fmt: skip
    assert [t["name"] for t in body["tools"]] == ["transfer", "sandbox"]


# ------------------------------------------------------------------- 1b: a namespaced call never runs


def test_a_namespaced_call_is_an_unexpected_tool_call() -> None:
    # the repro's shape: the model calls sandbox.transfer (openai-python ResponseFunctionToolCall.namespace)
    assert_unexpected(
        RESP.parse_response(response("resp_1", call(namespace="sandbox"))), "namespaced_function_call"
    )


def test_a_namespaced_call_beside_a_registry_call_runs_neither() -> None:
    both = response("resp_1", call(), call(id="fc_2", call_id="call_2", namespace="sandbox"))
    assert_unexpected(RESP.parse_response(both), "namespaced_function_call")


def test_a_namespaced_call_does_not_run_the_registry_tool_of_its_name() -> None:
    # an app that declares its namespace group under another name than any registry tool (accepted),
    # and a model that calls sandbox.transfer anyway: the registry's transfer must not run
    ran: list[int] = []
    run = runner(
        [response("resp_1", call(namespace="sandbox")), response("resp_2", FINAL)],
        ran,
        extra={"tools": [namespace(function("simulate"))]},
    )
    out = run.run_sync(input="Simulate sending 500", tenant="t", subject="s")
    assert (out.state.value, out.reason, ran) == ("FAILED", "UNEXPECTED_TOOL_CALL", [])


def test_a_namespaced_call_in_a_stream_is_an_unexpected_tool_call() -> None:
    item = call(namespace="sandbox")
    raw = responses_sse(
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**item, "arguments": "", "status": "in_progress"}},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0,
         "delta": item["arguments"]},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": response("resp_1", item)},
    )  # fmt: skip
    turn, _ = fed(RESP, raw)
    assert_unexpected(turn, "namespaced_function_call")


@pytest.mark.parametrize("value", ["transfer", "", None], ids=["same-as-name", "empty", "null"])
def test_a_deferred_top_level_call_still_runs(value: str | None) -> None:
    # vercel/ai packages/openai/src/responses/__fixtures__/openai-tool-search.1.json: a function that
    # tool_search loaded comes back with "namespace" equal to its name; an empty or null namespace names
    # none (openai-agents-python get_function_tool_lookup_key reads them as a bare name)
    item = call(namespace=value)
    ran: list[int] = []
    run = runner([response("resp_1", item), response("resp_2", FINAL)], ran)
    out = run.run_sync(input="Send 500", tenant="t", subject="s")
    assert (out.state.value, ran) == ("COMPLETED", [500])


# ------------------------------------------------------------------------ 2: a program-called call


# vercel/ai packages/openai/src/responses/__fixtures__/programmatic-tool-calling.1.json (shape only):
# a completed response whose function_call, made by a program item's code, waits in_progress
PROGRAM = {"type": "program", "id": "cm_1", "call_id": "call_prog", "code": "await tools.getInventory({})"}
PROGRAM_CALL = {
    "type": "function_call",
    "id": "fc_p",
    "call_id": "call_p",
    "name": "getInventory",
    "arguments": '{"sku":"sku_1"}',
    "status": "in_progress",
    "caller": {"type": "program", "caller_id": "call_prog"},
}


def test_a_program_called_function_call_is_an_unexpected_tool_call() -> None:
    turn = RESP.parse_response(response("resp_p", PROGRAM, PROGRAM_CALL))
    assert_unexpected(turn, "programmatic_function_call")


def test_a_direct_caller_is_read_as_before() -> None:
    # openai-python ResponseFunctionToolCall.caller: {type: "direct"} for a call the model made itself
    turn = RESP.parse_response(response("resp_d", call(caller={"type": "direct"})))
    assert turn.finish is Finish.TOOL_PROPOSALS


# -------------------------------------------------- 3: Interactions streamed thought summary deltas


def interactions_sse(*events: dict[str, Any] | str) -> bytes:
    return b"".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events)


def responses_sse(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def summary_delta(index: int, content: dict[str, Any]) -> dict[str, Any]:
    return {
        "index": index,
        "delta": {"type": "thought_summary", "content": content},
        "event_type": "step.delta",
    }


CREATED = {"interaction": {"id": "v1_X", "status": "in_progress"}, "event_type": "interaction.created"}
CALL_STEPS = [
    {"index": 1, "step": {"id": "c1", "type": "function_call", "name": "f", "arguments": {}},
     "event_type": "step.start"},
    {"index": 1, "delta": {"arguments": '{"a":"x"}', "type": "arguments_delta"}, "event_type": "step.delta"},
    {"index": 1, "event_type": "step.stop"},
    {"interaction": {"id": "v1_X", "status": "requires_action"}, "event_type": "interaction.completed"},
]  # fmt: skip


def thought_stream(*deltas: dict[str, Any] | str) -> bytes:
    # the Interactions steps schema (WIRE.md 5.6): a thought step, its summary deltas, its signature
    return interactions_sse(
        CREATED,
        {"index": 0, "step": {"type": "thought"}, "event_type": "step.start"},
        *deltas,
        {"index": 0, "delta": {"signature": "c2ln", "type": "thought_signature"}, "event_type": "step.delta"},
        {"index": 0, "event_type": "step.stop"},
        *CALL_STEPS,
    )


# the repro's shape: one emoji (U+1F600) escaped as two surrogate halves, one in each of two deltas
SPLIT = [
    '{"index":0,"delta":{"type":"thought_summary","content":{"type":"text","text":"Plan \\ud83d"}},'
    '"event_type":"step.delta"}',
    '{"index":0,"delta":{"type":"thought_summary","content":{"type":"text","text":"\\ude00 go"}},'
    '"event_type":"step.delta"}',
]


def test_summary_text_deltas_are_one_item_with_the_split_character_whole() -> None:
    turn, _ = fed(INTER, thought_stream(*SPLIT))
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert turn.continuation[0] == {
        "type": "thought",
        "summary": [{"type": "text", "text": "Plan \U0001f600 go"}],
        "signature": "c2ln",
    }
    json.dumps(list(turn.continuation), ensure_ascii=False).encode()  # encodable: no lone surrogate


def test_an_image_in_the_summary_ends_a_run_of_text() -> None:
    image = {"type": "image", "mime_type": "image/png", "data": "iVBO"}
    turn, _ = fed(
        INTER,
        thought_stream(
            summary_delta(0, {"type": "text", "text": "a"}),
            summary_delta(0, {"type": "text", "text": "b"}),
            summary_delta(0, image),
            summary_delta(0, {"type": "text", "text": "c"}),
            summary_delta(0, {"type": "text", "text": "d"}),
        ),
    )
    assert turn.continuation[0]["summary"] == [
        {"type": "text", "text": "ab"},
        image,
        {"type": "text", "text": "cd"},
    ]


def test_a_split_summary_character_is_replayed_and_the_run_completes() -> None:
    ran: list[str] = []

    class A(BaseModel):
        a: str

    def handler(args: A, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.a)
        return {"ok": 1}

    spec = cb.ToolSpec(name="f", description="f", params=A, handler=handler, schema_version="1")
    final = interactions_sse(
        {"interaction": {"id": "v1_Y", "status": "in_progress"}, "event_type": "interaction.created"},
        {"index": 0, "step": {"type": "model_output"}, "event_type": "step.start"},
        {"index": 0, "delta": {"text": "done", "type": "text"}, "event_type": "step.delta"},
        {"index": 0, "event_type": "step.stop"},
        {"interaction": {"id": "v1_Y", "status": "completed"}, "event_type": "interaction.completed"},
    )
    model = ScriptedModel("gemini-interactions", [Stream(thought_stream(*SPLIT)), Stream(final)])
    run = cb.Runner(model=model, registry=cb.Registry([spec]), clock=FakeClock(), settings={"stream": True})
    out = run.run_sync(input="hi", tenant="t", subject="s")
    assert (out.state.value, out.text, ran) == ("COMPLETED", "done", ["x"])
    replayed = json.dumps(model.requests[1], ensure_ascii=False).encode()  # what a transport sends
    assert "Plan \U0001f600 go".encode() in replayed
