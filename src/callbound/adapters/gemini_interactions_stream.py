"""Streaming assembly for Gemini Interactions (``gemini-interactions``): the ``steps`` schema
(``step.delta`` with ``arguments_delta`` fragments, keyed by step index) and the legacy ``outputs`` schema
(whole calls); terminal ``interaction.completed`` / legacy ``interaction.complete``. Split from
gemini_interactions.py, which imports it lazily. ``arguments_delta`` steps in the API's compact shape
are read from the raw event text without the JSON parser (``feed_events``, the fast path of
``callbound.adapters.stream``)."""

from __future__ import annotations

import dataclasses
import re
from bisect import bisect_left, insort
from collections.abc import Sequence
from typing import Any

from ..core.arguments import loads_body, parse_arguments
from ..core.model import ProgressCallback
from ..core.types import (
    ArgumentsProgress,
    CallReady,
    CallStarted,
    ModelTurn,
    Progress,
)
from .base import (
    StreamCaps,
    cap_tripped,
    capped,
    compact_json_len,
    held_len,
    join_fragments,
    stream_cut_turn,
    too_large_turn,
    utf8_len,
)
from .finite import invalid_json
from .gemini_interactions import (
    _TERMINAL,
    API,
    _provenance,
    _real_id,
    _usage,
    error_turn,
    turn_from_interaction,
)
from .shapes import interaction_step
from .sse import JSON_STRING, RawEvent, simple_event, string_value
from .stream import feed_one, kind_of

# A step.delta with an arguments_delta exactly as the API sends it (WIRE.md 5.6): compact, keys in this
# order, a string value (JSON_STRING: valid JSON only, so the payload it stands for is known without
# parsing). Up to 9 index digits ([0-9]: \d would take other scripts' digits); longer ones go the slow
# way. The payload names its own event_type, so the event: line cannot matter.
_ARGUMENTS = (
    r'\{"index":(0|[1-9][0-9]{0,8}),"delta":\{"arguments":"('
    + JSON_STRING
    + r')","type":"arguments_delta"\},"event_type":"step\.delta"\}'
)
_ARGUMENTS_DATA = re.compile(_ARGUMENTS)
_ARGUMENTS_EVENT = simple_event(_ARGUMENTS)


def _fragment(delta: dict[str, Any]) -> Any:
    """The argument text an ``arguments_delta`` carries: ``arguments``, or ``partial_arguments``, its
    name in the API revision before 2026-05-12 (WIRE.md 5.6). Ignoring the old name would let the call
    run with the ``{}`` of its ``step.start`` snapshot and put a stray key into the replay (D5, D8)."""
    value = delta.get("arguments")
    return value if isinstance(value, str) else delta.get("partial_arguments")


def _echoed(raw: str) -> dict[str, Any]:
    """The ``arguments`` object a streamed call's step goes back with (D8): the API takes an object
    only (the SDK's FunctionCallStepParam), so text the strict parser refuses (D5) goes back as the
    object the lenient body reader makes of it (duplicate keys: the last value, as a plain body's
    object is echoed), and text that is no JSON object (a list, a string, a number, ``null``, or no
    JSON at all) as ``{"INVALID_JSON": text}``, as a plain body's arguments of the same value go back
    (``turn_from_interaction``), so the continuation is the same streamed or not. The call itself
    carries the raw text and its arguments error either way."""
    parsed, _ = parse_arguments(raw)
    if parsed is not None:
        return parsed
    try:
        lenient = loads_body(raw)
    except (ValueError, RecursionError):
        return invalid_json(raw)
    return lenient if isinstance(lenient, dict) else invalid_json(raw)


def _list_in(item: dict[str, Any], key: str) -> list[Any]:
    """``item[key]`` as a list to append deltas to; a value of another type there (odd provider data)
    is replaced, since nothing can be appended to it."""
    value = item.get(key)
    if not isinstance(value, list):
        value = item[key] = []
    return value


def _same_call(held: dict[str, Any], snapshot: Any) -> bool:
    """A step.start snapshot naming the call step ``held`` holds: same type and id, and the same name
    where it names one (a legacy content.start carries only the id)."""
    return (
        isinstance(snapshot, dict)
        and all(snapshot.get(k) == held.get(k) for k in ("type", "id"))
        and snapshot.get("name") in (None, held.get("name"))
    )


class _Assembler:
    """Streaming assembly for Interactions events, keyed by step (legacy: content) index.

    A call's ``step.stop`` (legacy: ``content.stop``) is the provider's done event for it: its
    arguments are final there (issue 3 §4) and CallReady says so. A delta for a call step that has
    stopped (an ``arguments_delta``, a legacy whole ``function_call``, or any other) and an argument
    delta for any stopped step are dropped: not kept, not counted, no progress. The other adapters
    do the same with a delta after their done event (Anthropic after ``content_block_stop``,
    Responses after ``output_item.done``), so one provider contract violation reads the same on
    every API: the call runs on exactly the arguments that were complete at its done event, the ones
    CallReady announced, and nothing received after it can reach the tool. (A ``step.start`` for the
    index opens the step again when it names the same call; another step there is ``step_index_reused``,
    malformed, as Anthropic's ``block_index_reused``.) A delta for an index
    no ``step.start`` opened is dropped too, as those adapters drop one for a block or item never
    started: it names no step, and none without a type is made up for the replay (D8)."""

    fast_events = _ARGUMENTS_EVENT  # see feed_events

    def __init__(self, caps: StreamCaps, model: str | None) -> None:
        self._caps = caps
        self._model = model
        self._rid: str | None = None
        self._items: dict[int, dict[str, Any]] = {}
        self._order: list[int] = []  # the keys of _items, sorted: finish() numbers steps in this order
        self._args: dict[int, list[str]] = {}  # arguments_delta fragments, joined once at step.stop
        self._texts: dict[int, list[str]] = {}
        # thought_summary text deltas by step index: each run of consecutive ones is one summary item
        # (the dict in the step's "summary" list) and its fragments, joined once in _build
        self._summaries: dict[int, list[tuple[dict[str, Any], list[str]]]] = {}
        self._raw: dict[int, str] = {}  # joined argument text by step index, for the strict parser
        self._stopped: set[int] = set()  # steps whose step.stop (legacy: content.stop) came
        self._call_bytes: dict[int, int] = {}
        self._announced: set[int] = set()
        self._total = 0
        self._held = 0  # UTF-8 bytes of text and thought summary text held: against max_body_bytes
        self._legacy = False
        self._terminal: dict[str, Any] | None = None
        self._error: dict[str, Any] | None = None
        self._usage: dict[str, Any] | None = None  # running totals (metadata.total_usage, step.stop usage)
        self._aborted = False
        self._tripped: str | None = None  # the StreamCaps field that tripped (cap_tripped)
        self._malformed: str | None = None  # the first step snapshot of the wrong JSON type (shapes.py)

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def complete(self) -> bool:
        """The terminal event came: nothing after it changes the turn, so a reader may stop (a
        server that keeps the connection open must not hold a finished turn back)."""
        return self._terminal is not None

    def _cid(self, index: int) -> str:
        """The id progress events name a call by. A call without a real id is numbered, like its
        synthetic id in the turn (D7), by its position among the steps: finish() keeps every step, in
        index order, and indices need not start at 0 or be contiguous. A step arriving later with a
        lower index would shift it, but steps arrive in index order."""
        real = _real_id(self._items.get(index, {}).get("id"))
        if real:
            return real
        position = bisect_left(self._order, index)
        return f"{self._rid}:{position}" if self._rid else f"#{position}"

    def _started(self, index: int) -> list[Progress]:
        """CallStarted once the name is known (legacy content.start carries only the id)."""
        name = self._items[index].get("name")
        if index in self._announced or not isinstance(name, str):
            return []
        self._announced.add(index)
        return [CallStarted(self._cid(index), name)]

    def _count(self, index: int, size: int) -> bool:
        self._call_bytes[index] = self._call_bytes.get(index, 0) + size
        self._total += size
        if self._call_bytes[index] > self._caps.max_call_bytes or self._total > self._caps.max_response_bytes:
            return self._abort(cap_tripped(self._call_bytes[index], self._total, self._caps))
        return True

    def _hold(self, text: str) -> bool:
        """Count text held (answer and thought summaries) against ``max_body_bytes``: a streamed
        answer is bounded as a plain body is (review round 17, r4 F2). False once over it (aborted)."""
        return self._hold_size(utf8_len(text))

    def _hold_size(self, size: int) -> bool:
        """Count ``size`` bytes held besides call arguments against ``max_body_bytes`` (``_hold``):
        a signature, a media or built-in tool delta, a summary image, a step snapshot. Each event is
        under the cap, but not all of them together. False once over it (aborted)."""
        self._held += size
        return self._held <= self._caps.max_body_bytes or self._abort("max_body_bytes")

    def _whole(self, index: int, item: dict[str, Any]) -> bool:
        """Count a step.start snapshot: a function_call's arguments given whole against the argument
        caps (``{}``, the usual start, counts nothing), the rest as ``held_len`` against
        ``max_body_bytes``. False once a cap tripped (aborted)."""
        rest = item
        if item.get("type") == "function_call":
            given = item.get("arguments")
            if given and not self._count(index, compact_json_len(given)):
                return False
            rest = {k: v for k, v in item.items() if k != "arguments"}
        return self._hold_size(held_len(rest))

    def _abort(self, cap: str) -> bool:
        """A byte cap tripped: finish() reports TRUNCATED (``_tripped`` says why). Always False."""
        self._aborted = True
        self._tripped = cap
        self._items.clear()  # stop buffering: nothing of this stream will be used
        self._order.clear()
        self._args.clear()
        self._texts.clear()
        self._summaries.clear()
        return False

    def feed(self, event: dict[str, Any] | str) -> list[Progress]:
        if not isinstance(event, dict) or self._aborted or self._terminal is not None:
            # "[DONE]" (tolerated by the SDK) ends nothing: the terminal event does, and nothing after
            # it changes the turn (``complete``)
            return []
        kind = kind_of(event, "event_type")
        index = event.get("index")
        meta = event.get("metadata")  # optional on any event (SDK StepDeltaMetadata)
        if isinstance(meta, dict) and isinstance(meta.get("total_usage"), dict):
            self._usage = meta["total_usage"]
        if kind in ("interaction.created", "interaction.start"):
            inter = event.get("interaction")
            if isinstance(inter, dict):
                self._rid = _real_id(inter.get("id")) or self._rid  # store:false streams send id ""
                self._model = self._model or (inter["model"] if isinstance(inter.get("model"), str) else None)
            self._legacy = kind == "interaction.start"
        elif kind in _TERMINAL:
            inter = event.get("interaction")
            self._terminal = inter if isinstance(inter, dict) else {}
        elif kind == "error":
            self._error = event["error"] if isinstance(event.get("error"), dict) else {}
        elif kind == "interaction.status_update":
            if isinstance(event.get("usage"), dict):  # google-genai InteractionStatusUpdate.usage (D27)
                self._usage = event["usage"]
        elif kind in ("step.start", "content.start") and isinstance(index, int):
            snapshot = event.get("step" if kind == "step.start" else "content")
            self._legacy = self._legacy or kind == "content.start"
            if self._malformed is None and snapshot is not None:
                # judged as a plain body's steps are (shapes.interaction): a step is an object, and a
                # model_output's content a list of objects
                wrong = "step" if kind == "step.start" else "output"
                shape = interaction_step(snapshot) if isinstance(snapshot, dict) else f"{wrong}_not_an_object"
                self._malformed = shape
            held = self._items.get(index)
            if held is None:
                insort(self._order, index)
            elif held.get("type") == "function_call" and not _same_call(held, snapshot):
                # The index held a call progress announced, and another step starts there: read on, the
                # call vanished while the other ran (and got no CallStarted). Only the same call (type,
                # id, name) may open its step again (review round 19, e F3).
                self._malformed = self._malformed or "step_index_reused"
                return []
            item = self._items[index] = dict(snapshot) if isinstance(snapshot, dict) else {}
            if item and not self._whole(index, item):
                return []
            self._stopped.discard(index)  # a step started again is open again
            self._summaries.pop(index, None)  # its summary items are gone with the old snapshot
            if item.get("type") == "function_call":
                self._args[index] = []
                return self._started(index)
        elif kind in ("step.delta", "content.delta") and isinstance(index, int):
            delta = event.get("delta")
            if isinstance(delta, dict):
                return self._delta(index, delta)
        elif kind in ("step.stop", "content.stop") and isinstance(index, int):
            if isinstance(event.get("usage"), dict):  # the request's usage so far (step_usage: the step's)
                self._usage = event["usage"]
            return self._stop(index)
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[Progress]:
        item = self._items.get(index)
        if item is None:
            # No step.start opened this index: the delta names no step. Kept, it became a step without a
            # type, replayed to the API (D8), which rejects it; dropped, as Anthropic's and Responses'
            # assemblers drop a delta for a block or item never started (review round 18, b F1).
            return []
        dtype = delta.get("type")
        if index in self._stopped and (item.get("type") == "function_call" or dtype == "function_call"):
            return []  # final at its stop (see the class doc); arguments_delta is checked in _arguments
        # A delta goes only into the kind of step it belongs to (the SDK's delta types: text into a
        # model_output, legacy text; arguments into a function_call; a built-in tool's delta carries its
        # step's own type): another step would take members it never has, replayed (D8) and refused, or a
        # call its name and arguments from a delta that is not its own (review round 18, b F6).
        kind = item.get("type")
        if dtype == "text" and isinstance(delta.get("text"), str):
            if kind in ("model_output", "text") and self._hold(delta["text"]):
                self._texts.setdefault(index, []).append(delta["text"])
        elif dtype == "thought_signature":
            # A delta without its value (the SDK types make a summary delta's content optional)
            # leaves the step as it was: a null in it would go back to the API in the replay (D8).
            if isinstance(delta.get("signature"), str) and self._hold(delta["signature"]):
                item["signature"] = delta["signature"]
        elif dtype == "thought_summary":
            if isinstance(delta.get("content"), dict):
                self._summary(index, item, delta["content"])
        elif dtype == "arguments_delta" and isinstance(fragment := _fragment(delta), str):
            nbytes = self._arguments(index, fragment)
            return [] if nbytes is None else [ArgumentsProgress(self._cid(index), nbytes)]
        elif dtype == "function_call" and kind == "function_call":  # legacy: the whole call, args an object
            size = compact_json_len(delta.get("arguments"))  # as base.capped measures it in a plain body
            if not self._count(index, size):
                return []
            item.update(delta)
            return [*self._started(index), ArgumentsProgress(self._cid(index), self._call_bytes[index])]
        elif dtype in ("image", "audio", "video", "document") and item.get("type") == "model_output":
            if self._hold_size(compact_json_len(delta)):
                _list_in(item, "content").append(delta)
        elif dtype == kind and self._hold_size(compact_json_len(delta)):
            item.update({k: v for k, v in delta.items() if k != "type"})  # built-in tool deltas, whole
        return []

    def _summary(self, index: int, item: dict[str, Any], content: dict[str, Any]) -> None:
        """Keep one thought_summary delta. Consecutive text deltas are one summary text, streamed in
        pieces (Google's streaming docs build the summary by concatenating them): they go into one
        summary item, joined in _build with join_fragments, as text deltas are, since a character
        outside the BMP may arrive as its escaped surrogate halves in two deltas, and two lone
        surrogates in the replayed thought step make the next request unencodable (D4, D8). Any other
        content (an image) is an item of its own and ends the run."""
        text = content.get("text")
        if isinstance(text, str) and content.get("type") == "text" and not self._hold(text):
            return
        summary = _list_in(item, "summary")
        runs = self._summaries.setdefault(index, [])
        if content.get("type") != "text" or not isinstance(text, str):
            if self._hold_size(compact_json_len(content)):
                summary.append(content)
        elif runs and summary and summary[-1] is runs[-1][0]:
            runs[-1][1].append(text)  # the run goes on
        else:
            summary.append(content)
            runs.append((content, [text]))

    def _arguments(self, index: int, fragment: str) -> int | None:
        """Keep one arguments_delta fragment; the call's byte count, or None when a cap tripped or
        the step has stopped (its arguments are final, see the class doc)."""
        if index in self._stopped or self._items[index].get("type") != "function_call":
            return None  # final at its stop, or no call (see _delta)
        size = utf8_len(fragment)  # never raises: one half of a split surrogate pair counts 2 bytes
        if not self._count(index, size):
            return None
        self._args.setdefault(index, []).append(fragment)
        return self._call_bytes[index]

    def feed_events(self, events: Sequence[RawEvent], on_progress: ProgressCallback | None) -> None:
        """``feed`` for raw events (see ``callbound.adapters.stream``). A step.delta carrying an
        arguments_delta in the exact shape the API sends is read from its match (``fast_events``, or
        ``_ARGUMENTS_DATA`` on a frame's data) as ``feed`` would read its payload; every other event
        is decoded and fed whole. Runs once per event, hence inlined."""
        for event in events:
            if self._terminal is not None:
                return  # nothing after the terminal event is even decoded (``stream.feed_events``)
            found = _ARGUMENTS_DATA.fullmatch(event[1]) if isinstance(event, tuple) else event
            if found is None:
                feed_one(self, event, on_progress)  # decoded and fed whole: the reference path
                continue
            if self._aborted:
                continue  # feed() ignores everything now, and the event is valid JSON: nothing can fail
            index = int(found[1])
            if index not in self._items:
                continue  # feed() drops a delta for a step never started (_delta)
            nbytes = self._arguments(index, string_value(found, 2))
            if nbytes is not None and on_progress is not None:
                on_progress(ArgumentsProgress(self._cid(index), nbytes))

    def _stop(self, index: int) -> list[Progress]:
        item = self._items.get(index)
        if item is None or index in self._stopped:
            # A stop for a step already stopped is no new done event: CallReady is said once per call,
            # as Anthropic's and Responses' assemblers say it (review round 18, b F2). A step.start
            # for the index opens it again, and its stop then counts.
            return []
        self._stopped.add(index)
        fragments = self._args.pop(index, None)
        if item.get("type") == "function_call":
            if fragments:
                raw = self._raw[index] = join_fragments(fragments)
                item["arguments"] = _echoed(raw)
            return [CallReady(self._cid(index))]
        return []

    def _build(self, index: int, item: dict[str, Any]) -> dict[str, Any]:
        texts = self._texts.get(index)
        runs = self._summaries.get(index)
        if runs and isinstance(item.get("summary"), list):
            joined = {id(first): {**first, "text": join_fragments(parts)} for first, parts in runs}
            item = {**item, "summary": [joined.get(id(part), part) for part in item["summary"]]}
        if item.get("type") == "function_call" and self._args.get(index):  # no step.stop came
            raw = self._raw[index] = join_fragments(self._args[index])
            item = {**item, "arguments": _echoed(raw)}
        value = item.get("content")
        blocks: list[Any] = value if isinstance(value, list) else []
        if not isinstance(value, list | None) and item.get("type") == "model_output":
            # A model_output content that is not a list of blocks holds nothing readable, and the
            # turn reads it as a list: it goes on as an empty one.
            item = {**item, "content": blocks}
        if texts is None:
            return item
        # Text deltas, like arguments, may split a character outside the BMP into its escaped
        # surrogate halves: a plain join would leave two lone surrogates in the continuation, and the
        # next request could not be encoded (D4).
        if self._legacy or item.get("type") == "text":
            return {**item, "text": join_fragments(texts)}
        content = [c for c in blocks if isinstance(c, dict)]
        first = next((i for i, c in enumerate(content) if c.get("type") == "text"), None)
        if first is None:
            content.append({"type": "text", "text": join_fragments(texts)})
        else:  # the snapshot already held the text's beginning
            head = str(content[first].get("text") or "")
            content[first] = {**content[first], "text": join_fragments([head, *texts])}
        return {**item, "content": content}

    def finish(self, raw_sha256: str) -> ModelTurn:
        prov = _provenance(self._model)
        # The running usage read so far counts however the stream ended (D27): a cut or failed request
        # that is retried has still been paid for, and token budgets add up every request (D12).
        usage = _usage(self._usage)
        if self._aborted:
            turn = too_large_turn(API, prov, raw_sha256, self._rid, cap=self._tripped)
            return dataclasses.replace(turn, usage=usage)
        if self._error is not None:
            turn = error_turn(self._error, raw_sha256, None, {}, "error_event", self._model)
            return dataclasses.replace(turn, response_id=self._rid or turn.response_id, usage=usage)
        if self._terminal is None:
            return dataclasses.replace(stream_cut_turn(API, prov, raw_sha256, self._rid), usage=usage)
        inter = dict(self._terminal)
        if not _real_id(inter.get("id")):
            inter["id"] = self._rid
        inter.setdefault("model", self._model)
        if not isinstance(inter.get("usage"), dict) and self._usage is not None:
            inter["usage"] = self._usage  # a terminal event without usage: the running totals
        order = sorted(self._items)
        items = [self._build(i, self._items[i]) for i in order]
        if not items and inter.get("steps" if not self._legacy else "outputs") is not None:
            # No step events, but the terminal event carries the steps itself (the SDK's
            # InteractionSseEventInteraction may include them): those are the turn.
            # whole arguments (step.start, or a terminal event carrying its steps) are not counted as
            # deltas are: the finished turn gets the plain body's caps (issue 3 §4)
            return capped(turn_from_interaction(inter, raw_sha256, model=self._model), self._caps)
        if self._legacy:
            inter.pop("steps", None)
            inter["outputs"] = items
        # Step indices need not start at 0 or be contiguous; turn_from_interaction() reads raw
        # argument text by position in items, so each call is parsed from its own text.
        positions = {i: pos for pos, i in enumerate(order)}
        raw = {positions[i]: text for i, text in self._raw.items()}
        # A call is done at its step.stop (issue 3 §4); one that never got it is built from its deltas
        # for display and the record, and never runs.
        unfinished = any(
            item.get("type") == "function_call" and i not in self._stopped
            for i, item in zip(order, items, strict=True)
        )
        turn = turn_from_interaction(
            inter,
            raw_sha256,
            model=self._model,
            items=items,
            raw_arguments=raw,
            unfinished=unfinished,
            malformed=self._malformed,
        )
        return capped(turn, self._caps)
