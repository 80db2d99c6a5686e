"""Helpers shipped for users' own tests: ScriptedModel, ApiError, Stream, StreamCut and FakeClock.

``ScriptedModel(api, responses)`` replays raw provider wire responses through the real adapter (D24):
response k answers the operation's k-th model request, k counted from what the operation has stored,
so a resumed process or another worker continues the script. Each response is one of:

- a dict (or bytes/str of JSON): a plain response body;
- a list of stream events (dicts, ``"[DONE]"``, or a ``StreamCut()`` marker that drops the
  connection there), or raw SSE / JSON-lines text (as a str, or wrapped in ``Stream(text)`` to set its
  chunk size);
- ``ApiError(status, body, headers)``: an HTTP error, classified by the adapter's ``map_error``;
- a function of the request body (a copy) that returns one of the above.

Every request is recorded in ``.requests`` and, by default, checked against the provider's rules
(every call answered exactly once, results first, call ids echoed, signatures carried); a broken
request, or a response function that raises or returns something it cannot play, raises
``ScriptedRequestError``. A response of any other kind (``None``, a number, a bare ``StreamCut()``) is a
``UsageError`` from ``ScriptedModel(...)`` naming its index. A request past the end of the script raises
``ScriptExhausted``, and the operation stays MODEL_REQUESTED for a resume with a longer script. All are
``UsageError``s. ``FakeClock`` is a clock that moves only when told (D23).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any, cast

from .adapters import get as get_adapter
from .adapters.base import Adapter, StreamCaps, body_bytes, capped, response_too_large
from .adapters.sse import looks_like_stream
from .adapters.stream import StreamFeed
from .core.errors import ProtocolViolation, ScriptExhausted, UsageError
from .core.model import ProgressCallback, RequestMeta
from .core.types import ModelTurn, RawFailure
from .runtime.crash import crash_point
from .transports import check_client_args

__all__ = [
    "ApiError",
    "FakeClock",
    "ScriptExhausted",
    "ScriptedModel",
    "ScriptedRequestError",
    "Stream",
    "StreamCut",
]


class ScriptedRequestError(UsageError):
    """callbound (or your code) built a request the provider would reject (D24), or a response
    function of the script raised (its exception is the ``__cause__``)."""


def ApiError(status: int, body: Any = None, headers: dict[str, str] | None = None) -> RawFailure:
    """An HTTP error response for ScriptedModel: a neutral RawFailure the adapter classifies (D30)."""
    return RawFailure("http", status, body, dict(headers or {}))


@dataclass(frozen=True, slots=True)
class StreamCut:
    """Marks where a scripted stream's connection drops."""


@dataclass(frozen=True, slots=True)
class Stream:
    """Raw stream text (SSE or JSON-lines), fed to the shared reader in ``chunk_size`` pieces."""

    text: str | bytes
    chunk_size: int = 4096


def _finite_seconds(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(slots=True)
class FakeClock:
    """A clock that moves only by hand; ``sleep`` advances it instantly (D23).

    ``now()`` is timezone-aware UTC, as D23 asks of every clock: a ``current`` given in another zone is
    moved to UTC, and a naive one (or no datetime at all) is a ``UsageError``. A naive one was kept,
    stamped approvals' expiry naive, and a later resume raised TypeError (naive against aware) out of
    the run (D4). Time only goes forward: ``advance`` takes finite seconds >= 0."""

    current: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    mono: float = 0.0
    slept: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.current, datetime) or self.current.utcoffset() is None:
            raise UsageError(
                f"FakeClock(current=...) takes a timezone-aware datetime, such as "
                f"datetime(2026, 1, 1, tzinfo=UTC), not {self.current!r}"
            )
        self.current = self.current.astimezone(UTC)
        if not _finite_seconds(self.mono):
            raise UsageError(f"FakeClock(mono=...) takes a finite number of seconds, not {self.mono!r}")

    def now(self) -> datetime:
        return self.current

    def monotonic(self) -> float:
        return self.mono

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        # as asyncio.sleep: a wait of no time (or less) returns at once
        if _finite_seconds(seconds) and seconds > 0:
            self._move(seconds)
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        if not _finite_seconds(seconds) or seconds < 0:
            raise UsageError(
                f"FakeClock.advance(seconds) takes a finite number >= 0 (time only goes forward), not {seconds!r}"
            )
        self._move(seconds)

    def _move(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)
        self.mono += seconds


def _is_stream_text(item: str | bytes) -> bool:
    """Text that is a stream, not one body: SSE fields, or several JSON lines. Anything else (JSON, or
    text that is no JSON, which a script may hold to play a malformed body) stays a plain body."""
    head = item[:4096].decode("utf-8", "replace") if isinstance(item, bytes) else item[:4096]
    stripped = head.lstrip("\ufeff \t\r\n")
    if stripped.startswith(("event:", "data:", "id:", "retry:")):
        return True
    text = item.decode("utf-8", "replace") if isinstance(item, bytes) else item
    return stripped.startswith("{") and looks_like_stream(text) == "jsonl"


def _script(responses: object) -> list[Any]:
    """The responses as a list, one per model request. A single body passed without its list was
    iterated by its keys (a dict) or characters (a str), each taken for a response, and ``None`` raised
    TypeError (review round 16, F9)."""
    single = isinstance(responses, dict | str | bytes | bytearray | Stream | StreamCut | RawFailure)
    if single or callable(responses) or isinstance(responses, set | frozenset):
        hint = (
            "a set has no order"
            if isinstance(responses, set | frozenset)
            else "for one response, wrap it in a list: ScriptedModel(api, [response])"
        )
        raise UsageError(
            "ScriptedModel(api, responses): responses is a list with one response per model request "
            f"(a body, a list of stream events, ApiError(...) or a function of the request), not a "
            f"{type(responses).__name__}: {hint}"
        )
    try:
        script = list(cast(Iterable[Any], responses))
    except TypeError:
        raise UsageError(
            "ScriptedModel(api, responses): responses is a list with one response per model request, "
            f"not {type(responses).__name__}"
        ) from None
    for k, item in enumerate(script):
        if not callable(item) and not _playable(item):
            # Found when the operation reached it, as "cannot play a NoneType" with no index: the
            # run had already created and saved an operation a fixed script could not resume cleanly.
            raise UsageError(f"ScriptedModel(api, responses): response {k} (0-based) is {_unplayable(item)}")
    return script


_PLAYABLE = (
    "a body (a dict, JSON text or bytes), a list of stream events, raw SSE or JSON-lines text, "
    "Stream(text), ApiError(...), or a function of the request body that returns one of those"
)


def _playable(item: object) -> bool:
    """What ``ScriptedModel._play`` can play (a function aside)."""
    return isinstance(item, dict | str | bytes | list | Stream | RawFailure)


def _unplayable(item: object) -> str:
    """What ``item`` is, why it cannot be a response, and what to write instead."""
    if isinstance(item, StreamCut):
        return (
            "a bare StreamCut(): it marks where a stream's connection drops, inside a list of stream "
            "events ([event, event, StreamCut()])"
        )
    return f"{item!r:.60} ({type(item).__name__}), which ScriptedModel cannot play: use {_PLAYABLE}"


def _retry_after_from(failure: RawFailure, now: datetime | None) -> RawFailure:
    """``failure`` with an HTTP-date ``Retry-After`` turned into the seconds it names from ``now``, the
    runner's clock. A live client measures the date as it reads the response, on the wall clock, which
    is the runner's; played under a ``FakeClock`` it was measured on the wall clock too, so a test could
    not see the wait a date names (D23, D26)."""
    headers = failure.headers or {}
    key = next((k for k in headers if k.lower() == "retry-after"), None)
    if now is None or key is None or any(k.lower() == "retry-after-ms" for k in headers):
        return failure
    value = str(headers[key]).strip()
    try:
        float(value)
        return failure  # delay-seconds: the adapter reads them as they are
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return failure  # unreadable: the adapter ignores it as it would a live one
    if when.tzinfo is None:  # an HTTP date without a zone is UTC (RFC 9110), as the adapters read it
        when = when.replace(tzinfo=UTC)
    seconds = max(0.0, (when - now).total_seconds())
    return RawFailure(failure.kind, failure.status, failure.body, {**headers, key: repr(seconds)})


class ScriptedModel:
    """Plays ``responses`` in order, one per request (D24): a body (dict, JSON text or bytes), a
    ``Stream`` of raw bytes, a list of stream event payloads, or a ``RawFailure``. A response may also
    be a function of the request body (a copy) that returns one of those: a script that reads the
    results it was sent, as a model would."""

    def __init__(
        self,
        api: str,
        responses: Sequence[Any],
        *,
        check_requests: bool = True,
        model: str | None = None,
        caps: StreamCaps | None = None,
    ) -> None:
        # The live clients' own checks: caps={...} failed every request as a retried connection error.
        check_client_args("ScriptedModel", api, model=model, caps=caps)
        self.api = api
        self._adapter: Adapter = get_adapter(api)
        self.responses = _script(responses)
        self.requests: list[dict[str, Any]] = []
        self.check_requests = check_requests
        self.model = model
        self.caps = caps

    @property
    def adapter(self) -> Adapter:
        return self._adapter

    async def complete(
        self,
        body: dict[str, Any],
        *,
        stream: bool,
        meta: RequestMeta,
        on_progress: ProgressCallback | None = None,
    ) -> ModelTurn:
        self.requests.append(json.loads(json.dumps(body)))
        if self.check_requests:
            try:
                self._adapter.check_request(body, meta.previous)
            except ProtocolViolation as exc:
                raise ScriptedRequestError(f"request {meta.index} breaks {self.api} rules: {exc}") from exc
        k = meta.index
        if k >= len(self.responses):
            raise ScriptExhausted(
                f"ScriptedModel has {len(self.responses)} responses; operation {meta.operation_id} asked for "
                f"response {k} (0-based). Add more responses to the script."
            )
        model = self.model or body.get("model")
        item = self.responses[k]
        if callable(item):
            try:
                # its own copy: it cannot edit the recorded requests
                item = item(json.loads(json.dumps(body)))
            except UsageError:
                raise
            except Exception as exc:
                # A bug in the script, not a failed connection: retried as one, it used up the next
                # responses and ended in "add more responses" with the exception's type alone in a log
                # line (review round 16, F9).
                name = getattr(item, "__qualname__", type(item).__name__)
                raise ScriptedRequestError(
                    f"response {k} (0-based) of the script, the function {name}, raised "
                    f"{type(exc).__name__}: {exc}; fix the function (it gets the request body, a dict)"
                ) from exc
            if not _playable(item):
                # A function that forgot its return played None: "cannot play a NoneType", no index.
                name = getattr(self.responses[k], "__qualname__", type(self.responses[k]).__name__)
                raise ScriptedRequestError(
                    f"response {k} (0-based) of the script, the function {name}, returned {_unplayable(item)}"
                )
        return self._play(item, on_progress, model if isinstance(model, str) else None, meta.now)

    def _play(
        self, item: Any, on_progress: ProgressCallback | None, model: str | None, now: datetime | None = None
    ) -> ModelTurn:
        if isinstance(item, RawFailure):
            return self._adapter.map_error(_retry_after_from(item, now), model=model)
        if isinstance(item, str | bytes) and _is_stream_text(item):
            item = Stream(item)  # raw SSE or JSON-lines text, as issue 3 §4 lets a script hold it
        if isinstance(item, Stream | list):
            return self._play_stream(item, on_progress, model)
        if isinstance(item, dict | str | bytes):
            # every shape of a plain body is held to max_body_bytes, a dict as the JSON it stands for
            # (the transports stop reading there, D1's "a byte cap")
            if len(body_bytes(item)) > (self.caps or StreamCaps()).max_body_bytes:
                return self._adapter.map_error(RawFailure("too_large"), model=model)
            return capped(self._adapter.parse_response(item, model=model), self.caps)
        raise UsageError(f"ScriptedModel cannot play a {type(item).__name__}")

    def _play_stream(
        self, item: Stream | list[Any], on_progress: ProgressCallback | None, model: str | None
    ) -> ModelTurn:
        asm = self._adapter.stream_assembler(self.caps, model=model)
        if isinstance(item, Stream):
            # Raw bytes take the transports' path: SSE reader, then the assembler.
            raw = item.text.encode("utf-8") if isinstance(item.text, str) else item.text
            stream = StreamFeed(asm, on_progress, max_event=(self.caps or StreamCaps()).max_body_bytes)
            try:
                for i in range(0, len(raw), item.chunk_size):
                    stream.feed(raw[i : i + item.chunk_size])
                    if stream.aborted:
                        break
                else:
                    stream.close()
            except ProtocolViolation:
                # An event that is not JSON or bytes that are not UTF-8 end the stream there, as in
                # transports.feed_stream (D24: played as a transport would): a cut stream,
                # TRUNCATED(stream_interrupted) unless its terminal event came first, not an exception.
                pass
            return stream.finish()
        digest = hashlib.sha256()
        cut = False
        max_event = (self.caps or StreamCaps()).max_body_bytes
        for n, payload in enumerate(item):
            if isinstance(payload, StreamCut):
                cut = True
                break
            # The event's data as it would be on the wire (UTF-8 JSON, "é" not escaped), measured in
            # characters as the SSE reader measures an event's data against max_body_bytes
            # (StreamFeed's max_event): a list of events and the same events as SSE text trip at the
            # same size. json.dumps' default ensure_ascii counted an "é" as 6.
            text = (
                payload
                if isinstance(payload, str)
                else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
            )
            if len(text) > max_event:
                return response_too_large(asm.finish(digest.hexdigest()))
            digest.update(f"data: {text}\n\n".encode("utf-8", "surrogatepass"))
            for ev in asm.feed(payload):
                if on_progress is not None:
                    on_progress(ev)
            if n == len(item) // 2:
                crash_point("mid_stream")
            if asm.aborted:
                break
        turn = asm.finish(digest.hexdigest())
        del cut  # a cut stream simply ends early; the assembler decides it was not complete
        return turn
