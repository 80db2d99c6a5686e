"""``GeminiModel``: Gemini over the official ``google-genai`` SDK (extra ``gemini``; imported when a
model is made, never by ``import callbound``), with raw httpx where the SDK cannot hand back raw data.

What google-genai can and cannot hand back raw:

- ``generateContent`` (plain): yes, through the httpx client it is given. ``client.aio.models.
  generate_content(...)`` (``config.should_return_http_response=True``) hands back only the body's
  decoded text, so the SDK sends over an ``httpx.AsyncClient`` of ours whose response hook keeps the
  body bytes as received (D7, D8); the adapter parses those. That client does not follow redirects
  (a 3xx is a fatal failure, as over ``HttpModel``; the SDK's own client followed them, key and body
  included) and keeps google-genai off aiohttp. The request body is the adapter's:
  it is passed whole through ``config.http_options.extra_body`` (the SDK documents it as "extra
  parameters ... in the backend API's request structure"; lists in it replace the SDK's own, so the
  placeholder ``contents`` the SDK insists on never reaches the wire). The one change the SDK makes
  is an empty ``generationConfig: {}`` when the body has none, which means the same to the server
  (the loopback tests check that nothing else differs). Retries are off
  (``HttpRetryOptions(attempts=1)``, which also stops the SDK's implicit retry of connection errors)
  and the timeout is the remaining deadline (D26), which also bounds the request as a whole.
- ``streamGenerateContent``: no. The SDK refuses ``should_return_http_response`` on streams ("not
  supported in streaming methods") and its chunk iterator re-serialises each event after parsing it,
  so the bytes are not the ones received. Streams go over raw httpx (``HttpModel``) instead.
- Interactions: the SDK's generated Interactions client is not used; both plain and streamed
  requests go over raw httpx (``HttpModel``, with ``Api-Revision``).

Turns made over httpx record ``httpx/<version>`` as their client; SDK turns ``google-genai/<version>``.
``APIError`` becomes ``RawFailure("http", code, body, headers)``, except for a 2xx other than 200 (google-genai
raises for it), which is read as the answer, as ``HttpModel`` reads it; connection errors and timeouts
become ``RawFailure("connection")`` / ``RawFailure("timeout")`` (D30). The key comes from
``GOOGLE_API_KEY`` or else ``GEMINI_API_KEY`` unless given (google-genai's order).
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from ..adapters import get as get_adapter
from ..adapters.base import Adapter, StreamCaps
from ..core.errors import ProtocolViolation, UsageError
from ..core.model import ProgressCallback, RequestMeta
from ..core.types import ModelTurn, RawFailure
from . import (
    api_key_for,
    check_client_args,
    effective_timeout,
    missing_key,
    plain_turn,
    stamp_sdk_version,
    transport_errors,
    within_deadline,
)
from .bodycap import body_cap_hook, was_cut
from .checks import env_base_url

__all__ = ["GeminiModel"]

APIS = ("gemini-generate", "gemini-interactions")
API_VERSION = "v1beta"  # the version WIRE.md and the httpx transport use (the SDK's default may differ)


def _load_sdk() -> Any:
    """The ``google.genai`` module, imported on first use."""
    try:
        from google import genai  # type: ignore[import-not-found,import-untyped,attr-defined,unused-ignore]
    except ImportError as exc:
        raise UsageError("GeminiModel needs the official SDK: pip install 'callbound[gemini]'") from exc
    return genai


class GeminiModel:
    """A ``ModelClient`` for ``gemini-generate`` (and ``gemini-interactions``, over httpx).

    ``base_url`` is the server root (e.g. ``http://127.0.0.1:8080``), used by the SDK and by the httpx
    fallback alike; ``model`` is required for gemini-generate (it is part of the URL)."""

    def __init__(
        self,
        api: str = "gemini-generate",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        timeout_s: float | None = None,
        caps: StreamCaps | None = None,
    ) -> None:
        if api not in APIS:
            raise UsageError(f"GeminiModel serves {', '.join(APIS)}, not {api!r}")
        check_client_args(
            "GeminiModel",
            api,
            model=model,
            base_url=base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            caps=caps,
        )
        if base_url is None:
            env_base_url(api)  # GOOGLE_GEMINI_BASE_URL checked now, as over HttpModel (the SDK reads it too)
        self.api = api
        self._adapter: Adapter = get_adapter(api)
        self.base_url = base_url
        self._api_key = api_key
        self.model = model
        self.timeout_s = timeout_s
        self.caps = caps
        self._sdk = _load_sdk()
        self.sdk_version = f"google-genai/{self._sdk.__version__}"
        self._http: Any = None

    @property
    def adapter(self) -> Adapter:
        return self._adapter

    def __repr__(self) -> str:
        return f"GeminiModel({self.api!r}, base_url={self.base_url!r}, model={self.model!r})"

    def _key(self) -> str:
        key = self._api_key or api_key_for(self.api)
        if not key:
            raise UsageError(
                f"{self.api} needs an API key: set the environment variable {missing_key(self.api)}"
            )
        return key

    def _httpx_model(self) -> Any:
        if self._http is None:
            from .http import HttpModel

            self._http = HttpModel(
                self.api,
                base_url=self.base_url,
                api_key=self._key(),
                model=self.model,
                timeout_s=self.timeout_s,
                caps=self.caps,
            )
        return self._http

    async def complete(
        self,
        body: dict[str, Any],
        *,
        stream: bool,
        meta: RequestMeta,
        on_progress: ProgressCallback | None = None,
    ) -> ModelTurn:
        if stream or self.api != "gemini-generate":
            turn: ModelTurn = await self._httpx_model().complete(
                body, stream=stream, meta=meta, on_progress=on_progress
            )
            return turn
        if not self.model:
            raise UsageError("gemini-generate needs a model name: GeminiModel(..., model='gemini-...')")
        timeout = effective_timeout(meta.timeout_s, self.timeout_s)
        request = self._generate(body, timeout)
        turn = await within_deadline(self._adapter, request, meta.timeout_s, model=self.model)
        return stamp_sdk_version(turn, self.sdk_version)

    async def _generate(self, body: dict[str, Any], timeout: float) -> ModelTurn:
        key = self._key()
        received: list[httpx.Response] = []

        async def keep(response: httpx.Response) -> None:
            await response.aread()  # read here, so the SDK's own read finds it read
            received.append(response)

        # Our own httpx client, as HttpModel's (review 14): (1) redirects are not followed (the SDK's
        # followed them, sending the body, and x-goog-api-key, which httpx strips only as
        # Authorization, to the origin a 307 names; a 302 became a GET whose 200 was taken as the
        # model's turn); (2) the hook keeps the body bytes as received (D7, D8): the SDK hands back
        # only Response.text, decoded with errors="replace" or the header's charset, so invalid UTF-8
        # became a successful turn with U+FFFD and raw_sha256 was not the digest of the bytes; (3) a
        # given httpx client keeps google-genai off aiohttp, whose exceptions it would raise instead;
        # (4) body_cap_hook, before ``keep``, ends a body at its cap (StreamCaps.max_body_bytes, or
        # ERROR_BODY_LIMIT for an error), so neither the hook nor the SDK reads more than that
        # (review round 17, r4 F1: a 200 MB body was read whole, the cut came after).
        cap = body_cap_hook((self.caps or StreamCaps()).max_body_bytes)
        http_client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout), follow_redirects=False, event_hooks={"response": [cap, keep]}
        )
        try:
            return await self._send(body, timeout, key, http_client, received)
        finally:
            await http_client.aclose()  # google-genai leaves a client it was given open

    async def _send(
        self,
        body: dict[str, Any],
        timeout: float,
        key: str,
        http_client: httpx.AsyncClient,
        received: list[httpx.Response],
    ) -> ModelTurn:
        genai = self._sdk
        types = genai.types
        errors = genai.errors
        model = self.model
        timeout_ms = max(1, int(timeout * 1000))
        no_retries = types.HttpRetryOptions(attempts=1)
        client = genai.Client(
            api_key=key,
            http_options=types.HttpOptions(
                base_url=self.base_url,
                api_version=API_VERSION,
                timeout=timeout_ms,
                retry_options=no_retries,
                httpx_async_client=http_client,
            ),
        )
        config = types.GenerateContentConfig(
            should_return_http_response=True,
            http_options=types.HttpOptions(
                extra_body=json.loads(json.dumps(body)), timeout=timeout_ms, retry_options=no_retries
            ),
        )
        broken = transport_errors()
        try:
            await client.aio.models.generate_content(model=model, contents=".", config=config)
        except errors.APIError as exc:
            # google-genai takes any status but 200 for an error; another 2xx (a proxy's 203, say) is an
            # answer, read as HttpModel reads it
            if not (received and 200 <= received[-1].status_code < 300):
                return self._adapter.map_error(_api_error_failure(exc), model=model)
        except broken as exc:
            kind = "timeout" if "timeout" in type(exc).__name__.lower() else "connection"
            return self._adapter.map_error(RawFailure(kind, None, None, {}), model=model)
        except TimeoutError:
            return self._adapter.map_error(RawFailure("timeout", None, None, {}), model=model)
        except UnicodeDecodeError:
            # google-genai decodes an error body as JSON before raising APIError; not UTF-8, it raises
            # this instead: the status and the bytes received still make the failure (D30).
            if not received:
                raise
            failed = received[-1]
            content = None if was_cut(failed) else failed.content
            failure = RawFailure("http", failed.status_code, content, dict(failed.headers))
            return self._adapter.map_error(failure, model=model)
        finally:
            await client.aio.aclose()
        if not received:  # cannot happen while the SDK sends over http_client; never guess the bytes
            return self._adapter.map_error(RawFailure("connection", None, None, {}), model=model)
        answer = received[-1]
        # The hook has read the body, up to the cap: over it the turn is TRUNCATED(response_too_large).
        raw = None if was_cut(answer) else answer.content
        try:
            return plain_turn(self._adapter, raw, self.caps, model)
        except ProtocolViolation:
            failure = RawFailure("http", answer.status_code, raw, dict(answer.headers))
            return self._adapter.map_error(failure, model=model)


def _api_error_failure(exc: Any) -> RawFailure:
    """google-genai's ``APIError`` as a neutral failure: the status, the body bytes as received when
    the SDK kept the response, else its parsed details, and the headers."""
    response = getattr(exc, "response", None)
    body: bytes | str | dict[str, Any] | None = None
    headers: dict[str, str] = {}
    cut = response is not None and was_cut(response)
    if response is not None:
        try:
            content = response.content
            body = content if isinstance(content, bytes) else None
        except Exception:  # an unread stream body; fall back to the parsed details
            body = None
        raw_headers = getattr(response, "headers", None)
        if raw_headers is not None:
            headers = {str(k): str(v) for k, v in dict(raw_headers).items()}
    if cut:
        # over ERROR_BODY_LIMIT: the status alone must do, as over HttpModel (the SDK's details were
        # parsed from the part read, so they go too)
        body = None
    elif body is None and exc.details is not None:
        body = json.dumps(exc.details).encode("utf-8")
    status = exc.code if isinstance(exc.code, int) else None
    return RawFailure("http", status, body, headers)
