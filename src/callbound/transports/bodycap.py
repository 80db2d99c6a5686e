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
never read. The cap counts bytes as they arrive (before any content-encoding is undone).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

__all__ = ["ERROR_BODY_LIMIT", "body_cap_hook", "was_cut"]

# An error body longer than this is not read (the status alone must do): error bodies are small JSON.
ERROR_BODY_LIMIT = 1 << 20

_CUT = "callbound_body_cut"  # set in Response.extensions when the body passed its cap


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
            response.stream = _capped_class(response)(response.stream, limit, response.extensions)

    return hook


class _Capped:
    """The byte stream of a response, ended once more than ``limit`` bytes came (the response is
    marked cut); closing it closes the stream it wraps, and with it the connection."""

    def __init__(self, inner: Any, limit: int, extensions: dict[str, Any]) -> None:
        self._inner = inner
        self._limit = limit
        self._extensions = extensions

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > self._limit:
                self._extensions[_CUT] = True
                return
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


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
