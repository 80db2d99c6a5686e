"""OpenAI Responses stream assembly: SSE events (WIRE.md 1.6) into one turn. Argument deltas are
capped in bytes and never executed before the terminal event nor before the call's own done event;
argument deltas of the exact shape the API sends take a fast path that reads them without a JSON
parse."""

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
    Provenance,
)
from .base import (
    StreamCaps,
    cap_tripped,
    failure_turn,
    held_len,
    join_fragments,
    over_byte_cap,
    stream_cut_turn,
    too_large_turn,
    utf8_len,
)
from .failures import read_openai_error
from .openai_responses import (
    API,
    RETRYABLE_ERROR_CODES,
    _provenance,
    _usage,
    says_unfinished,
    turn_from_response,
)
from .openai_responses_items import FinalItems, _has_text, _size
from .sse import JSON_INT, JSON_STRING, RawEvent, simple_event, string_value
from .stream import feed_one, kind_of


def event_error(event: dict[str, Any]) -> dict[str, Any]:
    """The error object of an ``error`` stream event, which comes flat (SDK: ``code``/``message`` beside
    ``type: "error"``) or nested (recordings: ``error: {type, code, message}``). In the flat shape
    ``type`` names the event, not the error."""
    nested = event.get("error")
    if isinstance(nested, dict):
        return nested
    return {"type": None, "code": event.get("code"), "message": event.get("message")}


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
_REFUSAL_EVENTS = frozenset(
    {
        "response.content_part.added",
        "response.content_part.done",
        "response.refusal.delta",
        "response.refusal.done",
    }
)


def _output_index(value: Any) -> int | None:
    """An ``output_index`` usable as a position: a JSON integer >= 0. Anything else (a negative one,
    which Python would read from the end of the snapshot, a bool, a string) is no index at all."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class _Assembler(FinalItems):
    """Streaming assembly for Responses events (WIRE.md 1.6).

    Final items are the ``response.output_item.done`` items keyed by ``output_index`` (authoritative
    arguments and ``encrypted_content``); items the terminal snapshot has and no done event gave are
    taken from the snapshot. Argument deltas are appended to a list per item and joined once, only
    when a done item lacks its arguments. Byte caps count every argument byte once per call. Text
    deltas are likewise kept only until their item's done event carries the text, and used only for
    a message that ends without it (some compatible servers).

    A call is finished by its done event (``output_item.done`` or ``function_call_arguments.done``)
    or by the terminal snapshot holding it; a done or snapshot item whose status says
    ``in_progress``/``incomplete`` is unfinished, as in a plain body. "Arguments are parsed only
    after the provider's done event for that call" (issue 3 §4): a call with neither never runs, and
    the turn is TRUNCATED(call_incomplete), as the same response read as a plain body is.
    """

    fast_events = _DELTA_EVENT  # see feed_events

    def __init__(self, caps: StreamCaps, model: str | None) -> None:
        self._caps = caps
        self._model = model
        self._response_id: str | None = None
        self._items: dict[int, dict[str, Any]] = {}
        self._done: dict[int, dict[str, Any]] = {}
        self._args: dict[int, list[str]] = {}
        self._args_done: set[int] = set()  # function_call_arguments.done came for these items
        # Refusal text by (output_index, content_index), from the refusal events and content parts:
        # kept in case no item carries it (no output_item.done, an empty snapshot), as a refusal
        # signal wins over everything else in the turn (D31).
        self._refusals: dict[tuple[int, int], list[str]] = {}
        # A second item announced at an output_index whose item has already ended: the server reused
        # the index (an Ollama emitter numbered the calls of each chunk from 0 again), so the events
        # cannot say which item is which; the terminal snapshot decides (``_final_output``).
        self._reused_index = False
        # Output text by (output_index, content_index), from output_text deltas: OpenAI's done items
        # carry the text whole (and these are dropped there), but some compatible servers send a done
        # item and a snapshot without content, so the deltas are the only place the answer is.
        self._texts: dict[tuple[int, int], list[str]] = {}
        self._arg_bytes: dict[int, int] = {}
        self._item_index: dict[str, int] = {}
        self._progress_ids: dict[int, str] = {}  # calls announced with CallStarted
        self._ready: set[int] = set()
        self._total = 0
        self._held = 0  # UTF-8 bytes of output text, refusal and whole items held: against max_body_bytes
        self._whole_bytes: dict[int, int] = {}  # what each done item other than a call or message holds
        self._terminal: dict[str, Any] | None = None
        self._error: dict[str, Any] | None = None
        self._aborted = False
        self._tripped: str | None = None  # the StreamCaps field that tripped (cap_tripped)
        self._conflict: str | None = None  # the stream says two things of a call (FinalItems)

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def complete(self) -> bool:
        """The terminal event came: nothing after it changes the turn, so a reader may stop (a
        server that keeps the connection open must not hold a finished turn back)."""
        return self._terminal is not None

    def _index(self, event: dict[str, Any]) -> int | None:
        idx = _output_index(event.get("output_index"))
        if idx is not None:
            return idx
        item_id = event.get("item_id")
        return self._item_index.get(item_id) if isinstance(item_id, str) else None

    def _over_caps(self, call_bytes: int) -> bool:
        if call_bytes > self._caps.max_call_bytes or self._total > self._caps.max_response_bytes:
            self._tripped = cap_tripped(call_bytes, self._total, self._caps)
            return True
        return False

    def _abort(self, cap: str | None = None) -> list[Progress]:
        """A byte cap tripped (``cap``, when ``_over_caps`` has not named it): stop buffering."""
        self._aborted = True
        self._tripped = cap or self._tripped
        self._args.clear()
        self._texts.clear()
        self._refusals.clear()
        return []

    def _start(self, idx: int, item: dict[str, Any]) -> list[Progress]:
        if idx in self._progress_ids:
            return []
        call_id = item.get("call_id")
        name = item.get("name")
        # Progress names a call by the turn's call id, so a user interface can match them: a call
        # without call_id gets the turn's D7 id, response_id:output_index (#output_index while no
        # response id has come: the turn's then hashes the whole stream).
        if isinstance(call_id, str) and call_id:
            pid = call_id
        else:
            pid = f"{self._response_id}:{idx}" if self._response_id else f"#{idx}"
        self._progress_ids[idx] = pid
        return [CallStarted(pid, name if isinstance(name, str) else "")]

    def feed(self, event: dict[str, Any] | str) -> list[Progress]:
        if not isinstance(event, dict) or self._aborted or self._terminal is not None:
            return []  # after the terminal event nothing changes the turn (``complete``)
        kind = kind_of(event)
        if not isinstance(kind, str):
            # A type that is no text (a list or object) names no event callbound knows: ignored as an
            # unknown type is, never looked up in a set (TypeError, which a run read as a lost connection).
            return []
        if kind in ("response.created", "response.in_progress", "response.queued"):
            resp = event.get("response")
            if isinstance(resp, dict):
                if isinstance(resp.get("id"), str) and resp["id"]:
                    self._response_id = resp["id"]
                if self._model is None and isinstance(resp.get("model"), str):
                    self._model = resp["model"]
            return []
        if kind == "response.output_item.added":
            idx, item = _output_index(event.get("output_index")), event.get("item")
            if idx is None or not isinstance(item, dict):
                return []
            if idx in self._done and item.get("id") != self._done[idx].get("id"):
                self._reused_index = True  # (the same item announced again is no reuse)
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
        if kind == "response.function_call_arguments.done":
            # The finalised argument text (SDK ResponseFunctionCallArgumentsDoneEvent): it replaces the
            # deltas, so a call whose output_item.done never comes (a terminal snapshot with an empty
            # output) runs with these arguments, not with the added item's empty ones.
            idx, arguments = self._index(event), event.get("arguments")
            if idx is None or idx in self._done or not isinstance(arguments, str):
                return []
            size = utf8_len(arguments)
            seen = self._arg_bytes.get(idx, 0)
            if size > seen:  # bytes no delta carried count too, as for a done-only call
                self._total += size - seen
                self._arg_bytes[idx] = size
            if self._over_caps(self._arg_bytes.get(idx, 0)):
                return self._abort()
            self._args[idx] = [arguments]
            self._args_done.add(idx)
            return []
        if kind == "response.output_item.done":
            idx, item = _output_index(event.get("output_index")), event.get("item")
            if idx is None or not isinstance(item, dict):
                return []
            if isinstance(item.get("id"), str):
                self._item_index[item["id"]] = idx
            progress: list[Progress] = []
            if item.get("type") == "function_call":
                arguments = item.get("arguments")
                fragments = self._args.pop(idx, None)
                sent = isinstance(arguments, dict) or (isinstance(arguments, str) and arguments.strip())
                if fragments is not None and not sent:
                    # Empty or missing arguments on a done item say nothing (OpenRouter's Responses
                    # stream sends the item as added): the deltas or function_call_arguments.done, when
                    # they hold any, are what was sent. An object is read as a plain body's is (D5).
                    joined = join_fragments(fragments)
                    if not isinstance(arguments, str) or joined.strip():
                        arguments = joined
                        item = {**item, "arguments": arguments}
                size = _size(arguments)
                seen = self._arg_bytes.get(idx, 0)
                if size > seen:  # bytes no delta carried (a done-only call) count too
                    self._total += size - seen
                    self._arg_bytes[idx] = size
                if self._over_caps(self._arg_bytes.get(idx, 0)):
                    return self._abort()
                added = self._items.get(idx)
                same = added is None or self._same_call(added, item)
                progress = self._start(idx, item)
                if idx not in self._ready:
                    self._ready.add(idx)
                    # CallReady says the provider finished the call's arguments (docs/reference.md):
                    # not for a done item whose status says it did not (it never runs), nor for one
                    # that is another call than the one CallStarted named (``_same_call``).
                    if same and not says_unfinished(item):
                        progress.append(CallReady(self._progress_ids[idx]))
            elif item.get("type") != "message":
                # A reasoning, hosted-tool or image item is held whole from here (its deltas are not):
                # each event is under the cap, but not all of them together, so each counts against
                # max_body_bytes as Anthropic's and Gemini's pieces given whole do (review round 19).
                size = held_len(item)
                self._held += size - self._whole_bytes.get(idx, 0)
                self._whole_bytes[idx] = size
                if self._held > self._caps.max_body_bytes:
                    return self._abort("max_body_bytes")
            self._done[idx] = item
            self._args.pop(idx, None)  # the done item is authoritative; free the fragments
            if self._texts and _has_text(item):
                for key in [k for k in self._texts if k[0] == idx]:
                    del self._texts[key]  # the done item carries its text: free the deltas
            return progress
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            resp = event.get("response")
            status = str(kind).split(".", 1)[1]
            if not isinstance(resp, dict):
                resp = {"status": status}
            elif status != "completed" or not isinstance(resp.get("status"), str):
                # The event's name is the provider's explicit signal (D1: only an explicit completion is
                # success): response.failed and response.incomplete say so whatever their snapshot's
                # status, and a snapshot without its status takes the name's. A response.completed
                # whose snapshot says otherwise (failed, in_progress) is judged by the snapshot, which
                # is then no success either.
                resp = {**resp, "status": status}
            self._terminal = resp
            return self._ready_at_terminal(resp)
        if kind == "error":
            self._error = event
            return []
        if kind in _REFUSAL_EVENTS:
            self._refusal(str(kind), event)
        elif kind in ("response.output_text.delta", "response.output_text.done"):
            self._text(str(kind), event)
        if self._held > self._caps.max_body_bytes:  # bounded as a plain body is (review 17, r4 F2)
            return self._abort("max_body_bytes")
        # Reasoning deltas and hosted-tool events: the done items carry them, as whole strings.
        return []

    def _ready_at_terminal(self, resp: dict[str, Any]) -> list[Progress]:
        """CallReady for each call CallStarted announced that no output_item.done ended, when the
        terminal event finishes it (its function_call_arguments.done came, or the snapshot holds it
        finished) and the response completed: the turn runs it, so a user interface must not show it
        still being prepared. Nothing to do, and no walk, in a stream whose calls all had their done
        event."""
        waiting = [i for i in sorted(self._progress_ids) if i not in self._done]
        if not waiting or self._reused_index or self._error is not None or resp.get("status") != "completed":
            return []
        snapshot = resp.get("output")
        chosen, unfinished = self._choose(snapshot if isinstance(snapshot, list) else [])
        if self._conflict is not None:
            return []  # none of the turn's calls runs (finish)
        return [
            CallReady(self._progress_ids[i])
            for i in waiting
            if i in chosen and i not in unfinished and chosen[i].get("type") == "function_call"
        ]

    def _text(self, kind: str, event: dict[str, Any]) -> None:
        """Keep one output_text delta (or the part's whole text, which replaces them), used only for a
        message item that comes without its text (``_with_streamed_text``)."""
        idx = self._index(event)
        value = event.get("delta" if kind == "response.output_text.delta" else "text")
        if idx is None or idx in self._done or not isinstance(value, str):
            return  # an item already done carries its own text
        self._held += utf8_len(value)
        parts = self._texts.setdefault((idx, _output_index(event.get("content_index")) or 0), [])
        if kind == "response.output_text.delta":
            parts.append(value)
        else:
            parts[:] = [value]

    def _refusal(self, kind: str, event: dict[str, Any]) -> None:
        """Keep what one refusal event says: the part's start text, a delta, or the whole text (a
        ``.done`` event, which replaces the deltas)."""
        # An event that names no item it can be placed at is still a refusal signal: kept apart (-1).
        idx = self._index(event)
        content_index = _output_index(event.get("content_index"))
        if kind.startswith("response.content_part."):
            part = event.get("part")
            if not isinstance(part, dict) or part.get("type") != "refusal":
                return  # an output_text part: the done item carries the text
            value = part.get("refusal")
        else:
            value = event.get("delta" if kind == "response.refusal.delta" else "refusal")
        parts = self._refusals.setdefault((-1 if idx is None else idx, content_index or 0), [])
        if not isinstance(value, str):
            return  # still a refusal signal, with no text
        self._held += utf8_len(value)
        if kind == "response.refusal.delta" or (kind == "response.content_part.added" and not parts):
            parts.append(value)
        elif kind != "response.content_part.added":
            parts[:] = [value]

    def _arguments(self, idx: int, delta: str) -> int | None:
        """Keep one argument delta of item ``idx``. Returns the call's byte count when an
        ArgumentsProgress is due, else None (item already done, a cap tripped, or no CallStarted yet:
        nothing may be announced before its call)."""
        if idx in self._done or idx in self._args_done:
            # After its done event a call's arguments are final (issue 3 §4): a late delta is dropped,
            # as Anthropic's and Interactions' assemblers drop theirs, not appended to the final text.
            return None
        size = utf8_len(delta)
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
            if self._terminal is not None:
                return  # nothing after the terminal event is even decoded (``stream.feed_events``)
            found = _DELTA_DATA.fullmatch(event[1]) if isinstance(event, tuple) else event
            if found is None:
                feed_one(self, event, on_progress)  # decoded and fed whole: the reference path
                continue
            if self._aborted:
                continue  # feed() ignores everything now, and the event is valid JSON: nothing can fail
            item_id, output_index, delta = found.groups()
            idx: int | None = None
            if output_index is not None:
                idx = _output_index(int(output_index))
            if idx is None and item_id is not None:  # as _index: no usable index, so the item id
                idx = self._item_index.get(string_value(found, 1))
            if idx is None or delta is None:
                continue  # feed() ignores a delta it cannot place, or without text
            nbytes = self._arguments(idx, string_value(found, 3) if "\\" in delta else delta)
            if nbytes is not None and on_progress is not None:
                on_progress(ArgumentsProgress(self._progress_ids[idx], nbytes))

    def finish(self, raw_sha256: str) -> ModelTurn:
        prov = _provenance(self._model)
        if self._aborted:
            return too_large_turn(API, prov, raw_sha256, self._response_id, cap=self._tripped)
        if self._terminal is not None:
            resp = dict(self._terminal)
            if not (isinstance(resp.get("id"), str) and resp["id"]):
                resp["id"] = self._response_id
            if not resp.get("model"):
                resp["model"] = self._model
            if self._error is not None and resp.get("status") != "failed":
                # An error event says the response failed, whatever terminal event follows it: its calls
                # must not run (D1), as on every other API. The terminal's usage still counts (D27).
                return replace(
                    self._error_turn(prov, raw_sha256, resp["id"]), usage=_usage(resp.get("usage"))
                )
            if resp.get("status") == "failed" and not resp.get("error") and self._error is not None:
                resp["error"] = event_error(self._error)
            output, unfinished, refusals = self._final_output(resp)
            turn = turn_from_response(resp, raw_sha256, output, unfinished=unfinished, refusals=refusals)
            if self._conflict is not None and turn.finish is Finish.TOOL_PROPOSALS:
                # As a plain body that cannot be read whole (``turn_from_response``): not retried.
                failure = Failure("status", False, None, None, self._conflict)
                return replace(turn, finish=Finish.API_FAILURE, reason="malformed_response", failure=failure)
            # Checked only where the calls would run, as ``base.capped`` does: a refused, failed or
            # cut-off response keeps its own finish (D31).
            runnable = turn.finish is Finish.TOOL_PROPOSALS
            self._tripped = self._output_over_caps(output) if runnable else None
            if self._tripped is not None:
                # Items no delta or done event counted (the terminal snapshot's): the caps still apply.
                # The turn keeps what the terminal event reported, its status and usage (D27), as
                # the same response read as a plain body does (``base.capped``).
                self._aborted = True
                return over_byte_cap(turn, "arguments_too_large", self._tripped)
            return turn
        if self._error is not None:
            return self._error_turn(prov, raw_sha256, self._response_id)
        return stream_cut_turn(API, prov, raw_sha256, self._response_id)

    def _error_turn(self, prov: Provenance, raw_sha256: str, response_id: str | None) -> ModelTurn:
        assert self._error is not None
        r = read_openai_error(event_error(self._error), None, {}, RETRYABLE_ERROR_CODES)
        return failure_turn(
            API,
            prov,
            raw_sha256,
            response_id=response_id,
            raw_stop_reason=r.raw_stop_reason,
            reason=r.reason,
            failure=Failure("error_event", r.retryable, None, r.error_type, r.error_code, r.retry_after_s),
            finish=r.finish,
        )
