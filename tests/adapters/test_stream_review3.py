"""Review 3 of streamed arguments: done events make arguments final, byte caps count what is buffered,
plain and streamed bodies measure arguments alike, and progress never says ready too early.

Issue 3 §4: "Arguments are parsed only after the provider's done event for that call ... Cumulative
byte caps per call and per response → TRUNCATED(``arguments_too_large``), without buffering the rest.
Progress events for user interfaces: CallStarted(call_id, name), ArgumentsProgress(call_id, bytes),
CallReady(call_id)." Every stream here is read twice, event by event through ``feed`` and as bytes
through ``StreamFeed`` (the fast paths): both must give the same turn and the same progress.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.base import StreamCaps, capped, compact_json_len
from callbound.adapters.gemini_schema import _parse_path_cached, parse_json_path
from callbound.adapters.sse import iter_payloads
from callbound.core.types import ArgumentsProgress, CallReady, CallStarted, Finish, ModelTurn, Progress
from tests.adapters import streaming

ANTHROPIC = "anthropic-messages"
CHAT = "openai-chat"
GENERATE = "gemini-generate"
INTERACTIONS = "gemini-interactions"
RESPONSES = "openai-responses"

Event = dict[str, Any] | str


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def sse(events: list[Event], spaced: bool = False) -> bytes:
    """Compact JSON, as the APIs send it, so argument deltas take the fast paths; ``spaced`` JSON
    takes the decoding path for every event."""
    out = []
    for e in events:
        data = e if isinstance(e, str) else (json.dumps(e) if spaced else compact(e))
        out.append(f"data: {data}\n\n")
    return "".join(out).encode()


def read(api: str, raw: bytes, caps: StreamCaps | None = None) -> tuple[ModelTurn, list[Progress]]:
    """The stream's turn and progress through ``feed`` and through ``StreamFeed``; they must agree."""
    asm = get(api).stream_assembler(caps)
    progress: list[Progress] = []
    for payload in iter_payloads([raw]):
        progress += asm.feed(payload)
    by_feed = asm.finish(hashlib.sha256(raw).hexdigest())
    by_bytes, progress_by_bytes = streaming.fed(get(api), raw, caps)
    assert (by_feed, progress) == (by_bytes, progress_by_bytes)
    return by_feed, progress


def calls(turn: ModelTurn) -> list[tuple[str, Any]]:
    return [(c.call_id, c.arguments) for c in turn.calls]


def never_ready_before_final(progress: list[Progress]) -> None:
    """No ArgumentsProgress for a call after its CallReady, and CallReady once per call."""
    ready: set[str] = set()
    for p in progress:
        if isinstance(p, ArgumentsProgress):
            assert p.call_id not in ready, progress
        elif isinstance(p, CallReady):
            assert p.call_id not in ready, progress
            ready.add(p.call_id)


def too_large(turn: ModelTurn) -> None:
    assert (turn.finish, turn.reason, turn.calls) == (Finish.TRUNCATED, "arguments_too_large", ()), turn


# ---- 1. Interactions: a call's arguments are final at its step.stop ---------------------------------


def i_created(legacy: bool = False) -> dict[str, Any]:
    return {
        "interaction": {"id": "v1_X", "status": "in_progress", "model": "gemini-2.5-flash"},
        "event_type": "interaction.start" if legacy else "interaction.created",
    }


def i_completed(legacy: bool = False) -> dict[str, Any]:
    return {
        "interaction": {"id": "v1_X", "status": "requires_action", "usage": {"total_input_tokens": 5}},
        "event_type": "interaction.complete" if legacy else "interaction.completed",
    }


def i_start(index: int) -> dict[str, Any]:
    step = {"id": "c1", "type": "function_call", "name": "refund", "arguments": {}}
    return {"index": index, "step": step, "event_type": "step.start"}


def i_delta(index: int, text: str) -> dict[str, Any]:
    return {
        "index": index,
        "delta": {"arguments": text, "type": "arguments_delta"},
        "event_type": "step.delta",
    }


def i_stop(index: int) -> dict[str, Any]:
    return {"index": index, "event_type": "step.stop"}


def i_call(late: list[dict[str, Any]]) -> list[Event]:
    """A refund call of ``{"amount":10}``, stopped, then ``late`` events, then the terminal event."""
    body = [i_created(), i_start(0), i_delta(0, '{"amount":'), i_delta(0, "10}"), i_stop(0)]
    return [*body, *late, i_completed()]


@pytest.mark.parametrize("spaced", [False, True], ids=["fast path", "decoded"])
def test_interactions_an_arguments_delta_after_step_stop_changes_nothing(spaced: bool) -> None:
    turn, progress = read(INTERACTIONS, sse(i_call([i_delta(0, '{"amount":99999}')]), spaced))
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert calls(turn) == [("c1", {"amount": 10})]
    assert [step["arguments"] for step in turn.continuation] == [{"amount": 10}]
    assert progress == [
        CallStarted("c1", "refund"),
        ArgumentsProgress("c1", 10),
        ArgumentsProgress("c1", 13),
        CallReady("c1"),
    ]


def test_interactions_a_late_delta_is_not_counted_against_the_caps() -> None:
    """Dropped, as Anthropic and Responses drop a delta after their done events: the call is judged
    on the 13 bytes that were final at its stop."""
    turn, _ = read(INTERACTIONS, sse(i_call([i_delta(0, "x" * 100)])), StreamCaps(max_call_bytes=13))
    assert calls(turn) == [("c1", {"amount": 10})]


def test_interactions_another_delta_cannot_replace_a_stopped_call_s_arguments() -> None:
    """A delta of another type (built-in tool deltas are merged into their step whole) carrying an
    ``arguments`` member must not rewrite a call that has stopped either."""
    late = {"index": 0, "delta": {"type": "code_execution_call", "arguments": {"amount": 99999}}}
    turn, _ = read(INTERACTIONS, sse(i_call([{**late, "event_type": "step.delta"}])))
    assert calls(turn) == [("c1", {"amount": 10})]
    # and what goes back to the provider is what runs (D8)
    assert [step["arguments"] for step in turn.continuation] == [{"amount": 10}]


def test_interactions_legacy_function_call_delta_after_content_stop_changes_nothing() -> None:
    def whole(amount: int) -> dict[str, Any]:
        delta = {"id": "c1", "type": "function_call", "name": "refund", "arguments": {"amount": amount}}
        return {"index": 0, "delta": delta, "event_type": "content.delta"}

    events: list[Event] = [
        i_created(legacy=True),
        {"index": 0, "content": {"id": "c1", "type": "function_call"}, "event_type": "content.start"},
        whole(10),
        {"index": 0, "event_type": "content.stop"},
        whole(99999),
        i_completed(legacy=True),
    ]
    turn, progress = read(INTERACTIONS, sse(events))
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert calls(turn) == [("c1", {"amount": 10})]
    # counted as compact JSON, as capped() measures the same object in a plain body
    size = len(b'{"amount":10}')
    assert progress == [CallStarted("c1", "refund"), ArgumentsProgress("c1", size), CallReady("c1")]


def test_every_done_event_makes_the_arguments_final_alike() -> None:
    """The rule Interactions now follows, as the Anthropic and Responses assemblers already did."""
    start = {
        "type": "message_start",
        "message": {"id": "msg_1", "role": "assistant", "content": [], "usage": {"input_tokens": 1}},
    }
    block = {"type": "tool_use", "id": "toolu_1", "name": "refund", "input": {}}

    def a_delta(text: str) -> dict[str, Any]:
        return {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": text},
        }

    anthropic: list[Event] = [
        start,
        {"type": "content_block_start", "index": 0, "content_block": block},
        a_delta('{"amount":10}'),
        {"type": "content_block_stop", "index": 0},
        a_delta('{"amount":99999}'),
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "refund"}
    r_delta = {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0}
    responses: list[Event] = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": {**item, "arguments": ""}},
        {**r_delta, "delta": '{"amount":10}'},
        {"type": "response.output_item.done", "output_index": 0, "item": {**item, "status": "completed"}},
        {**r_delta, "delta": '{"amount":99999}'},
        {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": []}},
    ]
    for api, events in (
        (ANTHROPIC, anthropic),
        (RESPONSES, responses),
        (INTERACTIONS, i_call([i_delta(0, "9")])),
    ):
        turn, progress = read(api, sse(events))
        assert [c.arguments for c in turn.calls] == [{"amount": 10}], api
        never_ready_before_final(progress)


# ---- 2. Vertex partialArgs: the caps count what is buffered, keys included ---------------------------


def g_chunk(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish:
        cand["finishReason"] = finish
    return {"candidates": [cand], "responseId": "r1"}


def g_open(name: str = "f") -> dict[str, Any]:
    return g_chunk([{"functionCall": {"name": name, "willContinue": True}}])


def g_entries(*entries: dict[str, Any]) -> dict[str, Any]:
    return g_chunk([{"functionCall": {"partialArgs": list(entries), "willContinue": True}}])


def g_close() -> dict[str, Any]:
    return g_chunk([{"functionCall": {}}])


def g_finish() -> dict[str, Any]:
    return g_chunk([{"text": ""}], "STOP")


def partial_args(value: Any, path: str = "$") -> list[dict[str, Any]]:
    """The partialArgs entries Vertex streams for ``value``, strings in pieces of 3 characters."""
    if isinstance(value, dict):
        return [e for k, v in value.items() for e in partial_args(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [e for i, v in enumerate(value) for e in partial_args(v, f"{path}[{i}]")]
    if isinstance(value, str):
        pieces = [value[i : i + 3] for i in range(0, len(value), 3)]
        entries = [{"jsonPath": path, "stringValue": p, "willContinue": True} for p in pieces]
        return [*entries, {"jsonPath": path, "stringValue": ""}]
    if value is None:
        return [{"jsonPath": path, "nullValue": None}]
    key = "boolValue" if isinstance(value, bool) else "numberValue"
    return [{"jsonPath": path, key: value}]


def g_stream(*arguments: dict[str, Any]) -> bytes:
    events: list[Event] = []
    for args in arguments:
        events += [g_open(), *(g_entries(e) for e in partial_args(args)), g_close()]
    return sse([*events, g_finish()])


def g_plain(*arguments: dict[str, Any], caps: StreamCaps) -> ModelTurn:
    parts = [{"functionCall": {"name": "f", "args": args}} for args in arguments]
    body = compact(g_chunk(parts, "STOP")).encode()
    return capped(get(GENERATE).parse_response(body), caps, len(body))


ARGS = {
    "order": {"id": "A-4417 Zürich ✓", "express": True, "note": None},
    "lines": [{"sku": "X1", "qty": 2, "price": 9.5}, {"sku": "Y2", "qty": 1, "price": 120}],
    "tags": ["a", "bc"],
}


def test_vertex_long_key_names_trip_the_call_cap_as_they_arrive() -> None:
    """Five one-byte values under keys of 50 000 bytes: counted as they arrive, the first key trips
    the cap, and nothing after it is buffered."""
    key = "k" * 50_000
    events = [g_open(), *(g_entries({"jsonPath": f"$.{key}{i}", "numberValue": 1}) for i in range(5))]
    raw = sse([*events, g_close(), g_finish()])
    caps = StreamCaps(max_call_bytes=100, max_response_bytes=100)
    turn, progress = read(GENERATE, raw, caps)
    too_large(turn)
    assert progress == [CallStarted("r1:0", "f")]
    asm = get(GENERATE).stream_assembler(caps)
    payloads = list(iter_payloads([raw]))
    asm.feed(payloads[0])
    asm.feed(payloads[1])
    assert asm.aborted  # at the first key: the caller may stop reading


def test_vertex_long_key_names_trip_the_default_cap() -> None:
    """2.4 MB of arguments in 40 keys of 60 000 bytes: over the default 1 MiB per call."""
    key = "k" * 60_000
    events = [g_open(), *(g_entries({"jsonPath": f"$.{key}{i}", "boolValue": True}) for i in range(40))]
    turn, _ = read(GENERATE, sse([*events, g_close(), g_finish()]))
    too_large(turn)


def test_vertex_calls_over_the_response_cap_together() -> None:
    args = {"k" * 600: 1}
    caps = StreamCaps(max_call_bytes=10_000, max_response_bytes=1_000)
    too_large(read(GENERATE, g_stream(args, args), caps)[0])
    too_large(g_plain(args, args, caps=caps))
    caps = StreamCaps(max_call_bytes=10_000, max_response_bytes=2 * len(compact(args)))
    assert read(GENERATE, g_stream(args, args), caps)[0].finish is Finish.TOOL_PROPOSALS


def test_vertex_count_is_the_compact_json_of_the_arguments() -> None:
    turn, progress = read(GENERATE, g_stream(ARGS))
    assert calls(turn) == [("r1:0", ARGS)]
    sizes = [p.bytes for p in progress if isinstance(p, ArgumentsProgress)]
    assert sizes == sorted(sizes) and sizes[-1] == len(compact(ARGS).encode())


@pytest.mark.parametrize("args", [ARGS, {"a": 1}, {"list": [[1, 2], [3]], "s": "x"}])
def test_vertex_stream_and_plain_body_trip_at_the_same_boundary(args: dict[str, Any]) -> None:
    size = len(compact(args).encode())
    for cap, runs in ((size, True), (size - 1, False)):
        caps = StreamCaps(max_call_bytes=cap)
        streamed, _ = read(GENERATE, g_stream(args), caps)
        plain = g_plain(args, caps=caps)
        assert (streamed.finish is Finish.TOOL_PROPOSALS) is runs, (cap, streamed)
        assert (plain.finish is Finish.TOOL_PROPOSALS) is runs, (cap, plain)


def test_vertex_finished_turn_gets_the_plain_body_check() -> None:
    """A string value is counted decoded as it streams (``"`` is 1 byte); the finished turn is then
    checked as a plain body is, where the escape counts: a call over the cap only in that measure is
    TRUNCATED streamed as it is plain."""
    args = {"q": 'say "hi" and \\'}
    escaped = len(compact(args).encode())
    _, progress = read(GENERATE, g_stream(args))
    assert [p.bytes for p in progress if isinstance(p, ArgumentsProgress)][-1] == escaped - 3
    caps = StreamCaps(max_call_bytes=escaped - 1)
    too_large(read(GENERATE, g_stream(args), caps)[0])
    too_large(g_plain(args, caps=caps))


def test_a_long_json_path_is_parsed_but_not_cached() -> None:
    """The path cache outlives the stream: a hostile stream's long key paths must not stay in it."""
    long_path = "$." + "k" * 1000
    before = _parse_path_cached.cache_info()
    assert parse_json_path(long_path) == ["k" * 1000]
    after = _parse_path_cached.cache_info()
    assert (after.hits, after.misses) == (before.hits, before.misses)
    assert parse_json_path("$.short[2]") == ["short", 2]  # short paths still go through the cache
    assert _parse_path_cached.cache_info() != after


# ---- 3. plain bodies measure a parsed argument object as compact JSON --------------------------------


def anthropic_body(args: dict[str, Any]) -> str:
    block = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": args}
    usage = {"input_tokens": 1, "output_tokens": 1}
    return compact(
        {"id": "msg_1", "role": "assistant", "content": [block], "stop_reason": "tool_use", "usage": usage}
    )


def interactions_body(args: dict[str, Any]) -> str:
    step = {"type": "function_call", "id": "c1", "name": "f", "arguments": args}
    return compact({"id": "v1_X", "status": "requires_action", "steps": [step]})


def generate_body(args: dict[str, Any]) -> str:
    return compact(g_chunk([{"functionCall": {"name": "f", "args": args}}], "STOP"))


@pytest.mark.parametrize(
    ("api", "body"),
    [(ANTHROPIC, anthropic_body), (INTERACTIONS, interactions_body), (GENERATE, generate_body)],
)
def test_capped_measures_an_argument_object_as_compact_json(api: str, body: Any) -> None:
    args = {"a": 1, "b": [1, 2], "c": "é"}
    size = len(compact(args).encode())  # 26; 31 with default separators' spaces
    turn = get(api).parse_response(body(args))
    assert turn.calls and compact_json_len(turn.calls[0].arguments_raw) == size
    assert capped(turn, StreamCaps(max_call_bytes=size)) is turn
    too_large(capped(turn, StreamCaps(max_call_bytes=size - 1)))
    assert capped(turn, StreamCaps(max_response_bytes=size)) is turn
    too_large(capped(turn, StreamCaps(max_response_bytes=size - 1)))


def test_streamed_and_plain_anthropic_calls_trip_at_the_same_boundary() -> None:
    text = '{"a":1,"b":2}'
    start = {
        "type": "message_start",
        "message": {"id": "msg_1", "role": "assistant", "content": [], "usage": {"input_tokens": 1}},
    }
    block = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    events: list[Event] = [
        start,
        {"type": "content_block_start", "index": 0, "content_block": block},
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": p},
            }
            for p in (text[:4], text[4:])
        ),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]
    for cap, runs in ((len(text), True), (len(text) - 1, False)):
        caps = StreamCaps(max_call_bytes=cap)
        streamed, _ = read(ANTHROPIC, sse(events), caps)
        plain = capped(get(ANTHROPIC).parse_response(anthropic_body(json.loads(text))), caps)
        assert (streamed.finish is Finish.TOOL_PROPOSALS, plain.finish is Finish.TOOL_PROPOSALS) == (
            runs,
            runs,
        )


def test_streamed_whole_gemini_call_and_plain_body_trip_at_the_same_boundary() -> None:
    args = {"a": 1, "b": [1, 2], "c": "x"}
    size = len(compact(args).encode())
    raw = sse([g_chunk([{"functionCall": {"name": "f", "args": args}}]), g_finish()])
    for cap, runs in ((size, True), (size - 1, False)):
        caps = StreamCaps(max_call_bytes=cap)
        streamed, _ = read(GENERATE, raw, caps)
        plain = g_plain(args, caps=caps)
        assert (streamed.finish is Finish.TOOL_PROPOSALS, plain.finish is Finish.TOOL_PROPOSALS) == (
            runs,
            runs,
        )


# ---- 4. OpenAI Chat: CallReady when no more fragments can come, at [DONE] -----------------------------


def c_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o", "choices": [choice]}


def c_frag(text: str, *, start: bool = False) -> dict[str, Any]:
    call: dict[str, Any] = {"index": 0, "function": {"arguments": text}}
    if start:
        call = {"index": 0, "id": "call_A", "type": "function", "function": {"name": "f", "arguments": text}}
    return c_chunk({"tool_calls": [call]})


USAGE: Event = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "choices": [],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1},
}


@pytest.mark.parametrize("spaced", [False, True], ids=["fast path", "decoded"])
def test_chat_a_fragment_after_finish_reason_comes_before_call_ready(spaced: bool) -> None:
    """The turn keeps a fragment that arrives after the finish_reason (as the SDK's
    ChatCompletionStreamState does), so CallReady must wait for [DONE]."""
    events: list[Event] = [
        c_frag('{"a":', start=True),
        c_chunk({}, "tool_calls"),
        c_frag("1}"),
        USAGE,
        "[DONE]",
    ]
    turn, progress = read(CHAT, sse(events, spaced))
    assert turn.finish is Finish.TOOL_PROPOSALS and calls(turn) == [("call_A", {"a": 1})]
    assert progress == [
        CallStarted("call_A", "f"),
        ArgumentsProgress("call_A", 5),
        ArgumentsProgress("call_A", 7),
        CallReady("call_A"),
    ]


@pytest.mark.parametrize("spaced", [False, True], ids=["fast path", "decoded"])
def test_chat_nothing_after_done_changes_the_turn(spaced: bool) -> None:
    events: list[Event] = [c_frag('{"a":1}', start=True), c_chunk({}, "tool_calls"), "[DONE]", c_frag("x")]
    turn, progress = read(CHAT, sse(events, spaced))
    assert calls(turn) == [("call_A", {"a": 1})]
    assert isinstance(progress[-1], CallReady)


@pytest.mark.parametrize(
    "tail",
    [
        [c_chunk({}, "tool_calls"), USAGE],  # no [DONE]: the stream was cut
        ["[DONE]"],  # no finish_reason: cut as well
        [{"error": {"message": "boom", "type": "server_error"}}, c_chunk({}, "tool_calls"), "[DONE]"],
    ],
    ids=["no DONE", "no finish_reason", "error event"],
)
def test_chat_no_call_ready_when_the_turn_runs_no_call(tail: list[Event]) -> None:
    turn, progress = read(CHAT, sse([c_frag('{"a":1}', start=True), *tail]))
    assert turn.calls == () and turn.finish is not Finish.TOOL_PROPOSALS
    assert not any(isinstance(p, CallReady) for p in progress)


def test_responses_delta_after_arguments_done_is_dropped() -> None:
    """Issue 3 §4: the arguments are final at function_call_arguments.done; a late delta (before
    output_item.done, with an empty terminal snapshot) used to be appended, making the call's text
    invalid JSON. It is dropped, so the call runs on the arguments complete at its done event."""
    import json as _json

    from callbound.adapters import get as _get
    from callbound.adapters.stream import StreamFeed as _Feed

    fc = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "refund", "arguments": ""}
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": {**fc, "status": "in_progress"}},
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "item_id": "fc_1",
            "delta": '{"amount":',
        },
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "item_id": "fc_1",
            "delta": "10}",
        },
        {
            "type": "response.function_call_arguments.done",
            "output_index": 0,
            "item_id": "fc_1",
            "arguments": '{"amount":10}',
        },
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "item_id": "fc_1",
            "delta": "99999",
        },
        {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": []}},
    ]
    raw = b"".join(f"event: {e['type']}\ndata: {_json.dumps(e)}\n\n".encode() for e in events)
    for size in (None, 1, 7):
        feed = _Feed(_get("openai-responses").stream_assembler())
        chunks = [raw] if size is None else [raw[i : i + size] for i in range(0, len(raw), size)]
        for chunk in chunks:
            feed.feed(chunk)
        feed.close()
        turn = feed.finish()
        assert [c.arguments for c in turn.calls] == [{"amount": 10}], turn
