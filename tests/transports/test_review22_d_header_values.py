"""Review 22 (d): ``HttpModel(headers=...)`` takes every value httpx sends and HTTP allows.

``check_headers`` (review round 21, c) refused a bytes value, and a tab inside a value, with a
``UsageError``; httpx sends both (a bytes value as it is, h11 checks it against RFC 9110 field-content:
visible characters, obs-text 0x80-0xFF, spaces and tabs between them). A header a caller built as
bytes (a signed token, a value read from a file in binary) could not be given at all. Now accepted, and
sent as given, on a plain and on a streamed request; a newline, CR, NUL or other control character,
whitespace at either end and a non-ASCII character in a string are still refused when the model is
made, naming the header and never its value.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import h11
import pytest

from callbound.core.errors import UsageError
from callbound.core.model import RequestMeta
from callbound.core.types import Finish
from callbound.transports.http import HttpModel
from tests.transports.test_loopback import Loopback, Reply

SECRET = "sk-secret-value"

GOOD: list[dict[str, Any]] = [
    {"x-trace": "a\tb"},  # HTAB inside a value (RFC 9110 5.5)
    {"x-trace": "a \t b"},
    {"x-token": SECRET.encode()},  # bytes, ASCII
    {"x-token": b"caf\xe9\tv"},  # bytes with obs-text and a tab inside
    {"x-token": b""},  # an empty value, as a string's
]
BAD: list[tuple[dict[str, Any], str]] = [
    ({"x-token": SECRET.encode() + b"\r\nx-injected: 1"}, "holds a control character (U+000D)"),
    ({"x-token": SECRET.encode() + b"\n"}, "ends with a newline"),
    ({"x-token": b"a\x00b"}, "holds a control character (U+0000)"),
    ({"x-token": b"a\x0bb"}, "holds a control character (U+000B)"),
    ({"x-token": b"a\x7fb"}, "holds a control character (U+007F)"),
    ({"x-token": b"\t" + SECRET.encode()}, "starts or ends with whitespace"),
    ({"x-token": SECRET + "\t"}, "starts or ends with whitespace"),
    ({"x-token": SECRET.encode() + b" "}, "starts or ends with whitespace"),
    ({"x-token": SECRET + "\x01"}, "holds a control character (U+0001)"),
    ({"x-token": SECRET + "é"}, "holds a non-ASCII character"),
    ({"x-token": bytearray(b"v")}, "takes a string or bytes value, not bytearray"),
    ({"x-token": 5}, "takes a string or bytes value, not int"),
]

CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
CHUNKS = [
    {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}}]},
    {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    },
]


def _h11_accepts(value: str | bytes) -> bool:
    """What httpx's HTTP/1.1 layer sends: h11 refuses a value outside field-content."""
    raw = value if isinstance(value, bytes) else value.encode("ascii")
    try:
        h11.Request(method="POST", target="/", headers=[("host", "h"), ("x-v", raw)])
    except h11.LocalProtocolError:
        return False
    return True


@pytest.fixture
def server() -> Iterator[Loopback]:
    loop = Loopback()
    try:
        yield loop
    finally:
        loop.close()


@pytest.mark.parametrize("headers", GOOD, ids=repr)
def test_a_value_httpx_sends_is_accepted(headers: dict[str, Any]) -> None:
    assert all(_h11_accepts(v) for v in headers.values())
    model = HttpModel("openai-chat", base_url="http://127.0.0.1:9", api_key="k", headers=headers)
    sent = model.request_headers(stream=False)
    assert all(sent[k] == v for k, v in headers.items())


@pytest.mark.parametrize(("headers", "says"), BAD, ids=[repr(h) for h, _ in BAD])
def test_a_value_no_request_can_carry_is_still_refused(headers: dict[str, Any], says: str) -> None:
    with pytest.raises(UsageError, match=r"HttpModel\(headers=\.\.\.\)") as caught:
        HttpModel("openai-chat", base_url="http://127.0.0.1:9", api_key="k", headers=headers)
    assert says in str(caught.value) and "x-token" in str(caught.value)
    assert SECRET not in str(caught.value)
    value = next(iter(headers.values()))
    if isinstance(value, bytes) or (isinstance(value, str) and value.isascii()):
        # what h11 would send of these is a control character inside a value, which RFC 9110 5.5
        # field-content does not allow; the rest the wire refuses too
        raw = value if isinstance(value, bytes) else value.encode("ascii")
        assert not _h11_accepts(value) or any((b < 0x20 and b != 0x09) or b == 0x7F for b in raw)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_bytes_and_tabs_reach_the_server_as_given(server: Loopback, stream: bool) -> None:
    if stream:
        body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in CHUNKS) + b"data: [DONE]\n\n"
        server.script(Reply(body, sse=True))
    else:
        server.script(Reply(json.dumps(CHAT).encode()))
    headers: dict[str, str | bytes] = {
        "x-trace": "a\tb c",
        "x-token": b"caf\xe9\tv",
        "x-plain": SECRET.encode(),
    }
    model = HttpModel("openai-chat", base_url=server.root, api_key="k", headers=headers)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    turn = asyncio.run(model.complete(body, stream=stream, meta=RequestMeta("op", 0, None, 10.0)))
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "hi")
    [seen] = server.seen
    # http.server reads header values as latin-1 text
    assert seen.headers["x-trace"] == "a\tb c"
    assert seen.headers["x-token"] == "caf\xe9\tv"
    assert seen.headers["x-plain"] == SECRET
    assert seen.headers["authorization"] == "Bearer k"
