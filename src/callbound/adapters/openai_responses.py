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
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ..core.errors import ProtocolViolation
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
    make_call,
    result_text,
    retry_after_seconds,
    stream_cut_turn,
    synthetic_response_id,
    too_large_turn,
)
from .schema import openai_strict

API = "openai-responses"
PROVIDER = "openai"
REVISION = "openai-responses/1"

RETRYABLE_ERROR_CODES = frozenset({"server_error", "rate_limit_exceeded", "server_is_overloaded", "timeout"})


def _provenance(model: Any) -> Provenance:
    return Provenance(PROVIDER, API, model if isinstance(model, str) else None, REVISION)


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    # D27: input_tokens already includes cached tokens; output_tokens includes reasoning tokens.
    return Usage(raw.get("input_tokens"), raw.get("output_tokens"))


def _error_fields(err: Any) -> tuple[str | None, str | None]:
    if not isinstance(err, dict):
        return None, None
    etype = err.get("type")
    code = err.get("code")
    return (etype if isinstance(etype, str) else None), (code if isinstance(code, str) else None)


def turn_from_response(resp: dict[str, Any], raw_sha256: str, output: list[dict[str, Any]] | None = None) -> ModelTurn:
    """Map a complete Response object (plain body or terminal stream snapshot) to a ModelTurn."""
    prov = _provenance(resp.get("model"))
    rid = resp.get("id") if isinstance(resp.get("id"), str) and resp.get("id") else synthetic_response_id(raw_sha256)
    items = output if output is not None else resp.get("output") or []
    usage = _usage(resp.get("usage"))
    status = resp.get("status")

    text_parts: list[str] = []
    refusal_parts: list[str] = []
    calls: list[ToolCall] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    text_parts.append(part["text"])
                elif part.get("type") == "refusal":
                    refusal_parts.append(str(part.get("refusal") or ""))
        elif kind == "function_call":
            calls.append(make_call(PROVIDER, API, rid, item.get("call_id"), item.get("name"), item.get("arguments"), index))
        # reasoning, hosted tool calls (web_search_call, ...) travel in the continuation only (D31)

    def turn(finish: Finish, raw: str | None, reason: str | None, failure: Failure | None = None) -> ModelTurn:
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
            continuation=tuple(i for i in items if isinstance(i, dict)),
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
        details = resp.get("incomplete_details") or {}
        why = details.get("reason") if isinstance(details, dict) else None
        if refusal_parts or why == "content_filter":
            return turn(Finish.REFUSAL, why or "incomplete", "content_filter" if why == "content_filter" else "refusal")
        if why == "max_output_tokens":
            return turn(Finish.TRUNCATED, why, "max_tokens")
        return turn(Finish.API_FAILURE, why or "incomplete", "unknown_stop_reason", Failure("status", False))
    if status == "failed":
        etype, code = _error_fields(resp.get("error"))
        retryable = code in RETRYABLE_ERROR_CODES
        return turn(
            Finish.API_FAILURE, code or "failed", "api_error",
            Failure("status", retryable, None, etype, code),
        )
    if status == "cancelled":
        return turn(Finish.API_FAILURE, "cancelled", "cancelled", Failure("status", False))
    raw = status if isinstance(status, str) else None
    return turn(Finish.API_FAILURE, raw, "unknown_stop_reason", Failure("status", False))


def _error_body_turn(err: dict[str, Any], raw_sha256: str, status: int | None, headers: dict[str, str]) -> ModelTurn:
    etype, code = _error_fields(err)
    if status is not None:
        retryable = http_retryable(status, "http") and code not in QUOTA_CODES and etype not in QUOTA_CODES
        raw = str(status)
    else:
        retryable = (code or etype) in RETRYABLE_ERROR_CODES
        raw = code or etype or "error"
    reason = "rate_limited" if status == 429 else "api_error"
    if code in QUOTA_CODES or etype in QUOTA_CODES:
        reason = "quota_exceeded"
    return failure_turn(
        API, _provenance(None), raw_sha256, response_id=None, raw_stop_reason=raw, reason=reason,
        failure=Failure("http" if status is not None else "error_body", retryable, status, etype, code,
                        retry_after_seconds(headers)),
    )


class _Assembler:
    """Streaming assembly for Responses events (WIRE.md 1.6)."""

    def __init__(self, caps: StreamCaps, model: str | None) -> None:
        self._caps = caps
        self._model = model
        self._response_id: str | None = None
        self._items: dict[int, dict[str, Any]] = {}
        self._done: dict[int, dict[str, Any]] = {}
        self._args: dict[int, list[str]] = {}
        self._arg_bytes: dict[int, int] = {}
        self._item_index: dict[str, int] = {}
        self._total = 0
        self._terminal: dict[str, Any] | None = None
        self._error: dict[str, Any] | None = None
        self._aborted = False

    @property
    def aborted(self) -> bool:
        return self._aborted

    def _index(self, event: dict[str, Any]) -> int | None:
        idx = event.get("output_index")
        if isinstance(idx, int):
            return idx
        item_id = event.get("item_id")
        return self._item_index.get(item_id) if isinstance(item_id, str) else None

    def feed(self, event: dict[str, Any] | str) -> list[Progress]:
        if not isinstance(event, dict) or self._aborted:
            return []
        kind = event.get("type") or event.get("_event")
        if kind in ("response.created", "response.in_progress", "response.queued"):
            resp = event.get("response") or {}
            if isinstance(resp.get("id"), str):
                self._response_id = resp["id"]
            if self._model is None and isinstance(resp.get("model"), str):
                self._model = resp["model"]
            return []
        if kind == "response.output_item.added":
            idx, item = event.get("output_index"), event.get("item")
            if isinstance(idx, int) and isinstance(item, dict):
                self._items[idx] = item
                if isinstance(item.get("id"), str):
                    self._item_index[item["id"]] = idx
                if item.get("type") == "function_call":
                    self._args[idx] = []
                    self._arg_bytes[idx] = 0
                    return [CallStarted(str(item.get("call_id") or f"#{idx}"), str(item.get("name")))]
            return []
        if kind == "response.function_call_arguments.delta":
            idx = self._index(event)
            delta = event.get("delta")
            if idx is None or not isinstance(delta, str):
                return []
            size = len(delta.encode("utf-8"))
            self._arg_bytes[idx] = self._arg_bytes.get(idx, 0) + size
            self._total += size
            if self._arg_bytes[idx] > self._caps.max_call_bytes or self._total > self._caps.max_response_bytes:
                self._aborted = True
                self._args.clear()
                return []
            self._args.setdefault(idx, []).append(delta)
            item = self._items.get(idx, {})
            return [ArgumentsProgress(str(item.get("call_id") or f"#{idx}"), self._arg_bytes[idx])]
        if kind == "response.output_item.done":
            idx, item = event.get("output_index"), event.get("item")
            if isinstance(idx, int) and isinstance(item, dict):
                if item.get("type") == "function_call":
                    size = len(str(item.get("arguments") or "").encode("utf-8"))
                    if size > self._caps.max_call_bytes:
                        self._aborted = True
                        return []
                    if not isinstance(item.get("arguments"), str) and idx in self._args:
                        item = {**item, "arguments": "".join(self._args[idx])}
                self._done[idx] = item
                self._args.pop(idx, None)  # the done item is authoritative; free the fragments
                if item.get("type") == "function_call":
                    return [CallReady(str(item.get("call_id") or f"#{idx}"))]
            return []
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            resp = event.get("response")
            self._terminal = resp if isinstance(resp, dict) else {"status": kind.split(".", 1)[1]}
            return []
        if kind == "error":
            self._error = event
            return []
        return []  # text/refusal/reasoning deltas and hosted-tool events: the done items carry them

    def finish(self, raw_sha256: str) -> ModelTurn:
        prov = _provenance(self._model)
        if self._aborted:
            return too_large_turn(API, prov, raw_sha256, self._response_id)
        if self._terminal is not None:
            resp = dict(self._terminal)
            resp.setdefault("id", self._response_id)
            if not resp.get("model"):
                resp["model"] = self._model
            if self._done:
                output = [self._done[i] for i in sorted(self._done)]
            else:
                output = [o for o in resp.get("output") or [] if isinstance(o, dict)]
            return turn_from_response(resp, raw_sha256, output)
        if self._error is not None:
            err = self._error.get("error") if isinstance(self._error.get("error"), dict) else self._error
            etype, code = _error_fields(err)
            raw = code or etype or "error"
            return failure_turn(
                API, prov, raw_sha256, response_id=self._response_id, raw_stop_reason=raw, reason="api_error",
                failure=Failure("error_event", (code or etype) in RETRYABLE_ERROR_CODES, None, etype, code),
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
                {"type": "function", "name": decl.name, "description": decl.description, "parameters": schema,
                 "strict": strict}
            )
        return tools

    def initial_items(self, user_input: str | None, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        items = list(messages)
        if user_input is not None:
            items.append({"role": "user", "content": user_input})
        return items

    def turn_items(self, turn: ModelTurn) -> list[dict[str, Any]]:
        return list(turn.continuation)

    def result_items(self, turn: ModelTurn, results: Sequence[tuple[ToolCall, dict[str, Any]]]) -> list[dict[str, Any]]:
        return [{"type": "function_call_output", "call_id": call.call_id, "output": result_text(mr)} for call, mr in results]

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
            return _error_body_turn(data["error"], digest, None, {})
        if model is not None and not data.get("model"):
            data = {**data, "model": model}
        return turn_from_response(data, digest)

    def stream_assembler(self, caps: StreamCaps | None = None, *, model: str | None = None) -> _Assembler:
        return _Assembler(caps or StreamCaps(), model)

    def map_error(self, failure: RawFailure, *, model: str | None = None) -> ModelTurn:
        raw = failure.body
        digest = hashlib.sha256(raw if isinstance(raw, bytes) else str(raw or "").encode()).hexdigest()
        if failure.kind == "stream_cut":
            return stream_cut_turn(API, _provenance(model), digest, None)
        if failure.kind == "http":
            err: Any = None
            if raw is not None:
                try:
                    data, _ = decode_body(raw)
                    err = data.get("error") if isinstance(data, dict) else None
                except ProtocolViolation:
                    err = None
            return _error_body_turn(err if isinstance(err, dict) else {}, digest, failure.status, failure.headers)
        return failure_turn(
            API, _provenance(model), digest, response_id=None, raw_stop_reason=failure.kind,
            reason="timeout" if failure.kind == "timeout" else "connection_error",
            failure=Failure(failure.kind, True, None, None, None, retry_after_seconds(failure.headers)),
        )

    def check_request(self, body: dict[str, Any], previous: ModelTurn | None = None) -> None:
        """Every function_call in the input answered exactly once by call_id, no output for an unknown
        call; with previous_response_id, the previous turn's calls are the ones to answer."""
        items = body.get("input")
        if not isinstance(items, list):
            raise ProtocolViolation("Responses request needs an input list")
        calls: list[str] = []
        if body.get("previous_response_id") and previous is not None:
            calls.extend(c.call_id for c in previous.calls)
        outputs: list[str] = []
        for item in items:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                calls.append(str(item.get("call_id")))
            elif item.get("type") == "function_call_output":
                outputs.append(str(item.get("call_id")))
                if not isinstance(item.get("output"), str | list):
                    raise ProtocolViolation("function_call_output.output must be a string or a list of parts")
        for cid in outputs:
            if cid not in calls:
                raise ProtocolViolation(f"function_call_output for unknown call_id {cid!r}")
        for cid in set(calls):
            n = outputs.count(cid)
            if n != 1:
                raise ProtocolViolation(f"call_id {cid!r} is answered {n} times; it must be answered exactly once")


ADAPTER = OpenAIResponsesAdapter()
