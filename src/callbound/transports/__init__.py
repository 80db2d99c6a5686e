"""Live model clients (ModelClient, ``core/model.py``): official SDKs and raw httpx.

- ``http.HttpModel`` talks to all five APIs over raw ``httpx``.
- ``openai.OpenAIModel`` (Responses and Chat), ``anthropic.AnthropicModel`` and ``gemini.GeminiModel``
  use the official SDKs (optional extras ``openai``, ``anthropic``, ``gemini``).

Every client sends the adapter-built body, hands the adapter the provider's raw bytes (a body, or the
bytes of a stream read through the shared SSE reader), never retries on its own (the Runner retries,
D26), never follows a redirect (a 3xx is a fatal failure: the body and key stay with the server asked),
and turns SDK and httpx exceptions into a neutral ``RawFailure`` for ``adapter.map_error``
alone to classify (D30).

Every request, connect through the last byte, plain or streamed, is bounded by the remaining active
deadline (``RequestMeta.timeout_s``, D14, D26) as a whole, on top of the per-phase timeouts of httpx
and the SDKs: those restart with every byte read, so a server that keeps sending (SSE pings, a body
trickling in) would never trip them. A request cut by the deadline returns the failure turn a timeout
maps to, like any other timeout.

Nothing here imports an SDK or httpx at import time: ``import callbound`` never loads them. The
helpers below are what the transports share: the missing-key check, the stream feeder, the capped
read of a plain body (``StreamCaps.max_body_bytes``), the deadline bound and the SDK version stamp.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import os
import sys
from collections.abc import AsyncIterator, Awaitable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..adapters.base import Adapter, StreamCaps, capped
from ..adapters.stream import StreamFeed
from ..core.errors import ProtocolViolation, UsageError
from ..core.model import ProgressCallback, RequestMeta
from ..core.types import ModelTurn, RawFailure
from .bodycap import body_cap_hook, decoded_bytes, was_cut
from .checks import check_client_args, check_key, sdk_base_url

if TYPE_CHECKING:
    from ..core.model import ModelClient

__all__ = [
    "API_KEY_ENV",
    "SDK_EXTRA",
    "TRANSPORTS",
    "api_key_for",
    "check_client_args",
    "check_key",
    "effective_timeout",
    "feed_stream",
    "make_client",
    "missing_key",
    "plain_turn",
    "read_capped",
    "split_kwargs",
    "stainless_complete",
    "stamp_sdk_version",
    "transport_errors",
    "within_deadline",
]

TRANSPORTS = ("sdk", "http")

#: The environment variables each API's key is read from, in the order the SDKs look them up (google-genai
#: prefers GOOGLE_API_KEY when both are set, and says so in a warning).
API_KEY_ENV: dict[str, tuple[str, ...]] = {
    "openai-responses": ("OPENAI_API_KEY",),
    "openai-chat": ("OPENAI_API_KEY",),
    "anthropic-messages": ("ANTHROPIC_API_KEY",),
    "gemini-generate": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "gemini-interactions": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
}

#: Which SDK extra serves an API with ``transport="sdk"``.
SDK_EXTRA = {
    "openai-responses": "openai",
    "openai-chat": "openai",
    "anthropic-messages": "anthropic",
    "gemini-generate": "gemini",
    "gemini-interactions": "gemini",
}


def _env_names(api: str) -> tuple[str, ...]:
    names = API_KEY_ENV.get(api)
    if names is None:
        raise UsageError(f"unknown API {api!r}; use one of {', '.join(API_KEY_ENV)}")
    return names


def api_key_for(api: str) -> str | None:
    """The API key for ``api`` from the SDKs' usual environment variables, or None."""
    for name in _env_names(api):
        value = os.environ.get(name)
        if value:
            check_key(value, f"the environment variable {name}")
            return value
    return None


def missing_key(api: str) -> str | None:
    """None when a key for ``api`` is set; otherwise the environment variable to set (for Gemini the
    text names both accepted variables)."""
    if api_key_for(api) is not None:
        return None
    return " or ".join(_env_names(api))


def make_client(
    api: str,
    *,
    transport: str = "sdk",
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout_s: float | None = None,
    require_key: bool = True,
) -> ModelClient:
    """A live client for ``api``. ``transport="sdk"`` uses the official SDK (its extra must be
    installed); ``"http"`` uses raw httpx. Raises ``UsageError`` when the key is missing, the
    transport is unknown or the SDK is not installed.

    ``require_key=False`` defers the key check to the first request, which then raises the same
    ``UsageError``: for an application rebuilt only to record an approval decision, which never
    talks to the model (any process decides, without the provider's key).

    ``base_url`` is the server's root, the same for both transports (``--base-url`` of the CLI);
    ``/v1`` after it is accepted too. The OpenAI SDK wants its ``/v1`` in the URL and HttpModel adds
    it itself, so one URL reaches the same paths either way."""
    check_client_args(
        "make_client", api, model=model, base_url=base_url, api_key=api_key, timeout_s=timeout_s
    )
    _env_names(api)
    if api_key == "":
        # accepted, it deferred the "needs an API key" error to the first request, after the operation
        # was stored (the clients read "" as no key), while an empty variable is no key here at once
        # (review round 16, F12)
        raise UsageError(
            f"make_client(api_key='') is empty: pass the key, or None to read it from "
            f"{' or '.join(_env_names(api))}"
        )
    base_url = _server_root(base_url)
    if transport not in TRANSPORTS:
        raise UsageError(f"unknown transport {transport!r}; use one of {', '.join(TRANSPORTS)}")
    if require_key and api_key is None and missing_key(api) is not None:
        raise UsageError(f"{api} needs an API key: set the environment variable {missing_key(api)}")
    if api == "gemini-generate" and not model:
        raise UsageError("gemini-generate puts the model in the URL: pass a model name")
    if transport == "http":
        try:
            from .http import HttpModel
        except ImportError as exc:
            raise UsageError(f"the http transport needs httpx: pip install httpx ({exc})") from exc
        return HttpModel(api, base_url=base_url, api_key=api_key, model=model, timeout_s=timeout_s)
    extra = SDK_EXTRA[api]
    try:
        if extra == "openai":
            from .openai import OpenAIModel

            sdk_url = None if base_url is None else f"{base_url}/v1"
            return OpenAIModel(api, base_url=sdk_url, api_key=api_key, model=model, timeout_s=timeout_s)
        if extra == "anthropic":
            from .anthropic import AnthropicModel

            return AnthropicModel(api, base_url=base_url, api_key=api_key, model=model, timeout_s=timeout_s)
        from .gemini import GeminiModel

        return GeminiModel(api, base_url=base_url, api_key=api_key, model=model, timeout_s=timeout_s)
    except ImportError as exc:
        raise UsageError(
            f"the {api} SDK transport needs the official SDK: pip install 'callbound[{extra}]' "
            f"(or use transport='http'): {exc}"
        ) from exc


# ---- shared by the transports ---------------------------------------------------------------------


def transport_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the connection broke" while reading a body or stream, from httpx and
    from httpx2 (which newer SDKs use), whichever are installed, plus OSError. ``DecodingError`` (bytes
    that do not match their content-encoding, e.g. from a misconfigured proxy) is one of them: it is
    not a ``TransportError``, yet nothing usable arrived either, so it fails the same way (D26)."""
    found: list[type[BaseException]] = [OSError]
    for name in ("httpx", "httpx2"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        for attr in ("TransportError", "StreamError", "DecodingError"):
            cls = getattr(module, attr, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                found.append(cls)
    # aiohttp, once something loaded it (google-genai sends over it when it is installed; openai's
    # DefaultAioHttpClient): its ClientPayloadError (a body cut mid-way, bytes that do not match their
    # content-encoding) and ServerDisconnectedError are no OSError, and escaped complete() (D4, D30).
    aiohttp = sys.modules.get("aiohttp")
    cls = getattr(aiohttp, "ClientError", None)
    if isinstance(cls, type) and issubclass(cls, BaseException):
        found.append(cls)
    return tuple(found)


def _server_root(base_url: str | None) -> str | None:
    """``base_url`` without a trailing slash or ``/v1``: the root every client adds its paths to."""
    if base_url is None:
        return None
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


async def feed_stream(
    adapter: Adapter,
    chunks: AsyncIterator[bytes],
    *,
    model: str | None,
    on_progress: ProgressCallback | None,
    caps: StreamCaps | None = None,
    broken: tuple[type[BaseException], ...] = (),
) -> ModelTurn:
    """Read raw stream bytes through the shared SSE reader into the adapter's assembler.

    ``finish`` gets the SHA-256 of every byte received. A stream that breaks mid-way (an exception in
    ``broken``, or an event that is not JSON) simply ends there: the assembler says TRUNCATED
    (``stream_interrupted``, retryable) when its terminal event never came (D1, D26)."""
    stream = StreamFeed(
        adapter.stream_assembler(caps, model=model),
        on_progress,
        max_event=(caps or StreamCaps()).max_body_bytes,
    )
    flight = _InFlight(stream)
    in_flight = _IN_FLIGHT.get()
    if in_flight is not None:
        in_flight.append(flight)  # so that within_deadline can still count its usage if the deadline cuts it
    try:
        async for chunk in chunks:
            if not chunk:
                continue
            stream.feed(chunk)
            if stream.aborted or stream.complete:
                break  # a cap tripped, or the turn is finished: a connection left open holds nothing back
        else:
            stream.close()
    except ProtocolViolation:
        pass  # garbage on the wire: the stream is unusable from here on, like a cut one
    except broken:
        with contextlib.suppress(ProtocolViolation):
            stream.close()  # D33: a last event whose data is complete still counts
    return flight.finish()


class _InFlight:
    """A stream being read under ``within_deadline``; ``finish`` ends it once (an assembler's
    ``finish`` is not called twice), whether the stream ended or the deadline cut it."""

    __slots__ = ("stream", "turn")

    def __init__(self, stream: StreamFeed) -> None:
        self.stream = stream
        self.turn: ModelTurn | None = None

    def finish(self) -> ModelTurn:
        if self.turn is None:
            self.turn = self.stream.finish()
        return self.turn


# The streams read by the request that ``within_deadline`` is bounding (set only while it runs): when
# the deadline cuts one, the usage it reported so far still counts (D27).
_IN_FLIGHT: contextvars.ContextVar[list[_InFlight] | None] = contextvars.ContextVar(
    "callbound_streams_in_flight", default=None
)


def answered_plain(headers: Any) -> bool:
    """A stream request answered with a plain JSON body: a gateway or server that ignores
    ``stream: true`` and sends the whole response. Read through the SSE reader it held no event, so the
    turn was TRUNCATED(stream_interrupted), retried and paid for again until INCOMPLETE, though the
    answer was complete. No event stream is ``application/json`` (or ``+json``): read it as a plain body."""
    kind = str(headers.get("content-type", "")).split(";", 1)[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


async def as_stream(raw: bytes) -> AsyncIterator[bytes]:
    """A body read whole, fed to the stream reader: an answer to a stream request sent as
    ``application/json`` that is not the provider's JSON (``plain_turn`` refused it) is read as the
    event stream it may be under the wrong content type, or as the raw error object it holds."""
    yield raw


async def read_capped(chunks: AsyncIterator[bytes], limit: int) -> bytes | None:
    """A plain body, read whole; ``None`` as soon as it goes over ``limit`` bytes
    (``StreamCaps.max_body_bytes``), without reading the rest."""
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
    return b"".join(parts)


def plain_turn(adapter: Adapter, raw: bytes | None, caps: StreamCaps | None, model: str | None) -> ModelTurn:
    """The turn of a plain 2xx body: TRUNCATED(response_too_large) for ``None`` (over the body cap) or
    a body over it, else the adapter's parse with the argument caps. Raises ``ProtocolViolation`` when
    the body is not the provider's JSON (the caller classifies it like an error body)."""
    limit = (caps or StreamCaps()).max_body_bytes
    if raw is None or len(raw) > limit:
        return adapter.map_error(RawFailure("too_large"), model=model)
    return capped(adapter.parse_response(raw, model=model), caps, len(raw))


def stamp_sdk_version(turn: ModelTurn, sdk_version: str) -> ModelTurn:
    """Record which client produced the turn (``ModelTurn`` is frozen)."""
    return replace(turn, provenance=replace(turn.provenance, sdk_version=sdk_version))


def effective_timeout(
    meta_timeout_s: float | None, configured_s: float | None, default_s: float = 600.0
) -> float:
    """The request timeout: the remaining active deadline (D26), capped by a configured timeout."""
    candidates = [t for t in (meta_timeout_s, configured_s) if t is not None]
    value = min(candidates) if candidates else default_s
    return max(value, 0.001)


async def within_deadline(
    adapter: Adapter, request: Awaitable[ModelTurn], meta_timeout_s: float | None, *, model: str | None
) -> ModelTurn:
    """``request`` bounded as a whole by the remaining active deadline (D14, D26): past it, the
    failure turn a timeout maps to, never an exception (D4). Per-phase timeouts restart with every
    byte, so they alone never stop a server that keeps trickling bytes.

    A stream the deadline cuts keeps the usage it reported (Anthropic's ``message_start`` input
    tokens, say) on that failure turn, as a stream the connection cuts does (D27: the running usage
    counts however the stream ended): ``feed_stream`` registers its reader here. Only the deadline's
    own cancellation becomes that turn (``asyncio.timeout`` turns it into ``TimeoutError``); any other
    ``CancelledError`` goes on unchanged."""
    limit = None if meta_timeout_s is None else max(meta_timeout_s, 0.001)
    in_flight: list[_InFlight] = []
    token = _IN_FLIGHT.set(in_flight)
    try:
        async with asyncio.timeout(limit):
            return await request
    except TimeoutError:
        turn = adapter.map_error(RawFailure("timeout", None, None, {}), model=model)
        if in_flight:
            # The reader is never mid-chunk here: the cut came at an await between chunks.
            turn = replace(turn, usage=in_flight[-1].finish().usage)
        return turn
    finally:
        _IN_FLIGHT.reset(token)


def split_kwargs(method: Any, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a wire body into the keyword arguments an SDK method declares and the rest, which goes
    through ``extra_body`` so that the JSON sent is the adapter's body, key for key."""
    params = inspect.signature(method).parameters
    reserved = {"extra_headers", "extra_query", "extra_body", "timeout"}
    known: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in body.items():
        p = params.get(key)
        if p is not None and key not in reserved and p.kind is inspect.Parameter.KEYWORD_ONLY:
            known[key] = value
        else:
            extra[key] = value
    return known, extra


async def stainless_complete(
    sdk: Any,
    resource: Any,
    adapter: Adapter,
    body: dict[str, Any],
    *,
    stream: bool,
    timeout: float,
    model: str | None,
    on_progress: ProgressCallback | None,
    caps: StreamCaps | None = None,
) -> ModelTurn:
    """One request through an OpenAI- or Anthropic-style SDK resource (``client.responses``,
    ``client.chat.completions``, ``client.messages``), reading the raw bytes back through
    ``resource.with_streaming_response.create(...)``: the body's bytes (``decoded_bytes``: 64 KiB at a
    time however compressed, even over an SDK on httpx, which undoes a received chunk whole), a plain
    body read up to ``StreamCaps.max_body_bytes``, a stream through callbound's SSE reader (never the
    SDK's own event parser). SDK exceptions become a ``RawFailure`` (D30): ``APIStatusError`` → "http" with
    the status, body bytes and headers; ``APITimeoutError`` → "timeout"; ``APIConnectionError`` →
    "connection"."""
    known, extra = split_kwargs(resource.create, body)
    options: dict[str, Any] = {"timeout": timeout}
    if extra:
        options["extra_body"] = extra
    broken = transport_errors()
    try:
        async with resource.with_streaming_response.create(**known, **options) as response:
            http_response = response.http_response
            if stream and not answered_plain(http_response.headers):
                return await feed_stream(
                    adapter,
                    decoded_bytes(http_response),
                    model=model,
                    on_progress=on_progress,
                    caps=caps,
                    broken=(*broken, sdk.APIConnectionError),
                )
            try:
                limit = (caps or StreamCaps()).max_body_bytes
                content = await read_capped(decoded_bytes(http_response), limit)
            except broken as exc:
                kind = "timeout" if "timeout" in type(exc).__name__.lower() else "connection"
                return adapter.map_error(RawFailure(kind, None, None, {}), model=model)
        try:
            return plain_turn(adapter, content, caps, model)
        except ProtocolViolation:
            if stream and content is not None:  # see answered_plain
                return await feed_stream(
                    adapter, as_stream(content), model=model, on_progress=on_progress, caps=caps
                )
            failure = RawFailure("http", http_response.status_code, content, dict(http_response.headers))
            return adapter.map_error(failure, model=model)
    except sdk.APIStatusError as exc:
        response = exc.response
        try:
            # over ERROR_BODY_LIMIT the SDK read only that much (body_cap_hook): the status alone must
            # do, as over HttpModel
            err_body: bytes | None = None if was_cut(response) else response.content
        except Exception:  # the body could not be read; the status alone must do
            err_body = None
        failure = RawFailure("http", exc.status_code, err_body, dict(response.headers))
        return adapter.map_error(failure, model=model)
    except sdk.APITimeoutError:
        return adapter.map_error(RawFailure("timeout", None, None, {}), model=model)
    except sdk.APIConnectionError:
        return adapter.map_error(RawFailure("connection", None, None, {}), model=model)
    except broken as exc:
        # Raised by the SDK itself, unwrapped: reading an error body whose bytes do not match its
        # content-encoding (the status is lost with it) or the connection breaking as it does.
        kind = "timeout" if "timeout" in type(exc).__name__.lower() else "connection"
        return adapter.map_error(RawFailure(kind, None, None, {}), model=model)


class StainlessModel:
    """What the OpenAI and Anthropic SDK clients share (both SDKs are Stainless-generated): the SDK
    loaded on first use, a client with retries off, the request's timeout (D26), redirects not
    followed and an error body read no further than ``ERROR_BODY_LIMIT`` (``body_cap_hook``; a client
    of your own keeps its HTTP client's settings), and one
    ``complete`` that hands the raw body or stream to the adapter. Subclasses name the client class
    and the resource that creates a response."""

    client_class = ""
    default_base_url = ""  # the provider's URL as the SDK takes it

    def __init__(
        self,
        api: str,
        sdk: Any,
        *,
        base_url: str | None,
        api_key: str | None,
        model: str | None,
        timeout_s: float | None,
        client: Any,
        caps: StreamCaps | None,
    ) -> None:
        from ..adapters import get as get_adapter

        check_client_args(
            type(self).__name__,
            api,
            model=model,
            base_url=base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            caps=caps,
        )
        self.api = api
        self._adapter: Adapter = get_adapter(api)
        self.base_url = base_url
        # its SDK's variable checked now, a UsageError naming it (as over HttpModel), not every request
        # a retried connection error; a client of your own keeps its own URL
        self._sdk_url = None if client is not None else sdk_base_url(api, base_url, self.default_base_url)
        self._api_key = api_key
        self.model = model
        self.timeout_s = timeout_s
        self.client = client
        self.caps = caps
        self._sdk = sdk
        self.sdk_version = f"{sdk.__name__}/{sdk.__version__}"

    @property
    def adapter(self) -> Adapter:
        return self._adapter

    def _resource(self, client: Any) -> Any:
        raise NotImplementedError

    def _client(self, timeout: float) -> tuple[Any, bool]:
        """(client, owned): a client with retries off and the request's timeout."""
        if self.client is not None:
            return self.client.with_options(max_retries=0, timeout=timeout), False
        key = self._api_key or api_key_for(self.api)
        if not key:
            raise UsageError(
                f"{self.api} needs an API key: set the environment variable {missing_key(self.api)}"
            )
        factory = getattr(self._sdk, self.client_class)
        # Redirects not followed, as HttpModel: the SDKs' httpx client followed them, sending the body
        # to the origin a 307 names, or turning a 302 into a GET whose 200 was taken as the model's
        # turn (its tool calls would run). A 3xx is an APIStatusError, a fatal failure (review 14).
        # DefaultAsyncHttpxClient keeps the SDK's own defaults (limits, keep-alive) otherwise. The hook
        # caps an error body, which the SDK reads whole before it raises (review round 17, r4 F1).
        http = self._sdk.DefaultAsyncHttpxClient(
            timeout=timeout, follow_redirects=False, event_hooks={"response": [body_cap_hook(None)]}
        )
        client = factory(
            api_key=key,
            base_url=self._sdk_url,
            max_retries=0,
            timeout=timeout,
            http_client=http,
            default_headers=self._default_headers(),
        )
        return self._settle(client, key), True

    def _default_headers(self) -> dict[str, Any]:
        """Headers the SDK client is made with (none here; AnthropicModel pins its API version)."""
        return {}

    def _settle(self, client: Any, key: str) -> Any:
        """The client made by ``_client``, adjusted after the fact where a subclass must."""
        return client

    async def complete(
        self,
        body: dict[str, Any],
        *,
        stream: bool,
        meta: RequestMeta,
        on_progress: ProgressCallback | None = None,
    ) -> ModelTurn:
        if self.model and not body.get("model"):
            body = {**body, "model": self.model}
        name = body.get("model")
        model = name if isinstance(name, str) else None
        timeout = effective_timeout(meta.timeout_s, self.timeout_s)
        client, owned = self._client(timeout)
        try:
            resource = self._resource(client)
            # A body without a keyword the SDK requires (``model`` for Chat and Messages) made the SDK
            # raise TypeError before sending: retried as a connection error, FAILED(CONNECTION_ERROR).
            params = inspect.signature(resource.create).parameters.values()
            required = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
            missing = [name for name in required if body.get(name) is None]
            if "model" in missing:
                raise UsageError(
                    f"{self.api} needs a model name: {type(self).__name__}(..., model='...') "
                    "or settings={'model': ...}"
                )
            if missing:
                raise UsageError(
                    f"{self.api}: the request body lacks {', '.join(missing)}, which the SDK requires"
                )
            request = stainless_complete(
                self._sdk,
                resource,
                self._adapter,
                body,
                stream=stream,
                timeout=timeout,
                model=model,
                on_progress=on_progress,
                caps=self.caps,
            )
            turn = await within_deadline(self._adapter, request, meta.timeout_s, model=model)
        finally:
            if owned:
                await client.close()
        return stamp_sdk_version(turn, self.sdk_version)
