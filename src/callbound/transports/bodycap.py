"""The body cap on what the SDK clients read (``StreamCaps.max_body_bytes``, ``ERROR_BODY_LIMIT``).

``HttpModel`` reads every body itself, through ``read_capped``: a 2xx body up to
``StreamCaps.max_body_bytes``, an error body up to ``ERROR_BODY_LIMIT``, and over either it stops
reading (a 2xx body is then TRUNCATED(response_too_large), an error body leaves the failure its status
alone). The SDKs read some bodies themselves: the OpenAI and Anthropic SDKs read an error body whole
before they raise ``APIStatusError``, and ``GeminiModel``'s response hook reads every body whole for
its bytes (D7, D8). An endless or huge body made them hold all of it (review round 17, r4 F1).

``body_cap_hook`` is a response event hook for the httpx (or httpx2) client callbound gives an SDK:
it wraps the response's byte stream in one that ends once the body passes its cap, before the SDK or
the hook reads a byte, and marks the response (``was_cut``). The cut body is then dropped, so the
turn is the one ``HttpModel`` gives for the same body: ``None`` as the error body, or
TRUNCATED(response_too_large) for a 2xx body. The connection is closed there, so the server's rest is
never read. ``HttpModel`` reads every body through ``decoded_bytes`` instead.

The cap counts the body's DECODED bytes: for a body sent with ``Content-Encoding`` (gzip, deflate, and
br or zstd where the library decodes them) the hook undoes the encoding itself, alongside, 64 KiB of
output at a time, and stops the body before the chunk that would take it past the cap. So the
library's own decoder never sees that chunk: a small gzip body that expands to gigabytes (a
decompression bomb) is dropped having held about the cap, not read whole (review round 19, f F1:
counted as received, a 1 MiB gzip error body became up to 1 GiB in the SDKs' ``response.content``).
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

__all__ = ["ERROR_BODY_LIMIT", "body_cap_hook", "decoded_bytes", "was_cut"]

# An error body longer than this is not read (the status alone must do): error bodies are small JSON.
ERROR_BODY_LIMIT = 1 << 20

_CUT = "callbound_body_cut"  # set in Response.extensions when the body passed its cap
_STEP = 1 << 16  # the most decoded bytes the hook's own decoding holds at once


def was_cut(response: Any) -> bool:
    """True when ``body_cap_hook`` ended this response's body at its cap (what was read is not the
    body and must not be used)."""
    extensions = getattr(response, "extensions", None)
    return isinstance(extensions, dict) and bool(extensions.get(_CUT))


def body_cap_hook(max_2xx: int | None) -> Callable[[Any], Awaitable[None]]:
    """A ``response`` event hook that caps the body: a 2xx body at ``max_2xx`` bytes (``None``: the
    reader caps it itself, as ``read_capped`` and ``feed_stream`` do), any other at
    ``ERROR_BODY_LIMIT``. Works for httpx and httpx2 clients alike."""

    async def hook(response: Any) -> None:
        limit = max_2xx if 200 <= response.status_code < 300 else ERROR_BODY_LIMIT
        if limit is not None:
            capped = _capped_class(response)
            response.stream = capped(response.stream, limit, response.extensions, _layers(response))

    return hook


class _Capped:
    """The byte stream of a response, ended before the chunk whose decoded bytes take the body past
    ``limit`` (the response is marked cut); closing it closes the stream it wraps, and with it the
    connection."""

    def __init__(self, inner: Any, limit: int, extensions: dict[str, Any], layers: list[Any]) -> None:
        self._inner = inner
        self._limit = limit
        self._extensions = extensions
        self._layers = layers

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += self._decoded_size(chunk, self._limit - size)
            if size > self._limit:
                self._extensions[_CUT] = True
                return
            yield chunk

    def _decoded_size(self, chunk: bytes, room: int) -> int:
        """How many bytes ``chunk`` decodes to, counted no further than past ``room``."""
        if not self._layers:
            return len(chunk)
        size = 0
        try:
            for piece in _undo(self._layers, 0, chunk):
                size += len(piece)
                if size > room:
                    break
        except Exception:
            # bytes that do not match their encoding: the library's decoder refuses them itself (a
            # broken body, D26); from here on bytes count as received
            self._layers = []
            return max(size, len(chunk))
        return size

    async def aclose(self) -> None:
        await self._inner.aclose()


async def decoded_bytes(response: Any) -> AsyncIterator[bytes]:
    """A body (plain or streamed) decoded, as ``response.aiter_bytes()``, but in pieces of at most
    64 KiB when it has a content-encoding: httpx undoes a received chunk whole, so 64 KiB of gzip came
    as one piece of 64 MiB, held before any cap could see it (review round 19, f F1). Bytes that
    do not match their encoding raise the library's ``DecodingError``, as ``aiter_bytes`` does."""
    layers = _layers(response)
    if not layers:
        async for chunk in response.aiter_bytes():
            yield chunk
        return
    library = sys.modules[type(response).__module__.partition(".")[0]]
    async for chunk in response.aiter_raw():
        pieces = _undo(layers, 0, chunk)
        while True:
            try:
                piece = next(pieces)
            except StopIteration:
                break
            except Exception as exc:
                raise library.DecodingError(f"the body does not match its content-encoding: {exc}") from exc
            yield piece


def _undo(layers: list[Any], index: int, data: bytes) -> Iterator[bytes]:
    """``data`` decoded through ``layers[index:]``, in pieces."""
    if index == len(layers):
        yield data
        return
    for piece in layers[index].pieces(data):
        yield from _undo(layers, index + 1, piece)


class _Zlib:
    """gzip or deflate undone ``_STEP`` bytes of output at a time, as httpx does (deflate: zlib
    framing, else raw)."""

    def __init__(self, gzip: bool) -> None:
        self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)
        self._first = not gzip

    def pieces(self, data: bytes) -> Iterator[bytes]:
        while True:
            try:
                out = self._inflate.decompress(data, _STEP)
            except zlib.error:
                if not self._first:
                    raise
                self._first = False
                self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                continue
            self._first = False
            data = self._inflate.unconsumed_tail
            if out:
                yield out
            if self._inflate.eof or (not data and len(out) < _STEP):
                return


class _Whole:
    """Another encoding the library decodes (br, zstd), undone a chunk at a time by its decoder (httpx
    returns a chunk's bytes whole, httpx2 yields them in pieces)."""

    def __init__(self, decoder: Any) -> None:
        self._decoder = decoder

    def pieces(self, data: bytes) -> Iterator[bytes]:
        out = self._decoder.decode(data)  # bytes (httpx), or an iterator of bytes (httpx2)
        if isinstance(out, bytes):
            yield out
        else:
            yield from out


def _layers(response: Any) -> list[Any]:
    """The content-encodings the response's library will undo, the last applied first (as its
    ``MultiDecoder``); one it does not know it leaves alone, and so do these."""
    known = getattr(
        sys.modules.get(type(response).__module__.partition(".")[0] + "._decoders"), "SUPPORTED_DECODERS", {}
    )
    layers: list[Any] = []
    for value in response.headers.get_list("content-encoding", split_commas=True):
        name = value.strip().lower()
        if name in ("gzip", "deflate"):
            layers.append(_Zlib(name == "gzip"))
        elif name != "identity" and name in known:
            layers.append(_Whole(known[name]()))
    return layers[::-1]


_CLASSES: dict[str, type] = {}


def _capped_class(response: Any) -> type:
    """``_Capped`` as an ``AsyncByteStream`` of the response's own library (httpx or httpx2: a
    response reads only a stream of its library's class)."""
    root = type(response).__module__.partition(".")[0]
    cls = _CLASSES.get(root)
    if cls is None:
        cls = type("CappedByteStream", (_Capped, sys.modules[root].AsyncByteStream), {})
        _CLASSES[root] = cls
    return cls
