"""Anthropic Messages adapter (``anthropic-messages``). Facts: WIRE.md section 3.

- Calls are ``tool_use`` content blocks whose ``input`` is a JSON object; it is handed to
  ``make_call`` as the dict ``decode_body`` produced, so duplicate keys, NaN and big integers are
  still rejected (D5). ``server_tool_use`` and ``*_tool_result`` blocks are server-side: they stay in
  the continuation and are never dispatched (D31).
- Continuation (D8): ``{"role": "assistant", "content": [every block exactly as received]}``, thinking
  and redacted_thinking blocks with their signatures. Results are ONE user message whose content
  starts with a ``tool_result`` per call, in call order, with ``is_error`` = not ok.
- Stop mapping (D1, D31): ``refusal`` → REFUSAL (wins over tool_use blocks); ``end_turn`` and
  ``stop_sequence`` → FINAL_TEXT; ``tool_use`` → TOOL_PROPOSALS; ``max_tokens`` and
  ``model_context_window_exceeded`` → TRUNCATED; ``pause_turn`` → CONTINUE (the content is resent
  unchanged, with no new user message); anything else → API_FAILURE(unknown_stop_reason).
- Tool schema (D9): ``$ref`` inlined; Anthropic takes JSON Schema as is otherwise.
- Usage (D27): input = input + cache creation + cache read tokens; streamed usage is cumulative, so
  ``message_delta`` fields replace those of ``message_start``. When ``usage.iterations`` lists every
  sampling step of the request (compaction, advisor, fallback), the top-level counts cover only the
  final step, so the turn's usage is the sum over the iterations.
- Streaming: ``anthropic_stream`` rebuilds the Message; ``message_stop`` is the terminal event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.errors import ProtocolViolation
from ..core.registry import ToolDeclaration
from ..core.types import Failure, Finish, ModelTurn, Provenance, RawFailure, ToolCall, Usage
from .anthropic_stream import _DELTA_DATA as _DELTA_DATA
from .anthropic_stream import _DELTA_EVENT as _DELTA_EVENT
from .anthropic_stream import _DELTA_FIELDS as _DELTA_FIELDS
from .anthropic_stream import MessageStream
from .base import (
    QUOTA_CODES,
    StreamCaps,
    decode_body,
    failure_turn,
    http_retryable,
    make_call,
    map_failure,
    result_text,
    retry_after_seconds,
    stream_cut_turn,
    synthetic_response_id,
    too_large_turn,
)
from .schema import inline_refs

API = "anthropic-messages"
PROVIDER = "anthropic"
REVISION = "anthropic-messages/1"

DEFAULT_MAX_TOKENS = 4096  # the API refuses a request without max_tokens
RETRYABLE_ERROR_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})
# A spend cap answers 429 but will not lift by waiting (WIRE.md 3.5).
QUOTA_ERRORS = QUOTA_CODES | {"enforced_spend_limit_reached", "billing_error"}
THINKING_TYPES = ("thinking", "redacted_thinking")
TOOL_CHOICES = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}


def _provenance(model: Any) -> Provenance:
    return Provenance(PROVIDER, API, model if isinstance(model, str) else None, REVISION)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _input_total(raw: dict[str, Any]) -> int | None:
    # D27: input_tokens excludes cached tokens here, so cache writes and reads are added back.
    base = _int(raw.get("input_tokens"))
    cached = (_int(raw.get(k)) or 0 for k in ("cache_creation_input_tokens", "cache_read_input_tokens"))
    return None if base is None else base + sum(cached)


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    # D27: every prompt and generated token of the request. With compaction (and advisor or fallback
    # steps) the top-level counts leave out the other sampling iterations, which usage.iterations
    # lists one by one (Anthropic's compaction docs: "sum all entries in usage.iterations").
    steps = raw.get("iterations")
    if isinstance(steps, list) and steps and all(isinstance(s, dict) for s in steps):
        ins = [_input_total(s) for s in steps]
        outs = [_int(s.get("output_tokens")) for s in steps]
        if None not in ins and None not in outs:
            return Usage(sum(i or 0 for i in ins), sum(o or 0 for o in outs))
    return Usage(_input_total(raw), _int(raw.get("output_tokens")))


def turn_from_message(
    msg: dict[str, Any], raw_sha256: str, raw_inputs: dict[int, str] | None = None
) -> ModelTurn:
    """Map a complete Message (plain body or rebuilt from a stream) to a ModelTurn. ``raw_inputs``
    holds the joined input_json text of streamed tool_use blocks that did not parse, by block index."""
    prov = _provenance(msg.get("model"))
    rid = _str(msg.get("id")) or synthetic_response_id(raw_sha256)
    content = msg.get("content") if isinstance(msg.get("content"), list) else []
    assert isinstance(content, list)
    calls: list[ToolCall] = []
    text: list[str] = []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            text.append(block["text"])
        elif kind == "tool_use":
            raw = raw_inputs[index] if raw_inputs and index in raw_inputs else block.get("input")
            args = raw if isinstance(raw, str | dict) else None
            calls.append(make_call(PROVIDER, API, rid, _str(block.get("id")), block.get("name"), args, index))
    stop = msg.get("stop_reason")
    raw_stop = stop if isinstance(stop, str) else None
    refusal: str | None = None
    if stop == "refusal":
        details = msg.get("stop_details")
        why = details.get("explanation") if isinstance(details, dict) else None
        refusal = why if isinstance(why, str) else ""

    def turn(finish: Finish, reason: str | None, failure: Failure | None = None) -> ModelTurn:
        return ModelTurn(
            api=API,
            response_id=rid,
            finish=finish,
            raw_stop_reason=raw_stop,
            reason=reason,
            calls=tuple(calls),  # kept for display; only TOOL_PROPOSALS turns execute
            text="".join(text),
            refusal=refusal,
            usage=_usage(msg.get("usage")),
            # An empty assistant message is invalid on the wire, so there is nothing to carry back.
            continuation=({"role": "assistant", "content": content},) if content else (),
            provenance=prov,
            raw_sha256=raw_sha256,
            failure=failure,
        )

    if stop == "refusal":  # D31: wins over any tool_use block in the same message
        return turn(Finish.REFUSAL, "refusal")
    if stop in ("end_turn", "stop_sequence"):
        return turn(Finish.FINAL_TEXT, None)
    if stop == "tool_use":
        if calls:
            return turn(Finish.TOOL_PROPOSALS, None)
        # "run tools" with nothing runnable must never read as a final answer.
        return turn(Finish.API_FAILURE, "missing_tool_calls", Failure("status", False))
    if stop == "max_tokens":
        return turn(Finish.TRUNCATED, "max_tokens")
    if stop == "model_context_window_exceeded":
        return turn(Finish.TRUNCATED, "context_window")
    if stop == "pause_turn":
        return turn(Finish.CONTINUE, None)
    return turn(Finish.API_FAILURE, "unknown_stop_reason", Failure("status", False))


def _error_turn(
    err: Any,
    raw_sha256: str,
    status: int | None,
    headers: dict[str, str],
    kind: str,
    response_id: str | None = None,
    model: str | None = None,
) -> ModelTurn:
    """D26/D32: by status when there is one, else by ``error.type`` (a 200 stream can carry an error)."""
    err = err if isinstance(err, dict) else {}
    etype = _str(err.get("type"))
    details = err.get("details")
    code = _str(details.get("error_code")) if isinstance(details, dict) else None
    quota = etype in QUOTA_ERRORS or code in QUOTA_ERRORS
    if status is not None:
        retryable = http_retryable(status, "http") and not quota
        raw = str(status)
    else:
        retryable = etype in RETRYABLE_ERROR_TYPES and not quota
        raw = etype or code or "error"
    if quota:
        reason = "quota_exceeded"
    elif status == 429 or etype == "rate_limit_error":
        reason = "rate_limited"
    elif status == 529 or etype == "overloaded_error":
        reason = "overloaded"
    else:
        reason = "api_error"
    return failure_turn(
        API, _provenance(model), raw_sha256, response_id=response_id, raw_stop_reason=raw, reason=reason,
        failure=Failure(kind, retryable, status, etype, code, retry_after_seconds(headers)),
    )  # fmt: skip


class _Assembler(MessageStream):
    """Streaming assembly (``anthropic_stream``) plus the turn it ends in."""

    def finish(self, raw_sha256: str) -> ModelTurn:
        prov = _provenance(self._model)
        rid = _str(self._message.get("id"))
        if self._aborted:
            return too_large_turn(API, prov, raw_sha256, rid)
        if self._error is not None:
            return _error_turn(self._error, raw_sha256, None, {}, "error_event", rid, self._model)
        if not self._stopped:
            return stream_cut_turn(API, prov, raw_sha256, rid)
        msg, raw_inputs = self.message()
        return turn_from_message(msg, raw_sha256, raw_inputs)


def _blocks(msg: Any) -> list[dict[str, Any]]:
    content = msg.get("content") if isinstance(msg, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


class AnthropicMessagesAdapter:
    api = API
    provider = PROVIDER
    revision = REVISION

    def render_tools(self, declarations: Sequence[ToolDeclaration]) -> list[dict[str, Any]]:
        return [
            {"name": d.name, "description": d.description, "input_schema": inline_refs(d.parameters, d.name)}
            for d in declarations
        ]

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
        if not results:
            return []
        blocks = _blocks(turn.continuation[0]) if turn.continuation else []
        content = []
        for call, model_result in results:
            tool_use_id = call.call_id
            if call.synthetic_id:  # D7: echo what was sent, never the made-up id
                sent = blocks[call.output_index].get("id") if call.output_index < len(blocks) else None
                tool_use_id = sent if isinstance(sent, str) else ""
            content.append(
                {
                    "type": "tool_result",
                    "tool_use_id": tool_use_id,
                    "content": result_text(model_result),
                    "is_error": not model_result.get("ok"),
                }
            )
        return [{"role": "user", "content": content}]

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
        # Messages has no server-side state: previous_response_id is ignored and items replayed.
        body: dict[str, Any] = {}
        if settings.get("model"):
            body["model"] = settings["model"]
        max_tokens = settings.get("max_output_tokens")
        body["max_tokens"] = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
        if instructions:
            body["system"] = instructions
        body["messages"] = items
        if tools:
            body["tools"] = tools
        choice = settings.get("tool_choice")
        if isinstance(choice, dict) and "name" in choice and "type" not in choice:
            body["tool_choice"] = {"type": "tool", "name": choice["name"]}
        elif isinstance(choice, str):
            body["tool_choice"] = TOOL_CHOICES.get(choice, {"type": choice})
        elif choice is not None:
            body["tool_choice"] = choice  # already in Anthropic's shape
        if settings.get("temperature") is not None:
            body["temperature"] = settings["temperature"]
        body.update(settings.get("extra") or {})
        if stream:
            body["stream"] = True
        return body

    def parse_response(self, body: bytes | str | dict[str, Any], *, model: str | None = None) -> ModelTurn:
        data, digest = decode_body(body)
        if not isinstance(data, dict):
            raise ProtocolViolation("a Messages body must be a JSON object")
        if data.get("type") == "error" or (isinstance(data.get("error"), dict) and "content" not in data):
            return _error_turn(data.get("error"), digest, None, {}, "error_body", None, model)
        if model is not None and not data.get("model"):
            data = {**data, "model": model}
        return turn_from_message(data, digest)

    def stream_assembler(self, caps: StreamCaps | None = None, *, model: str | None = None) -> _Assembler:
        return _Assembler(caps or StreamCaps(), model)

    def map_error(self, failure: RawFailure, *, model: str | None = None) -> ModelTurn:
        return map_failure(
            API,
            _provenance(model),
            failure,
            lambda err, digest: _error_turn(
                err, digest, failure.status, failure.headers, "http", None, model
            ),
        )

    def check_request(self, body: dict[str, Any], previous: ModelTurn | None = None) -> None:
        """The user message right after an assistant message with tool_use blocks starts with one
        tool_result per distinct id (text only after them); no tool_result answers an unknown id;
        the answered turn's thinking blocks are carried back unchanged, signatures included."""
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise ProtocolViolation("a Messages request needs a messages list")
        asked: set[str] = set()
        for position, msg in enumerate(messages):
            role = msg.get("role") if isinstance(msg, dict) else None
            blocks = _blocks(msg)
            if role == "user":
                self._check_results(position, blocks, asked)
            elif asked:
                raise ProtocolViolation(
                    f"messages[{position}]: tool_use ids {sorted(asked)} need tool_result first"
                )
            asked = set()
            if role == "assistant":
                asked = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
                for b in blocks:
                    if b.get("type") == "thinking" and not isinstance(b.get("signature"), str):
                        raise ProtocolViolation(f"messages[{position}]: a thinking block lost its signature")
                    if b.get("type") == "redacted_thinking" and not isinstance(b.get("data"), str):
                        raise ProtocolViolation(
                            f"messages[{position}]: a redacted_thinking block lost its data"
                        )
        if asked:
            raise ProtocolViolation(f"tool_use ids {sorted(asked)} are never answered with tool_result")
        if previous is not None and previous.continuation:
            thinking = [b for b in _blocks(previous.continuation[0]) if b.get("type") in THINKING_TYPES]
            sent = [_blocks(m) for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
            if thinking and not any(all(t in blocks for t in thinking) for blocks in sent):
                raise ProtocolViolation("the previous turn's thinking blocks must be sent back unchanged")

    @staticmethod
    def _check_results(position: int, blocks: list[dict[str, Any]], asked: set[str]) -> None:
        answered: set[str] = set()
        other = False
        for block in blocks:
            if block.get("type") != "tool_result":
                other = True
                continue
            tid = block.get("tool_use_id")
            if other:
                raise ProtocolViolation(
                    f"messages[{position}]: tool_result blocks must come before any other block"
                )
            if not isinstance(tid, str) or tid not in asked:
                raise ProtocolViolation(f"messages[{position}]: tool_result for unknown tool_use_id {tid!r}")
            if tid in answered:
                raise ProtocolViolation(f"messages[{position}]: tool_use_id {tid!r} is answered twice")
            answered.add(tid)
        missing = asked - answered
        if missing:
            raise ProtocolViolation(f"messages[{position}]: no tool_result for {sorted(missing)}")


ADAPTER = AnthropicMessagesAdapter()
