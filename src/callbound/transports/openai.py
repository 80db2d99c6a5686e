"""``OpenAIModel``: OpenAI Responses and Chat Completions over the official ``openai`` SDK (extra
``openai``; imported when a model is made, never by ``import callbound``).

The SDK hands back the raw wire data, not re-shaped:

- plain: ``client.responses.with_streaming_response.create(...)`` /
  ``client.chat.completions.with_streaming_response.create(...)``; the body's ``iter_bytes()`` is read
  up to ``StreamCaps.max_body_bytes`` and the adapter parses those bytes;
- stream: ``client.responses.with_streaming_response.create(..., stream=True)`` (and the Chat
  equivalent); its ``iter_bytes()`` goes through callbound's own SSE reader, never the SDK's parser.

The body keys the SDK method declares are passed as keyword arguments and the rest through
``extra_body``, so the JSON on the wire is the adapter's body. The client is built with
``max_retries=0`` and a timeout equal to the remaining deadline (D26), which also bounds the whole
request, on an httpx client that does not follow redirects (a 3xx is a fatal failure, as over
``HttpModel``: the body and key stay with the server asked). ``APIStatusError``,
``APITimeoutError`` and ``APIConnectionError`` become a ``RawFailure`` for ``adapter.map_error``
(D30). The key comes from ``OPENAI_API_KEY`` unless given. The SDK version is
recorded in each turn's provenance (``openai/<version>``).
"""

from __future__ import annotations

import os
from typing import Any

from ..adapters.base import StreamCaps
from ..core.errors import UsageError
from . import (
    StainlessModel,
)
from .checks import OPENAI_HEADER_ENV, openai_env_headers

__all__ = ["OpenAIModel"]

APIS = ("openai-responses", "openai-chat")


def _load_sdk() -> Any:
    """The ``openai`` module, imported on first use."""
    try:
        import openai  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise UsageError("OpenAIModel needs the official SDK: pip install 'callbound[openai]'") from exc
    return openai


class OpenAIModel(StainlessModel):
    """A ``ModelClient`` for ``openai-responses`` or ``openai-chat`` over the official SDK.

    ``base_url`` is the SDK's (it includes ``/v1``, e.g. ``http://127.0.0.1:8080/v1``); ``client``
    may be an ``openai.AsyncOpenAI`` of your own (it is used through ``with_options(max_retries=0,
    timeout=...)``; it keeps its own HTTP client, so build it with
    ``http_client=openai.DefaultAsyncHttpxClient(follow_redirects=False)`` to refuse redirects too);
    otherwise a client is made for each request, so the model works under any event loop
    (``run_sync`` starts a new one each time)."""

    client_class = "AsyncOpenAI"
    default_base_url = "https://api.openai.com/v1"

    def __init__(
        self,
        api: str = "openai-responses",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        timeout_s: float | None = None,
        client: Any = None,
        caps: StreamCaps | None = None,
    ) -> None:
        if api not in APIS:
            raise UsageError(f"OpenAIModel serves {', '.join(APIS)}, not {api!r}")
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
        if client is None:
            openai_env_headers()  # OPENAI_ORG_ID and OPENAI_PROJECT_ID checked now, as over HttpModel

    def __repr__(self) -> str:
        return f"OpenAIModel({self.api!r}, base_url={self.base_url!r}, model={self.model!r})"

    def _resource(self, client: Any) -> Any:
        return client.responses if self.api == "openai-responses" else client.chat.completions

    def _default_headers(self) -> dict[str, Any]:
        """``OPENAI_ORG_ID`` and ``OPENAI_PROJECT_ID`` checked (``openai_env_headers``); an empty one
        sends no header, as over ``HttpModel`` (the SDK sent it empty). The SDK's own header names,
        so that ``Omit`` replaces its entry."""
        openai_env_headers()
        names = {"openai-organization": "OpenAI-Organization", "openai-project": "OpenAI-Project"}
        return {names[h]: self._sdk.Omit() for h, name in OPENAI_HEADER_ENV if os.environ.get(name) == ""}
