"""``AnthropicModel``: Anthropic Messages over the official ``anthropic`` SDK (extra ``anthropic``;
imported when a model is made, never by ``import callbound``).

The SDK hands back the raw wire data, not re-shaped:

- plain: ``client.messages.with_streaming_response.create(...)``; the body's ``iter_bytes()`` is read
  up to ``StreamCaps.max_body_bytes`` and the adapter parses those bytes;
- stream: ``client.messages.with_streaming_response.create(..., stream=True)``; its ``iter_bytes()``
  goes through callbound's own SSE reader, never the SDK's event accumulator.

The body keys ``messages.create`` declares are passed as keyword arguments and the rest through
``extra_body``, so the JSON on the wire is the adapter's body. The request carries the headers
``HttpModel`` sends, so the one adapter reads one API version whichever transport carries it
(review round 17, r4 F3): ``anthropic-version`` is pinned to ``HttpModel``'s (``2023-06-01``; the SDK
would send its own, ``2026-10-21`` in anthropic 2.15), also on a client you pass, and the key goes in
``x-api-key`` (anthropic 2.x sends ``api_key`` as ``Authorization: Bearer``; that header is then
dropped; a client you pass keeps its own authentication). The client is built with ``max_retries=0`` and a timeout equal to the
remaining deadline (D26), which also bounds the whole request, on an httpx client that does not
follow redirects (a 3xx is a fatal failure, as over ``HttpModel``). ``APIStatusError``,
``APITimeoutError`` and ``APIConnectionError`` become a ``RawFailure`` for ``adapter.map_error``
(D30). The key comes from ``ANTHROPIC_API_KEY`` unless given. The SDK version is recorded in each
turn's provenance (``anthropic/<version>``).
"""

from __future__ import annotations

from typing import Any

from ..adapters.base import StreamCaps
from ..core.errors import UsageError
from . import (
    StainlessModel,
)
from .http import ANTHROPIC_VERSION

__all__ = ["AnthropicModel"]

API = "anthropic-messages"


def _load_sdk() -> Any:
    """The ``anthropic`` module, imported on first use."""
    try:
        import anthropic  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise UsageError("AnthropicModel needs the official SDK: pip install 'callbound[anthropic]'") from exc
    return anthropic


class AnthropicModel(StainlessModel):
    """A ``ModelClient`` for ``anthropic-messages`` over the official SDK.

    ``base_url`` is the SDK's (the server root, e.g. ``http://127.0.0.1:8080``); ``client`` may be an
    ``anthropic.AsyncAnthropic`` of your own (used through ``with_options(max_retries=0,
    timeout=...)``; it keeps its own HTTP client, so build it with
    ``http_client=anthropic.DefaultAsyncHttpxClient(follow_redirects=False)`` to refuse redirects too);
    otherwise a client is made for each request, so the model works under any event loop."""

    client_class = "AsyncAnthropic"
    default_base_url = "https://api.anthropic.com"

    def __init__(
        self,
        api: str = API,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        timeout_s: float | None = None,
        client: Any = None,
        caps: StreamCaps | None = None,
    ) -> None:
        if api != API:
            raise UsageError(f"AnthropicModel serves {API}, not {api!r}")
        super().__init__(
            api,
            _load_sdk(),
            base_url=base_url,
            api_key=api_key,
            model=model,
            timeout_s=timeout_s,
            client=client,
            caps=caps,
        )

    def __repr__(self) -> str:
        return f"AnthropicModel(base_url={self.base_url!r}, model={self.model!r})"

    def _resource(self, client: Any) -> Any:
        return client.messages

    def _default_headers(self) -> dict[str, Any]:
        return {"anthropic-version": ANTHROPIC_VERSION}

    def _client(self, timeout: float) -> tuple[Any, bool]:
        client, owned = super()._client(timeout)
        if not owned:  # a client you pass: its API version pinned too, its authentication its own
            client = client.with_options(default_headers=self._default_headers())
        return client, owned

    def _settle(self, client: Any, key: str) -> Any:
        """The key in ``x-api-key``, as ``HttpModel`` sends it, where the SDK puts ``api_key`` in
        ``Authorization: Bearer`` (anthropic 2.x); an SDK that sends ``x-api-key`` itself is left as
        it is (adding it again would send the header twice)."""
        if any(name.lower() == "x-api-key" for name in client.auth_headers):
            return client
        return client.with_options(default_headers={"x-api-key": key, "authorization": self._sdk.Omit()})
