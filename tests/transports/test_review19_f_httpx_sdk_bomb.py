"""An SDK on httpx (openai and anthropic before they moved to httpx2; ``openai>=1.60`` is allowed) reads
a plain 2xx gzip body through callbound in bounded pieces too (review round 19, f F3; D1's byte cap).

httpx undoes a received chunk whole, so ``iter_bytes()`` of 64 KiB of gzip held 64 MiB at once before
``read_capped`` could see it was over ``max_body_bytes``; ``stainless_complete`` reads the body through
``bodycap.decoded_bytes`` now (as its streams), holding about the cap. The SDK here is a stand-in with
the Stainless shape whose response is a real ``httpx.Response``.
"""

from __future__ import annotations

import tracemalloc
import zlib
from collections.abc import AsyncIterator
from typing import Any

import httpx

from callbound.adapters import get as get_adapter
from callbound.adapters.base import StreamCaps
from callbound.transports import stainless_complete

CAP = 64 << 10


def _bomb() -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    parts = [packer.compress(b'{"id": "x", "text": "')]
    parts += [packer.compress(b"x" * (1 << 20)) for _ in range(64)]
    parts.append(packer.flush())
    return b"".join(parts)


BOMB = _bomb()


class _Sdk:
    class APIStatusError(Exception):
        pass

    class APITimeoutError(Exception):
        pass

    class APIConnectionError(Exception):
        pass


class _Streamed:
    """What ``with_streaming_response.create`` yields: the httpx response, and ``iter_bytes`` as the
    SDK's (httpx's own decoding)."""

    def __init__(self, http_response: httpx.Response) -> None:
        self.http_response = http_response

    def iter_bytes(self) -> AsyncIterator[bytes]:
        return self.http_response.aiter_bytes()

    async def __aenter__(self) -> _Streamed:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.http_response.aclose()


class _Resource:
    def __init__(self) -> None:
        self.with_streaming_response = self

    def create(self, *, model: str, messages: Any = None, **rest: Any) -> _Streamed:
        async def raw() -> AsyncIterator[bytes]:
            yield BOMB  # one received chunk, as a socket read of 64 KiB gives it

        response = httpx.Response(200, headers={"content-encoding": "gzip"}, content=raw())
        return _Streamed(response)


async def test_a_plain_gzip_body_over_the_cap_is_read_in_bounded_pieces() -> None:
    adapter = get_adapter("openai-chat")
    tracemalloc.start()
    try:
        turn = await stainless_complete(
            _Sdk,
            _Resource(),
            adapter,
            {"model": "gpt-x", "messages": []},
            stream=False,
            timeout=30,
            model="gpt-x",
            on_progress=None,
            caps=StreamCaps(max_body_bytes=CAP),
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak
    assert turn.failure is not None and turn.failure.error_code == "max_body_bytes"
    assert (turn.finish.value, turn.reason) == ("TRUNCATED", "response_too_large")
