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
  ``message_delta`` fields replace those of ``message_start``.
- Streaming: blocks keyed by ``index``; fragments kept as lists and joined once when the block stops
  (or at the end, since a ``max_tokens`` cut may skip ``content_block_stop``) by ``join_fragments``,
  which re-pairs surrogate halves split over two deltas; ``message_stop`` is the terminal event.
  Deltas in the API's compact shape are read from the raw event text without the JSON parser
  (``feed_events``, the fast path of ``callbound.adapters.stream``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..core.arguments import loads_body
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
from .schema import inline_refs
from .sse import JSON_STRING, RawEvent, simple_event, string_value
from .stream import feed_one

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


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    # D27: input_tokens excludes cached tokens here, so cache writes and reads are added back.
    base = _int(raw.get("input_tokens"))
    cached = (_int(raw.get(k)) or 0 for k in ("cache_creation_input_tokens", "cache_read_input_tokens"))
    return Usage(None if base is None else base + sum(cached), _int(raw.get("output_tokens")))


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


class _Block:
    """One streamed content block: the start object plus fragments per field, joined once."""

    __slots__ = ("base", "citations", "done", "nbytes", "parts", "tool_use")

    def __init__(self, base: dict[str, Any]) -> None:
        self.base = base
        self.parts: dict[str, list[str]] = {}
        self.citations: list[Any] = []
        self.nbytes = 0
        self.done = False
        # base is this block's own copy and its type is never rewritten, so this holds until the end.
        self.tool_use = base.get("type") == "tool_use"


_DELTA_FIELDS = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "signature",
    "input_json_delta": "partial_json",
}
# One content_block_delta exactly as the API sends it: compact, keys in this order, a string value
# (JSON_STRING: valid JSON only, so the payload it stands for is known without parsing). The delta type
# and its field are one group: only the pairs of _DELTA_FIELDS match. Up to 9 index digits ([0-9]: \d
# would take other scripts' digits); longer ones go the slow way.
_PAIR_FIELDS = {f'{kind}","{field}': field for kind, field in _DELTA_FIELDS.items()}
_DELTA = (
    r'\{"type":"content_block_delta","index":(0|[1-9][0-9]{0,8}),"delta":\{"type":"('
    + "|".join(map(re.escape, _PAIR_FIELDS))
    + r')":"('
    + JSON_STRING
    + r')"\}\}'
)
_DELTA_DATA = re.compile(_DELTA)
_DELTA_EVENT = simple_event(_DELTA)  # the payload has "type", so the event name cannot matter


class _Assembler:
    """Streaming assembly for Messages events (WIRE.md 3.4)."""

    fast_events = _DELTA_EVENT  # see feed_events

    def __init__(self, caps: StreamCaps, model: str | None) -> None:
        self._max_call_bytes = caps.max_call_bytes
        self._max_response_bytes = caps.max_response_bytes
        self._model = model
        self._message: dict[str, Any] = {}
        self._usage: dict[str, Any] = {}
        self._delta: dict[str, Any] = {}
        self._blocks: dict[int, _Block] = {}
        self._raw_inputs: dict[int, str] = {}
        self._total = 0
        self._stopped = False
        self._error: dict[str, Any] | None = None
        self._aborted = False

    @property
    def aborted(self) -> bool:
        return self._aborted

    def feed(self, event: dict[str, Any] | str) -> list[Progress]:
        if not isinstance(event, dict) or self._aborted:
            return []
        kind = event.get("type") or event.get("_event")
        index = event.get("index")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            self._message = dict(event["message"])
            if self._model is None and _str(self._message.get("model")):
                self._model = self._message["model"]
            if isinstance(self._message.get("usage"), dict):
                self._usage = dict(self._message["usage"])
        elif (
            kind == "content_block_start"
            and isinstance(index, int)
            and isinstance(event.get("content_block"), dict)
        ):
            block = self._blocks[index] = _Block(dict(event["content_block"]))
            if block.base.get("type") == "tool_use":
                return [CallStarted(self._label(index), str(block.base.get("name")))]
        elif kind == "content_block_delta" and isinstance(index, int) and index in self._blocks:
            return self._fragment(index, event.get("delta"))
        elif kind == "content_block_stop" and isinstance(index, int) and index in self._blocks:
            if self._finalise(index) and self._blocks[index].base.get("type") == "tool_use":
                return [CallReady(self._label(index))]
        elif kind == "message_delta":
            if isinstance(event.get("delta"), dict):
                self._delta.update(event["delta"])
            if isinstance(event.get("usage"), dict):
                # Cumulative counts: replace, never add (D27). The input and cache counts are optional
                # here and may be null (SDK MessageDeltaUsage): a null keeps message_start's count.
                self._usage.update((k, v) for k, v in event["usage"].items() if v is not None)
        elif kind == "message_stop":
            self._stopped = True
        elif kind == "error":
            err = event.get("error")
            self._error = err if isinstance(err, dict) else event
        return []  # ping and unknown events carry nothing the turn needs

    def _label(self, index: int) -> str:
        return _str(self._blocks[index].base.get("id")) or f"#{index}"

    def _fragment(self, index: int, delta: Any) -> list[Progress]:
        block = self._blocks[index]
        if not isinstance(delta, dict) or block.done:
            return []
        kind = delta.get("type")
        if kind == "citations_delta":
            block.citations.append(delta.get("citation"))
            return []
        field = _DELTA_FIELDS.get(str(kind))
        value = delta.get(field) if field else None
        if field is None or not isinstance(value, str):
            return []  # an unknown delta type: the block keeps what content_block_start sent
        nbytes = self._append(block, field, value)
        return [] if nbytes is None else [ArgumentsProgress(self._label(index), nbytes)]

    def _append(self, block: _Block, field: str, value: str) -> int | None:
        """Keep one fragment of an open block. Returns the call's byte count when the fragment is
        tool_use argument text (an ArgumentsProgress is due), else None."""
        json_text = field == "partial_json"
        if json_text:
            size = utf8_len(value)  # never raises: one half of a split surrogate pair counts 2 bytes
            block.nbytes += size
            self._total += size
            if block.nbytes > self._max_call_bytes or self._total > self._max_response_bytes:
                self._aborted = True  # stop buffering; finish() reports TRUNCATED(arguments_too_large)
                self._blocks.clear()
                return None
        parts = block.parts.get(field)
        if parts is None:
            parts = block.parts[field] = []
        parts.append(value)
        return block.nbytes if json_text and block.tool_use else None

    def feed_events(self, events: Sequence[RawEvent], on_progress: ProgressCallback | None) -> None:
        """``feed`` for raw events (see ``callbound.adapters.stream``). A content_block_delta in the
        exact compact shape the API sends is read from its match (``fast_events``, or ``_DELTA_DATA``
        on a frame's data) as ``feed`` would read its payload; every other event is decoded and fed
        whole. Runs once per event, hence inlined."""
        blocks = self._blocks  # never rebound: clear() empties it in place
        for event in events:
            found = _DELTA_DATA.fullmatch(event[1]) if isinstance(event, tuple) else event
            if found is None:
                feed_one(self, event, on_progress)  # decoded and fed whole: the reference path
                continue
            if self._aborted:
                continue  # feed() ignores everything now, and the event is valid JSON: nothing can fail
            index_text, pair, value = found.groups()
            block = blocks.get(int(index_text))
            if block is None or block.done:
                continue  # feed() ignores a delta for a block never started or already stopped
            nbytes = self._append(
                block, _PAIR_FIELDS[pair], string_value(found, 3) if "\\" in value else value
            )
            if nbytes is not None and on_progress is not None:
                on_progress(ArgumentsProgress(self._label(int(index_text)), nbytes))

    def _finalise(self, index: int) -> bool:
        """Rebuild the block as the plain API returns it. False when it was already final."""
        block = self._blocks[index]
        if block.done:
            return False
        block.done = True
        final = block.base
        for field, parts in block.parts.items():
            if field == "signature":
                # A signature_delta carries the whole signature (the SDK assigns it, never appends).
                final[field] = parts[-1]
            elif field != "partial_json":
                # Text and thinking deltas may split a character outside the BMP into its
                # escaped surrogate halves, as argument deltas may: a plain join would leave two lone
                # surrogates in the continuation, and the next request could not be encoded (D4).
                start = final.get(field)
                final[field] = join_fragments([start, *parts] if isinstance(start, str) else parts)
        if block.citations:
            start_citations = final.get("citations")
            final["citations"] = [
                *(start_citations if isinstance(start_citations, list) else []),
                *block.citations,
            ]
        fragments = block.parts.get("partial_json")
        if fragments is not None:
            joined = join_fragments(fragments)  # puts back a surrogate pair split over two deltas
            if joined.strip():
                try:
                    parsed = loads_body(joined)  # marks duplicate keys for make_call to reject (D5)
                except (ValueError, RecursionError):
                    parsed = None
                if isinstance(parsed, dict):
                    final["input"] = parsed
                else:
                    # The call fails with arguments_error on the raw text; the block keeps its start input.
                    self._raw_inputs[index] = joined
            # Only an empty partial_json (a tool without arguments) keeps the start's input: {}.
        block.parts = {}
        return True

    def finish(self, raw_sha256: str) -> ModelTurn:
        prov = _provenance(self._model)
        rid = _str(self._message.get("id"))
        if self._aborted:
            return too_large_turn(API, prov, raw_sha256, rid)
        if self._error is not None:
            return _error_turn(self._error, raw_sha256, None, {}, "error_event", rid, self._model)
        if not self._stopped:
            return stream_cut_turn(API, prov, raw_sha256, rid)
        for index in self._blocks:
            self._finalise(index)  # a max_tokens cut can end a block without content_block_stop
        msg = {**self._message, **self._delta}
        msg["content"] = [self._blocks[i].base for i in sorted(self._blocks)]
        msg["usage"] = self._usage
        if not msg.get("model"):
            msg["model"] = self._model
        # Indices may be sparse in theory; map raw inputs from block index to content position.
        positions = {i: pos for pos, i in enumerate(sorted(self._blocks))}
        raw_inputs = {positions[i]: text for i, text in self._raw_inputs.items()}
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
