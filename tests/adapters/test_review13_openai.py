"""Review 13: OpenAI Chat Completions and Responses.

1. A Chat stream whose tool-call fragment carries ``function.arguments`` as a JSON object is read as
   the plain body reader reads it (D5: object arguments go through the same parser), and echoed as
   received (D8); two different objects for one call, or an object and argument text, are a conflict:
   no call of the turn runs.
2. A Responses ``output_item.done`` whose ``arguments`` are empty or missing does not override the
   arguments the terminal snapshot holds for the same item; object arguments on a done item are read;
   a done item and a snapshot that read differently fail closed.
3. A Chat stream that reuses ``index: 0`` for each parallel call (each with its own id and name) keeps
   the calls apart; so does one that sends whole calls with neither index nor id.
4. OpenRouter's HTTP-200 error (``finish_reason: "error"`` with an error object) is read from that
   error object in a plain body, as the same error streamed is.
5. ``settings["extra"]["tools"]`` is added after the registry's tools, never replacing them; a name
   the registry already uses, or a value that is not a list, is a ``UsageError``.

Every body is a small synthetic one written for the test; the comment above each test names the
recording, issue or documentation whose shape it mirrors.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

import callbound as cb
from callbound.adapters import get
from callbound.adapters.base import StreamCaps
from callbound.core.errors import UsageError
from callbound.core.machine import classify_turn
from callbound.core.types import CallReady, CallStarted, Finish, ModelTurn, ok_result
from callbound.testing import FakeClock, ScriptedModel, Stream
from tests.adapters.streaming import fed

CHAT = get("openai-chat")
RESP = get("openai-responses")
ARGS = {"pattern": "*.tmp"}


class DeleteFiles(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pattern: str = "*"  # a broad default: a call read with {} would delete everything


def run(api: str, first: Any, final: dict[str, Any]) -> tuple[cb.Outcome, list[dict[str, Any]], Any]:
    ran: list[dict[str, Any]] = []

    def handler(args: DeleteFiles, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.model_dump())
        return {"ok": True}

    spec = cb.ToolSpec(
        name="delete_files", description="d", params=DeleteFiles, handler=handler, schema_version="1"
    )
    model = ScriptedModel(api, [first, final])
    runner = cb.Runner(
        model=model, registry=cb.Registry([spec]), clock=FakeClock(), settings={"stream": True}
    )
    return runner.run_sync("go", tenant="t", subject="s"), ran, model.requests


# ---------------------------------------------------------------------------------------------- Chat


def sse(*events: dict[str, Any] | str, done: bool = True) -> bytes:
    out = "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events)
    return (out + ("data: [DONE]\n\n" if done else "")).encode()


def chunk(delta: dict[str, Any], finish: str | None = None, **top: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-7",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **top,
    }


def frag(index: int | None, cid: str | None, name: str | None, arguments: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    out: dict[str, Any] = {"type": "function", "function": function}
    if cid is not None:
        out["id"] = cid
    if index is not None:
        out["index"] = index
    return out


def calls(turn: ModelTurn) -> list[tuple[str, str, Any]]:
    return [(c.call_id, c.name, c.arguments) for c in turn.calls]


def chat_next_request_ok(turn: ModelTurn) -> dict[str, Any]:
    items = [{"role": "user", "content": "q"}, *CHAT.turn_items(turn)]
    items += CHAT.result_items(turn, [(c, ok_result({"n": i})) for i, c in enumerate(turn.calls)])
    body = CHAT.build_request(items=items, tools=[], settings={}, instructions=None, stream=False)
    CHAT.check_request(body, turn)
    return body


# LiteLLM's ollama_chat stream before BerriAI/litellm PR 37792 ("function.arguments arrived as a dict
# instead of a JSON string in streaming"): one whole call whose arguments are an object.
OBJECT_STREAM = sse(
    chunk({"role": "assistant", "content": None, "tool_calls": [frag(0, "call_a1", "delete_files", ARGS)]}),
    chunk({}, "tool_calls"),
)


def test_chat_stream_object_arguments_are_read_as_the_plain_body_reads_them() -> None:
    turn, progress = fed(CHAT, OBJECT_STREAM)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert calls(turn) == [("call_a1", "delete_files", ARGS)]
    sent = turn.continuation[0]["tool_calls"][0]
    assert sent["function"]["arguments"] == ARGS  # echoed as received, as a plain body's message is (D8)
    plain = CHAT.parse_response(
        {"id": "chatcmpl-7", "choices": [{"index": 0, "finish_reason": "tool_calls",
         "message": {"role": "assistant", "content": None, "tool_calls": [{k: v for k, v in sent.items()}]}}]}
    )  # fmt: skip
    assert calls(plain) == calls(turn)
    assert [type(p) for p in progress].count(CallReady) == 1
    chat_next_request_ok(turn)


def test_chat_stream_object_arguments_run_the_handler_with_them() -> None:
    final = {"id": "c2", "choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "ok"}}]}
    out, ran, requests = run("openai-chat", Stream(OBJECT_STREAM), final)
    assert (out.state.value, ran) == ("COMPLETED", [ARGS])
    assert requests[1]["messages"][1]["tool_calls"][0]["function"]["arguments"] == ARGS


def test_chat_stream_legacy_function_call_object_arguments_are_read() -> None:
    raw = sse(
        chunk({"function_call": {"name": "delete_files", "arguments": ARGS}}), chunk({}, "function_call")
    )
    turn, _ = fed(CHAT, raw)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [c.arguments for c in turn.calls] == [ARGS]


def test_chat_stream_the_same_object_sent_again_is_one_reading() -> None:
    again = {"pattern": "*.tmp"}
    raw = sse(
        chunk({"tool_calls": [frag(0, "call_a1", "delete_files", ARGS)]}),
        chunk({"tool_calls": [frag(0, "call_a1", None, again)]}),
        chunk({}, "tool_calls"),
    )
    turn, _ = fed(CHAT, raw)
    assert (turn.finish, calls(turn)) == (Finish.TOOL_PROPOSALS, [("call_a1", "delete_files", ARGS)])


@pytest.mark.parametrize(
    "second",
    [frag(0, "call_a1", None, {"pattern": "*"}), frag(0, None, None, '{"pattern":"*"}')],
    ids=["another-object", "object-and-text"],
)
def test_chat_stream_conflicting_arguments_run_no_call(second: dict[str, Any]) -> None:
    raw = sse(
        chunk({"tool_calls": [frag(0, "call_a1", "delete_files", ARGS)]}),
        chunk({"tool_calls": [second]}),
        chunk({}, "tool_calls"),
    )
    turn, _ = fed(CHAT, raw)
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "malformed_response")
    assert turn.failure is not None and not turn.failure.retryable
    assert turn.failure.error_code == "conflicting_arguments"
    assert not turn.executable
    assert classify_turn(turn).reason == "MALFORMED_RESPONSE"


def test_chat_stream_object_arguments_count_toward_the_byte_caps() -> None:
    big = {"pattern": "x" * 200}
    raw = sse(chunk({"tool_calls": [frag(0, "c", "delete_files", big)]}), chunk({}, "tool_calls"))
    turn, _ = fed(CHAT, raw, StreamCaps(max_call_bytes=100))
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "arguments_too_large")
    assert not turn.calls


# Ollama 0.20.x /v1/chat/completions (ollama/ollama issue 15457; vercel/ai PR 14277): every parallel
# call comes whole in its own chunk, each at "index": 0 with its own id.
def reused_index_stream() -> bytes:
    return sse(
        chunk({"role": "assistant", "content": "", "tool_calls": [frag(0, "call_9e", "delete_files", '{"pattern":"a"}')]}),
        chunk({"role": "assistant", "content": "", "tool_calls": [frag(0, "call_tl", "delete_files", '{"pattern":"b"}')]}),
        chunk({"role": "assistant", "content": ""}, "tool_calls"),
    )  # fmt: skip


def test_chat_stream_calls_reusing_index_zero_stay_apart() -> None:
    turn, progress = fed(CHAT, reused_index_stream())
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert calls(turn) == [
        ("call_9e", "delete_files", {"pattern": "a"}),
        ("call_tl", "delete_files", {"pattern": "b"}),
    ]
    assert [p for p in progress if isinstance(p, CallStarted | CallReady)] == [
        CallStarted("call_9e", "delete_files"),
        CallStarted("call_tl", "delete_files"),
        CallReady("call_9e"),
        CallReady("call_tl"),
    ]
    body = chat_next_request_ok(turn)
    assert [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"] == ["call_9e", "call_tl"]


def test_chat_stream_calls_reusing_index_zero_each_run_once() -> None:
    final = {"id": "c2", "choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "ok"}}]}
    out, ran, _ = run("openai-chat", Stream(reused_index_stream()), final)
    # the two calls may run concurrently (D15): which handler starts first is the scheduler's choice
    assert out.state.value == "COMPLETED"
    assert sorted(ran, key=lambda args: str(args["pattern"])) == [{"pattern": "a"}, {"pattern": "b"}]


def fast(index: int, arguments: str) -> str:
    """A chunk of the exact compact shape the fast path reads (one argument fragment, nothing else)."""
    choice = {"index": 0, "delta": {"tool_calls": [{"index": index, "function": {"arguments": arguments}}]},
              "finish_reason": None}  # fmt: skip
    return json.dumps({"id": "chatcmpl-7", "choices": [choice]}, separators=(",", ":"))


def test_chat_stream_fragments_after_a_reused_index_continue_the_new_call() -> None:
    # The second call at index 0 streamed in pieces, then a call at index 1: the fragments at index 0
    # (fast-path chunks included) belong to the second call, index 1 is a third call of its own.
    events: list[dict[str, Any] | str] = [
        chunk({"tool_calls": [frag(0, "a", "delete_files", '{"pattern":"a"}')]}),
        chunk({"tool_calls": [frag(0, "b", "delete_files", "")]}),
        fast(0, '{"pattern":'),
        chunk({"tool_calls": [frag(0, None, None, '"b"}')]}),
        chunk({"tool_calls": [frag(1, "c", "delete_files", '{"pattern":"c"}')]}),
        chunk({}, "tool_calls"),
    ]
    turn, _ = fed(CHAT, sse(*events))
    expected = [
        ("a", "delete_files", {"pattern": "a"}),
        ("b", "delete_files", {"pattern": "b"}),
        ("c", "delete_files", {"pattern": "c"}),
    ]
    assert (turn.finish, calls(turn)) == (Finish.TOOL_PROPOSALS, expected)
    spaced = [json.loads(e) if isinstance(e, str) else e for e in events]  # json.dumps' spaces: no fast path
    slow, _ = fed(CHAT, sse(*spaced))
    assert calls(slow) == expected


def test_chat_stream_a_repeated_id_or_a_new_id_without_a_name_stays_on_its_call() -> None:
    # Some proxies repeat the call's id on every fragment; a new id alone opens no call either.
    raw = sse(
        chunk({"tool_calls": [frag(0, "a", "delete_files", '{"pat')]}),
        chunk({"tool_calls": [frag(0, "a", "delete_files", 'tern":')]}),
        chunk({"tool_calls": [frag(0, "z", None, '"x"}')]}),
        chunk({}, "tool_calls"),
    )
    turn, _ = fed(CHAT, raw)
    assert calls(turn) == [("a", "delete_files", {"pattern": "x"})]


# /tmp review probe of the same Ollama shape without index and id: whole calls, one per chunk.
def test_chat_stream_whole_calls_without_index_or_id_stay_apart() -> None:
    raw = sse(
        chunk({"role": "assistant", "content": "", "tool_calls": [frag(None, None, "a", '{"x":1}')]}),
        chunk({"role": "assistant", "content": "", "tool_calls": [frag(None, None, "b", '{"y":2}')]}),
        chunk({"role": "assistant", "content": ""}, "stop"),
    )
    turn, _ = fed(CHAT, raw)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.name, c.arguments) for c in turn.calls] == [("a", {"x": 1}), ("b", {"y": 2})]


def test_chat_stream_a_name_repeated_on_every_fragment_without_index_or_id_is_one_call() -> None:
    raw = sse(
        chunk({"tool_calls": [frag(None, None, "a", '{"x":')]}),
        chunk({"tool_calls": [frag(None, None, "a", '{"y":1}')]}),
        chunk({"tool_calls": [frag(None, None, "a", "}")]}),
        chunk({}, "tool_calls"),
    )
    turn, _ = fed(CHAT, raw)
    assert [(c.name, c.arguments) for c in turn.calls] == [("a", {"x": {"y": 1}})]


# openrouter.ai/docs errors page ("API-Specific Error Handling", "Mid-Stream Errors"): an error after
# some tokens comes with HTTP 200, finish_reason "error", and the error object in choices[0].error
# (plain) or beside the choices (plain and streamed).
OR_ERROR = {"code": 502, "message": "Provider returned error", "metadata": {"provider_name": "Together"}}
OR_CHOICE = {"index": 0, "finish_reason": "error", "native_finish_reason": "error",
             "message": {"role": "assistant", "content": "Hel"}}  # fmt: skip
USAGE = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}


@pytest.mark.parametrize("where", ["in-choice", "beside-choices"])
def test_chat_plain_error_finish_is_read_from_its_error_object(where: str) -> None:
    if where == "in-choice":
        body = {"id": "gen-1", "object": "chat.completion", "choices": [{**OR_CHOICE, "error": OR_ERROR}]}
    else:
        body = {"id": "gen-1", "object": "chat.completion", "error": OR_ERROR, "choices": [OR_CHOICE]}
    turn = CHAT.parse_response({**body, "usage": USAGE})
    streamed, _ = fed(CHAT, sse(chunk({"content": "Hel"}), chunk({}, "error", error=OR_ERROR)))
    for t in (turn, streamed):
        assert (t.finish, t.reason, t.raw_stop_reason) == (Finish.API_FAILURE, "api_error", "502")
        assert t.failure is not None and t.failure.retryable  # a 5xx is retried (D26)
        assert not t.executable
    assert (turn.response_id, turn.usage.input_tokens, turn.usage.output_tokens) == ("gen-1", 7, 2)
    assert classify_turn(turn).target.value == "RETRY"


def test_chat_error_finish_with_a_fatal_code_is_not_retried() -> None:
    err = {"code": 400, "message": "Provider returned error"}
    turn = CHAT.parse_response({"id": "g", "choices": [{**OR_CHOICE, "error": err}]})
    assert (turn.reason, turn.raw_stop_reason) == ("api_error", "400")
    assert turn.failure is not None and not turn.failure.retryable


def test_chat_error_finish_without_an_error_object_stays_unknown() -> None:
    turn = CHAT.parse_response({"id": "g", "choices": [OR_CHOICE]})
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "unknown_stop_reason")


def test_chat_stream_choice_level_error_reads_as_the_plain_body() -> None:
    raw = sse(chunk({"content": "Hel"}), {**chunk({}, "error"), "choices": [{**OR_CHOICE, "delta": {},
              "error": OR_ERROR}]})  # fmt: skip
    turn, _ = fed(CHAT, raw)
    assert (turn.finish, turn.reason, turn.raw_stop_reason) == (Finish.API_FAILURE, "api_error", "502")
    assert turn.failure is not None and turn.failure.retryable


# ----------------------------------------------------------------------------------------- Responses

ADDED = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "delete_files",
         "arguments": "", "status": "in_progress"}  # fmt: skip
FULL = {**ADDED, "arguments": json.dumps(ARGS, separators=(",", ":")), "status": "completed"}


def responses_sse(done_item: dict[str, Any] | None, snapshot: list[dict[str, Any]], *deltas: str) -> bytes:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "gen-1", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": ADDED},
    ]
    events += [
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": d}
        for d in deltas
    ]
    if done_item is not None:
        events.append({"type": "response.output_item.done", "output_index": 0, "item": done_item})
    events.append({"type": "response.completed", "response": {"id": "gen-1", "status": "completed",
                   "output": snapshot}})  # fmt: skip
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def without_arguments(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "arguments"}


# OpenRouter's Responses API (beta) streams no argument deltas: "the complete arguments are only
# available in the final response.completed event" (OpenRouterTeam ai-sdk-provider changeset "Fix
# streaming tool call arguments not being passed to execute function"); its done item is the item as
# added.
@pytest.mark.parametrize(
    "done",
    [{**ADDED, "status": "completed"}, without_arguments({**ADDED, "status": "completed"})],
    ids=["empty", "missing"],
)
def test_responses_done_item_without_arguments_takes_the_snapshots(done: dict[str, Any]) -> None:
    turn, _ = fed(RESP, responses_sse(done, [FULL]))
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.call_id, c.arguments) for c in turn.calls] == [("call_1", ARGS)]
    assert turn.continuation[0]["arguments"] == FULL["arguments"]  # replayed with what was sent (D8)
    plain = RESP.parse_response({"id": "gen-1", "status": "completed", "output": [FULL]})
    assert [c.arguments for c in plain.calls] == [c.arguments for c in turn.calls]


def test_responses_done_item_without_arguments_runs_the_handler_with_the_snapshots() -> None:
    final = {"id": "r2", "status": "completed", "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}]}  # fmt: skip
    raw = responses_sse({**ADDED, "status": "completed"}, [FULL])
    out, ran, requests = run("openai-responses", Stream(raw), final)
    assert (out.state.value, ran) == ("COMPLETED", [ARGS])
    replayed = [i for i in requests[1]["input"] if i.get("type") == "function_call"]
    assert [i["arguments"] for i in replayed] == [FULL["arguments"]]


def test_responses_done_item_with_empty_arguments_keeps_the_deltas() -> None:
    turn, _ = fed(RESP, responses_sse({**ADDED, "status": "completed"}, [], '{"pattern":', '"*.tmp"}'))
    assert [c.arguments for c in turn.calls] == [ARGS]


def test_responses_done_item_object_arguments_are_read() -> None:
    item = {**ADDED, "arguments": ARGS, "status": "completed"}
    for snapshot in ([item], []):
        turn, _ = fed(RESP, responses_sse(item, snapshot))
        assert turn.finish is Finish.TOOL_PROPOSALS
        assert [c.arguments for c in turn.calls] == [ARGS]
        assert turn.continuation[0]["arguments"] == ARGS


def test_responses_done_item_and_snapshot_that_read_alike_are_no_conflict() -> None:
    spaced = {**FULL, "arguments": '{ "pattern" : "*.tmp" }'}
    turn, _ = fed(RESP, responses_sse(spaced, [FULL]))
    assert (turn.finish, [c.arguments for c in turn.calls]) == (Finish.TOOL_PROPOSALS, [ARGS])
    assert turn.continuation[0]["arguments"] == spaced["arguments"]  # the done item is authoritative


@pytest.mark.parametrize("snapshot_args", ['{"pattern":"*"}', "{}", {"pattern": "*"}])
def test_responses_done_item_and_snapshot_that_disagree_run_no_call(snapshot_args: Any) -> None:
    turn, _ = fed(RESP, responses_sse(FULL, [{**FULL, "arguments": snapshot_args}]))
    assert (turn.finish, turn.reason, turn.raw_stop_reason) == (
        Finish.API_FAILURE,
        "malformed_response",
        "completed",
    )
    assert turn.failure is not None and turn.failure.error_code == "conflicting_arguments"
    assert not turn.failure.retryable and not turn.executable


def test_responses_snapshot_object_arguments_over_the_cap_trip_it() -> None:
    big = {**ADDED, "arguments": {"pattern": "x" * 200}, "status": "completed"}
    turn, _ = fed(
        RESP, responses_sse({**ADDED, "status": "completed"}, [big]), StreamCaps(max_call_bytes=100)
    )
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "arguments_too_large")


# ------------------------------------------------------------------------------------- extra["tools"]


def registry() -> cb.Registry:
    spec = cb.ToolSpec(
        name="delete_files", description="d", params=DeleteFiles, handler=lambda a, c: {}, schema_version="1"
    )
    return cb.Registry([spec])


HOSTED = {
    "openai-responses": [{"type": "web_search"}, {"type": "code_interpreter", "container": {"type": "auto"}}],
    "openai-chat": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}],
}
CLASH = {
    "openai-responses": {"type": "function", "name": "delete_files", "parameters": {"type": "object"}},
    "openai-chat": {"type": "function", "function": {"name": "delete_files"}},
}


def first_request(api: str, extra: dict[str, Any], reg: cb.Registry | None = None) -> dict[str, Any]:
    done = {
        "openai-responses": {"id": "r", "status": "completed", "output": []},
        "openai-chat": {"id": "c", "choices": [{"index": 0, "finish_reason": "stop", "message": {"content": ""}}]},
    }[api]  # fmt: skip
    model = ScriptedModel(api, [done])
    runner = cb.Runner(model=model, registry=reg or registry(), clock=FakeClock(), settings={"extra": extra})
    runner.run_sync("go", tenant="t", subject="s")
    body: dict[str, Any] = model.requests[0]
    return body


def tool_name(api: str, tool: dict[str, Any]) -> Any:
    return tool.get("name") if api == "openai-responses" else tool.get("function", {}).get("name")


@pytest.mark.parametrize("api", ["openai-responses", "openai-chat"])
def test_extra_tools_are_added_after_the_registry_tools(api: str) -> None:
    body = first_request(api, {"tools": HOSTED[api]})
    assert tool_name(api, body["tools"][0]) == "delete_files"
    assert body["tools"][1:] == HOSTED[api]


@pytest.mark.parametrize("api", ["openai-responses", "openai-chat"])
def test_extra_tools_alone_are_sent_when_the_registry_renders_none(api: str) -> None:
    body = get(api).build_request(
        items=[], tools=[], settings={"extra": {"tools": HOSTED[api]}}, instructions=None, stream=False
    )
    assert body["tools"] == HOSTED[api]


@pytest.mark.parametrize("api", ["openai-responses", "openai-chat"])
def test_an_extra_tool_named_as_a_registry_tool_is_a_usage_error(api: str) -> None:
    with pytest.raises(UsageError, match="'delete_files'"):
        cb.Runner(
            model=ScriptedModel(api, []),
            registry=registry(),
            clock=FakeClock(),
            settings={"extra": {"tools": [*HOSTED[api], CLASH[api]]}},
        )


@pytest.mark.parametrize("api", ["openai-responses", "openai-chat"])
@pytest.mark.parametrize("value", [{"type": "web_search"}, "web_search", None])
def test_extra_tools_that_are_not_a_list_are_a_usage_error(api: str, value: Any) -> None:
    with pytest.raises(UsageError, match=r"\['tools'\] must be a list"):
        cb.Runner(
            model=ScriptedModel(api, []),
            registry=registry(),
            clock=FakeClock(),
            settings={"extra": {"tools": value}},
        )
