"""The fast streaming path against the path it replaces, on generated streams and random chunkings.

Fast: ``StreamFeed`` (adapters/stream.py): ``SSEReader`` reading LF-framed events a block at a time,
the adapter's recogniser matching its common delta event on the raw text, ``feed_events`` reading the
fragment from the match. Reference: the per-line reader (``SSEReader`` before blocks: every line
through ``_line``) → ``decode_event`` → ``feed``, exactly what the callers ran before ``StreamFeed``.
Both must give the same events, progress, ``aborted`` after each chunk, exception (type and message)
and assembled turn, down to which argument objects carry duplicate-key marks (D5).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callbound.adapters import anthropic_messages, get, sse
from callbound.adapters.base import StreamCaps
from callbound.adapters.sse import Frame, RawEvent, Recogniser, SSEEvent, SSEReader, decode_event
from callbound.adapters.stream import StreamFeed, frame_of
from callbound.core.types import ArgumentsProgress, ModelTurn, Progress
from tests.hypothesis_budget import examples

ANTHROPIC = "anthropic-messages"
INTERACTIONS = "gemini-interactions"
RESPONSES = "openai-responses"
CHAT = "openai-chat"
GENERATE = "gemini-generate"


class LineReader(SSEReader):
    """The reference reader: every line goes through the per-line reader, as before block reading."""

    def _read_blocks(self, text: str, recognise: Recogniser | None, out: list[RawEvent]) -> None:
        self._read_lines(text, out)


def byte_chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def marks(value: Any) -> Any:
    """``value`` with every dict's class name beside it: == on dicts ignores duplicate-key marks."""
    if isinstance(value, dict):
        return (type(value).__name__, {k: marks(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return [marks(v) for v in value]
    return value


@dataclass
class Outcome:
    turn: ModelTurn
    progress: list[Progress]
    aborted: list[bool]  # after each chunk
    error: tuple[type[BaseException], str] | None
    events: int | None  # events fed, when the stream was read to the end

    def comparable(self) -> tuple[Any, ...]:
        calls = [marks(c.arguments) for c in self.turn.calls]
        return (self.turn, marks(self.turn.continuation), calls, self.progress, self.aborted, self.error)


def reference_run(
    api: str, chunks: list[bytes], caps: StreamCaps | None, model: str | None = None
) -> Outcome:
    asm = get(api).stream_assembler(caps, model=model)
    reader = LineReader()
    digest = hashlib.sha256()
    progress: list[Progress] = []
    aborted: list[bool] = []
    error = None
    count = 0
    try:
        for chunk in chunks:
            digest.update(chunk)
            for ev in reader.feed(chunk):
                progress += asm.feed(decode_event(ev))
                count += 1
            aborted.append(asm.aborted)
        for ev in reader.close():
            progress += asm.feed(decode_event(ev))
            count += 1
    except Exception as exc:  # every exception must be the same on both paths
        error = (type(exc), str(exc))
    return Outcome(asm.finish(digest.hexdigest()), progress, aborted, error, None if error else count)


def fast_run(
    api: str, chunks: list[bytes], caps: StreamCaps | None, model: str | None = None, *, track: bool = True
) -> Outcome:
    progress: list[Progress] = []
    stream = StreamFeed(get(api).stream_assembler(caps, model=model), progress.append if track else None)
    aborted: list[bool] = []
    error = None
    events: int | None = None
    try:
        for chunk in chunks:
            stream.feed(chunk)
            aborted.append(stream.aborted)
        stream.close()
        events = stream.events
    except Exception as exc:
        error = (type(exc), str(exc))
    return Outcome(stream.finish(), progress, aborted, error, events)


def assert_same(api: str, chunks: list[bytes], caps: StreamCaps | None, model: str | None = None) -> Outcome:
    ref = reference_run(api, chunks, caps, model)
    fast = fast_run(api, chunks, caps, model)
    assert fast.comparable() == ref.comparable()
    if ref.error is None:
        assert fast.events == ref.events
    quiet = fast_run(api, chunks, caps, model, track=False)  # no callback: no progress objects are made
    assert quiet.comparable()[:3] == ref.comparable()[:3]
    assert (quiet.aborted, quiet.error) == (ref.aborted, ref.error)
    return ref


# ---- generated streams ----------------------------------------------------------------------------

# Argument and text fragments: quotes, backslashes, control characters, non-ASCII, astral characters
# (surrogate pairs once escaped) and lone surrogates (only ever written escaped: they are not UTF-8).
_FRAGMENT_CHARS = st.one_of(
    st.sampled_from('{}[]:," \\/abcxyz019\n\t\r\x00\x1f\x7f\u00e9\u2028\u4e2d\U0001f600'),
    st.characters(min_codepoint=0x20, max_codepoint=0x2FF),
    st.characters(codec="utf-8"),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),  # lone surrogates
)
_FRAGMENTS = st.text(_FRAGMENT_CHARS, max_size=12)


@st.composite
def json_string(draw: st.DrawFn, value: str) -> str:
    """A JSON string literal for ``value``, written one of the ways a server may write it."""
    style = draw(st.sampled_from(["ascii", "utf8", "utf8", "mixed"]))
    if style == "ascii" or any("\ud800" <= ch <= "\udfff" for ch in value):
        return json.dumps(value)
    if style == "utf8":
        return json.dumps(value, ensure_ascii=False)
    # Escape characters at random, in the short form or as \uXXXX (a surrogate pair above the BMP).
    short = {
        "/": "\\/",
        '"': '\\"',
        "\\": "\\\\",
        "\n": "\\n",
        "\t": "\\t",
        "\b": "\\b",
        "\f": "\\f",
        "\r": "\\r",
    }
    out = []
    for ch in value:
        if ch in '"\\' or ch < " " or draw(st.integers(0, 3)) == 0:
            if ch in short and draw(st.booleans()):
                out.append(short[ch])
            else:
                out.append(json.dumps(ch)[1:-1] if ord(ch) > 0xFFFF else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


# Raw string bodies that are not what they seem: bad escapes, raw control characters, a cut escape.
_BROKEN_STRINGS = st.sampled_from(
    ['"a\\x"', '"\\u12G4"', '"\\u12"', '"ab\\', '"a\x01b"', '"a\nb"', '"\\ud800"', '"\\udc00\\ud800"']
)
_DELTA_KINDS = list(anthropic_messages._DELTA_FIELDS.items())


@st.composite
def delta_text(draw: st.DrawFn, index: int, hostile: bool) -> str:
    """The data of one content_block_delta: mostly the API's compact shape, sometimes not; in a
    ``hostile`` stream sometimes not JSON or with an index that is not one."""
    kind, fld = draw(st.sampled_from(_DELTA_KINDS))
    shapes = ["compact"] * 6 + ["spaced", "mismatch", "dup", "citation"] + ["broken", "index"] * hostile
    shape = draw(st.sampled_from(shapes))
    value = draw(_FRAGMENTS)
    index_text = str(index)
    if shape == "index":
        index_text = draw(st.sampled_from(["01", "-1", "1.0", "true", "1e0", "12345678901", "\u0661", '"0"']))
    if shape == "mismatch":
        fld = draw(st.sampled_from([f for _, f in _DELTA_KINDS if f != fld] + ["type2"]))
    if shape == "spaced":
        payload = {"type": "content_block_delta", "index": index, "delta": {"type": kind, fld: value}}
        lone = any("\ud800" <= ch <= "\udfff" for ch in value)  # not UTF-8: only ever escaped
        return json.dumps(payload, ensure_ascii=lone or draw(st.booleans()))
    if shape == "citation":
        citation = {"type": "char_location", "cited_text": value}
        payload = {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "citations_delta", "citation": citation},
        }
        return json.dumps(payload)
    string = draw(_BROKEN_STRINGS) if shape == "broken" else draw(json_string(value))
    body = f'{{"type":"{kind}","{fld}":{string}}}'
    if shape == "dup":
        body = draw(
            st.sampled_from(
                [
                    f'{{"type":"{kind}","{fld}":{string},"{fld}":"x"}}',
                    f'{{"type":"{kind}","type":"{kind}","{fld}":{string}}}',
                ]
            )
        )
        return f'{{"type":"content_block_delta","index":{index_text},"delta":{body},"index":{index_text}}}'
    return f'{{"type":"content_block_delta","index":{index_text},"delta":{body}}}'


@st.composite
def anthropic_events(draw: st.DrawFn) -> list[tuple[str | None, str]]:
    """(event name, data) of a Messages stream: blocks of every kind at small (repeated, sparse)
    indices, deltas before start and after stop, pings, errors, garbage, and often a proper end."""
    events: list[tuple[str | None, str]] = []
    hostile = draw(st.integers(0, 3)) == 0  # events that are not JSON end a stream: not too often
    if draw(st.integers(0, 9)):
        msg = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
        events.append(("message_start", json.dumps({"type": "message_start", "message": msg})))
    for _ in range(draw(st.integers(0, 24))):
        index = draw(st.integers(0, 2))
        op = draw(st.sampled_from(["delta"] * 8 + ["start", "start", "stop", "ping", "other"]))
        if op == "delta":
            events.append(("content_block_delta", draw(delta_text(index, hostile))))
        elif op == "start":
            kind = draw(st.sampled_from(["tool_use", "tool_use", "text", "thinking", "server_tool_use"]))
            block: dict[str, Any] = {"type": kind}
            if kind.endswith("tool_use"):
                block.update(id=draw(st.sampled_from(["toolu_1", "toolu_2", ""])), name="f", input={})
            elif kind == "text":
                block["text"] = ""
            else:
                block.update(thinking="", signature="")
            payload = {"type": "content_block_start", "index": index, "content_block": block}
            events.append(("content_block_start", json.dumps(payload)))
        elif op == "stop":
            events.append(("content_block_stop", json.dumps({"type": "content_block_stop", "index": index})))
        elif op == "ping":
            events.append(("ping", '{"type": "ping"}'))
        else:
            other = ["[DONE]", '{"index":0}', '{"type":"error","error":{"type":"overloaded_error"}}']
            other += ["not json", "[1]"] * hostile
            events.append((draw(st.sampled_from([None, "error", "message"])), draw(st.sampled_from(other))))
    if draw(st.integers(0, 4)):
        stop = {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 9},
        }
        events.append(("message_delta", json.dumps(stop)))
        events.append(("message_stop", '{"type":"message_stop"}'))
    return events


@st.composite
def framed(draw: st.DrawFn, events: list[tuple[str | None, str]], jsonl: bool = False) -> bytes:
    """SSE text for ``events``: mostly the usual LF framing; sometimes CRLF or CR, no event line or
    another name, ``data:`` without a space, comments, id/retry lines, extra blank lines, data split
    over two lines, a BOM, a missing final blank line, or a stream cut anywhere. With ``jsonl``,
    sometimes JSON lines instead (one payload a line)."""
    eol = draw(st.sampled_from(["\n"] * 6 + ["\r\n", "\r"]))
    odd = draw(st.integers(0, 3)) == 0  # a stream with framing oddities here and there
    parts: list[str] = ["\ufeff"] if draw(st.integers(0, 9)) == 0 else []
    if jsonl and draw(st.integers(0, 3)) == 0:
        parts += [data + eol for _, data in events if data.startswith("{")]
        events = []
    for name, data in events:
        quirk = draw(st.integers(0, 9)) if odd else 9
        if quirk == 0:
            parts.append(draw(st.sampled_from([": ping", "id: 7", "retry: 10", ":"])) + eol)
        if name is not None and quirk != 1:
            parts.append(f"event: {'other' if quirk == 2 else name}{eol}")
        if quirk == 3 and ", " in data:
            head, tail = data.split(", ", 1)  # JSON may continue on a second data line at whitespace
            parts.append(f"data: {head},{eol}data: {tail}{eol}")
        else:
            parts.append(f"{'data:' if quirk == 4 else 'data: '}{data}{eol}")
        parts.append(eol * (2 if quirk == 5 else 1))
    raw = "".join(parts).encode("utf-8")
    ending = draw(st.sampled_from(["whole"] * 4 + ["no blank line", "cut"]))
    if ending == "no blank line":
        raw = raw[: -len(eol)] if raw.endswith(eol.encode()) else raw
    elif ending == "cut" and raw:
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw


@st.composite
def arguments_delta_text(draw: st.DrawFn, index: int, hostile: bool) -> str:
    """The data of one Interactions step.delta: mostly an arguments_delta in the API's compact shape,
    sometimes another delta, other spacing or key order, a legacy content.delta, duplicate keys; in
    a ``hostile`` stream sometimes not JSON or with an index that is not one."""
    shapes = (
        ["compact"] * 6 + ["spaced", "reordered", "dup", "text", "legacy"] + ["broken", "index"] * hostile
    )
    shape = draw(st.sampled_from(shapes))
    value = draw(_FRAGMENTS)
    lone = any("\ud800" <= ch <= "\udfff" for ch in value)  # not UTF-8: only ever escaped
    delta = {"arguments": value, "type": "arguments_delta"}
    if shape == "spaced":
        return json.dumps({"index": index, "delta": delta, "event_type": "step.delta"}, ensure_ascii=lone)
    if shape == "reordered":
        payload = {
            "event_type": "step.delta",
            "index": index,
            "delta": {"type": "arguments_delta", "arguments": value},
        }
        return json.dumps(payload, separators=(",", ":"))
    if shape == "text":
        return json.dumps(
            {"index": index, "delta": {"text": value, "type": "text"}, "event_type": "step.delta"}
        )
    index_text = str(index)
    if shape == "index":
        index_text = draw(st.sampled_from(["01", "-1", "1.0", "true", "12345678901", "\u0661", '"0"']))
    string = draw(_BROKEN_STRINGS) if shape == "broken" else draw(json_string(value))
    kind = "content.delta" if shape == "legacy" else "step.delta"
    body = f'"arguments":{string},"type":"arguments_delta"'
    if shape == "dup":
        body = draw(st.sampled_from([f'"arguments":"x",{body}', f'{body},"type":"text"']))
    return f'{{"index":{index_text},"delta":{{{body}}},"event_type":"{kind}"}}'


@st.composite
def interactions_events(draw: st.DrawFn) -> list[tuple[str | None, str]]:
    """(event name, data) of an Interactions stream (steps schema): call, text and thought steps at
    small (repeated, sparse) indices, deltas before start and after stop, errors, garbage, and often
    a proper end."""
    events: list[tuple[str | None, str]] = []
    hostile = draw(st.integers(0, 3)) == 0

    def add(payload: dict[str, Any]) -> None:
        events.append((payload["event_type"], json.dumps(payload)))

    if draw(st.integers(0, 9)):
        add(
            {
                "interaction": {"id": "v1_1", "status": "in_progress", "model": "g"},
                "event_type": "interaction.created",
            }
        )
    for _ in range(draw(st.integers(0, 24))):
        index = draw(st.integers(0, 2))
        op = draw(st.sampled_from(["delta"] * 8 + ["start", "start", "stop", "other"]))
        if op == "delta":
            events.append(("step.delta", draw(arguments_delta_text(index, hostile))))
        elif op == "start":
            step = draw(
                st.sampled_from(
                    [
                        {"type": "function_call", "id": "c1", "name": "f", "arguments": {}},
                        {"type": "function_call", "id": "", "name": "g", "arguments": {}},
                        {"type": "model_output"},
                        {"type": "thought"},
                    ]
                )
            )
            add({"index": index, "step": step, "event_type": "step.start"})
        elif op == "stop":
            add({"index": index, "event_type": "step.stop"})
        else:
            other = ["[DONE]", '{"index":0}', '{"error":{"code":"x"},"event_type":"error"}']
            other += ["not json", "[1]"] * hostile
            events.append((draw(st.sampled_from([None, "error", "message"])), draw(st.sampled_from(other))))
    if draw(st.integers(0, 4)):
        usage = {"total_input_tokens": 5, "total_output_tokens": 4}
        add(
            {
                "interaction": {"id": "v1_1", "status": "requires_action", "usage": usage},
                "event_type": "interaction.completed",
            }
        )
    return events


@st.composite
def responses_delta_text(draw: st.DrawFn, index: int, hostile: bool) -> str:
    """The data of one Responses function_call_arguments.delta: its members (type, sequence_number,
    item_id, output_index, delta, obfuscation) in any order, some left out or repeated, values
    written any way; sometimes another member, other spacing, a value of another type; in a
    ``hostile`` stream sometimes not JSON or with a number that is not one."""
    members: list[tuple[str, str]] = [("type", '"response.function_call_arguments.delta"')]
    members.append(("sequence_number", str(draw(st.integers(0, 10**6)))))
    members.append(("item_id", draw(json_string(draw(st.sampled_from(["fc_1", "fc_2", "fc_\u00e9", "x"]))))))
    members.append(("output_index", str(index)))
    members.append(("delta", draw(json_string(draw(_FRAGMENTS)))))
    members.append(("obfuscation", draw(json_string(draw(st.text("abcXYZ09", max_size=8))))))
    members = draw(st.permutations(members))
    if draw(st.integers(0, 3)):  # the API sends type first
        members.sort(key=lambda m: m[0] != "type")
    members = draw(st.lists(st.sampled_from(members), min_size=0, max_size=2)) + members  # repeats
    # Some left out; output_index often (the call is then found by item_id).
    odds = {"type": 12, "output_index": 2}
    members = [m for m in members if draw(st.integers(0, odds.get(m[0], 6)))]
    quirks = ["none"] * 8 + ["extra", "null", "spaced", "other type"] + ["broken", "number"] * hostile
    quirk = draw(st.sampled_from(quirks))
    if quirk == "extra":
        members.append(draw(st.sampled_from([("logprobs", "[]"), ("content_index", "0"), ("x", '"y"')])))
    elif quirk == "null" and members:
        members[draw(st.integers(0, len(members) - 1))] = (
            draw(st.sampled_from(["delta", "item_id", "output_index"])),
            "null",
        )
    elif quirk == "other type":  # the last "type" is the one that counts
        members.insert(draw(st.integers(0, len(members))), ("type", '"response.output_text.delta"'))
    elif quirk == "broken":
        members.append(("delta", draw(_BROKEN_STRINGS)))
    elif quirk == "number":
        number = draw(st.sampled_from(["01", "1.0", "1e0", "true", "-1", "-0", "1" * 25, "\u0661"]))
        members.append((draw(st.sampled_from(["output_index", "sequence_number"])), number))
    sep = ", " if quirk == "spaced" else ","
    return "{" + sep.join(f'"{k}":{v}' for k, v in members) + "}"


@st.composite
def responses_events(draw: st.DrawFn) -> list[tuple[str | None, str]]:
    """(event name, data) of a Responses stream: function_call and message items at small (repeated,
    sparse) output indices, deltas before added, after done and for unknown items, errors, garbage,
    and often a terminal event."""
    events: list[tuple[str | None, str]] = []
    hostile = draw(st.integers(0, 3)) == 0

    def add(payload: dict[str, Any]) -> None:
        events.append((payload["type"], json.dumps(payload)))

    if draw(st.integers(0, 9)):
        add({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}})
    for _ in range(draw(st.integers(0, 24))):
        index = draw(st.integers(0, 2))
        op = draw(st.sampled_from(["delta"] * 8 + ["added", "added", "done", "other"]))
        item_id = draw(st.sampled_from(["fc_1", "fc_2", "fc_\u00e9"]))
        call = {"type": "function_call", "id": item_id, "call_id": "call_" + item_id, "name": "f"}
        if op == "delta":
            events.append(
                ("response.function_call_arguments.delta", draw(responses_delta_text(index, hostile)))
            )
        elif op == "added":
            item = draw(
                st.sampled_from([{**call, "arguments": ""}, {"type": "message", "id": "m", "content": []}])
            )
            add({"type": "response.output_item.added", "output_index": index, "item": item})
        elif op == "done":
            arguments = draw(st.sampled_from([None, "{}", '{"a":1}']))
            item = {**call, "status": "completed"} if arguments is None else {**call, "arguments": arguments}
            add({"type": "response.output_item.done", "output_index": index, "item": item})
        else:
            other = ["[DONE]", '{"output_index":0}', '{"type":"error","code":"server_error","message":"m"}']
            other += ["not json", "[1]"] * hostile
            events.append((draw(st.sampled_from([None, "error", "message"])), draw(st.sampled_from(other))))
    if draw(st.integers(0, 4)):
        status = draw(st.sampled_from(["completed", "incomplete", "failed"]))
        add({"type": f"response.{status}", "response": {"id": "resp_1", "status": status, "output": []}})
    return events


@st.composite
def chat_fragment_text(draw: st.DrawFn, index: int, hostile: bool) -> str:
    """The data of one chat.completion.chunk with one tool-call argument fragment: top-level members
    in any order, some left out or repeated, values written any way; sometimes another member, a
    usage or error object, text content or a finish_reason beside the fragment, a second fragment or
    choice, other spacing; in a ``hostile`` stream sometimes not JSON or with a bad index."""
    arguments = draw(json_string(draw(_FRAGMENTS)))
    index_text = str(index)
    extra_choice = ""
    quirks = ["member", "usage", "error", "content", "finish", "two", "choice1", "spaced", "id"]
    quirk = draw(st.sampled_from(["none"] * 10 + quirks + ["broken", "index"] * hostile))
    if quirk == "broken":
        arguments = draw(_BROKEN_STRINGS)
    elif quirk == "index":
        index_text = draw(
            st.sampled_from(["01", "-1", "1.0", "true", "12345678901", "\u0661", '"0"', "null"])
        )
    delta = f'{{"tool_calls":[{{"index":{index_text},"function":{{"arguments":{arguments}}}}}]}}'
    if quirk == "content":
        delta = delta[:-1] + ',"content":"x"}'
    elif quirk == "two":
        delta = delta[:-2] + ',{"index":1,"function":{"arguments":"x"}}]}'
    elif quirk == "id":
        delta = delta.replace('{"index"', '{"id":"call_9","index"', 1)
    logprobs = draw(st.sampled_from(["", ',"logprobs":null']))
    finish = '"tool_calls"' if quirk == "finish" else "null"
    choice = f'{{"index":0,"delta":{delta}{logprobs},"finish_reason":{finish}}}'
    if quirk == "choice1":
        extra_choice = ',{"index":1,"delta":{"content":"y"},"finish_reason":null}'
    members: list[tuple[str, str]] = [
        ("id", draw(json_string(draw(st.sampled_from(["chatcmpl-1", "chatcmpl-\u00e9", ""]))))),
        ("object", '"chat.completion.chunk"'),
        ("created", str(draw(st.integers(0, 2**40)))),
        ("model", draw(json_string(draw(st.sampled_from(["gpt-x", "", "m\u00e9"]))))),
        ("system_fingerprint", draw(st.sampled_from(['"fp_1"', "null"]))),
        ("service_tier", draw(st.sampled_from(['"default"', "null"]))),
        ("obfuscation", draw(json_string(draw(st.text("abcXYZ09", max_size=6))))),
        ("usage", "null"),
        ("choices", f"[{choice}{extra_choice}]"),
    ]
    members = draw(st.permutations(members))
    members = draw(st.lists(st.sampled_from(members), max_size=2)) + members  # repeats: the last counts
    members = [m for m in members if draw(st.sampled_from([True] * 5 + [False]))]  # some left out
    if quirk == "member":
        members.append(
            draw(st.sampled_from([("x", "1"), ("choices", "[]"), ("model", "null"), ("usage", "{}")]))
        )
    elif quirk == "usage":
        members.append(("usage", '{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}'))
    elif quirk == "error":
        members.append(("error", '{"message":"m","type":"server_error"}'))
    sep = ", " if quirk == "spaced" else ","
    return "{" + sep.join(f'"{k}":{v}' for k, v in members) + "}"


@st.composite
def chat_events(draw: st.DrawFn) -> list[tuple[str | None, str]]:
    """(None, data) of a Chat Completions stream: a role chunk, calls opened (with id and name) at
    small (repeated, sparse) indices, argument fragments before and after, text, a finish_reason
    chunk, a usage chunk, [DONE], errors, garbage, in any order."""
    events: list[tuple[str | None, str]] = []
    hostile = draw(st.sampled_from([False, False, False, True]))
    base = '"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x"'

    def chunk(delta: str, finish: str = "null") -> tuple[None, str]:
        return None, f'{{{base},"choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}'

    if draw(st.sampled_from([True] * 9 + [False])):
        events.append(chunk('{"role":"assistant","content":null}'))
    for _ in range(draw(st.integers(0, 24))):
        index = draw(st.integers(0, 2))
        op = draw(st.sampled_from(["fragment"] * 8 + ["open", "open", "text", "other"]))
        if op == "fragment":
            events.append((None, draw(chat_fragment_text(index, hostile))))
        elif op == "open":
            name = draw(st.sampled_from(['"name":"f",', ""]))
            call = f'{{"index":{index},"id":"call_{index}","type":"function","function":{{{name}"arguments":""}}}}'
            events.append(chunk(f'{{"tool_calls":[{call}]}}'))
        elif op == "text":
            events.append(chunk(f'{{"content":{json.dumps(draw(_FRAGMENTS))}}}'))
        else:
            other = ['{"error":{"message":"m","type":"server_error"}}', '{"choices":[]}']
            other += ["not json", "[1]"] * hostile
            events.append((draw(st.sampled_from([None, "error", "message"])), draw(st.sampled_from(other))))
    if draw(st.sampled_from([True] * 4 + [False])):
        events.append(chunk("{}", draw(st.sampled_from(['"tool_calls"', '"stop"', '"length"']))))
        usage = '{"prompt_tokens":8,"completion_tokens":4,"total_tokens":12}'
        events.append((None, f'{{{base},"choices":[],"usage":{usage}}}'))
        events.append((None, "[DONE]"))
    return events


# Vertex generateContent chunks (WIRE.md 4.7), members in the recorded order.
_VERTEX_TAIL = (
    ',"usageMetadata":{"trafficType":"ON_DEMAND"},"modelVersion":"gemini-x",'
    '"createTime":"2026-04-02T17:03:50.399550Z","responseId":"r1"'
)
_TAIL_MEMBERS = st.sampled_from(
    [
        '"usageMetadata":{"trafficType":"ON_DEMAND"}',
        '"usageMetadata":{"trafficType":"PROVISIONED"}',
        '"createTime":"2026-04-02T17:03:50Z"',
        '"modelVersion":"gemini-x"',
        '"modelVersion":"gemini-y"',
        '"modelVersion":"g\\u00e9"',
        '"responseId":"r1"',
        '"responseId":"r2"',
        '"responseId":""',
        '"responseId":"r\\/3"',
    ]
)
# Members the fast shape does not take: feed() reads them (usage with counts, feedback, an error, a
# second candidates list) or they are not JSON strings.
_OTHER_MEMBERS = st.sampled_from(
    [
        '"usageMetadata":{"trafficType":"ON_DEMAND","promptTokenCount":3}',
        '"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2}',
        '"promptFeedback":{"blockReason":"SAFETY"}',
        '"error":{"code":429,"message":"busy","status":"RESOURCE_EXHAUSTED"}',
        '"candidates":[{"content":{"role":"model","parts":[{"text":"x"}]}}]',
        '"modelVersion":null',
        '"responseId":7',
    ]
)
_JSON_PATHS = st.sampled_from(["$.text", "$.text", "$.a.b", "$.items[0]", "$.items[1]", "$['k']", "$", "x"])


@st.composite
def generate_piece_text(draw: st.DrawFn, hostile: bool) -> str:
    """One chunk with a partialArgs string piece: mostly the recorded compact shape with a random
    tail, sometimes spaced, another role, a candidate index, a second entry or part, an entry that
    ends the value, members the fast shape does not take; in a ``hostile`` stream sometimes a
    string that is not one."""
    shapes = ["compact"] * 14 + ["spaced", "role", "index", "two entries", "two parts", "last", "other"]
    shape = draw(st.sampled_from(shapes + ["broken"] * hostile))
    path = draw(_JSON_PATHS)
    value = draw(_FRAGMENTS)
    lone = any("\ud800" <= ch <= "\udfff" for ch in value)  # not UTF-8: only ever escaped
    members = draw(st.lists(_TAIL_MEMBERS, max_size=5))
    if shape == "other":
        members.insert(draw(st.integers(0, len(members))), draw(_OTHER_MEMBERS))
    tail = "".join("," + m for m in members)
    if shape == "spaced":
        entry = {"jsonPath": path, "stringValue": value, "willContinue": True}
        part = {"functionCall": {"partialArgs": [entry], "willContinue": True}}
        body = json.dumps(
            {"candidates": [{"content": {"role": "model", "parts": [part]}}]}, ensure_ascii=lone
        )
        return body[:-1] + tail + "}"
    string = draw(_BROKEN_STRINGS) if shape == "broken" else draw(json_string(value))
    path_text = draw(json_string(path))
    entry_text = f'{{"jsonPath":{path_text},"stringValue":{string},"willContinue":true}}'
    if shape == "last":
        entry_text = f'{{"jsonPath":{path_text},"stringValue":{string}}}'
    if shape == "two entries":
        entry_text += f',{{"jsonPath":"$.more","stringValue":{string},"willContinue":true}}'
    part = f'{{"functionCall":{{"partialArgs":[{entry_text}],"willContinue":true}}}}'
    if shape == "two parts":
        part += ',{"text":"t"}'
    role = draw(st.sampled_from(['"user"', '"model "', "null"])) if shape == "role" else '"model"'
    index = ',"index":0' if shape == "index" else ""
    return f'{{"candidates":[{{"content":{{"role":{role},"parts":[{part}]}}{index}}}]{tail}}}'


@st.composite
def generate_events(draw: st.DrawFn) -> list[tuple[str | None, str]]:
    """(event name, data) of a Vertex streamGenerateContent stream: calls opened by name (with a
    thought signature or not), string pieces, value-ending entries, terminators, whole calls, text,
    pieces with no open call, errors, garbage, and often a finish chunk."""
    events: list[tuple[str | None, str]] = []
    hostile = draw(st.integers(0, 3)) == 0

    def chunk(parts: str, extra: str = "") -> None:
        data = '{"candidates":[{"content":{"role":"model","parts":[' + parts + "]}" + extra + "}]"
        events.append((None, data + _VERTEX_TAIL + "}"))

    ops = ["open"] if draw(st.integers(0, 3)) else []  # most streams open a call first
    ops += draw(
        st.lists(
            st.sampled_from(["piece"] * 10 + ["open", "open", "end", "close", "whole", "text", "other"]),
            max_size=24,
        )
    )
    for op in ops:
        if op == "piece":
            events.append((None, draw(generate_piece_text(hostile))))
        elif op == "open":
            sig = draw(st.sampled_from(["", ',"thoughtSignature":"c2ln"']))
            cid = draw(st.sampled_from(["", ',"id":"call_1"']))
            chunk(f'{{"functionCall":{{"name":"get_order","willContinue":true{cid}}}{sig}}}')
        elif op == "end":
            path = draw(_JSON_PATHS)
            chunk(
                f'{{"functionCall":{{"partialArgs":[{{"jsonPath":"{path}","stringValue":""}}],"willContinue":true}}}}'
            )
        elif op == "close":
            chunk('{"functionCall":{}}')
        elif op == "whole":
            chunk('{"functionCall":{"name":"get_order","args":{"order_id":"A1"}}}')
        elif op == "text":
            chunk(json.dumps({"text": draw(_FRAGMENTS)}))
        else:
            other = ['{"error":{"code":500,"message":"x","status":"INTERNAL"}}', "{}", '{"candidates":[]}']
            other += ["not json", "[1]"] * hostile
            events.append((None, draw(st.sampled_from(other))))
    if draw(st.integers(0, 4)):
        usage = ',"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":4,"totalTokenCount":9}'
        events.append(
            (
                None,
                '{"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"STOP"}]'
                + usage
                + ',"modelVersion":"gemini-x","responseId":"r1"}',
            )
        )
    return events


_CAPS = st.one_of(
    st.none(),
    st.builds(StreamCaps, st.integers(0, 120), st.integers(0, 200)),
)


# ---- the reader -----------------------------------------------------------------------------------


def reference_frames(chunks: list[bytes]) -> tuple[list[Frame], Any]:
    reader = LineReader()
    frames: list[Frame] = []
    try:
        for chunk in chunks:
            frames += [(e.event, e.data) for e in reader.feed(chunk)]
        frames += [(e.event, e.data) for e in reader.close()]
    except Exception as exc:
        return frames, (type(exc), str(exc))
    return frames, None


def block_frames(chunks: list[bytes], recognise: Recogniser | None) -> tuple[list[Frame], Any]:
    reader = SSEReader()
    frames: list[Frame] = []
    try:
        for chunk in chunks:
            frames += [frame_of(e) for e in reader.feed_events(chunk, recognise)]
        frames += reader.close_frames()
    except Exception as exc:
        return frames, (type(exc), str(exc))
    return frames, None


_TEXT = st.text(st.sampled_from('ab :{}"\u00e9\u2028'), max_size=4)
_LINE = st.one_of(
    st.sampled_from([":", ": c", "id: 1", "retry: 5", "data", "event", "x: y", "data:", "event:", "event: "]),
    st.builds(
        str.__add__, st.sampled_from(["data: ", "data: ", "data:", "event: ", "event:", "data:  "]), _TEXT
    ),
)


@st.composite
def sse_blocks(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """(SSE text, cut points): events of one to four lines of any kind (several data lines, several
    event lines, empty names, comments, unknown fields), separated by one or more blank lines, after a
    first event that sets SSE mode; LF-ended, or now and then with CR or CRLF too. Cut points fall
    anywhere, and often just after a line end, so that an event begun in one chunk ends in the next."""
    blocks = draw(st.lists(st.lists(_LINE, min_size=1, max_size=4), max_size=12))
    eol = "\n" if draw(st.integers(0, 3)) else draw(st.sampled_from(["\r\n", "\r"]))
    parts = ["data: 0\n\n"]
    for lines in blocks:
        parts.append("".join(line + "\n" for line in lines) + eol * draw(st.sampled_from([1, 1, 1, 2])))
    raw = "".join(parts).encode()
    return raw, draw(cut_points(raw))


def cut_points(raw: bytes) -> st.SearchStrategy[list[int]]:
    """Anywhere, and often just after a line end, so that an event begun in one chunk ends in the next."""
    line_ends = [i + 1 for i, byte in enumerate(raw) if byte in b"\r\n"] or [0]
    return st.lists(st.one_of(st.sampled_from(line_ends), st.integers(0, len(raw))), max_size=10)


@settings(max_examples=examples(1000), deadline=None)
@given(sse_blocks())
def test_block_reading_yields_the_frames_of_line_reading(stream: tuple[bytes, list[int]]) -> None:
    raw, cuts = stream
    for chunks in ([raw], byte_chunks(raw, [9, *cuts])):
        expected = reference_frames(chunks)
        assert block_frames(chunks, None) == expected
        assert block_frames(chunks, anthropic_messages._DELTA_EVENT.fullmatch) == expected
        assert public_frames(chunks) == expected


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(1, 300))
def test_block_reading_of_messages_streams(data: st.DataObject, first: int) -> None:
    raw = data.draw(framed(data.draw(anthropic_events())))
    cuts = data.draw(cut_points(raw))
    for chunks in ([raw], byte_chunks(raw, [first, *cuts])):
        expected = reference_frames(chunks)
        assert block_frames(chunks, None) == expected
        assert block_frames(chunks, anthropic_messages._DELTA_EVENT.fullmatch) == expected


def public_frames(chunks: list[bytes]) -> tuple[list[Frame], Any]:
    reader = SSEReader()
    events: list[SSEEvent] = []
    try:
        for chunk in chunks:
            events += reader.feed(chunk)
        events += reader.close()
    except Exception as exc:
        return [(e.event, e.data) for e in events], (type(exc), str(exc))
    return [(e.event, e.data) for e in events], None


@pytest.mark.parametrize(
    "text",
    [
        "data: a\n\n\n\ndata: b\n\n",  # extra blank lines between events
        "event: x\n\ndata: a\n\n",  # an event line alone resets nothing the next block needs
        "event: x\nevent: y\ndata: a\n\n",
        "data: a\ndata: b\n\nevent: e\ndata: c\ndata: d\n\n",  # several data lines: joined with LF
        "data:a\n\ndata\n\nevent:e\ndata:  b\n\n",  # no space, a bare field name, two spaces
        ": c\ndata: a\n\nid: 1\ndata: b\n\n",
        "data: a\n\nevent: e\ndata: b\nid: 3\n\n",
        "event: message_start\n\n\n\n\n",
    ],
)
def test_block_reading_edge_cases(text: str) -> None:
    raw = text.encode()
    for size in (1, 2, 3, 5, 7, len(raw)):
        chunks = [b"data: 0\n\n", *(raw[i : i + size] for i in range(0, len(raw), size))]
        assert block_frames(chunks, None) == reference_frames(chunks)


def test_a_recogniser_sees_whole_one_event_blocks_only() -> None:
    seen: list[str] = []

    def spy(text: str) -> None:
        seen.append(text)

    reader = SSEReader()
    reader.feed_events(b"data: 0\n\n", spy)  # the first chunk decides the mode: read by lines
    reader.feed_events(b"event: a\ndata: 1\n\ndata: 2\n\nevent: b\nda", spy)
    reader.feed_events(b"ta: 3\n\ndata: 4\r\n\r\n", spy)  # CR: read by lines, nothing offered
    reader.feed_events(b"data: 5\n\ndata: 6\n", spy)
    reader.feed_events(b"\n", spy)  # ends the event "data: 6" opened before: read by lines
    reader.feed_events(b"data: 7", spy)  # a cut line is only kept, not read ...
    reader.feed_events(b"\n\n", spy)  # ... so its event is whole when its line end comes
    assert seen == ["event: a\ndata: 1", "data: 2", "data: 5", "data: 7"]


# ---- assembly: anthropic-messages ------------------------------------------------------------------


@settings(max_examples=examples(800), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(1, 300), _CAPS)
def test_anthropic_fast_path_assembles_what_the_reference_does(
    data: st.DataObject, first: int, caps: StreamCaps | None
) -> None:
    raw = data.draw(framed(data.draw(anthropic_events())))
    cuts = data.draw(cut_points(raw))
    # The first chunk sets the mode and is read by lines: cut it short so most events are not.
    assert_same(ANTHROPIC, byte_chunks(raw, [first, *cuts]), caps)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(1, 300), _CAPS)
def test_interactions_fast_path_assembles_what_the_reference_does(
    data: st.DataObject, first: int, caps: StreamCaps | None
) -> None:
    raw = data.draw(framed(data.draw(interactions_events()), jsonl=True))
    cuts = data.draw(cut_points(raw))
    assert_same(INTERACTIONS, byte_chunks(raw, [first, *cuts]), caps)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(1, 300), _CAPS)
def test_responses_fast_path_assembles_what_the_reference_does(
    data: st.DataObject, first: int, caps: StreamCaps | None
) -> None:
    raw = data.draw(framed(data.draw(responses_events())))
    cuts = data.draw(cut_points(raw))
    assert_same(RESPONSES, byte_chunks(raw, [first, *cuts]), caps)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(1, 300), _CAPS)
def test_chat_fast_path_assembles_what_the_reference_does(
    data: st.DataObject, first: int, caps: StreamCaps | None
) -> None:
    raw = data.draw(framed(data.draw(chat_events())))
    cuts = data.draw(cut_points(raw))
    assert_same(CHAT, byte_chunks(raw, [first, *cuts]), caps)


@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(1, 300), _CAPS)
def test_generate_fast_path_assembles_what_the_reference_does(
    data: st.DataObject, first: int, caps: StreamCaps | None
) -> None:
    raw = data.draw(framed(data.draw(generate_events()), jsonl=True))
    cuts = data.draw(cut_points(raw))
    assert_same(GENERATE, byte_chunks(raw, [first, *cuts]), caps)


def _tool_stream(*fragments: str, eol: str = "\n") -> bytes:
    events = [
        (
            "message_start",
            '{"type":"message_start","message":{"id":"msg_1","model":"m","content":[],"usage":{}}}',
        ),
        (
            "content_block_start",
            '{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}',
        ),
        *(
            (
                "content_block_delta",
                f'{{"type":"content_block_delta","index":0,"delta":'
                f'{{"type":"input_json_delta","partial_json":{f}}}}}',
            )
            for f in fragments
        ),
        ("content_block_stop", '{"type":"content_block_stop","index":0}'),
        ("message_delta", '{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{}}'),
        ("message_stop", '{"type":"message_stop"}'),
    ]
    return "".join(f"event: {n}{eol}data: {d}{eol}{eol}" for n, d in events).encode()


@pytest.mark.parametrize(
    ("fragments", "outcome"),
    [
        (['"{\\"a\\": \\"\\u00e9\\ud83d\\ude00\\"}"'], {"a": "\u00e9\U0001f600"}),  # escapes, surrogate pair
        (
            ['"{\\"a\\": \\"\\ud83d"', '"\\ude00\\"}"'],
            {"a": "\U0001f600"},
        ),  # a pair split over deltas: rejoined
        (['"{\\"a\\":1,"', '"\\"a\\":2}"'], "duplicate"),  # duplicate keys in the joined text (D5)
        (['"{\\"a\\":\\x1}"'], "not JSON"),  # a bad escape: the full parser rejects the event
        (['"{\\"a\\":\\u12}"'], "not JSON"),
        (['"{}"', '"\x01"'], "not JSON"),  # a raw control character
    ],
)
def test_anthropic_fragment_edge_cases(fragments: list[str], outcome: Any) -> None:
    for eol in ("\n", "\r\n"):
        raw = _tool_stream(*fragments, eol=eol)
        ref = assert_same(ANTHROPIC, [raw], None)
        assert_same(ANTHROPIC, [raw[i : i + 7] for i in range(0, len(raw), 7)], StreamCaps(1 << 20))
        if isinstance(outcome, dict):
            assert ref.turn.calls[0].arguments == outcome
        elif isinstance(outcome, type):
            assert ref.error is not None and ref.error[0] is outcome
        elif outcome == "duplicate":
            assert "duplicate" in str(ref.turn.calls[0].arguments_error)
        else:
            assert ref.error is not None and outcome in ref.error[1]


def test_anthropic_deltas_outside_an_open_block_are_ignored_alike() -> None:
    def ev(name: str, data: str) -> str:
        return f"event: {name}\ndata: {data}\n\n"

    start = '{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}'
    delta = '{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}'
    stop = '{"type":"content_block_stop","index":1}'
    end = '{"type":"message_stop"}'
    for order in ([delta, start, delta, stop, delta, end], [start, stop, delta, start, delta, end]):
        raw = "".join(ev("x", d) for d in order).encode()
        ref = assert_same(ANTHROPIC, [raw[:1], raw[1:]], None)
        assert ref.progress and ref.error is None


def test_anthropic_byte_caps_trip_at_the_same_fragment() -> None:
    raw = _tool_stream(*(json.dumps(f) for f in ["{", '"a":', '"', "x" * 30, '"', "}"]))
    for limit in range(0, 40):
        for caps in (StreamCaps(limit, 1 << 20), StreamCaps(1 << 20, limit)):
            assert_same(ANTHROPIC, [raw], caps)
            assert_same(ANTHROPIC, [raw[:90], raw[90:]], caps)


# ---- assembly: gemini-interactions -----------------------------------------------------------------


def _step_stream(*fragments: str, index: int = 0, jsonl: bool = False) -> bytes:
    call = {"type": "function_call", "id": "c1", "name": "f", "arguments": {}}
    events = [
        (
            "interaction.created",
            '{"interaction":{"id":"v1_1","status":"in_progress"},"event_type":"interaction.created"}',
        ),
        ("step.start", json.dumps({"index": index, "step": call, "event_type": "step.start"})),
        *(
            (
                "step.delta",
                f'{{"index":{index},"delta":{{"arguments":{f},"type":"arguments_delta"}},'
                '"event_type":"step.delta"}',
            )
            for f in fragments
        ),
        ("step.stop", json.dumps({"index": index, "event_type": "step.stop"})),
        (
            "interaction.completed",
            '{"interaction":{"id":"v1_1","status":"requires_action"},"event_type":"interaction.completed"}',
        ),
    ]
    if jsonl:
        return "".join(data + "\n" for _, data in events).encode()
    return "".join(f"event: {name}\ndata: {data}\n\n" for name, data in events).encode()


@pytest.mark.parametrize(
    ("fragments", "outcome"),
    [
        (['"{\\"a\\": \\"\\u00e9\\ud83d\\ude00\\"}"'], {"a": "\u00e9\U0001f600"}),
        (
            ['"{\\"a\\": \\"\\ud83d"', '"\\ude00\\"}"'],
            {"a": "\U0001f600"},
        ),  # a pair split over deltas: rejoined
        (['"{\\"a\\":1,"', '"\\"a\\":2}"'], "duplicate"),
        (['"{\\"a\\":\\x1}"'], "not JSON"),
        (['"{}"', '"\x01"'], "not JSON"),
    ],
)
def test_interactions_fragment_edge_cases(fragments: list[str], outcome: Any) -> None:
    for jsonl in (False, True):
        raw = _step_stream(*fragments, jsonl=jsonl)
        ref = assert_same(INTERACTIONS, [raw[:20], raw[20:]], None)
        assert_same(INTERACTIONS, [raw[i : i + 7] for i in range(0, len(raw), 7)], StreamCaps(1 << 20))
        if isinstance(outcome, dict):
            assert ref.turn.calls[0].arguments == outcome
        elif isinstance(outcome, type):
            assert ref.error is not None and ref.error[0] is outcome
        elif outcome == "duplicate":
            assert "duplicate" in str(ref.turn.calls[0].arguments_error)
        else:
            assert ref.error is not None and outcome in ref.error[1]


def test_interactions_byte_caps_trip_at_the_same_fragment() -> None:
    raw = _step_stream(*(json.dumps(f) for f in ["{", '"a":', '"', "x" * 30, '"', "}"]))
    for limit in range(0, 40):
        for caps in (StreamCaps(limit, 1 << 20), StreamCaps(1 << 20, limit)):
            assert_same(INTERACTIONS, [raw[:30], raw[30:]], caps)


def test_interactions_delta_for_an_unknown_step_is_dropped_alike() -> None:
    # feed() drops a delta for an index no step.start opened (review round 18, b F1): the fast path must too.
    raw = _step_stream('"{}"', index=2)
    stray = (
        b'data: {"index":5,"delta":{"arguments":"{}","type":"arguments_delta"},"event_type":"step.delta"}\n\n'
    )
    cut = raw.index(b"event: interaction.completed")
    ref = assert_same(INTERACTIONS, [raw[:40], raw[40:cut] + stray + raw[cut:]], None)
    assert ref.progress and ref.error is None


# ---- assembly: openai-responses --------------------------------------------------------------------


def _item_stream(*deltas: str, eol: str = "\n") -> bytes:
    """A Responses stream with one call whose argument deltas have the data ``deltas``."""
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""}
    payloads = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
    ]
    # A done item without arguments: the joined deltas are the arguments.
    done_item = {k: v for k, v in item.items() if k != "arguments"}
    done = {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": {**done_item, "status": "completed"},
    }
    end = {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": []}}
    texts = [json.dumps(p) for p in payloads] + list(deltas) + [json.dumps(done), json.dumps(end)]
    return "".join(f"data: {t}{eol}{eol}" for t in texts).encode()


def _responses_delta(fragment: str, order: str = "wire") -> str:
    members = {
        "type": '"response.function_call_arguments.delta"',
        "sequence_number": "4",
        "item_id": '"fc_1"',
        "output_index": "0",
        "delta": fragment,
        "obfuscation": '"Ab9"',
    }
    keys = {
        "wire": ["type", "sequence_number", "item_id", "output_index", "delta", "obfuscation"],
        "old": ["type", "item_id", "output_index", "delta"],
        "last": ["type", "item_id", "output_index", "delta", "sequence_number"],
        "item id only": ["type", "item_id", "delta"],
    }[order]
    return "{" + ",".join(f'"{k}":{members[k]}' for k in keys) + "}"


@pytest.mark.parametrize("order", ["wire", "old", "last", "item id only"])
@pytest.mark.parametrize(
    ("fragments", "outcome"),
    [
        (['"{\\"a\\": \\"\\u00e9\\ud83d\\ude00\\"}"'], {"a": "\u00e9\U0001f600"}),
        (['"{\\"a\\": \\"\\ud83d"', '"\\ude00\\"}"'], {"a": "\U0001f600"}),  # a pair split over deltas
        (['"{\\"a\\":1,"', '"\\"a\\":2}"'], "duplicate"),
        (['"{\\"a\\":\\x1}"'], "not JSON"),
        (['"{}"', '"\x01"'], "not JSON"),
    ],
)
def test_responses_fragment_edge_cases(fragments: list[str], outcome: Any, order: str) -> None:
    for eol in ("\n", "\r\n"):
        raw = _item_stream(*(_responses_delta(f, order) for f in fragments), eol=eol)
        ref = assert_same(RESPONSES, [raw[:20], raw[20:]], None)
        assert_same(RESPONSES, [raw[i : i + 7] for i in range(0, len(raw), 7)], StreamCaps(1 << 20))
        if isinstance(outcome, dict):
            assert ref.turn.calls[0].arguments == outcome
        elif outcome == "duplicate":
            assert "duplicate" in str(ref.turn.calls[0].arguments_error)
        else:
            assert ref.error is not None and outcome in ref.error[1]


def _vertex_piece(string: str, path: str = "$.text", tail: str = _VERTEX_TAIL) -> str:
    entry = f'{{"jsonPath":"{path}","stringValue":{string},"willContinue":true}}'
    return (
        '{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"partialArgs":['
        + entry
        + '],"willContinue":true}}]}}]'
        + tail
        + "}"
    )


def _vertex_stream(*pieces: str, eol: str = "\n", opened: bool = True) -> bytes:
    """A recorded-shape Vertex stream: the call opened by name, ``pieces`` (chunk data), the entry
    that ends the value, the empty terminator and the finish chunk."""
    head = '{"candidates":[{"content":{"role":"model","parts":['
    chunks = []
    if opened:
        chunks.append(
            head
            + '{"functionCall":{"name":"get_order","willContinue":true},"thoughtSignature":"c2ln"}]}}]'
            + _VERTEX_TAIL
            + "}"
        )
    chunks += pieces
    chunks.append(
        head
        + '{"functionCall":{"partialArgs":[{"jsonPath":"$.text","stringValue":""}],"willContinue":true}}]}}]'
        + _VERTEX_TAIL
        + "}"
    )
    chunks.append(head + '{"functionCall":{}}]}}]' + _VERTEX_TAIL + "}")
    chunks.append(
        head
        + '{"text":""}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":4},"modelVersion":"gemini-x","responseId":"r1"}'
    )
    return "".join(f"data: {c}{eol}{eol}" for c in chunks).encode()


def test_generate_pieces_assemble_the_call_and_name_it_by_the_response_id() -> None:
    """Byte counts include the structure the first piece creates (the root's braces, ``"text":`` and
    the string's quotes: 11 bytes), as compact JSON has them; before review 3 only values counted."""
    pieces = [_vertex_piece(json.dumps(p)) for p in ["Bos", "ton \u00e9 \\", '"x"']]
    ref = assert_same(GENERATE, [_vertex_stream(*pieces)], None)
    (call,) = ref.turn.calls
    assert call.arguments == {"text": 'Boston \u00e9 \\"x"'}
    assert ref.turn.response_id == "r1"
    sizes = [(p.call_id, p.bytes) for p in ref.progress if isinstance(p, ArgumentsProgress)]
    assert sizes == [("r1:0", 14), ("r1:0", 22), ("r1:0", 25)]  # the empty end entry carries no bytes


@pytest.mark.parametrize(
    "pieces",
    [
        [_vertex_piece('"a"', tail="")],  # no members at all
        [
            _vertex_piece('"a"', tail=',"responseId":"first"'),
            _vertex_piece('"b"', tail=',"responseId":"second"'),
        ],
        [_vertex_piece('"a"', tail=',"modelVersion":"m1","modelVersion":"m2"')],  # the last one counts
        [_vertex_piece('"a"', path="$.items[0]"), _vertex_piece('"b"', path="$.items[1]")],
        [_vertex_piece('"a"', path="$.text"), _vertex_piece('"b"', path="$.other")],
        [_vertex_piece('"a"', path="$..bad")],  # a jsonPath the schema cannot use
        [_vertex_piece('"\\ud83d"'), _vertex_piece('"\\ude00"')],  # a surrogate pair split over two pieces
    ],
)
def test_generate_piece_edge_cases(pieces: list[str]) -> None:
    assert_same(GENERATE, [_vertex_stream(*pieces)], None)
    assert_same(GENERATE, [_vertex_stream(*pieces, eol="\r\n")], None)


def test_generate_pieces_without_an_open_call_are_malformed_alike() -> None:
    ref = assert_same(GENERATE, [_vertex_stream(_vertex_piece('"a"'), opened=False)], None)
    assert ref.turn.reason == "malformed_stream"


def test_generate_byte_caps_trip_at_the_same_piece() -> None:
    """``{"text":"x…x"}``: 70 value bytes and 11 of structure, counted since review 3 (before, 70)."""
    pieces = [_vertex_piece(json.dumps("x" * 7)) for _ in range(10)]
    for cap in (0, 6, 7, 17, 18, 20, 80, 81, 82):
        ref = assert_same(GENERATE, [_vertex_stream(*pieces)], StreamCaps(cap, 10_000))
        assert (ref.turn.reason == "arguments_too_large") == (cap < 81)


_RESPONSES_DELTA = '{"type":"response.function_call_arguments.delta"'


@pytest.mark.parametrize(
    "data",
    [
        _RESPONSES_DELTA + ',"item_id":"fc_1","delta":"{}","type":"response.output_text.delta"}',  # last type
        _RESPONSES_DELTA + ',"item_id":"fc\\u005f1","delta":"{}"}',  # an escaped item id, no index
        _RESPONSES_DELTA + ',"output_index":5,"item_id":"fc_1","delta":"{}"}',  # the index wins
        _RESPONSES_DELTA + ',"item_id":"fc_9","delta":"{}"}',  # an unknown item
        _RESPONSES_DELTA + ',"output_index":0,"delta":"{","delta":"{}"}',  # a repeated key: the last
        _RESPONSES_DELTA + ',"output_index":0,"output_index":1,"delta":"{}"}',
        _RESPONSES_DELTA + ',"output_index":0}',  # no text
        _RESPONSES_DELTA + ',"output_index":-0,"delta":"{}"}',
        _RESPONSES_DELTA + ',"output_index":0,"delta":"{}","logprobs":[]}',  # another member
        _RESPONSES_DELTA + ',"output_index":0,"delta":null}',
        _RESPONSES_DELTA + ',"output_index":0,"delta":"{}","delta":null}',
        '{"output_index":0,"delta":"{}"}',  # no type: the event name decides
        '{"output_index":0,"type":"response.function_call_arguments.delta","delta":"{}"}',
    ],
)
def test_responses_delta_members(data: str) -> None:
    for named in (False, True):
        raw = _item_stream(data)
        if named:  # an event name, which counts only for a payload without "type"
            raw = raw.replace(
                b"data: " + data.encode(),
                b"event: response.function_call_arguments.delta\ndata: " + data.encode(),
            )
        for chunks in ([raw], [raw[:20], raw[20:]], [raw[i : i + 9] for i in range(0, len(raw), 9)]):
            assert_same(RESPONSES, chunks, None)


def test_responses_byte_caps_trip_at_the_same_fragment() -> None:
    raw = _item_stream(*(_responses_delta(json.dumps(f)) for f in ["{", '"a":', '"', "x" * 30, '"', "}"]))
    for limit in range(0, 40):
        for caps in (StreamCaps(limit, 1 << 20), StreamCaps(1 << 20, limit)):
            assert_same(RESPONSES, [raw[:30], raw[30:]], caps)


# ---- assembly: openai-chat -------------------------------------------------------------------------

_CHUNK_HEAD = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":'


def _chunk_stream(*chunks: str, eol: str = "\n") -> bytes:
    """A Chat Completions stream with one call whose fragments are the chunks ``chunks``."""
    opened = '[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":null}]'
    finish = '[{"index":0,"delta":{},"finish_reason":"tool_calls"}]'
    texts = [_CHUNK_HEAD + opened + "}", *chunks, _CHUNK_HEAD + finish + "}", "[DONE]"]
    return "".join(f"data: {t}{eol}{eol}" for t in texts).encode()


def _chat_fragment(arguments: str, members: str = "") -> str:
    choice = f'[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":{arguments}}}}}]}},"finish_reason":null}}]'
    return _CHUNK_HEAD + choice + members + "}"


@pytest.mark.parametrize(
    "data",
    [
        _chat_fragment('"{}"', ',"choices":[]'),  # the last choices counts
        _chat_fragment('"{}"', ',"usage":null,"obfuscation":"x","system_fingerprint":null'),
        _chat_fragment('"{}"', ',"usage":{"prompt_tokens":1,"completion_tokens":2}'),
        _chat_fragment('"{}"', ',"error":{"message":"m"}'),
        _chat_fragment('"{}"', ',"id":"chatcmpl-2","model":"other"'),
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"function":{"arguments":"{}"}}]},"finish_reason":null}]}',
        '{"model":"m","id":""}',  # no choices
        _chat_fragment('"{}"').replace('"chatcmpl-1"', '"chatcmpl-\\u00e9"').replace('"gpt-x"', '"\\u00e9"'),
        _chat_fragment('"{}"').replace('"chatcmpl-1"', '""').replace('"gpt-x"', '""'),
        _chat_fragment('"{\\"a\\":\\u00e9}"'),
    ],
)
def test_chat_chunk_members(data: str) -> None:
    for model in (None, "given"):  # a model given up front is kept
        raw = f"data: {data}\n\n".encode() + _chunk_stream(data)  # first: its id and model count
        for chunks in ([raw], [raw[:20], raw[20:]], [raw[i : i + 9] for i in range(0, len(raw), 9)]):
            assert_same(CHAT, chunks, None, model)


@pytest.mark.parametrize(
    ("fragments", "outcome"),
    [
        (['"{\\"a\\": \\"\\u00e9\\ud83d\\ude00\\"}"'], {"a": "\u00e9\U0001f600"}),
        (
            ['"{\\"a\\": \\"\\ud83d"', '"\\ude00\\"}"'],
            {"a": "\U0001f600"},
        ),  # a pair split over chunks: rejoined
        (['"{\\"a\\":1,"', '"\\"a\\":2}"'], "duplicate"),
        (['"{\\"a\\":\\x1}"'], "not JSON"),
        (['"{}"', '"\x01"'], "not JSON"),
    ],
)
def test_chat_fragment_edge_cases(fragments: list[str], outcome: Any) -> None:
    for eol in ("\n", "\r\n"):
        raw = _chunk_stream(*(_chat_fragment(f) for f in fragments), eol=eol)
        ref = assert_same(CHAT, [raw[:20], raw[20:]], None)
        assert_same(CHAT, [raw[i : i + 7] for i in range(0, len(raw), 7)], StreamCaps(1 << 20))
        if isinstance(outcome, dict):
            assert ref.turn.calls[0].arguments == outcome
        elif isinstance(outcome, type):
            assert ref.error is not None and ref.error[0] is outcome
        elif outcome == "duplicate":
            assert "duplicate" in str(ref.turn.calls[0].arguments_error)
        else:
            assert ref.error is not None and outcome in ref.error[1]


def test_chat_byte_caps_trip_at_the_same_fragment() -> None:
    raw = _chunk_stream(*(_chat_fragment(json.dumps(f)) for f in ["{", '"a":', '"', "x" * 30, '"', "}"]))
    for limit in range(0, 40):
        for caps in (StreamCaps(limit, 1 << 20), StreamCaps(1 << 20, limit)):
            assert_same(CHAT, [raw[:30], raw[30:]], caps)


# ---- the fast path is really taken, and a broken one is caught ------------------------------------


def _count_slow_decodes(monkeypatch: pytest.MonkeyPatch) -> list[RawEvent]:
    """The events decoded whole (``stream.decode_raw``, which every fallback goes through)."""
    from callbound.adapters import stream

    slow: list[RawEvent] = []
    original: Callable[[RawEvent], Any] = stream.decode_raw

    def counting(event: RawEvent) -> Any:
        slow.append(event)
        return original(event)

    monkeypatch.setattr(stream, "decode_raw", counting)
    return slow


def test_anthropic_deltas_skip_the_json_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    slow = _count_slow_decodes(monkeypatch)
    fragments = [json.dumps(f) for f in ['{"a": "', "b\u00e9\\", '"}']] * 50
    for eol in ("\n", "\r\n"):  # CR framing is read by lines, but the delta data still matches
        slow.clear()
        turn = fast_run(ANTHROPIC, [_tool_stream(*fragments, eol=eol)], None).turn
        assert turn.calls and turn.calls[0].arguments_error is not None  # the text is not one object
        assert len(slow) == 5  # message_start, block start and stop, message_delta, message_stop


def test_interactions_deltas_skip_the_json_parser(monkeypatch: pytest.MonkeyPatch) -> None:

    slow = _count_slow_decodes(monkeypatch)
    fragments = [json.dumps(f) for f in ['{"a": "', "b\u00e9\\", '"}']] * 50
    for jsonl in (False, True):  # JSON lines are read by lines, but the delta data still matches
        slow.clear()
        fast_run(INTERACTIONS, [_step_stream(*fragments, jsonl=jsonl)], None)
        assert len(slow) == 4  # interaction.created, step.start, step.stop, interaction.completed


def test_responses_deltas_skip_the_json_parser(monkeypatch: pytest.MonkeyPatch) -> None:

    slow = _count_slow_decodes(monkeypatch)
    fragments = [json.dumps(f) for f in ['{"a": "', "b\u00e9\\", '"}']] * 50
    for order in ("wire", "old", "last", "item id only"):
        for eol in ("\n", "\r\n"):
            slow.clear()
            fast_run(
                RESPONSES, [_item_stream(*(_responses_delta(f, order) for f in fragments), eol=eol)], None
            )
            assert len(slow) == 4  # created, added, done, completed


def test_chat_fragments_skip_the_json_parser(monkeypatch: pytest.MonkeyPatch) -> None:

    slow = _count_slow_decodes(monkeypatch)
    fragments = [json.dumps(f) for f in ['{"a": "', "b\u00e9\\", '"}']] * 50
    for eol in ("\n", "\r\n"):
        slow.clear()
        fast_run(CHAT, [_chunk_stream(*(_chat_fragment(f) for f in fragments), eol=eol)], None)
        assert len(slow) == 3  # the chunk that opens the call, the finish_reason chunk, [DONE]


def test_a_broken_fast_path_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # The comparison is only worth something if it fails when the fast path goes wrong.
    raw = _tool_stream('"{\\"a\\":"', '"\\"\\u00e9\\""', '"}"')
    assert_same(ANTHROPIC, [raw], None)
    undecoded = lambda text, start: (text[start : text.index('"}}', start)], 0)  # noqa: E731
    monkeypatch.setattr(sse, "scan_string", undecoded)
    with pytest.raises(AssertionError):
        assert_same(ANTHROPIC, [raw], None)


def test_generate_pieces_skip_the_json_parser(monkeypatch: pytest.MonkeyPatch) -> None:

    slow = _count_slow_decodes(monkeypatch)
    pieces = [_vertex_piece(json.dumps(f)) for f in ['{"a": "', "b\u00e9\\", '"}']] * 50
    for eol in ("\n", "\r\n"):  # CR framing is read by lines, but the chunk data still matches
        slow.clear()
        turn = fast_run(GENERATE, [_vertex_stream(*pieces, eol=eol)], None).turn
        assert turn.calls and turn.calls[0].arguments is not None
        assert len(slow) == 4  # the opening chunk, the value's end, the terminator, the finish chunk


def test_a_broken_generate_fast_path_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from callbound.adapters import gemini_stream

    raw = _vertex_stream(_vertex_piece('"a\\u00e9"'), _vertex_piece('"b"'))
    assert_same(GENERATE, [raw], None)
    monkeypatch.setattr(gemini_stream, "string_value", lambda found, group: found[group])  # escapes kept
    with pytest.raises(AssertionError):
        assert_same(GENERATE, [raw], None)


@given(st.data())
@settings(max_examples=50, deadline=None)
def test_fragments_survive_any_chunking(data: st.DataObject) -> None:
    # A plain property on the output, independent of the reference: the arguments are the text sent.
    text = data.draw(st.text(_FRAGMENT_CHARS.filter(lambda c: not "\ud800" <= c <= "\udfff"), max_size=40))
    args = json.dumps({"t": text}, ensure_ascii=data.draw(st.booleans()))
    pieces = [args[i : i + 5] for i in range(0, len(args), 5)]
    raw = _tool_stream(*(data.draw(json_string(p)) for p in pieces))
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=8))
    turn = fast_run(ANTHROPIC, byte_chunks(raw, cuts), None).turn
    assert turn.calls[0].arguments == {"t": text}


@pytest.mark.parametrize(
    "data",
    [
        _RESPONSES_DELTA + ',"output_index":-1,"item_id":"fc_1","delta":"{}"}',  # placed by its item id
        _RESPONSES_DELTA + ',"item_id":"fc_1","output_index":-7,"delta":"{}"}',
        _RESPONSES_DELTA + ',"output_index":-1,"delta":"{}"}',  # nowhere to place it
        _RESPONSES_DELTA + ',"output_index":-1,"item_id":"fc_9","delta":"{}"}',
    ],
)
def test_responses_deltas_with_a_negative_index_are_read_alike(data: str) -> None:
    raw = _item_stream(data)
    for chunks in ([raw], [raw[:20], raw[20:]], [raw[i : i + 9] for i in range(0, len(raw), 9)]):
        ref = assert_same(RESPONSES, chunks, None)
        assert ref.error is None


@pytest.mark.parametrize("index", [-1, -2])
def test_responses_items_at_a_negative_index_are_ignored_alike(index: int) -> None:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""}
    snapshot = [{"type": "message", "id": "m1", "role": "assistant", "content": []}]
    payloads = [
        {"type": "response.output_item.added", "output_index": index, "item": item},
        {"type": "response.function_call_arguments.delta", "output_index": index, "delta": "{}"},
        {"type": "response.output_item.done", "output_index": index, "item": {**item, "arguments": "{}"}},
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": snapshot}},
    ]
    raw = "".join(f"data: {json.dumps(p, separators=(',', ':'))}\n\n" for p in payloads).encode()
    for chunks in ([raw], [raw[i : i + 11] for i in range(0, len(raw), 11)]):
        ref = assert_same(RESPONSES, chunks, None)
        assert ref.error is None and ref.turn.calls == ()
        assert ref.turn.continuation == tuple(snapshot), "the snapshot's last item is not taken twice"
