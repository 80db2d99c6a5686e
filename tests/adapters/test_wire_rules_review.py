"""Review of the wire rules of issue 3 and the decisions it cites, where no other test pins them.

Each test names the rule it holds the code to. Tests that fail on the current code are marked
``xfail(strict=True)`` with the reason; the review report gives the fix.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

import callbound as cb
from callbound.adapters import API_NAMES, get
from callbound.adapters.stream import StreamFeed
from callbound.cli.app import app
from callbound.core.types import ArgumentsProgress, CallReady, CallStarted, Finish, Progress, RawFailure
from callbound.testing import FakeClock, ScriptedModel
from tests.docs.stop_reason_bodies import BUILDERS

APIS = list(API_NAMES)


def sse(payloads: list[Any]) -> bytes:
    return "".join(f"data: {p if isinstance(p, str) else json.dumps(p)}\n\n" for p in payloads).encode()


def fed(api: str, raw: bytes) -> tuple[Any, list[Progress]]:
    progress: list[Progress] = []
    feed = StreamFeed(get(api).stream_assembler(), progress.append)
    feed.feed(raw)
    feed.close()
    return feed.finish(), progress


# ---- minimal streams per API: one text answer without ids or usage, one call -----------------------


def text_stream(api: str) -> list[Any]:
    """A complete text answer with no response id and no usage anywhere."""
    if api == "openai-responses":
        msg = {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "hi", "annotations": []}],
        }
        return [
            {"type": "response.output_item.added", "output_index": 0, "item": {**msg, "content": []}},
            {"type": "response.output_item.done", "output_index": 0, "item": msg},
            {
                "type": "response.completed",
                "response": {"status": "completed", "output": [msg], "usage": None},
            },
        ]
    if api == "openai-chat":
        return [
            {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}}]},
            {
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            },
            "[DONE]",
        ]
    if api == "anthropic-messages":
        return [
            {"type": "message_start", "message": {"type": "message", "role": "assistant", "content": []}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
            {"type": "message_stop"},
        ]
    if api == "gemini-generate":
        return [
            {
                "candidates": [
                    {"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}
                ]
            }
        ]
    return [
        {"event_type": "interaction.created", "interaction": {"id": "", "status": "in_progress"}},
        {"event_type": "step.start", "index": 0, "step": {"type": "model_output", "content": []}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "text", "text": "hi"}},
        {"event_type": "step.stop", "index": 0},
        {"event_type": "interaction.completed", "interaction": {"status": "completed"}},
    ]


def call_events(api: str) -> tuple[list[Any], list[Any], list[Any]]:
    """(events up to and including the call's own done event, the terminal events, an error event)."""
    args = '{"order_id":"A1"}'
    if api == "openai-responses":
        item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_order"}
        body = [
            {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
            {"type": "response.output_item.added", "output_index": 0, "item": {**item, "arguments": ""}},
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_1",
                "output_index": 0,
                "delta": args,
            },
            {
                "type": "response.function_call_arguments.done",
                "item_id": "fc_1",
                "output_index": 0,
                "arguments": args,
            },
            {"type": "response.output_item.done", "output_index": 0, "item": {**item, "arguments": args}},
        ]
        done = {**item, "arguments": args, "status": "completed"}
        terminal = [
            {
                "type": "response.completed",
                "response": {"id": "resp_1", "status": "completed", "output": [done]},
            }
        ]
        error = [{"type": "error", "code": "server_error", "message": "boom", "param": None}]
        return body, terminal, error
    if api == "openai-chat":
        chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk"}
        first = {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_order", "arguments": ""},
        }
        body = [
            {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [first]}}]},
            {
                **chunk,
                "choices": [
                    {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": args}}]}}
                ],
            },
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ]
        return (
            body,
            ["[DONE]"],
            [{"error": {"type": "server_error", "code": "server_error", "message": "boom"}}],
        )
    if api == "anthropic-messages":
        start = {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {}}
        body = [
            {
                "type": "message_start",
                "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": []},
            },
            {"type": "content_block_start", "index": 0, "content_block": start},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": args},
            },
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
        ]
        error = [{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]
        return body, [{"type": "message_stop"}], error
    if api == "gemini-generate":
        call = {"functionCall": {"id": "g1", "name": "get_order", "args": {"order_id": "A1"}}}
        body = [{"responseId": "r1", "candidates": [{"content": {"role": "model", "parts": [call]}}]}]
        terminal = [
            {
                "responseId": "r1",
                "candidates": [
                    {"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}
                ],
            }
        ]
        error = [{"error": {"code": 503, "message": "unavailable", "status": "UNAVAILABLE"}}]
        return body, terminal, error
    body = [
        {"event_type": "interaction.created", "interaction": {"id": "v1_1", "status": "in_progress"}},
        {
            "event_type": "step.start",
            "index": 0,
            "step": {"type": "function_call", "id": "c1", "name": "get_order", "arguments": {}},
        },
        {"event_type": "step.delta", "index": 0, "delta": {"type": "arguments_delta", "arguments": args}},
        {"event_type": "step.stop", "index": 0},
    ]
    terminal = [
        {"event_type": "interaction.completed", "interaction": {"id": "v1_1", "status": "requires_action"}}
    ]
    error = [{"event_type": "error", "error": {"code": "unavailable", "message": "boom"}}]
    return body, terminal, error


@pytest.mark.parametrize("api", APIS)
def test_the_minimal_call_stream_is_a_tool_proposal(api: str) -> None:
    """Sanity for the streams below: with its terminal event the call is proposed."""
    body, terminal, _ = call_events(api)
    turn, _ = fed(api, sse(body + terminal))
    assert turn.finish is Finish.TOOL_PROPOSALS, (turn.reason, turn.failure)
    assert [c.arguments for c in turn.calls] == [{"order_id": "A1"}]


# ---- D1 / issue 3 §4: an error event after HTTP 200 is API_FAILURE, whatever follows it -----------------


def _error_then_terminal(api: str) -> Any:
    body, terminal, error = call_events(api)
    turn, _ = fed(api, sse(body + error + terminal))
    return turn


@pytest.mark.parametrize("api", APIS)
def test_an_error_event_fails_the_turn_even_when_a_terminal_event_follows(api: str) -> None:
    turn = _error_then_terminal(api)
    assert turn.finish is Finish.API_FAILURE
    assert turn.failure is not None and turn.failure.kind == "error_event"


# ---- issue 3 §4 / D26: a call complete but without the stream's terminal event never runs ---------------


@pytest.mark.parametrize("api", APIS)
def test_a_completed_call_without_the_terminal_event_is_a_retryable_cut(api: str) -> None:
    body, _, _ = call_events(api)
    turn, progress = fed(api, sse(body))
    assert turn.finish is Finish.TRUNCATED and turn.reason == "stream_interrupted"
    assert turn.calls == () and turn.failure is not None and turn.failure.retryable
    # Progress may say the call is ready; nothing may claim it ran (issue 3 §4).
    assert {type(p) for p in progress} <= {CallStarted, ArgumentsProgress, CallReady}


# ---- issue 3 §4: progress order per call ----------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_progress_is_started_then_bytes_then_ready_for_every_api(api: str) -> None:
    body, terminal, _ = call_events(api)
    _, progress = fed(api, sse(body + terminal))
    kinds = [type(p) for p in progress]
    assert kinds[0] is CallStarted and kinds[-1] is CallReady, progress
    assert kinds.count(CallStarted) == 1 and kinds.count(CallReady) == 1
    sizes = [p.bytes for p in progress if isinstance(p, ArgumentsProgress)]
    assert sizes and sizes == sorted(sizes) and sizes[-1] == len('{"order_id":"A1"}')
    assert len({p.call_id for p in progress}) == 1


# ---- D27: usage missing → null, never 0, streamed as well as plain --------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_a_stream_without_usage_reports_null_usage(api: str) -> None:
    turn, _ = fed(api, sse(text_stream(api)))
    assert turn.finish is Finish.FINAL_TEXT, (turn.reason, turn.failure)
    assert turn.text == "hi"
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (None, None)


# ---- D7: a missing response id is cb: + 16 hex of the SHA-256 of the whole stream's bytes ---------------


@pytest.mark.parametrize("api", APIS)
def test_a_stream_without_response_id_gets_the_digest_of_all_its_bytes(api: str) -> None:
    raw = sse(text_stream(api))
    turn, _ = fed(api, raw)
    assert turn.response_id == "cb:" + hashlib.sha256(raw).hexdigest()[:16]
    assert turn.raw_sha256 == hashlib.sha256(raw).hexdigest()


# ---- D26 / D32: HTTP status classification and raw stop reason on every API -----------------------------

RETRYABLE = [408, 409, 429, 500, 502, 503, 504, 529]
FATAL = [400, 401, 403, 404, 413, 422]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("status", RETRYABLE + FATAL)
def test_http_status_classification_on_every_api(api: str, status: int) -> None:
    turn = get(api).map_error(RawFailure("http", status, b"", {}))
    assert turn.finish is Finish.API_FAILURE
    assert turn.calls == ()
    assert turn.raw_stop_reason == str(status)
    assert turn.failure is not None and turn.failure.status == status
    assert turn.failure.retryable is (status in RETRYABLE)


@pytest.mark.parametrize("api", APIS)
def test_retry_after_is_carried_on_every_api(api: str) -> None:
    turn = get(api).map_error(RawFailure("http", 503, b"", {"Retry-After": "12"}))
    assert turn.failure is not None and turn.failure.retry_after_s == 12.0


# ---- D8 / WIRE 1.5, 5.5: server-side continuation resends tools and instructions, only new items ------


@pytest.mark.parametrize(
    ("api", "key"),
    [("openai-responses", "previous_response_id"), ("gemini-interactions", "previous_interaction_id")],
)
def test_server_side_continuation_resends_tools_and_instructions(api: str, key: str) -> None:
    adapter = get(api)
    new = [{"type": "function_call_output", "call_id": "c1", "output": "{}"}]
    body = adapter.build_request(
        items=[{"role": "user", "content": "old"}, *new],
        tools=[{"type": "function", "name": "t"}],
        settings={"model": "m"},
        instructions="be brief",
        stream=False,
        previous_response_id="resp_or_v1_1",
        new_items=new,
    )
    assert body[key] == "resp_or_v1_1"
    assert body["input"] == new
    assert body["tools"] == [{"type": "function", "name": "t"}]
    assert "be brief" in (body.get("instructions"), body.get("system_instruction"))


class GetOrder(BaseModel):
    order_id: str


def _registry() -> cb.Registry:
    return cb.Registry(
        [
            cb.ToolSpec(
                name="get_order",
                description="Look up an order",
                params=GetOrder,
                handler=lambda a, c: {"order_id": a.order_id},
                schema_version="v1",
                risk="read",
                timeout_ms=1000,
            )
        ]
    )


CALL_CASE = {"openai-responses": "completed+calls", "gemini-interactions": "requires_action+calls"}
FINAL_CASE = {"openai-responses": "completed", "gemini-interactions": "completed"}


@pytest.mark.parametrize(
    ("api", "key"),
    [("openai-responses", "previous_response_id"), ("gemini-interactions", "previous_interaction_id")],
)
def test_runner_opt_in_chaining_sends_only_results_with_tools_and_instructions(api: str, key: str) -> None:
    """D8: stateless replay is the default; ``continuation: previous_response_id`` chains and sends only
    the results, still declaring the tools and the instructions (neither is inherited, WIRE 1.5/5.5)."""
    first = BUILDERS[api](CALL_CASE[api])
    model = ScriptedModel(api, [first, BUILDERS[api](FINAL_CASE[api])])
    runner = cb.Runner(
        model=model,
        registry=_registry(),
        clock=FakeClock(),
        instructions="be brief",
        settings={"model": "m-1", "continuation": "previous_response_id"},
    )
    outcome = runner.run_sync("where is A1?", tenant="t", subject="s")
    assert outcome.state == "COMPLETED", outcome
    second = model.requests[1]
    assert second[key] == first["id"]
    assert second["tools"] == model.requests[0]["tools"]
    assert "be brief" in (second.get("instructions"), second.get("system_instruction"))
    text = json.dumps(second["input"])
    assert "where is A1?" not in text, "only the new items go with a chained request"
    assert "A1" in text

    replay = ScriptedModel(api, [first, BUILDERS[api](FINAL_CASE[api])])
    cb.Runner(model=replay, registry=_registry(), clock=FakeClock(), settings={"model": "m-1"}).run_sync(
        "where is A1?", tenant="t", subject="s"
    )
    assert key not in replay.requests[1], "stateless replay is the default (D8)"
    assert "where is A1?" in json.dumps(replay.requests[1]["input"])


# ---- D9: a schema the provider cannot express fails when the registry is bound ---------------------------


class Node(BaseModel):
    name: str
    children: list[Node]


@pytest.mark.parametrize("api", APIS)
def test_unsupported_schema_is_raised_when_the_runner_is_built(api: str) -> None:
    registry = cb.Registry(
        [
            cb.ToolSpec(
                name="tree",
                description="A recursive schema",
                params=Node,
                handler=lambda a, c: {},
                schema_version="v1",
                risk="read",
                timeout_ms=1000,
            )
        ]
    )
    model = ScriptedModel(api, [])
    with pytest.raises(cb.UnsupportedSchema):
        cb.Runner(model=model, registry=registry, clock=FakeClock(), settings={"model": "m"})
    assert model.requests == []


# ---- issue 3 §5 / D28: `callbound parse` ------------------------------------------------------------------

ERROR_BODIES: dict[str, dict[str, Any]] = {
    "openai-responses": {
        "error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": "m"}
    },
    "openai-chat": {"error": {"type": "invalid_request_error", "code": "bad_value", "message": "m"}},
    "anthropic-messages": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    "gemini-generate": {"error": {"code": 429, "message": "m", "status": "RESOURCE_EXHAUSTED"}},
    "gemini-interactions": {"error": {"code": "not_found", "message": "m"}},
}
ERROR_RAW = {
    "openai-responses": "insufficient_quota",
    "openai-chat": "bad_value",
    "anthropic-messages": "overloaded_error",
    "gemini-generate": "RESOURCE_EXHAUSTED",
    "gemini-interactions": "not_found",
}


def cli(args: list[str], data: bytes = b"") -> Any:
    return CliRunner().invoke(app, ["parse", *args], input=data)


@pytest.mark.parametrize("api", APIS)
def test_parse_error_body_is_an_api_failure_turn_exit_0(api: str) -> None:
    r = cli(["--api", api, "-"], json.dumps(ERROR_BODIES[api]).encode())
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["finish"] == "API_FAILURE" and out["raw_stop_reason"] == ERROR_RAW[api]  # D32
    assert out["calls"] == []


@pytest.mark.parametrize("api", APIS)
def test_parse_cut_stream_is_a_truncated_turn_exit_0(api: str) -> None:
    body, _, _ = call_events(api)
    r = cli(["--api", api, "-"], sse(body))
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert (out["finish"], out["reason"], out["calls"]) == ("TRUNCATED", "stream_interrupted", [])


REFUSAL_CASE = {
    "openai-responses": "completed+refusal",
    "openai-chat": "content_filter",
    "anthropic-messages": "refusal",
    "gemini-generate": "SAFETY",
}  # Interactions has no refusal signal (WIRE.md section 0)


@pytest.mark.parametrize("api", list(REFUSAL_CASE))
def test_parse_refusal_exit_0(api: str) -> None:
    r = cli(["--api", api, "-"], json.dumps(BUILDERS[api](REFUSAL_CASE[api])).encode())
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["finish"] == "REFUSAL"


def test_parse_reads_a_file_argument(tmp_path: Path) -> None:
    path = tmp_path / "body.json"
    path.write_text(json.dumps(BUILDERS["openai-chat"]("tool_calls+calls")))
    r = cli(["--api", "openai-chat", str(path)])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["finish"] == "TOOL_PROPOSALS" and out["calls"][0]["arguments"] == {"order_id": "A1"}


def test_parse_missing_file_exits_2_with_one_line(tmp_path: Path) -> None:
    r = cli(["--api", "openai-chat", str(tmp_path / "nope.json")])
    assert r.exit_code == 2
    assert r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("data", [b"42", b"null", b'"text"', b"data: [1]\n\n"])
@pytest.mark.parametrize("api", ["openai-responses", "anthropic-messages", "gemini-interactions"])
def test_parse_json_that_is_no_turn_exits_2(api: str, data: bytes) -> None:
    r = cli(["--api", api, "-"], data)
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
