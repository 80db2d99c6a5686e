"""OpenAI Chat Completions stream assembly: chunks (WIRE.md 2.4) into one turn. Argument fragments
are capped in bytes and never executed before the finish; chunks of the exact shape the API sends for
one fragment take a fast path that reads them without a JSON parse."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..core.model import ProgressCallback
from ..core.types import (
    ArgumentsProgress,
    CallReady,
    CallStarted,
    Failure,
    Finish,
    ModelTurn,
    Progress,
)
from .base import (
    StreamCaps,
    cap_tripped,
    compact_json_len,
    held_len,
    join_fragments,
    stream_cut_turn,
    too_large_turn,
    utf8_len,
)
from .openai_chat import (
    API,
    _error_turn,
    _provenance,
    _str,
    _usage,
    is_first_choice,
    turn_from_completion,
)
from .openai_chat_ids import Slot, another_call, arguments_of, sorted_json, whole, wire_index
from .openai_chat_parts import Parts, keep
from .shapes import chat_message
from .sse import DONE, JSON_INT, JSON_STRING, RawEvent, simple_event, string_value
from .stream import feed_one

NO_FINISH = frozenset({"", "null"})  # finish_reason values a chunk sends for "not finished" (_choice)

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


# Members of a tool-call fragment that the assembler rebuilds itself; any other member is provider
# state that travels back with the call (D8), e.g. Gemini's extra_content.google.thought_signature.
_CALL_KEYS = frozenset({"index", "id", "type", "function"})


# The finish reasons by which the model ended its output itself (D1): its calls' arguments are whole.
_OWN_END = ("tool_calls", "function_call", "stop")


class _Assembler:
    """Streaming assembly for chat.completion.chunk events (WIRE.md 2.4).

    Chat has no per-call done event, and a finish_reason does not close the calls: fragments after it
    are still part of the turn (the SDK's ``ChatCompletionStreamState`` keeps them too, and so does
    this assembler). Only the terminal ``[DONE]`` makes the arguments final, so CallReady for every
    call comes there, and everything after ``[DONE]`` is ignored: progress never says ready before
    the arguments the turn runs with are complete."""

    fast_events = _FRAGMENT_EVENT  # see feed_events

    def __init__(self, caps: StreamCaps, model: str | None) -> None:
        self._caps = caps
        self._model = model
        self._response_id: str | None = None
        self._role: str = "assistant"
        self._content: list[str] | None = None
        self._parts: Parts | None = None  # content streamed as a list of parts (Mistral)
        self._refusal: list[str] | None = None
        self._reasoning: list[str] | None = None  # delta.reasoning_content (DeepSeek, Kimi, Qwen, xAI)
        self._details: list[dict[str, Any]] = []  # delta.reasoning_details (OpenRouter), merged
        self._detail_parts: list[dict[str, list[str]]] = []  # text fragments of each merged detail
        self._extra: dict[str, Any] = {}  # delta.extra_content (Gemini: a text part's thought signature)
        self._malformed: str | None = None  # the first delta member of the wrong JSON type (shapes.py)
        self._slots: dict[int, Slot] = {}
        # A call opened at an index another call already holds (Ollama 0.20.x sends every parallel call
        # whole at index 0, each with its own id: ollama issue 15457, vercel/ai PR 14277) gets the next
        # free key: _moved maps such a wire index to the key of its latest call, and _relocated holds
        # the keys given that way, which a later wire index of the same number must not take.
        self._moved: dict[int, int] = {}
        self._relocated: set[int] = set()
        self._legacy: Slot | None = None
        self._choice_error: dict[str, Any] | None = None  # choices[0].error (OpenRouter)
        self._usage: dict[str, Any] | None = None
        self._choice_usage: dict[str, Any] | None = None
        self._finish_reason: Any = None  # as sent: text, or another JSON value (unknown)
        self._blank: Any = None  # a "" or "null" finish_reason seen (NO_FINISH, or {}, [], 0), for finish()
        self._done = False
        self._error: dict[str, Any] | None = None
        self._total = 0
        self._held = 0  # UTF-8 bytes of text, refusal and reasoning held: against max_body_bytes
        self._aborted = False
        self._tripped: str | None = None  # the StreamCaps field that tripped (cap_tripped)

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def complete(self) -> bool:
        """The terminal event came: nothing after it changes the turn, so a reader may stop (a
        server that keeps the connection open must not hold a finished turn back)."""
        return self._done

    def feed(self, event: dict[str, Any] | str) -> list[Progress]:
        if self._aborted or self._done:
            return []  # after [DONE] nothing changes the turn (see the class doc)
        if event == DONE:
            self._done = True
            return self._ready()
        if not isinstance(event, dict):
            return []
        if isinstance(event.get("error"), dict):  # an error object instead of a chunk, after HTTP 200
            self._error = event["error"]
            if isinstance(event.get("usage"), dict):
                # The request was paid for up to the error (D27): OpenRouter's error chunk carries
                # the usage (pydantic-ai cassette test_openrouter_stream_error).
                self._usage = event["usage"]
            return []
        if self._response_id is None and _str(event.get("id")):
            self._response_id = event["id"]
        if self._model is None and _str(event.get("model")):
            self._model = event["model"]
        if isinstance(event.get("usage"), dict):
            self._usage = event["usage"]
        elif isinstance(x_groq := event.get("x_groq"), dict) and isinstance(x_groq.get("usage"), dict):
            # Groq's own copy on its last chunk, there also when no stream_options asked for the
            # top-level one: read where the top-level usage never comes (D27)
            self._choice_usage = self._choice_usage or x_groq["usage"]
        out: list[Progress] = []
        choices = event.get("choices")
        # Anything but a list holds no choice, as for a plain body (turn_from_completion).
        for choice in choices if isinstance(choices, list) else ():
            if is_first_choice(choice):
                self._choice(choice, out)
        return out

    def _choice(self, choice: dict[str, Any], out: list[Progress]) -> None:
        if isinstance(choice.get("error"), dict):  # read as the plain body's is (turn_from_completion)
            self._choice_error = choice["error"]
        if isinstance(choice.get("usage"), dict):
            # Moonshot puts usage on the finishing choice; a top-level usage chunk still wins
            # (vercel/ai packages/moonshotai __fixtures__ moonshotai-stream-choice-usage, -usage-precedence).
            self._choice_usage = choice["usage"]
        delta = choice.get("delta")
        # a delta, content or call fragment of the wrong JSON type fails the turn (shapes.py)
        self._malformed = self._malformed or chat_message(delta, "delta")
        if isinstance(delta, dict):
            if _str(delta.get("role")):
                self._role = delta["role"]
            content = delta.get("content")
            if isinstance(content, list):
                # Mistral streams thinking and text as parts; the text parts are the answer, as in a plain
                # body (vercel/ai packages/openai-compatible/src/chat/__fixtures__/issue-13703-mistral-thinking).
                self._parts = self._parts or Parts(self._content)
                self._held += self._parts.feed(content)
            elif isinstance(content, str):
                if self._parts is not None and content:
                    self._parts.add("text", {"type": "text"}, content)
                self._content = self._content if self._content is not None else []
                self._content.append(content)
                self._held += utf8_len(content)
            if isinstance(delta.get("refusal"), str):
                self._refusal = self._refusal if self._refusal is not None else []
                self._refusal.append(delta["refusal"])
                self._held += utf8_len(delta["refusal"])
            # D8: reasoning the provider wants back with its tool calls (DeepSeek and Kimi answer 400
            # "reasoning_content ... must be passed back" without it; OpenRouter keeps signatures in
            # reasoning_details). Groq's "reasoning" is not kept: Groq rejects it on a request.
            if isinstance(delta.get("reasoning_content"), str):
                self._reasoning = self._reasoning if self._reasoning is not None else []
                self._reasoning.append(delta["reasoning_content"])
                self._held += utf8_len(delta["reasoning_content"])
            if isinstance(delta.get("reasoning_details"), list):
                self._held += self._reasoning_details(delta["reasoning_details"])
            if self._held > self._caps.max_body_bytes:  # bounded as a plain body is (review 17, r4 F2)
                self._abort("max_body_bytes")
                return
            if isinstance(delta.get("extra_content"), dict):
                keep(self._extra, {"extra_content": delta["extra_content"]}, frozenset())
            tool_calls = delta.get("tool_calls")
            # Anything but a list holds no call, as for a plain body (_calls).
            frags = tool_calls if isinstance(tool_calls, list) else []
            # Fragments with neither index nor id continue the calls already open, in order.
            loose = [
                f for f in frags if isinstance(f, dict) and wire_index(f) is None and not _str(f.get("id"))
            ]
            for position, frag in enumerate(frags):
                if isinstance(frag, dict):
                    key = self._key_for(frag, position, loose)
                    slot = self._slots.setdefault(key, Slot())
                    self._fragment(slot, key, frag.get("function"), frag, out)
                    if self._aborted:
                        return
            if isinstance(delta.get("function_call"), dict):
                self._legacy = self._legacy or Slot()
                self._fragment(self._legacy, None, delta["function_call"], {}, out)
        reason = choice.get("finish_reason")
        # The first finish_reason stays, unless a later one is content_filter: a refusal signal wins
        # over everything else in the turn (D31). "" (Ollama issue 4357, SGLang issue 3912) and KoboldCpp's
        # "null" on middle chunks are no finish_reason, as the openai SDK's truthiness test reads them:
        # latched, they hid the real "stop" that follows (never a success, D1, but never the answer).
        latch = self._finish_reason is None or reason == "content_filter"
        # Not text ({}, [], 0, a number): no finish_reason callbound knows, never a set lookup of an
        # unhashable value (TypeError, read as a connection error). One the SDK's truthiness test reads as
        # unset ({}, [], 0) is a blank; any other is latched; either way it reads as the plain body's
        # unknown stop reason, FAILED(UNKNOWN_STOP_REASON), unless a real one follows the blank.
        unset = reason in NO_FINISH if isinstance(reason, str) else not reason
        if not unset and latch:
            self._finish_reason = reason
        elif unset and reason is not None:
            self._blank = reason

    def _ready(self) -> list[Progress]:
        """CallReady for every call, at ``[DONE]``: only when finish() builds the turn from them (a
        finish_reason came, no error event did) and that finish_reason says the model ended its
        output itself (``tool_calls``, ``function_call``, ``stop``): ``length`` or ``content_filter``
        cut it, so the arguments are not complete (CallReady says they are, docs/reference.md) and
        the turn runs none of them."""
        if self._finish_reason not in _OWN_END or self._error is not None:
            return []
        out: list[Progress] = [CallReady(self._label(self._slots[key], key)) for key in sorted(self._slots)]
        if self._legacy is not None:
            out.append(CallReady(self._label(self._legacy, None)))
        return out

    def _label(self, slot: Slot, key: int | None) -> str:
        """The call id progress events name a call by: the turn's (``_calls``), so a user interface can
        match them to the calls of the Outcome. A call sent without an id gets the turn's D7 id,
        ``response_id:index``, its index the call's position among the tool calls (``message``; the
        legacy ``function_call`` comes last), or ``#index`` while no response id has come (the turn's
        then hashes the whole stream)."""
        if slot.id:
            return slot.id
        index = len(self._slots) if key is None else sorted(self._slots).index(key)
        return f"{self._response_id}:{index}" if self._response_id else f"#{index}"

    def _indexed(self, index: int) -> int:
        """The slot key of the call now open at wire ``index`` (the index itself unless moved)."""
        key = self._moved.get(index)
        if key is None and index in self._relocated:  # that key holds a call moved from another index
            key = self._moved[index] = max(self._slots) + 1
            self._relocated.add(key)
        return index if key is None else key

    def _key_for(self, frag: dict[str, Any], position: int, loose: list[dict[str, Any]]) -> int:
        index = wire_index(frag)
        function = frag.get("function")
        named = isinstance(function, dict) and _str(function.get("name")) is not None
        if index is not None:
            key = self._indexed(index) if self._relocated else index
            held = self._slots.get(key)
            fid = _str(frag.get("id"))
            if (held is not None and named) and (
                (held.id and fid and fid != held.id)
                or (not held.id and fid is None and another_call(held, function))
            ):
                # Another call reusing the index (Ollama, above). A new id alone is not enough: some
                # proxies repeat an id on every fragment of one call; a new id with a name opens one, and
                # so does, where neither has an id, another whole call after a whole one (another_call).
                key = self._moved[index] = max(self._slots) + 1
                self._relocated.add(key)
            return key
        # Some compatible servers omit index (vercel/ai moonshotai-stream-indexless-tool-calls): a new
        # id opens a new call and a known id is that call; fragments with neither continue the last
        # len(loose) calls in order (one delta may carry the arguments of two parallel calls).
        if not self._slots:
            return position
        fid = _str(frag.get("id"))
        if fid is not None:
            known = next((k for k, slot in self._slots.items() if slot.id == fid), None)
            return known if known is not None else max(self._slots) + 1
        keys = sorted(self._slots)
        rank = next(i for i, f in enumerate(loose) if f is frag)
        key = keys[len(keys) - len(loose) + rank] if len(loose) <= len(keys) else keys[-1]
        if named and self._slots[key].name is not None and whole(self._slots[key]):
            # A name for a call whose arguments are already a whole JSON object: a second call sent
            # whole with neither index nor id (Ollama's shape without them), not more of the first,
            # which no fragment could extend and still parse.
            return max(self._slots) + 1
        return key

    def _reasoning_details(self, items: list[Any]) -> int:
        """OpenRouter streams ``reasoning_details`` in pieces: consecutive text or summary pieces of
        one index make one detail, as the plain body has it; anything else (encrypted data) is kept
        as sent. Fragments are joined once, in ``message``. Returns the bytes held (max_body_bytes)."""
        size = 0
        for item in items:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            last = self._details[-1] if self._details else None
            if (
                last is not None
                and kind in ("reasoning.text", "reasoning.summary")
                and last.get("type") == kind
                and last.get("index") == item.get("index")
            ):
                parts = self._detail_parts[-1]
                for name, value in item.items():
                    if name in ("text", "summary") and isinstance(value, str):
                        parts.setdefault(name, []).append(value)
                        size += utf8_len(value)
                    elif value is not None:
                        last[name] = value  # e.g. the signature that closes a thinking block
                        size += held_len({name: value})
                continue
            detail = {k: v for k, v in item.items() if k not in ("text", "summary") or not isinstance(v, str)}
            self._details.append(detail)
            texts = {k: [v] for k, v in item.items() if k in ("text", "summary") and isinstance(v, str)}
            self._detail_parts.append(texts)
            # its text, and what else it holds (encrypted data, a signature) as held_len counts it
            size += sum(utf8_len(v[0]) for v in texts.values()) + held_len(detail)
        return size

    def _fragment(
        self, slot: Slot, key: int | None, function: Any, frag: dict[str, Any], out: list[Progress]
    ) -> None:
        if not slot.id and isinstance(frag.get("id"), str):  # a real id wins over an empty one
            slot.id = frag["id"]
        if slot.type is None and _str(frag.get("type")):
            slot.type = frag["type"]
        if len(frag) > len(_CALL_KEYS & frag.keys()):
            # D8: Gemini's OpenAI-compatible stream sends each call whole with its thought signature in
            # extra_content, and Gemini 3 rejects the next request (4xx) when it does not come back.
            keep(slot.extra, frag, _CALL_KEYS)
        if not isinstance(function, dict):
            return
        if slot.name is None and _str(function.get("name")):
            slot.name = function["name"]
        label = self._label(slot, key)  # key None: the legacy function_call
        started = self._announce(slot, label)
        if started is not None:
            out.append(started)
        args = function.get("arguments")
        if isinstance(args, dict):
            nbytes = self._object(slot, args)
        elif isinstance(args, str):
            nbytes = self._arguments(slot, args)
        else:
            return
        if nbytes is not None:
            out.append(ArgumentsProgress(label, nbytes))

    def _object(self, slot: Slot, args: dict[str, Any]) -> int | None:
        """Keep arguments sent as an object, counted for the byte caps as compact JSON (as the plain
        body's are, ``base.capped``); the call's byte count, or None when nothing was added: the same
        object sent again, or a different one, which makes the call's arguments a conflict
        (``finish`` then runs none of the turn's calls), or a cap tripped."""
        if slot.obj is not None:
            slot.conflict = slot.conflict or sorted_json(slot.obj) != sorted_json(args)
            return None
        slot.obj = args
        return self._arguments(slot, args)

    @staticmethod
    def _announce(slot: Slot, label: str) -> CallStarted | None:
        """CallStarted once the call's name is known."""
        if slot.started or slot.name is None:
            return None
        slot.started = True
        return CallStarted(label, slot.name)

    def _arguments(self, slot: Slot, args: str | dict[str, Any]) -> int | None:
        """Keep one argument fragment (an object is kept by ``_object``, and only counted here); the
        call's byte count, or None when a cap tripped."""
        # never raises: one half of a split surrogate pair counts 2 bytes
        size = utf8_len(args) if isinstance(args, str) else compact_json_len(args)
        slot.nbytes += size
        self._total += size
        if slot.nbytes > self._caps.max_call_bytes or self._total > self._caps.max_response_bytes:
            self._abort(cap_tripped(slot.nbytes, self._total, self._caps))
            return None
        if isinstance(args, str):
            slot.args.append(args)
        return slot.nbytes

    def _abort(self, cap: str) -> None:
        """A byte cap tripped: stop buffering; finish() reports TRUNCATED (``_tripped`` says why)."""
        self._aborted = True
        self._tripped = cap
        self._slots.clear()
        self._legacy = None
        self._content = self._refusal = self._reasoning = self._parts = None
        self._details.clear()
        self._detail_parts.clear()

    def feed_events(self, events: Sequence[RawEvent], on_progress: ProgressCallback | None) -> None:
        """``feed`` for raw events (see ``callbound.adapters.stream``). A chunk that only carries one
        tool-call argument fragment (``_FRAGMENT_EVENT``, or ``_FRAGMENT_DATA`` on a frame's data) is
        read from its match as ``feed`` would read its payload; every other event is decoded and fed
        whole. Runs once per event, hence inlined."""
        slots = self._slots  # never rebound: clear() empties it in place
        for event in events:
            if self._done:
                return  # nothing after [DONE] is even decoded (``stream.feed_events``)
            found = _FRAGMENT_DATA.fullmatch(event[1]) if isinstance(event, tuple) else event
            if found is None or found[3] is None:  # no choices: let feed() decide
                feed_one(self, event, on_progress)  # decoded and fed whole: the reference path
                continue
            if self._aborted:
                continue  # feed() ignores everything now, and the event is valid JSON: nothing can fail
            response_id, model, index_text, args = found.groups()
            if self._response_id is None and response_id:  # "" is no id, as in feed()
                self._response_id = string_value(found, 1)
            if self._model is None and model:
                self._model = string_value(found, 2)
            key = int(index_text)
            if self._relocated:  # an index some call was moved away from (_key_for)
                key = self._indexed(key)
            slot = slots.get(key)
            if slot is None:
                slot = slots[key] = Slot()
            label = self._label(slot, key)
            started = self._announce(slot, label)
            if started is not None and on_progress is not None:
                on_progress(started)
            nbytes = self._arguments(slot, string_value(found, 4) if "\\" in args else args)
            if nbytes is not None and on_progress is not None:
                on_progress(ArgumentsProgress(label, nbytes))

    def message(self) -> dict[str, Any]:
        """The assistant message as the plain API would have returned it, for the continuation (D8)."""
        # Text, like arguments, may have a character outside the BMP split into its escaped surrogate
        # halves over two chunks: a plain join would leave two lone surrogates, which no request body
        # can carry.
        msg: dict[str, Any] = {
            "role": self._role,
            "content": join_fragments(self._content) if self._content is not None else None,
        }
        if self._parts is not None:
            msg["content"] = self._parts.content()
        if self._refusal is not None:
            msg["refusal"] = join_fragments(self._refusal)
        if self._reasoning is not None:
            msg["reasoning_content"] = join_fragments(self._reasoning)
        if self._extra:
            msg.update(self._extra)
        if self._details:
            msg["reasoning_details"] = [
                {**detail, **{name: join_fragments(parts) for name, parts in texts.items()}}
                for detail, texts in zip(self._details, self._detail_parts, strict=True)
            ]
        if self._slots:
            msg["tool_calls"] = [
                {
                    # D8: as the plain body holds it: a call streamed without an id key has none
                    **({} if slot.id is None else {"id": slot.id}),
                    "type": slot.type or "function",
                    "function": {"name": slot.name or "", "arguments": arguments_of(slot)},
                    **slot.extra,
                }
                for slot in (self._slots[k] for k in sorted(self._slots))
            ]
        if self._legacy is not None:
            msg["function_call"] = {"name": self._legacy.name or "", "arguments": arguments_of(self._legacy)}
        return msg

    def _conflicting(self) -> bool:
        """A call sent two different argument objects, or an object and argument text: what it was
        called with cannot be told, so none of the turn's calls may run (never with arguments the
        provider did not send)."""
        slots = [*self._slots.values(), *([self._legacy] if self._legacy is not None else [])]
        return any(s.conflict or (s.obj is not None and join_fragments(s.args).strip()) for s in slots)

    def finish(self, raw_sha256: str) -> ModelTurn:
        prov = _provenance(self._model)
        raw_usage = self._usage if self._usage is not None else self._choice_usage
        # The usage read so far counts however the stream ended (D27): a cut or failed request that is
        # retried has still been paid for, and token budgets add up every request (D12).
        usage = _usage(raw_usage)
        if self._aborted:
            turn = too_large_turn(API, prov, raw_sha256, self._response_id, cap=self._tripped)
            return replace(turn, usage=usage)
        if self._error is not None:
            turn = _error_turn(
                self._error, raw_sha256, None, {}, "error_event", self._response_id, self._model
            )
            return replace(turn, usage=usage)
        # A stream that reached [DONE] with only a blank finish_reason (GenieX sends "" on every chunk,
        # the last included) is read as the same body plain: no success, and not a cut to pay again for.
        reason = self._finish_reason if self._finish_reason is not None or not self._done else self._blank
        if not self._done or reason is None:
            return replace(stream_cut_turn(API, prov, raw_sha256, self._response_id), usage=usage)
        choice = {"index": 0, "message": self.message(), "finish_reason": reason}
        if self._choice_error is not None:
            choice["error"] = self._choice_error
        resp = {"id": self._response_id, "model": self._model, "choices": [choice], "usage": raw_usage}
        turn = turn_from_completion(resp, raw_sha256, "error_event", self._malformed)
        if turn.finish is Finish.TOOL_PROPOSALS and self._conflicting():
            return replace(
                turn,
                finish=Finish.API_FAILURE,
                reason="malformed_response",
                failure=Failure("status", False, None, None, "conflicting_arguments"),
            )
        return turn
