"""OpenAI Chat Completions adapter (``openai-chat``). Facts: WIRE.md section 2.

- Calls are ``choices[0].message.tool_calls[]`` with arguments as a JSON string; the legacy
  ``message.function_call`` counts as one call with a synthetic id (D7). Results are one
  ``{"role": "tool", "tool_call_id", "content"}`` message per call (``role: "function"`` for the
  legacy call, which has no id to echo).
- Continuation (D8): the assistant message exactly as received; for a stream, the message rebuilt
  from the deltas (``role``, ``content``, ``tool_calls``, and ``refusal``/``function_call`` when sent).
- Finish mapping (D1, D31): a non-null ``message.refusal`` → REFUSAL whatever the finish_reason;
  ``tool_calls`` → TOOL_PROPOSALS; ``stop``/``function_call`` → TOOL_PROPOSALS when complete calls are
  present (forced tool_choice ends with ``stop``), else FINAL_TEXT; ``length`` → TRUNCATED;
  ``content_filter`` → REFUSAL; anything else, or none → API_FAILURE(unknown_stop_reason).
- Tool schema (D9): ``$ref`` inlined, OpenAI strict transform where the schema allows it.
- Streaming: one chunk per ``data:`` line; tool-call fragments keyed by ``index`` (id and name only
  on the first fragment); the usage chunk has ``choices: []``; the stream is complete only when a
  finish_reason was seen and ``[DONE]`` arrived. Fragments are kept as lists and joined once. Chunks
  that carry only one argument fragment are read from the raw event text without the JSON parser
  (``feed_events``, the fast path of ``callbound.adapters.stream``).
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
from .sse import DONE, JSON_INT, JSON_STRING, RawEvent, simple_event, string_value
from .stream import decode_raw

API = "openai-chat"
PROVIDER = "openai"
REVISION = "openai-chat/1"

RETRYABLE_ERROR_CODES = frozenset({"server_error", "rate_limit_exceeded", "server_is_overloaded", "timeout"})


def _provenance(model: Any) -> Provenance:
    return Provenance(PROVIDER, API, model if isinstance(model, str) else None, REVISION)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    # D27: prompt_tokens already counts cached tokens, completion_tokens reasoning tokens; missing → None.
    return Usage(_int(raw.get("prompt_tokens")), _int(raw.get("completion_tokens")))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some compatible servers answer with text parts
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _calls(message: dict[str, Any], rid: str) -> tuple[list[ToolCall], bool]:
    """(calls, whether any is complete). Index = position in ``tool_calls``; the legacy call comes last."""
    calls: list[ToolCall] = []
    complete = False
    tool_calls = message.get("tool_calls")
    listed = tool_calls if isinstance(tool_calls, list) else []
    for index, tc in enumerate(listed):
        if not isinstance(tc, dict):
            continue
        # A call of another type (``custom``) has no function: it is still a call to answer, and the
        # dispatcher rejects it (unknown tool, no arguments) instead of it being dropped.
        function: Any = tc.get("function")
        raw, name = (
            (function.get("arguments"), function.get("name")) if isinstance(function, dict) else (None, None)
        )
        complete = complete or bool(_str(name))
        args = raw if isinstance(raw, str | dict) else None
        calls.append(make_call(PROVIDER, API, rid, _str(tc.get("id")), name, args, index))
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        raw = legacy.get("arguments")
        complete = complete or bool(_str(legacy.get("name")))
        args = raw if isinstance(raw, str | dict) else None
        calls.append(make_call(PROVIDER, API, rid, None, legacy.get("name"), args, len(listed)))
    return calls, complete


def turn_from_completion(resp: dict[str, Any], raw_sha256: str) -> ModelTurn:
    """Map a complete chat.completion object (plain body or rebuilt from a stream) to a ModelTurn."""
    prov = _provenance(resp.get("model"))
    rid = _str(resp.get("id")) or synthetic_response_id(raw_sha256)
    choices = resp.get("choices")
    choice: dict[str, Any] = {}
    if isinstance(choices, list):
        # We never ask for n > 1; choice index 0 is the turn.
        choice = next((c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0), {})
    raw_message = choice.get("message")
    message: dict[str, Any] = raw_message if isinstance(raw_message, dict) else {}
    finish_reason = choice.get("finish_reason")
    raw_reason = finish_reason if isinstance(finish_reason, str) else None
    calls, complete = _calls(message, rid)
    refusal = message.get("refusal") if isinstance(message.get("refusal"), str) else None

    def turn(finish: Finish, reason: str | None, failure: Failure | None = None) -> ModelTurn:
        return ModelTurn(
            api=API,
            response_id=rid,
            finish=finish,
            raw_stop_reason=raw_reason,
            reason=reason,
            calls=tuple(calls),  # kept for display; only TOOL_PROPOSALS turns execute
            text=_text(message.get("content")),
            refusal=refusal,
            usage=_usage(resp.get("usage")),
            continuation=(message,) if message else (),
            provenance=prov,
            raw_sha256=raw_sha256,
            failure=failure,
        )

    if refusal is not None:  # D31: a refusal wins over a normal stop and over complete calls
        return turn(Finish.REFUSAL, "refusal")
    if raw_reason == "content_filter":
        return turn(Finish.REFUSAL, "content_filter")
    if raw_reason == "length":
        return turn(Finish.TRUNCATED, "max_tokens")
    if raw_reason in ("tool_calls", "function_call", "stop") and complete:
        return turn(Finish.TOOL_PROPOSALS, None)
    if raw_reason == "stop":
        return turn(Finish.FINAL_TEXT, None)
    if raw_reason in ("tool_calls", "function_call"):
        # The model said "run tools" but sent nothing runnable: never read that as a final answer.
        return turn(Finish.API_FAILURE, "missing_tool_calls", Failure("status", False))
    return turn(Finish.API_FAILURE, "unknown_stop_reason", Failure("status", False))


def _error_fields(err: Any) -> tuple[str | None, str | None]:
    if not isinstance(err, dict):
        return None, None
    return _str(err.get("type")), _str(err.get("code"))


def _error_turn(
    err: Any,
    raw_sha256: str,
    status: int | None,
    headers: dict[str, str],
    kind: str,
    response_id: str | None = None,
    model: str | None = None,
) -> ModelTurn:
    """D26/D32: HTTP errors carry the status as raw_stop_reason; bodies and events without one the code."""
    etype, code = _error_fields(err)
    quota = code in QUOTA_CODES or etype in QUOTA_CODES
    if status is not None:
        retryable = http_retryable(status, "http") and not quota
        raw = str(status)
    else:
        retryable = (code or etype) in RETRYABLE_ERROR_CODES and not quota
        raw = code or etype or "error"
    reason = "quota_exceeded" if quota else "rate_limited" if status == 429 else "api_error"
    return failure_turn(
        API, _provenance(model), raw_sha256, response_id=response_id, raw_stop_reason=raw, reason=reason,
        failure=Failure(kind, retryable, status, etype, code, retry_after_seconds(headers)),
    )  # fmt: skip


# A chat.completion.chunk that carries one tool-call argument fragment and nothing else (WIRE.md 2.4),
# as the API sends it: compact, top-level members in any order (each preceded by the opening brace
# or a comma, so _MEMBER is written once and a repeated key's group keeps its last value, as the
# parsed dict does), "choices" holding only choice 0 whose delta is one tool_calls entry with only
# index and function.arguments, no finish_reason. Values are JSON_STRING (valid JSON only) or fixed,
# so the payload it stands for is known without parsing. Groups: 1 id, 2 model, 3 tool-call index
# (None when "choices" is absent), 4 arguments. feed() never reads the event name here.
_CHOICES = (
    r'\[\{"index":0,"delta":\{"tool_calls":\[\{"index":(0|[1-9][0-9]{0,8}),"function":\{"arguments":"('
    + JSON_STRING
    + r')"\}\}\]\}(?:,"logprobs":null)?,"finish_reason":null(?:,"logprobs":null)?\}\]'
)
_MEMBER = (
    rf'(?:"id":"({JSON_STRING})"'
    r'|"object":"chat\.completion\.chunk"'
    rf'|"created":{JSON_INT}'
    rf'|"model":"({JSON_STRING})"'
    rf'|"system_fingerprint":(?:"{JSON_STRING}"|null)'
    rf'|"service_tier":(?:"{JSON_STRING}"|null)'
    rf'|"obfuscation":"{JSON_STRING}"'
    r'|"usage":null'
    rf'|"choices":{_CHOICES})'
)
_FRAGMENT = rf"\{{(?:(?:(?<=\{{)|(?<!\{{),){_MEMBER})+\}}"
_FRAGMENT_DATA = re.compile(_FRAGMENT)
_FRAGMENT_EVENT = simple_event(_FRAGMENT)


class _Slot:
    """One streamed tool call: fragments are appended and joined once at the end."""

    __slots__ = ("args", "id", "name", "nbytes", "started", "type")

    def __init__(self) -> None:
        self.id: str | None = None
        self.type: str | None = None
        self.name: str | None = None
        self.args: list[str] = []
        self.nbytes = 0
        self.started = False


class _Assembler:
    """Streaming assembly for chat.completion.chunk events (WIRE.md 2.4)."""

    fast_events = _FRAGMENT_EVENT  # see feed_events

    def __init__(self, caps: StreamCaps, model: str | None) -> None:
        self._caps = caps
        self._model = model
        self._response_id: str | None = None
        self._role: str = "assistant"
        self._content: list[str] | None = None
        self._refusal: list[str] | None = None
        self._slots: dict[int, _Slot] = {}
        self._legacy: _Slot | None = None
        self._usage: dict[str, Any] | None = None
        self._finish_reason: str | None = None
        self._done = False
        self._error: dict[str, Any] | None = None
        self._total = 0
        self._aborted = False

    @property
    def aborted(self) -> bool:
        return self._aborted

    def feed(self, event: dict[str, Any] | str) -> list[Progress]:
        if self._aborted:
            return []
        if event == DONE:
            self._done = True
            return []
        if not isinstance(event, dict):
            return []
        if isinstance(event.get("error"), dict):  # an error object instead of a chunk, after HTTP 200
            self._error = event["error"]
            return []
        if self._response_id is None and _str(event.get("id")):
            self._response_id = event["id"]
        if self._model is None and _str(event.get("model")):
            self._model = event["model"]
        if isinstance(event.get("usage"), dict):
            self._usage = event["usage"]
        out: list[Progress] = []
        for choice in event.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice, out)
        return out

    def _choice(self, choice: dict[str, Any], out: list[Progress]) -> None:
        delta = choice.get("delta")
        if isinstance(delta, dict):
            if _str(delta.get("role")):
                self._role = delta["role"]
            if isinstance(delta.get("content"), str):
                self._content = self._content if self._content is not None else []
                self._content.append(delta["content"])
            if isinstance(delta.get("refusal"), str):
                self._refusal = self._refusal if self._refusal is not None else []
                self._refusal.append(delta["refusal"])
            for position, frag in enumerate(delta.get("tool_calls") or []):
                if isinstance(frag, dict):
                    key = self._key_for(frag, position)
                    slot = self._slots.setdefault(key, _Slot())
                    self._fragment(slot, f"#{key}", frag.get("function"), frag, out)
                    if self._aborted:
                        return
            if isinstance(delta.get("function_call"), dict):
                self._legacy = self._legacy or _Slot()
                self._fragment(self._legacy, "#legacy", delta["function_call"], {}, out)
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and self._finish_reason is None:
            self._finish_reason = reason
            # Chat has no per-call done event: the finish_reason chunk closes every call at once.
            for key in sorted(self._slots):
                out.append(CallReady(self._slots[key].id or f"#{key}"))
            if self._legacy is not None:
                out.append(CallReady("#legacy"))

    def _key_for(self, frag: dict[str, Any], position: int) -> int:
        index = frag.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            return index
        # Some compatible servers omit index: an id opens a new call, otherwise extend the last one.
        if not self._slots:
            return position
        return max(self._slots) + 1 if _str(frag.get("id")) else max(self._slots)

    def _fragment(
        self, slot: _Slot, key: str, function: Any, frag: dict[str, Any], out: list[Progress]
    ) -> None:
        if slot.id is None and _str(frag.get("id")):
            slot.id = frag["id"]
        if slot.type is None and _str(frag.get("type")):
            slot.type = frag["type"]
        if not isinstance(function, dict):
            return
        if slot.name is None and _str(function.get("name")):
            slot.name = function["name"]
        label = slot.id or key
        started = self._announce(slot, label)
        if started is not None:
            out.append(started)
        args = function.get("arguments")
        if not isinstance(args, str):
            return
        nbytes = self._arguments(slot, args)
        if nbytes is not None:
            out.append(ArgumentsProgress(label, nbytes))

    @staticmethod
    def _announce(slot: _Slot, label: str) -> CallStarted | None:
        """CallStarted once the call's name is known."""
        if slot.started or slot.name is None:
            return None
        slot.started = True
        return CallStarted(label, slot.name)

    def _arguments(self, slot: _Slot, args: str) -> int | None:
        """Keep one argument fragment; the call's byte count, or None when a cap tripped."""
        size = utf8_len(args)  # never raises: one half of a split surrogate pair counts 2 bytes
        slot.nbytes += size
        self._total += size
        if slot.nbytes > self._caps.max_call_bytes or self._total > self._caps.max_response_bytes:
            self._aborted = True  # stop buffering; finish() reports TRUNCATED(arguments_too_large)
            self._slots.clear()
            self._legacy = None
            return None
        slot.args.append(args)
        return slot.nbytes

    def feed_events(self, events: Sequence[RawEvent], on_progress: ProgressCallback | None) -> None:
        """``feed`` for raw events (see ``callbound.adapters.stream``). A chunk that only carries one
        tool-call argument fragment (``_FRAGMENT_EVENT``, or ``_FRAGMENT_DATA`` on a frame's data) is
        read from its match as ``feed`` would read its payload; every other event is decoded and fed
        whole. Runs once per event, hence inlined."""
        slots = self._slots  # never rebound: clear() empties it in place
        for event in events:
            found = _FRAGMENT_DATA.fullmatch(event[1]) if isinstance(event, tuple) else event
            if found is None or found[3] is None:  # no choices: let feed() decide
                progress = self.feed(decode_raw(event))
                if on_progress is not None:
                    for item in progress:
                        on_progress(item)
                continue
            if self._aborted:
                continue  # feed() ignores everything now, and the event is valid JSON: nothing can fail
            response_id, model, index_text, args = found.groups()
            if self._response_id is None and response_id:  # "" is no id, as in feed()
                self._response_id = string_value(found, 1)
            if self._model is None and model:
                self._model = string_value(found, 2)
            key = int(index_text)
            slot = slots.get(key)
            if slot is None:
                slot = slots[key] = _Slot()
            label = slot.id or f"#{key}"
            started = self._announce(slot, label)
            if started is not None and on_progress is not None:
                on_progress(started)
            nbytes = self._arguments(slot, string_value(found, 4) if "\\" in args else args)
            if nbytes is not None and on_progress is not None:
                on_progress(ArgumentsProgress(label, nbytes))

    def message(self) -> dict[str, Any]:
        """The assistant message as the plain API would have returned it, for the continuation (D8)."""
        msg: dict[str, Any] = {
            "role": self._role,
            "content": "".join(self._content) if self._content is not None else None,
        }
        if self._refusal is not None:
            msg["refusal"] = "".join(self._refusal)
        if self._slots:
            msg["tool_calls"] = [
                {
                    "id": slot.id or "",
                    "type": slot.type or "function",
                    "function": {"name": slot.name or "", "arguments": join_fragments(slot.args)},
                }
                for slot in (self._slots[k] for k in sorted(self._slots))
            ]
        if self._legacy is not None:
            msg["function_call"] = {
                "name": self._legacy.name or "",
                "arguments": join_fragments(self._legacy.args),
            }
        return msg

    def finish(self, raw_sha256: str) -> ModelTurn:
        prov = _provenance(self._model)
        if self._aborted:
            return too_large_turn(API, prov, raw_sha256, self._response_id)
        if self._error is not None:
            return _error_turn(
                self._error, raw_sha256, None, {}, "error_event", self._response_id, self._model
            )
        if not self._done or self._finish_reason is None:
            return stream_cut_turn(API, prov, raw_sha256, self._response_id)
        resp = {
            "id": self._response_id,
            "model": self._model,
            "choices": [{"index": 0, "message": self.message(), "finish_reason": self._finish_reason}],
            "usage": self._usage,
        }
        return turn_from_completion(resp, raw_sha256)


class OpenAIChatAdapter:
    api = API
    provider = PROVIDER
    revision = REVISION

    def render_tools(self, declarations: Sequence[ToolDeclaration]) -> list[dict[str, Any]]:
        tools = []
        for decl in declarations:
            schema, strict = openai_strict(decl.parameters, decl.name)
            function = {
                "name": decl.name,
                "description": decl.description,
                "parameters": schema,
                "strict": strict,
            }
            tools.append({"type": "function", "function": function})
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
        message = turn.continuation[0] if turn.continuation else {}
        listed = message.get("tool_calls") if isinstance(message.get("tool_calls"), list) else []
        assert isinstance(listed, list)
        items: list[dict[str, Any]] = []
        for call, model_result in results:
            content = result_text(model_result)
            if call.output_index >= len(listed) and isinstance(message.get("function_call"), dict):
                items.append({"role": "function", "name": call.name, "content": content})
                continue
            call_id = call.call_id
            if call.synthetic_id:
                # D7: never send a made-up id; echo what the provider sent (compatible servers send "").
                raw = listed[call.output_index] if call.output_index < len(listed) else None
                sent = raw.get("id") if isinstance(raw, dict) else None
                call_id = sent if isinstance(sent, str) else ""
            items.append({"role": "tool", "tool_call_id": call_id, "content": content})
        return items

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
        # Chat Completions has no server-side state: previous_response_id is ignored and items replayed.
        body: dict[str, Any] = {}
        if settings.get("model"):
            body["model"] = settings["model"]
        body["messages"] = [{"role": "system", "content": instructions}, *items] if instructions else items
        if tools:
            body["tools"] = tools
        choice = settings.get("tool_choice")
        if isinstance(choice, dict) and "name" in choice:
            body["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        elif choice is not None:
            body["tool_choice"] = choice
        if settings.get("temperature") is not None:
            body["temperature"] = settings["temperature"]
        if settings.get("max_output_tokens") is not None:
            body["max_completion_tokens"] = settings["max_output_tokens"]
        if stream:
            body["stream"] = True
            # Without include_usage a stream reports no tokens at all (WIRE.md 2.4).
            body["stream_options"] = {"include_usage": True}
        body.update(settings.get("extra") or {})
        if stream:
            body["stream"] = True  # the transport reads a stream; extra cannot turn that off
        return body

    def parse_response(self, body: bytes | str | dict[str, Any], *, model: str | None = None) -> ModelTurn:
        data, digest = decode_body(body)
        if not isinstance(data, dict):
            raise ProtocolViolation("a chat completion body must be a JSON object")
        if isinstance(data.get("error"), dict) and "choices" not in data:
            return _error_turn(data["error"], digest, None, {}, "error_body", None, model)
        if model is not None and not data.get("model"):
            data = {**data, "model": model}
        return turn_from_completion(data, digest)

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
        """Every tool_call id of an assistant message is answered by exactly one ``role: tool`` message
        among those that follow it directly; no tool message answers an unknown id."""
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise ProtocolViolation("a chat request needs a messages list")
        pending: set[str] = set()
        answered: set[str] = set()
        legacy_pending = False
        for position, msg in enumerate([*messages, None]):
            role = msg.get("role") if isinstance(msg, dict) else None
            if role == "tool" and isinstance(msg, dict):
                cid = msg.get("tool_call_id")
                if not isinstance(cid, str) or cid not in pending:
                    raise ProtocolViolation(
                        f"messages[{position}]: tool message for unknown tool_call_id {cid!r}"
                    )
                if cid in answered:
                    raise ProtocolViolation(f"messages[{position}]: tool_call_id {cid!r} is answered twice")
                if not isinstance(msg.get("content"), str | list):
                    raise ProtocolViolation(
                        f"messages[{position}]: tool content must be a string or a list of parts"
                    )
                answered.add(cid)
                continue
            if role == "function" and legacy_pending:
                legacy_pending = False
                continue
            missing = pending - answered
            if missing or legacy_pending:
                what = ", ".join(sorted(missing)) or "the function_call"
                raise ProtocolViolation(f"messages[{position}]: no tool message answers {what}")
            pending, answered = set(), set()
            if role == "assistant" and isinstance(msg, dict):
                for tc in msg.get("tool_calls") or []:
                    if isinstance(tc, dict) and isinstance(tc.get("id"), str):
                        pending.add(tc["id"])  # a repeated id is answered once (D7)
                legacy_pending = isinstance(msg.get("function_call"), dict)


ADAPTER = OpenAIChatAdapter()
