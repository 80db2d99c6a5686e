"""The shared SSE / JSON-lines reader (adapters/sse.py): framing, end of input (D33), chunking."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callbound.adapters.sse import DONE, SSEEvent, SSEReader, decode_event, iter_payloads, looks_like_stream
from callbound.core.arguments import DuplicateKeyDict
from callbound.core.errors import ProtocolViolation


def read_all(chunks: list[bytes] | list[str]) -> list[SSEEvent]:
    reader = SSEReader()
    out: list[SSEEvent] = []
    for chunk in chunks:
        out.extend(reader.feed(chunk))
    out.extend(reader.close())
    return out


def byte_chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    pieces, start = [], 0
    for p in [*points, len(data)]:
        pieces.append(data[start:p])
        start = p
    return pieces


# ---- line ends ------------------------------------------------------------------------------------


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_line_end_styles(eol: str) -> None:
    text = f'event: a{eol}data: {{"n":1}}{eol}{eol}data: {{"n":2}}{eol}{eol}'
    assert read_all([text.encode()]) == [SSEEvent("a", '{"n":1}'), SSEEvent(None, '{"n":2}')]


def test_mixed_line_ends_in_one_stream() -> None:
    text = 'data: {"n":1}\r\n\r\ndata: {"n":2}\r\rdata: {"n":3}\n\n'
    assert [e.data for e in read_all([text])] == ['{"n":1}', '{"n":2}', '{"n":3}']


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"])
def test_only_cr_and_lf_end_lines(sep: str) -> None:
    # str.splitlines() would cut a line at each of these; for SSE they are data.
    events = read_all([f"data: a{sep}b\n\n".encode()])
    assert events == [SSEEvent(None, f"a{sep}b")]


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85"])
def test_raw_line_separator_inside_a_json_string_survives(sep: str) -> None:
    # JSON allows these raw inside strings, and model text does contain them.
    payload = json.dumps({"text": f"a{sep}b"}, ensure_ascii=False)
    assert sep in payload
    assert list(iter_payloads([f"data: {payload}\n\n".encode()])) == [{"text": f"a{sep}b"}]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    # If the LF after a chunk-final CR were read as its own (blank) line, "a" would be dispatched alone.
    chunks = [b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]
    assert read_all(chunks) == [SSEEvent(None, "a\nb")]


def test_cr_inside_a_chunk_is_not_taken_for_half_of_a_crlf() -> None:
    # The chunk's last complete line ends with CR, but a partial line follows it: the LF that opens
    # the next chunk ends that partial line and must not be swallowed.
    assert read_all([b"data: a\r\rdata: b", b"\n\n"]) == [SSEEvent(None, "a"), SSEEvent(None, "b")]


def test_cr_at_chunk_end_followed_by_data_is_a_line_end() -> None:
    assert read_all([b"data: a\r", b"\r", b'data: {"x":1}\n\n']) == [
        SSEEvent(None, "a"),
        SSEEvent(None, '{"x":1}'),
    ]


# ---- fields ---------------------------------------------------------------------------------------


def test_multi_line_data_is_joined_with_lf() -> None:
    text = 'data: {"a":\ndata:  1,\ndata:"b":2}\n\n'
    events = read_all([text])
    assert events == [SSEEvent(None, '{"a":\n 1,\n"b":2}')]
    assert decode_event(events[0]) == {"a": 1, "b": 2}


def test_comments_and_unknown_fields_are_ignored() -> None:
    text = ': keep-alive\nid: 7\nretry: 100\nfoo: bar\ndata: {"x":1}\n: another\n\n:only a comment\n\n'
    assert read_all([text]) == [SSEEvent(None, '{"x":1}')]


def test_event_line_is_optional_and_reset_after_each_event() -> None:
    text = 'event: first\ndata: {"n":1}\n\ndata: {"n":2}\n\n'
    assert read_all([text]) == [SSEEvent("first", '{"n":1}'), SSEEvent(None, '{"n":2}')]


def test_blank_lines_without_data_dispatch_nothing() -> None:
    assert read_all(["\n\n\nevent: x\n\n\n"]) == []


def test_field_without_colon_and_without_space() -> None:
    # "data" alone is a data line with an empty value; "data:x" has no space to strip.
    assert read_all(["data\ndata:x\n\n"]) == [SSEEvent(None, "\nx")]


def test_done_sentinel_is_passed_through() -> None:
    payloads = list(iter_payloads([b'data: {"a":1}\n\ndata: [DONE]\n\n']))
    assert payloads == [{"a": 1}, DONE]


def test_byte_order_mark_is_dropped() -> None:
    assert read_all(["\ufeffdata: {}\n\n".encode()]) == [SSEEvent(None, "{}")]
    assert read_all([b"\xef\xbb", b'\xbfevent: e\ndata: {"k":2}\n\n']) == [SSEEvent("e", '{"k":2}')]


# ---- JSON lines -----------------------------------------------------------------------------------


def test_json_lines_input() -> None:
    text = '{"type":"a","n":1}\n\n{"type":"b","n":2}\r\n{"type":"c"}'
    assert [e.data for e in read_all([text])] == ['{"type":"a","n":1}', '{"type":"b","n":2}', '{"type":"c"}']
    assert [p["type"] for p in iter_payloads([text]) if isinstance(p, dict)] == ["a", "b", "c"]


def test_json_lines_partial_last_line_is_not_dispatched() -> None:
    assert [e.data for e in read_all(['{"a":1}\n{"b":'])] == ['{"a":1}']


# ---- end of input (D33) ---------------------------------------------------------------------------


def test_final_event_without_blank_line_is_dispatched() -> None:
    assert read_all(['data: {"a":1}\n\ndata: {"b":2}\n']) == [
        SSEEvent(None, '{"a":1}'),
        SSEEvent(None, '{"b":2}'),
    ]


def test_final_event_without_any_line_end_is_dispatched_when_complete() -> None:
    assert read_all(['event: e\ndata: {"b":2}']) == [SSEEvent("e", '{"b":2}')]
    assert read_all(["data: [DONE]"]) == [SSEEvent(None, "[DONE]")]


def test_final_crlf_event_without_blank_line() -> None:
    assert read_all([b'data: {"b":2}\r']) == [SSEEvent(None, '{"b":2}')]


@pytest.mark.parametrize(
    "tail",
    ['data: {"b":', "data: [DO", 'data: {"b":2', '{"c":'],
)
def test_partial_final_line_is_never_dispatched(tail: str) -> None:
    assert read_all([f'data: {{"a":1}}\n\n{tail}']) == [SSEEvent(None, '{"a":1}')]


def test_event_whose_last_data_line_was_cut_is_not_dispatched() -> None:
    # The first data line happens to be complete JSON, but the event went on and was cut.
    assert read_all(['data: {"a":1}\ndata: {"more']) == []


def test_cut_non_data_line_does_not_discard_complete_data() -> None:
    assert read_all(['data: {"a":1}\nevent: som']) == [SSEEvent(None, '{"a":1}')]


def test_incomplete_multi_line_data_is_not_dispatched() -> None:
    assert read_all(['data: {"a":\n']) == []


def test_stream_cut_inside_a_multibyte_character_does_not_raise() -> None:
    raw = 'data: {"a":1}\n\ndata: {"t":"é'.encode()
    assert read_all([raw[:-1]]) == [SSEEvent(None, '{"a":1}')]
    # even when the cut character follows a complete data line of the same event
    assert read_all([b'data: {"a":1}\n\xc3']) == []


def test_invalid_utf8_is_a_protocol_violation() -> None:
    with pytest.raises(ProtocolViolation):
        read_all([b'data: {"a":"\xff"}\n\n'])


# ---- decoding -------------------------------------------------------------------------------------


def test_decode_event_names_untyped_payloads_from_the_event_line() -> None:
    assert decode_event(SSEEvent("message_start", '{"x":1}')) == {"x": 1, "_event": "message_start"}
    assert decode_event(SSEEvent("message_start", '{"type":"t"}')) == {"type": "t"}
    assert decode_event(SSEEvent("message", '{"x":1}')) == {"x": 1}


@pytest.mark.parametrize("data", ["not json", '{"a":', "[1,2]", '"text"', "42"])
def test_decode_event_rejects_non_objects(data: str) -> None:
    with pytest.raises(ProtocolViolation):
        decode_event(SSEEvent(None, data))


def test_decode_event_marks_duplicate_keys() -> None:
    # D5: object-style arguments inside stream events must be rejectable like those in plain bodies.
    value = decode_event(SSEEvent(None, '{"args":{"amount":1,"amount":1000}}'))
    assert isinstance(value, dict)
    assert isinstance(value["args"], DuplicateKeyDict)
    assert value["args"].duplicate_keys == ("amount",)


def test_decode_event_deeply_nested_is_a_protocol_violation() -> None:
    with pytest.raises(ProtocolViolation):
        decode_event(SSEEvent(None, "[" * 100_000 + "]" * 100_000))


# ---- classification -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('{"id":"resp_1","status":"completed"}', "json"),
        ('{\n  "id": "resp_1",\n  "status": "completed"\n}\n', "json"),
        ('  \n{"a":1}\n', "json"),
        ('[\n {"a": 1},\n {"b": 2}\n]', "json"),
        ('{"type":"a"}\n{"type":"b"}\n', "jsonl"),
        ('{"type":"a"}\r\n{"type":"b"}', "jsonl"),
        ('event: response.created\ndata: {"a":1}\n\n', "sse"),
        ('data: {"a":1}\n\n', "sse"),
        (": comment\ndata: {}\n\n", "sse"),
        ("id: 1\ndata: {}\n\n", "sse"),
        ("\ufeffdata: {}\n\n", "sse"),
        ('\ufeff{"a":1}', "json"),
    ],
)
def test_looks_like_stream(text: str, kind: str) -> None:
    assert looks_like_stream(text) == kind


# ---- any chunking gives the same events -----------------------------------------------------------

# a data value may hold anything but CR/LF (including U+2028, NEL, multi-byte characters)
_value_chars = st.characters(exclude_categories=["Cs"], exclude_characters="\r\n")
_event_names = st.one_of(st.none(), st.text(alphabet="abcdefghijklmnopqrstuvwxyz._", min_size=1, max_size=12))


@st.composite
def sse_streams(draw: st.DrawFn) -> tuple[bytes, list[SSEEvent]]:
    events = draw(
        st.lists(
            st.tuples(_event_names, st.lists(st.text(_value_chars, max_size=20), min_size=1, max_size=3)),
            max_size=6,
        )
    )
    parts: list[str] = []
    expected: list[SSEEvent] = []
    for name, lines in events:
        eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
        if draw(st.booleans()):
            parts.append(f": keep-alive{eol}")
        if name is not None:
            parts.append(f"event: {name}{eol}")
        for value in lines:
            parts.append(f"data: {value}{eol}")
        parts.append(eol)
        expected.append(SSEEvent(name, "\n".join(lines)))
    # the last event may lose its blank line (D33) when its data is complete JSON
    if draw(st.booleans()):
        payload = json.dumps({"last": draw(st.text(_value_chars, max_size=10))}, ensure_ascii=False)
        parts.append(f"data: {payload}")
        expected.append(SSEEvent(None, payload))
    return "".join(parts).encode("utf-8"), expected


@settings(max_examples=300, deadline=None)
@given(stream=sse_streams(), cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=12))
def test_any_chunking_yields_the_same_events(stream: tuple[bytes, list[SSEEvent]], cuts: list[int]) -> None:
    data, expected = stream
    assert read_all([data]) == expected
    assert read_all(byte_chunks(data, cuts)) == expected


@settings(max_examples=100, deadline=None)
@given(stream=sse_streams())
def test_byte_by_byte_feed_yields_the_same_events(stream: tuple[bytes, list[SSEEvent]]) -> None:
    data, expected = stream
    assert read_all([data[i : i + 1] for i in range(len(data))]) == expected


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(
        st.dictionaries(st.text(_value_chars, max_size=5), st.text(_value_chars, max_size=8), max_size=3),
        min_size=1,
        max_size=6,
    ),
    trailing_newline=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=1000), max_size=10),
)
def test_any_chunking_of_json_lines(
    payloads: list[dict[str, str]], trailing_newline: bool, cuts: list[int]
) -> None:
    lines = [json.dumps({"type": "t", **p}, ensure_ascii=False) for p in payloads]
    data = ("\n".join(lines) + ("\n" if trailing_newline else "")).encode()
    assert list(iter_payloads(byte_chunks(data, cuts))) == [json.loads(line) for line in lines]
