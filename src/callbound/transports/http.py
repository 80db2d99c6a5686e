"""``HttpModel``: a model client over raw httpx for all five APIs.

| API | request |
| --- | --- |
| openai-responses | ``POST {base}/v1/responses`` with ``Authorization: Bearer`` |
| openai-chat | ``POST {base}/v1/chat/completions`` with ``Authorization: Bearer`` |
| anthropic-messages | ``POST {base}/v1/messages`` with ``x-api-key`` and ``anthropic-version`` |
| gemini-generate | ``POST {base}/v1beta/models/{model}:generateContent`` (stream: ``:streamGenerateContent?alt=sse``) with ``x-goog-api-key`` |
| gemini-interactions | ``POST {base}/v1beta/interactions`` with ``x-goog-api-key`` and ``Api-Revision`` (WIRE.md 5.0) |

A gemini-generate model named ``tunedModels/<id>`` is sent to ``{base}/v1beta/tunedModels/<id>:...``, as
google-genai sends it. The adapter-built body is sent unchanged. A plain response goes to
``adapter.parse_response`` as the bytes received; a stream's bytes go through the shared SSE reader into ``adapter.stream_assembler``,
and ``finish`` gets the SHA-256 of all of them (D7). A non-2xx answer becomes
``RawFailure("http", status, body, headers)``, a connect error or a 2xx body that does not match
its content-encoding ``RawFailure("connection")``, a timeout ``RawFailure("timeout")``, all
classified by ``adapter.map_error`` alone (D30). A stream that breaks mid-way, or whose bytes cannot
be decoded, is finished as received: the adapter says TRUNCATED (``stream_interrupted``) when its
terminal event never came. The remaining active deadline (``RequestMeta.timeout_s``, D26) bounds
each phase (connect, every read, write) and the whole request, so bytes that keep trickling in cannot
stretch it. There are no retries here; the Runner retries.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx

from ..adapters import get as get_adapter
from ..adapters.base import Adapter, StreamCaps
from ..core.errors import ProtocolViolation, UsageError
from ..core.model import ProgressCallback, RequestMeta
from ..core.types import ModelTurn, RawFailure
from . import (
    _server_root,
    answered_plain,
    api_key_for,
    as_stream,
    check_client_args,
    effective_timeout,
    feed_stream,
    plain_turn,
    read_capped,
    stamp_sdk_version,
    within_deadline,
)
from .bodycap import ERROR_BODY_LIMIT, decoded_bytes
from .checks import BASE_URL_ENV, check_headers, env_base_url, openai_env_headers

__all__ = ["BASE_URL_ENV", "DEFAULT_BASE_URLS", "INTERACTIONS_API_REVISION", "HttpModel"]

DEFAULT_BASE_URLS = {
    "openai-responses": "https://api.openai.com",
    "openai-chat": "https://api.openai.com",
    "anthropic-messages": "https://api.anthropic.com",
    "gemini-generate": "https://generativelanguage.googleapis.com",
    "gemini-interactions": "https://generativelanguage.googleapis.com",
}
ANTHROPIC_VERSION = "2023-06-01"
INTERACTIONS_API_REVISION = "2026-05-20"

# A body that cannot be read to its end: the connection broke, or its bytes do not match its
# content-encoding (a proxy that labels plain bytes gzip). Either way nothing usable arrived, so both
# fail the same way: a connection failure, or a cut stream (D26). DecodingError is a RequestError but
# not a TransportError, hence named here.
_BROKEN: tuple[type[Exception], ...] = (httpx.TransportError, httpx.StreamError, httpx.DecodingError)


def _env_base_url(api: str) -> str | None:
    """The SDK's base-URL variable for ``api`` (``BASE_URL_ENV``), as the server root (OpenAI's
    carries ``/v1``, which HttpModel adds itself), or None when unset or empty: one environment reaches
    one server whichever transport carries the request."""
    return _server_root(env_base_url(api))


# The APIs whose request body names the model (gemini-generate names it in the URL).
_MODEL_IN_BODY = frozenset({"openai-responses", "openai-chat", "anthropic-messages", "gemini-interactions"})


def _wire(headers: dict[str, str | bytes]) -> dict[bytes, bytes]:
    """The request's headers as httpx writes them: names and string values in ASCII (``check_headers``
    and ``check_key`` admitted nothing else), bytes values as they are."""
    return {k.encode("ascii"): v if isinstance(v, bytes) else v.encode("ascii") for k, v in headers.items()}


class HttpModel:
    """A ``ModelClient`` over raw httpx. ``base_url`` is the server root (no ``/v1``; by default the
    SDK's variable, ``BASE_URL_ENV``, else the provider's); ``api_key``
    defaults to the SDKs' usual environment variable; ``model`` is required for gemini-generate (the
    model is part of the URL) and otherwise goes in a body that names none (a body's own model wins),
    as over the SDK clients; ``timeout_s`` caps each phase of
    every request (connect, every read, write) in addition to the remaining deadline, which also
    bounds the request as a whole; ``headers`` are added to every request: values are ASCII strings or
    bytes (sent as they are, as httpx sends them; a byte 0x80-0xFF is RFC 9110's obs-text), with spaces
    or tabs inside but not at either end, and no other control character (``checks.check_headers``)."""

    def __init__(
        self,
        api: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        timeout_s: float | None = None,
        headers: dict[str, str | bytes] | None = None,
        caps: StreamCaps | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        check_client_args(
            "HttpModel", api, model=model, base_url=base_url, api_key=api_key, timeout_s=timeout_s, caps=caps
        )
        check_headers("HttpModel", headers)
        self.api = api
        self._adapter: Adapter = get_adapter(api)
        self.base_url = (base_url or _env_base_url(api) or DEFAULT_BASE_URLS[api]).rstrip("/")
        if api.startswith("openai-"):
            openai_env_headers()  # a variable no header can carry: a UsageError now, not at each request
        self._api_key = api_key
        self.model = model
        self.timeout_s = timeout_s
        self.headers = dict(headers or {})
        self.caps = caps
        self._transport = transport
        self.sdk_version = f"httpx/{httpx.__version__}"

    @property
    def adapter(self) -> Adapter:
        return self._adapter

    def __repr__(self) -> str:
        return f"HttpModel({self.api!r}, base_url={self.base_url!r}, model={self.model!r})"

    # ---- request shape ---------------------------------------------------------------------------

    def _key(self) -> str:
        key = self._api_key or api_key_for(self.api)
        if not key:
            from . import missing_key

            raise UsageError(
                f"{self.api} needs an API key: set the environment variable {missing_key(self.api)}"
            )
        return key

    def _model_name(self, body: dict[str, Any]) -> str | None:
        name = self.model or body.get("model")
        return name if isinstance(name, str) else None

    def url(self, body: dict[str, Any], *, stream: bool) -> str:
        api = self.api
        if api == "openai-responses":
            return f"{self.base_url}/v1/responses"
        if api == "openai-chat":
            return f"{self.base_url}/v1/chat/completions"
        if api == "anthropic-messages":
            return f"{self.base_url}/v1/messages"
        if api == "gemini-generate":
            model = self._model_name(body)
            if not model:
                raise UsageError("gemini-generate needs a model name: HttpModel(..., model='gemini-...')")
            # a tuned model is served under its own collection, as google-genai sends it
            # (tunedModels/<id>); any other name under models/
            collection = "tunedModels" if model.startswith("tunedModels/") else "models"
            name = quote(model.removeprefix(f"{collection}/"), safe="-._~")
            if stream:
                return f"{self.base_url}/v1beta/{collection}/{name}:streamGenerateContent?alt=sse"
            return f"{self.base_url}/v1beta/{collection}/{name}:generateContent"
        return f"{self.base_url}/v1beta/interactions"

    def request_headers(self, *, stream: bool) -> dict[str, str | bytes]:
        key = self._key()
        headers: dict[str, str | bytes] = {"content-type": "application/json"}
        if stream:
            headers["accept"] = "text/event-stream"
        if self.api.startswith("openai-"):
            headers["authorization"] = f"Bearer {key}"
            # the organization and project the openai SDK names from its variables: the same request
            # on either transport (a user key in several organizations is billed, limited and
            # allowed models by the one named)
            headers.update(openai_env_headers())
        elif self.api == "anthropic-messages":
            headers["x-api-key"] = key
            headers["anthropic-version"] = ANTHROPIC_VERSION
        else:
            headers["x-goog-api-key"] = key
            if self.api == "gemini-interactions":
                headers["api-revision"] = INTERACTIONS_API_REVISION
        headers.update(self.headers)
        return headers

    # ---- ModelClient -----------------------------------------------------------------------------

    async def complete(
        self,
        body: dict[str, Any],
        *,
        stream: bool,
        meta: RequestMeta,
        on_progress: ProgressCallback | None = None,
    ) -> ModelTurn:
        # as the SDK clients do: HttpModel(model=...) names the model of a body without one (the API
        # answered 400 "model required", a fatal failure, while OpenAIModel filled it in); an
        # Interactions body naming an agent instead keeps it alone
        if self.model and self.api in _MODEL_IN_BODY and not body.get("model") and not body.get("agent"):
            body = {**body, "model": self.model}
        url = self.url(body, stream=stream)
        headers = self.request_headers(stream=stream)
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        try:
            content = text.encode("utf-8")
        except UnicodeEncodeError:
            # a lone surrogate (a provider's unpaired \ud800, carried back as received, D8) has no UTF-8
            # form: sent as the JSON escape it came as, with the rest of the body escaped alike
            content = json.dumps(body, separators=(",", ":")).encode("ascii")
        # the model the request names: the body's, where the body carries it (as the SDK clients read it)
        sent = body.get("model") if self.api in _MODEL_IN_BODY else self._model_name(body)
        model = sent if isinstance(sent, str) else None
        timeout = effective_timeout(meta.timeout_s, self.timeout_s)
        request = self._send(url, headers, content, stream, model, timeout, on_progress)
        turn = await within_deadline(self._adapter, request, meta.timeout_s, model=model)
        return stamp_sdk_version(turn, self.sdk_version)

    async def _send(
        self,
        url: str,
        headers: dict[str, str | bytes],
        content: bytes,
        stream: bool,
        model: str | None,
        timeout: float,
        on_progress: ProgressCallback | None,
    ) -> ModelTurn:
        adapter = self._adapter
        # every body is read through decoded_bytes: 64 KiB pieces however compressed, so a read stops
        # at its cap in DECODED bytes having held about that much (a gzip bomb; review round 19, f F1)
        try:
            async with (
                httpx.AsyncClient(timeout=httpx.Timeout(timeout), transport=self._transport) as client,
                client.stream("POST", url, content=content, headers=_wire(headers)) as response,
            ):
                if not 200 <= response.status_code < 300:
                    raw = await _read_error_body(response)
                    return adapter.map_error(
                        RawFailure("http", response.status_code, raw, dict(response.headers)), model=model
                    )
                if stream and not answered_plain(response.headers):
                    return await feed_stream(
                        adapter,
                        decoded_bytes(response),
                        model=model,
                        on_progress=on_progress,
                        caps=self.caps,
                        broken=_BROKEN,
                    )
                try:
                    raw = await read_capped(
                        decoded_bytes(response), (self.caps or StreamCaps()).max_body_bytes
                    )
                except _BROKEN as exc:
                    kind = "timeout" if isinstance(exc, httpx.TimeoutException) else "connection"
                    return adapter.map_error(RawFailure(kind, None, None, {}), model=model)
                try:
                    return plain_turn(adapter, raw, self.caps, model)
                except ProtocolViolation:
                    if stream and raw is not None:  # see answered_plain
                        return await feed_stream(
                            adapter, as_stream(raw), model=model, on_progress=on_progress, caps=self.caps
                        )
                    # A 2xx body that is not the provider's JSON: the adapter classifies it like
                    # an error body (fatal unless its status says otherwise).
                    return adapter.map_error(
                        RawFailure("http", response.status_code, raw, dict(response.headers)), model=model
                    )
        except httpx.TimeoutException:
            return adapter.map_error(RawFailure("timeout", None, None, {}), model=model)
        except _BROKEN:
            return adapter.map_error(RawFailure("connection", None, None, {}), model=model)


async def _read_error_body(response: httpx.Response) -> bytes | None:
    try:
        return await read_capped(decoded_bytes(response), ERROR_BODY_LIMIT)
    except _BROKEN:  # the status alone must do
        return None
