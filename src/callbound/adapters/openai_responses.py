"""OpenAI Responses API adapter (``openai-responses``). Facts: WIRE.md section 1.

- Calls are ``function_call`` output items; results are ``function_call_output`` items keyed by
  ``call_id`` (never the ``fc_`` item id).
- Continuation (D8): stateless replay by default: every output item of the turn (reasoning items with
  ``encrypted_content``, messages with ``phase``, function calls) is resent unchanged, then the
  outputs. ``previous_response_id`` is opt-in (``settings["continuation"] = "previous_response_id"``).
- Status mapping (D1): ``completed`` → TOOL_PROPOSALS if function_call items else FINAL_TEXT;
  a refusal content part → REFUSAL (D31); ``incomplete`` + ``max_output_tokens`` → TRUNCATED;
  ``incomplete`` + ``content_filter`` → REFUSAL; ``failed``/``cancelled`` → API_FAILURE; anything else
  → API_FAILURE(unknown_stop_reason).
- Tool schema (D9): ``$ref`` inlined, OpenAI strict transform where the schema allows it.
- Streaming: final items come from ``response.output_item.done`` keyed by ``output_index`` (the
  terminal snapshot may have an empty ``output``); argument deltas are kept as a list and joined once.
  Argument deltas made of the members the API sends are read from the raw event text without the
  JSON parser (``feed_events``, the fast path of ``callbound.adapters.stream``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..core.errors import ProtocolViolation
from ..core.model import ProgressCallback
from ..core.registry import ToolDeclaration
from ..core.types import (
    ArgumentsProgress,
    CallReady,
    CallStarted,
    Failure,
    Finish,
    ModelTurn,
    Progress,
    Provenance,
    RawFailure,
    ToolCall,
    Usage,
)
from .base import (
    QUOTA_CODES,
    StreamCaps,
    decode_body,
    failure_turn,
    http_retryable,
    join_fragments,
    make_call,
    map_failure,
    result_text,
    retry_after_seconds,
    stream_cut_turn,
    synthetic_response_id,
    too_large_turn,
    utf8_len,
)
from .schema import openai_strict
from .sse import JSON_INT, JSON_STRING, RawEvent, simple_event, string_value
from .stream import decode_raw

API = "openai-responses"
PROVIDER = "openai"
REVISION = "openai-responses/1"

RETRYABLE_ERROR_CODES = frozenset({"server_error", "rate_limit_exceeded", "server_is_overloaded", "timeout"})


def _provenance(model: Any) -> Provenance:
    return Provenance(PROVIDER, API, model if isinstance(model, str) else None, REVISION)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    # D27: input_tokens already includes cached tokens; output_tokens includes reasoning tokens.
    return Usage(_count(raw.get("input_tokens")), _count(raw.get("output_tokens")))


def _error_fields(err: Any) -> tuple[str | None, str | None]:
    if not isinstance(err, dict):
        return None, None
    etype = err.get("type")
    code = err.get("code")
    return (etype if isinstance(etype, str) else None), (code if isinstance(code, str) else None)


def _retryable_code(etype: str | None, code: str | None) -> bool:
    if code in QUOTA_CODES or etype in QUOTA_CODES:
        return False
    return code in RETRYABLE_ERROR_CODES or etype in RETRYABLE_ERROR_CODES


def _event_error_fields(event: dict[str, Any]) -> tuple[str | None, str | None]:
    """The ``error`` stream event comes flat (SDK: ``code``/``message`` beside ``type: "error"``) or
    nested (recordings: ``error: {type, code, message}``). In the flat shape ``type`` names the event,
    not the error."""
    nested = event.get("error")
    if isinstance(nested, dict):
        return _error_fields(nested)
    code = event.get("code")
    return None, code if isinstance(code, str) else None


def turn_from_response(
    resp: dict[str, Any], raw_sha256: str, output: list[dict[str, Any]] | None = None
) -> ModelTurn:
    """Map a complete Response object (plain body or terminal stream snapshot) to a ModelTurn."""
    prov = _provenance(resp.get("model"))
    given_id = resp.get("id")
    rid = given_id if isinstance(given_id, str) and given_id else synthetic_response_id(raw_sha256)
    raw_items = output if output is not None else resp.get("output")
    items = [i for i in raw_items if isinstance(i, dict)] if isinstance(raw_items, list) else []
    usage = _usage(resp.get("usage"))
    status = resp.get("status")

    text_parts: list[str] = []
    refusal_parts: list[str] = []
    calls: list[ToolCall] = []
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind == "message":
            content = item.get("content")
            for part in content if isinstance(content, list) else []:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    text_parts.append(part["text"])
                elif part.get("type") == "refusal":
                    refusal = part.get("refusal")
                    refusal_parts.append(refusal if isinstance(refusal, str) else "")
        elif kind == "function_call":
            call_id = item.get("call_id")
            calls.append(
                make_call(
                    PROVIDER,
                    API,
                    rid,
                    call_id if isinstance(call_id, str) else None,
                    item.get("name"),
                    item.get("arguments"),
                    index,
                )
            )
        # reasoning, hosted tool calls (web_search_call, ...) travel in the continuation only (D31)

    def turn(
        finish: Finish, raw: str | None, reason: str | None, failure: Failure | None = None
    ) -> ModelTurn:
        return ModelTurn(
            api=API,
            response_id=rid,
            finish=finish,
            raw_stop_reason=raw,
            reason=reason,
            calls=tuple(calls),  # kept for display; only TOOL_PROPOSALS turns execute
            text="".join(text_parts),
            refusal="".join(refusal_parts) if refusal_parts else None,
            usage=usage,
            continuation=tuple(items),
            provenance=prov,
            raw_sha256=raw_sha256,
            failure=failure,
        )

    if status == "completed":
        if refusal_parts:
            return turn(Finish.REFUSAL, "completed", "refusal")
        if calls:
            return turn(Finish.TOOL_PROPOSALS, "completed", None)
        return turn(Finish.FINAL_TEXT, "completed", None)
    if status == "incomplete":
        details = resp.get("incomplete_details")
        why = details.get("reason") if isinstance(details, dict) else None
        why = why if isinstance(why, str) else None
        if refusal_parts or why == "content_filter":
            reason = "content_filter" if why == "content_filter" else "refusal"
            return turn(Finish.REFUSAL, why or "incomplete", reason)
        if why == "max_output_tokens":
            return turn(Finish.TRUNCATED, why, "max_tokens")
        return turn(Finish.API_FAILURE, why or "incomplete", "unknown_stop_reason", Failure("status", False))
    if status == "failed":
        etype, code = _error_fields(resp.get("error"))
        return turn(
            Finish.API_FAILURE,
            code or etype or "failed",
            "api_error",
            Failure("status", _retryable_code(etype, code), None, etype, code),
        )
    if status == "cancelled":
        return turn(Finish.API_FAILURE, "cancelled", "cancelled", Failure("status", False))
    raw = status if isinstance(status, str) else None
    return turn(Finish.API_FAILURE, raw, "unknown_stop_reason", Failure("status", False))


def _error_body_turn(
    err: dict[str, Any],
    raw_sha256: str,
    status: int | None,
    headers: dict[str, str],
    model: str | None = None,
) -> ModelTurn:
    etype, code = _error_fields(err)
    quota = code in QUOTA_CODES or etype in QUOTA_CODES
    if status is not None:
        retryable = http_retryable(status, "http") and not quota
        raw = str(status)
    else:
        retryable = _retryable_code(etype, code)
        raw = code or etype or "error"
    reason = "quota_exceeded" if quota else "rate_limited" if status == 429 else "api_error"
    return failure_turn(
        API,
        _provenance(model),
        raw_sha256,
        response_id=None,
        raw_stop_reason=raw,
        reason=reason,
        failure=Failure(
            "http" if status is not None else "error_body",
            retryable,
            status,
            etype,
            code,
            retry_after_seconds(headers),
        ),
    )


# A function-call argument delta (WIRE.md 1.6) as the API sends it: compact, "type" first, then only
# members it sends (item_id, output_index, delta, sequence_number, obfuscation) in any order, as that
# order has changed over time. Each value is a JSON integer or string (JSON_STRING: valid JSON only),
# so the payload it stands for is known without parsing, and a repeated key's group keeps its last
# value, as the parsed dict does. Groups: 1 item_id, 2 output_index, 3 delta (None when absent). The
# payload has "type": the event name cannot matter.
_DELTA = (
    r'\{"type":"response\.function_call_arguments\.delta"(?:,(?:'
    rf'"item_id":"({JSON_STRING})"'
    rf'|"output_index":({JSON_INT})'
    rf'|"delta":"({JSON_STRING})"'
    rf'|"sequence_number":{JSON_INT}'
    rf'|"obfuscation":"{JSON_STRING}"'
    r"))*\}"
)
_DELTA_DATA = re.compile(_DELTA)
_DELTA_EVENT = simple_event(_DELTA)


class _Assembler:
    """Streaming assembly for Responses events (WIRE.md 1.6).

    Final items are the ``response.output_item.done`` items keyed by ``output_index`` (authoritative
    arguments and ``encrypted_content``); items the terminal snapshot has and no done event gave are
    taken from the snapshot. Argument deltas are appended to a list per item and joined once, only
    when a done item lacks its arguments. Byte caps count every argument byte once per call.
    """

    fast_events = _DELTA_EVENT  # see feed_events

    def __init__(self, caps: StreamCaps, model: str | None) -> None:
        self._caps = caps
        self._model = model
        self._response_id: str | None = None
        self._items: dict[int, dict[str, Any]] = {}
        self._done: dict[int, dict[str, Any]] = {}
        self._args: dict[int, list[str]] = {}
        self._arg_bytes: dict[int, int] = {}
        self._item_index: dict[str, int] = {}
        self._progress_ids: dict[int, str] = {}  # calls announced with CallStarted
        self._ready: set[int] = set()
        self._total = 0
        self._terminal: dict[str, Any] | None = None
        self._error: dict[str, Any] | None = None
        self._aborted = False

    @property
    def aborted(self) -> bool:
        return self._aborted

    def _index(self, event: dict[str, Any]) -> int | None:
        idx = event.get("output_index")
        if isinstance(idx, int) and not isinstance(idx, bool):
            return idx
        item_id = event.get("item_id")
        return self._item_index.get(item_id) if isinstance(item_id, str) else None

    def _over_caps(self, call_bytes: int) -> bool:
        return call_bytes > self._caps.max_call_bytes or self._total > self._caps.max_response_bytes

    def _abort(self) -> list[Progress]:
        self._aborted = True
        self._args.clear()
        return []

    def _start(self, idx: int, item: dict[str, Any]) -> list[Progress]:
        if idx in self._progress_ids:
            return []
        call_id = item.get("call_id")
        name = item.get("name")
        pid = call_id if isinstance(call_id, str) and call_id else f"#{idx}"
        self._progress_ids[idx] = pid
        return [CallStarted(pid, name if isinstance(name, str) else "")]

    def feed(self, event: dict[str, Any] | str) -> list[Progress]:
        if not isinstance(event, dict) or self._aborted:
            return []
        kind = event.get("type") or event.get("_event")
        if kind in ("response.created", "response.in_progress", "response.queued"):
            resp = event.get("response")
            if isinstance(resp, dict):
                if isinstance(resp.get("id"), str) and resp["id"]:
                    self._response_id = resp["id"]
                if self._model is None and isinstance(resp.get("model"), str):
                    self._model = resp["model"]
            return []
        if kind == "response.output_item.added":
            idx, item = event.get("output_index"), event.get("item")
            if not (isinstance(idx, int) and isinstance(item, dict)):
                return []
            self._items[idx] = item
            if isinstance(item.get("id"), str):
                self._item_index[item["id"]] = idx
            if item.get("type") != "function_call":
                return []
            self._args.setdefault(idx, [])
            return self._start(idx, item)
        if kind == "response.function_call_arguments.delta":
            idx = self._index(event)
            delta = event.get("delta")
            if idx is None or not isinstance(delta, str):
                return []
            nbytes = self._arguments(idx, delta)
            return [] if nbytes is None else [ArgumentsProgress(self._progress_ids[idx], nbytes)]
        if kind == "response.output_item.done":
            idx, item = event.get("output_index"), event.get("item")
            if not (isinstance(idx, int) and isinstance(item, dict)):
                return []
            if isinstance(item.get("id"), str):
                self._item_index[item["id"]] = idx
            progress: list[Progress] = []
            if item.get("type") == "function_call":
                arguments = item.get("arguments")
                fragments = self._args.pop(idx, None)
                if not isinstance(arguments, str) and fragments is not None:
                    arguments = join_fragments(fragments)
                    item = {**item, "arguments": arguments}
                size = utf8_len(arguments) if isinstance(arguments, str) else 0
                seen = self._arg_bytes.get(idx, 0)
                if size > seen:  # bytes no delta carried (a done-only call) count too
                    self._total += size - seen
                    self._arg_bytes[idx] = size
                if self._over_caps(self._arg_bytes.get(idx, 0)):
                    return self._abort()
                progress = self._start(idx, item)
                if idx not in self._ready:
                    self._ready.add(idx)
                    progress.append(CallReady(self._progress_ids[idx]))
            self._done[idx] = item
            self._args.pop(idx, None)  # the done item is authoritative; free the fragments
            return progress
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            resp = event.get("response")
            self._terminal = resp if isinstance(resp, dict) else {"status": str(kind).split(".", 1)[1]}
            return []
        if kind == "error":
            self._error = event
            return []
        return []  # text/refusal/reasoning deltas and hosted-tool events: the done items carry them

    def _arguments(self, idx: int, delta: str) -> int | None:
        """Keep one argument delta of item ``idx``. Returns the call's byte count when an
        ArgumentsProgress is due, else None (item already done, a cap tripped, or no CallStarted yet:
        nothing may be announced before its call)."""
        if idx in self._done:
            return None
        size = len(delta) if delta.isascii() else utf8_len(delta)  # ASCII needs no encoding
        call_bytes = self._arg_bytes[idx] = self._arg_bytes.get(idx, 0) + size
        self._total += size
        if self._over_caps(call_bytes):
            self._abort()
            return None
        fragments = self._args.get(idx)
        if fragments is None:
            fragments = self._args[idx] = []
        fragments.append(delta)
        return call_bytes if idx in self._progress_ids else None

    def feed_events(self, events: Sequence[RawEvent], on_progress: ProgressCallback | None) -> None:
        """``feed`` for raw events (see ``callbound.adapters.stream``). An argument delta made only of
        the members the API sends (``_DELTA_EVENT``, or ``_DELTA_DATA`` on a frame's data) is read
        from its match as ``feed`` would read its payload; every other event is decoded and fed whole.
        Runs once per event, hence inlined."""
        for event in events:
            found = _DELTA_DATA.fullmatch(event[1]) if isinstance(event, tuple) else event
            if found is None:
                progress = self.feed(decode_raw(event))
                if on_progress is not None:
                    for item in progress:
                        on_progress(item)
                continue
            if self._aborted:
                continue  # feed() ignores everything now, and the event is valid JSON: nothing can fail
            item_id, output_index, delta = found.groups()
            if output_index is not None:
                idx: int | None = int(output_index)
            elif item_id is not None:
                idx = self._item_index.get(string_value(found, 1))
            else:
                idx = None
            if idx is None or delta is None:
                continue  # feed() ignores a delta it cannot place, or without text
            nbytes = self._arguments(idx, string_value(found, 3) if "\\" in delta else delta)
            if nbytes is not None and on_progress is not None:
                on_progress(ArgumentsProgress(self._progress_ids[idx], nbytes))

    def _final_output(self, resp: dict[str, Any]) -> list[dict[str, Any]]:
        snapshot = resp.get("output")
        snap = snapshot if isinstance(snapshot, list) else []
        indices = sorted(set(self._done) | set(range(len(snap))) | set(self._items))
        output: list[dict[str, Any]] = []
        for i in indices:
            item = self._done.get(i)
            if item is None and i < len(snap) and isinstance(snap[i], dict):
                item = snap[i]
            if item is None and i in self._items:
                # Added, never done, absent from the snapshot: the added copy, with its deltas. A cut
                # argument text cannot parse, so the call then carries an arguments_error.
                item = self._items[i]
                if item.get("type") == "function_call" and not item.get("arguments") and i in self._args:
                    item = {**item, "arguments": join_fragments(self._args[i])}
            if item is not None:
                output.append(item)
        return output

    def _output_over_caps(self, output: list[dict[str, Any]]) -> bool:
        total = 0
        for item in output:
            if item.get("type") == "function_call" and isinstance(item.get("arguments"), str):
                size = utf8_len(item["arguments"])
                total += size
                if size > self._caps.max_call_bytes:
                    return True
        return total > self._caps.max_response_bytes

    def finish(self, raw_sha256: str) -> ModelTurn:
        prov = _provenance(self._model)
        if self._aborted:
            return too_large_turn(API, prov, raw_sha256, self._response_id)
        if self._terminal is not None:
            resp = dict(self._terminal)
            if not (isinstance(resp.get("id"), str) and resp["id"]):
                resp["id"] = self._response_id
            if not resp.get("model"):
                resp["model"] = self._model
            if resp.get("status") == "failed" and not resp.get("error") and self._error is not None:
                etype, code = _event_error_fields(self._error)
                resp["error"] = {"type": etype, "code": code}
            output = self._final_output(resp)
            if self._output_over_caps(output):
                self._aborted = True
                return too_large_turn(API, prov, raw_sha256, resp["id"])
            return turn_from_response(resp, raw_sha256, output)
        if self._error is not None:
            etype, code = _event_error_fields(self._error)
            return failure_turn(
                API,
                prov,
                raw_sha256,
                response_id=self._response_id,
                raw_stop_reason=code or etype or "error",
                reason="quota_exceeded" if (code in QUOTA_CODES or etype in QUOTA_CODES) else "api_error",
                failure=Failure("error_event", _retryable_code(etype, code), None, etype, code),
            )
        return stream_cut_turn(API, prov, raw_sha256, self._response_id)


class OpenAIResponsesAdapter:
    api = API
    provider = PROVIDER
    revision = REVISION

    def render_tools(self, declarations: Sequence[ToolDeclaration]) -> list[dict[str, Any]]:
        tools = []
        for decl in declarations:
            schema, strict = openai_strict(decl.parameters, decl.name)
            tools.append(
                {
                    "type": "function",
                    "name": decl.name,
                    "description": decl.description,
                    "parameters": schema,
                    "strict": strict,
                }
            )
        return tools

    def initial_items(
        self, user_input: str | None, messages: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        items = list(messages)
        if user_input is not None:
            items.append({"role": "user", "content": user_input})
        return items

    def turn_items(self, turn: ModelTurn) -> list[dict[str, Any]]:
        return list(turn.continuation)

    def result_items(
        self, turn: ModelTurn, results: Sequence[tuple[ToolCall, dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        return [
            {"type": "function_call_output", "call_id": call.call_id, "output": result_text(mr)}
            for call, mr in results
        ]

    def build_request(
        self,
        *,
        items: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        settings: dict[str, Any],
        instructions: str | None,
        stream: bool,
        previous_response_id: str | None = None,
        new_items: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if settings.get("model"):
            body["model"] = settings["model"]
        if instructions:
            body["instructions"] = instructions
        if previous_response_id is not None:
            body["previous_response_id"] = previous_response_id
            body["input"] = new_items if new_items is not None else []
        else:
            body["input"] = items
        if tools:
            body["tools"] = tools
        choice = settings.get("tool_choice")
        if isinstance(choice, dict) and "name" in choice:
            body["tool_choice"] = {"type": "function", "name": choice["name"]}
        elif choice is not None:
            body["tool_choice"] = choice
        if settings.get("temperature") is not None:
            body["temperature"] = settings["temperature"]
        if settings.get("max_output_tokens") is not None:
            body["max_output_tokens"] = settings["max_output_tokens"]
        if settings.get("store") is False:
            body["store"] = False
            body["include"] = ["reasoning.encrypted_content"]
        body.update(settings.get("extra") or {})
        if stream:
            body["stream"] = True
        return body

    def parse_response(self, body: bytes | str | dict[str, Any], *, model: str | None = None) -> ModelTurn:
        data, digest = decode_body(body)
        if not isinstance(data, dict):
            raise ProtocolViolation("a Responses body must be a JSON object")
        if isinstance(data.get("error"), dict) and "status" not in data:
            return _error_body_turn(data["error"], digest, None, {}, model)
        if model is not None and not data.get("model"):
            data = {**data, "model": model}
        return turn_from_response(data, digest)

    def stream_assembler(self, caps: StreamCaps | None = None, *, model: str | None = None) -> _Assembler:
        return _Assembler(caps or StreamCaps(), model)

    def map_error(self, failure: RawFailure, *, model: str | None = None) -> ModelTurn:
        return map_failure(
            API,
            _provenance(model),
            failure,
            lambda err, digest: _error_body_turn(err or {}, digest, failure.status, failure.headers, model),
        )

    def check_request(self, body: dict[str, Any], previous: ModelTurn | None = None) -> None:
        """Every function_call in the input answered exactly once, later in the input, by its
        ``call_id`` (never the ``fc_`` item id); no output for an unknown call. With
        ``previous_response_id`` the previous turn's calls are the ones to answer, and ``previous``
        must be that response."""
        items = body.get("input")
        if isinstance(items, str):
            items = []  # a plain text input carries no calls and no outputs
        if not isinstance(items, list):
            raise ProtocolViolation("Responses request needs an input list")
        answered: dict[str, int] = {}
        order: dict[str, None] = {}  # call ids, in the order their calls appear
        item_ids: dict[str, str] = {}  # fc_ item id -> call_id
        chained = body.get("previous_response_id")
        if chained and previous is not None:
            if chained != previous.response_id:
                raise ProtocolViolation(
                    f"previous_response_id {chained!r} is not the response being answered "
                    f"({previous.response_id!r})"
                )
            order.update(dict.fromkeys(c.call_id for c in previous.calls))
            for item in previous.continuation:
                if item.get("type") == "function_call" and isinstance(item.get("id"), str):
                    item_ids[item["id"]] = str(item.get("call_id"))
        later_calls = {
            item.get("call_id")
            for item in items
            if isinstance(item, dict) and item.get("type") == "function_call"
        }
        for item in items:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "function_call":
                cid = item.get("call_id")
                if not isinstance(cid, str) or not cid:
                    raise ProtocolViolation("a function_call input item needs its call_id")
                order[cid] = None
                if isinstance(item.get("id"), str):
                    item_ids[item["id"]] = cid
            elif kind == "function_call_output":
                cid = item.get("call_id")
                if not isinstance(cid, str) or cid not in order:
                    if isinstance(cid, str) and cid in item_ids and item_ids[cid] != cid:
                        raise ProtocolViolation(
                            f"function_call_output is keyed by the item id {cid!r}; "
                            f"use the call_id {item_ids[cid]!r}"
                        )
                    if cid in later_calls:
                        raise ProtocolViolation(f"function_call_output for {cid!r} comes before its call")
                    hint = "" if previous is not None or not chained else " (previous turn not given)"
                    raise ProtocolViolation(f"function_call_output for unknown call_id {cid!r}{hint}")
                if not isinstance(item.get("output"), str | list):
                    raise ProtocolViolation("function_call_output.output must be a string or a list of parts")
                answered[cid] = answered.get(cid, 0) + 1
        if previous is not None and previous.finish is Finish.TOOL_PROPOSALS:
            for call in previous.calls:
                if not call.synthetic_id and call.call_id not in order:
                    raise ProtocolViolation(
                        f"call_id {call.call_id!r} of the turn being answered is not in the request "
                        "(its function_call must be replayed unchanged, D8)"
                    )
        for cid in order:
            n = answered.get(cid, 0)
            if n != 1:
                raise ProtocolViolation(
                    f"call_id {cid!r} is answered {n} times; it must be answered exactly once"
                )


ADAPTER = OpenAIResponsesAdapter()
