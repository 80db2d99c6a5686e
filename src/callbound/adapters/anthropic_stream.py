"""Streamed Messages events put back together as the plain API returns the Message (WIRE.md 3.4).

Used by ``anthropic_messages``, whose ``_Assembler`` adds ``finish`` (the turn mapping) on top of
``MessageStream``. Nothing here knows about turns.

- Blocks are keyed by ``index``. ``message_start`` may already carry content blocks (a turn resumed
  inside a code execution container starts with its results and the pending ``tool_use``); they are
  complete, kept as blocks ``0..n-1``, and later ``content_block_start`` indices count after them, as
  the SDK's accumulator appends them.
- Order (review round 19, e F1): ``message_start`` comes first and once, and an index is started once.
  A stream that breaks this (no ``message_start`` before ``message_stop``, a second one, a second
  ``content_block_start`` for an index) is ``malformed`` (``message_start_missing``,
  ``message_start_repeated``, ``block_index_reused``): the SDK's accumulator refuses or misreads it,
  and reading on would drop a block, a call progress announced included. A stop or delta for an index
  never started, a ``ping`` or an unknown event changes nothing.
- Fragments are kept as lists and joined once when the block stops (or at the end, since a
  ``max_tokens`` cut may skip ``content_block_stop``) by ``join_fragments``, which re-pairs surrogate
  halves split over two deltas. A ``signature`` or a compaction's ``encrypted_content`` arrives whole
  in each delta: the last one wins. ``compaction_delta`` text is appended, like ``text_delta``.
- A tool_use input that never parses as a JSON object (fine-grained tool streaming gives no guarantee
  that it does), or holds a number JSON cannot carry (NaN, Infinity, 1e400), becomes
  ``{"INVALID_JSON": "<the text>"}`` in the rebuilt block, as Anthropic's docs say to send it back;
  ``message()`` also returns the text, which the call's parser rejects.
- Byte caps: tool_use argument text (and an input given whole at the start) counts against
  ``max_call_bytes`` / ``max_response_bytes`` as it comes; everything else held (text, thinking,
  signatures, compactions, citations, server_tool_use / mcp_tool_use ``input_json_delta``, which is no
  call, and every other block that arrives whole, as its deltas would count it) counts, all together, against
  ``max_body_bytes``: a streamed answer is held to the cap a plain body is.
- Deltas in the API's compact shape are read from the raw event text without the JSON parser
  (``feed_events``, the fast path of ``callbound.adapters.stream``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..core.arguments import loads_body
from ..core.model import ProgressCallback
from ..core.types import ArgumentsProgress, CallReady, CallStarted, ModelTurn, Progress
from .base import StreamCaps, cap_tripped, compact_json_len, held_len, join_fragments, utf8_len
from .finite import has_non_finite, invalid_json
from .shapes import anthropic_content
from .sse import JSON_STRING, RawEvent, simple_event, string_value
from .stream import feed_one, kind_of

_DELTA_FIELDS = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "signature",
    "input_json_delta": "partial_json",
    "compaction_delta": "content",
}
# What a message_delta says about a refusal: once one said "refusal", no later delta changes these.
_REFUSAL_KEYS = ("stop_reason", "stop_details")
# Fields a delta carries whole (the SDK assigns them, never appends): the last delta wins.
_WHOLE_FIELDS = {"signature", "encrypted_content"}
# The delta fields each kind of block takes, as the SDK's accumulator applies them: any other pairing
# changes nothing (a "text" on a tool_use block would be replayed, D8, and refused). A block of a kind
# not listed takes the fields its start already holds ("partial_json" goes into "input").
_TAKES = {
    "text": frozenset({"text", "citations"}),
    "thinking": frozenset({"thinking", "signature"}),
    "compaction": frozenset({"content", "encrypted_content"}),
    **dict.fromkeys(("tool_use", "server_tool_use", "mcp_tool_use"), frozenset({"partial_json"})),
}


def _takes(base: dict[str, Any]) -> frozenset[str]:
    kind = base.get("type")
    if isinstance(kind, str) and kind in _TAKES:
        return _TAKES[kind]
    fields = ("text", "citations", "thinking", "signature", "content", "encrypted_content", "partial_json")
    return frozenset(f for f in fields if ("input" if f == "partial_json" else f) in base)


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


class _Block:
    """One streamed content block: the start object plus fragments per field, joined once."""

    __slots__ = ("base", "citations", "done", "nbytes", "parts", "takes", "tool_use")

    def __init__(self, base: dict[str, Any], done: bool = False) -> None:
        self.base = base
        self.parts: dict[str, list[str]] = {}
        self.citations: list[Any] = []
        self.nbytes = 0
        self.done = done
        # base is this block's own copy and its type is never rewritten, so this holds until the end.
        self.tool_use = base.get("type") == "tool_use"
        self.takes = _takes(base)  # the delta fields it takes (review round 18, b F5)


class MessageStream:
    """Streaming assembly for Messages events; ``message()`` is the Message as the plain API returns it."""

    fast_events = _DELTA_EVENT  # see feed_events

    def __init__(self, caps: StreamCaps, model: str | None) -> None:
        self._caps = caps
        self._max_call_bytes = caps.max_call_bytes
        self._max_response_bytes = caps.max_response_bytes
        self._model = model
        self._message: dict[str, Any] = {}
        self._usage: dict[str, Any] = {}
        self._delta: dict[str, Any] = {}
        self._blocks: dict[int, _Block] = {}
        self._raw_inputs: dict[int, str] = {}
        self._total = 0  # tool_use argument bytes, against max_response_bytes
        self._held = 0  # every other fragment's bytes (text, thinking, server tool input): max_body_bytes
        self._stopped = False
        self._begun = False  # message_start came: a second one is malformed
        self._error: dict[str, Any] | None = None
        self._aborted = False
        # The StreamCaps field that tripped (``cap_tripped``), for the subclass's finish() to pass to
        # ``too_large_turn`` as ``cap``.
        self.tripped_cap: str | None = None
        # The first content container or block of the wrong JSON type (shapes.py), for the subclass's
        # finish() to pass to the turn, as a plain body's content is judged.
        self.malformed: str | None = None

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def complete(self) -> bool:
        """The terminal event came: nothing after it changes the turn, so a reader may stop (a
        server that keeps the connection open must not hold a finished turn back)."""
        return self._stopped

    def feed(self, event: dict[str, Any] | str) -> list[Progress]:
        if not isinstance(event, dict) or self._aborted or self._stopped:
            return []  # after message_stop nothing changes the turn (``complete``)
        kind = kind_of(event)
        index = event.get("index")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            if self._begun:  # the SDK's accumulator ignores it; read, it replaced id, usage and blocks
                self.malformed = self.malformed or "message_start_repeated"
                return []
            return self._start(event["message"])
        if (
            kind == "content_block_start"
            and isinstance(index, int)
            and isinstance(event.get("content_block"), dict)
        ):
            if index in self._blocks:
                # An index names one block of the message (WIRE.md 3.4); the SDK's accumulator appends a
                # second start and sends its deltas to the first block. Read as a new block, it dropped
                # the one held there, a call CallReady had announced included: nothing of it may run.
                self.malformed = self.malformed or "block_index_reused"
                return []
            block = self._blocks[index] = _Block(dict(event["content_block"]))
            if not self._whole(block):
                return []
            if block.tool_use:
                return [CallStarted(self._label(index), str(block.base.get("name")))]
        elif kind == "content_block_start" and event.get("content_block") is not None:
            self.malformed = self.malformed or "content_block_not_an_object"
        elif kind == "content_block_delta" and isinstance(index, int) and index in self._blocks:
            return self._fragment(index, event.get("delta"))
        elif kind == "content_block_stop" and isinstance(index, int) and index in self._blocks:
            if self._finalise(index) and self._blocks[index].tool_use:
                return [CallReady(self._label(index))]
        elif kind == "message_delta":
            if isinstance(event.get("delta"), dict):
                refused = self._delta.get("stop_reason") == "refusal"
                held = {k: self._delta[k] for k in _REFUSAL_KEYS if k in self._delta} if refused else {}
                self._delta.update(event["delta"])
                # D31: a refusal wins over everything else in the turn, a later stop_reason included.
                self._delta.update(held)
            if isinstance(event.get("usage"), dict):
                # Cumulative counts: replace, never add (D27). The input and cache counts are optional
                # here and may be null (SDK MessageDeltaUsage): a null keeps message_start's count.
                self._usage.update((k, v) for k, v in event["usage"].items() if v is not None)
        elif kind == "message_stop":
            self._stopped = True
            if not self._begun:  # the SDK refuses such a stream ("Unexpected event order")
                self.malformed = self.malformed or "message_start_missing"
        elif kind == "error":
            err = event.get("error")
            self._error = err if isinstance(err, dict) else event
        return []  # ping and unknown events carry nothing the turn needs

    def _start(self, message: dict[str, Any]) -> list[Progress]:
        self._begun = True
        self._message = dict(message)
        if self._model is None and isinstance(message.get("model"), str) and message["model"]:
            self._model = message["model"]
        if isinstance(message.get("usage"), dict):
            self._usage = dict(message["usage"])
        # Content already complete at the start (a resumed container turn): blocks 0..n-1 (D8 keeps
        # them in the continuation; a tool_use among them is a call like any other).
        progress: list[Progress] = []
        content = message.get("content")
        self.malformed = self.malformed or anthropic_content(content)
        for index, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, dict):
                self._blocks[index] = _Block(dict(block), done=True)
                if not self._whole(self._blocks[index]):
                    return []
                if self._blocks[index].tool_use:
                    label = self._label(index)
                    progress += [CallStarted(label, str(block.get("name"))), CallReady(label)]
        return progress

    def _label(self, index: int) -> str:
        """The call id progress events name the block's call by: the turn's, so a user interface can
        match them to the calls of the Outcome. A tool_use block without an id gets the turn's D7 id,
        ``response_id:position`` (its position in the content, ``message``), or ``#position`` while no
        message id has come (the turn's then hashes the whole stream)."""
        value = self._blocks[index].base.get("id")
        if isinstance(value, str) and value:
            return value
        position = sorted(self._blocks).index(index)
        rid = self._message.get("id")
        return f"{rid}:{position}" if isinstance(rid, str) and rid else f"#{position}"

    def _fragment(self, index: int, delta: Any) -> list[Progress]:
        block = self._blocks[index]
        if not isinstance(delta, dict) or block.done:
            return []
        kind = delta.get("type")
        if kind == "citations_delta":
            citation = delta.get("citation")
            if "citations" in block.takes and self._hold(compact_json_len(citation)):
                block.citations.append(citation)
            return []
        if kind == "compaction_delta" and isinstance(delta.get("encrypted_content"), str):
            self._append(block, "encrypted_content", delta["encrypted_content"])
        field = _DELTA_FIELDS.get(str(kind))
        value = delta.get(field) if field else None
        if field is None or not isinstance(value, str):
            return []  # an unknown delta type (or a null fragment): the block keeps what it has
        nbytes = self._append(block, field, value)
        return [] if nbytes is None else [ArgumentsProgress(self._label(index), nbytes)]

    def _append(self, block: _Block, field: str, value: str) -> int | None:
        """Keep one fragment of an open block. Returns the call's byte count when the fragment is
        tool_use argument text (an ArgumentsProgress is due), else None. A field the block does not
        take is dropped (``_takes``)."""
        if field not in block.takes:
            return None
        arguments = block.tool_use and field == "partial_json"
        if arguments:
            size = utf8_len(value)  # never raises: one half of a split surrogate pair counts 2 bytes
            block.nbytes += size
            self._total += size
            if block.nbytes > self._max_call_bytes or self._total > self._max_response_bytes:
                self._abort(cap_tripped(block.nbytes, self._total, self._caps))
                return None
        else:
            # Everything else a block holds is no call: text, thinking, signatures, a compaction, and a
            # server_tool_use / mcp_tool_use input (pydantic-ai's test_anthropic_mcp_servers_stream
            # cassette streams one as input_json_delta; a plain body's capped() counts only tool_use, and
            # a stream may trip before plain, never after: docs/stop-reasons.md). All of it together is
            # bounded as a plain body is (review round 17, r4 F2).
            if not self._hold(utf8_len(value)):
                return None
        parts = block.parts.get(field)
        if parts is None:
            parts = block.parts[field] = []
        parts.append(value)
        return block.nbytes if arguments else None

    def _hold(self, size: int) -> bool:
        """Count ``size`` bytes held besides call arguments against ``max_body_bytes``; False once over
        it (aborted)."""
        self._held += size
        if self._held > self._caps.max_body_bytes:
            self._abort("max_body_bytes")
            return False
        return True

    def _whole(self, block: _Block) -> bool:
        """Count a block that arrives whole (``content_block_start``, ``message_start``'s content), as
        its deltas would be counted: a tool_use's input against the argument caps (``{}``, the usual
        start, counts nothing, so progress bytes stay the deltas'), any other block, as ``held_len``,
        against ``max_body_bytes`` (a redacted_thinking's data, a server tool's result: each event is
        under the cap, but not all of them together). False once a cap tripped (aborted)."""
        if not block.tool_use:
            return self._hold(held_len(block.base))
        given = block.base.get("input")
        size = compact_json_len(given) if given else 0
        if size:
            block.nbytes += size
            self._total += size
            if block.nbytes > self._max_call_bytes or self._total > self._max_response_bytes:
                self._abort(cap_tripped(block.nbytes, self._total, self._caps))
                return False
        return True

    def _abort(self, cap: str) -> None:
        """A byte cap tripped: stop buffering; finish() reports TRUNCATED (``tripped_cap`` says why)."""
        self._aborted = True
        self.tripped_cap = cap
        self._blocks.clear()

    def feed_events(self, events: Sequence[RawEvent], on_progress: ProgressCallback | None) -> None:
        """``feed`` for raw events (see ``callbound.adapters.stream``). A content_block_delta in the
        exact compact shape the API sends is read from its match (``fast_events``, or ``_DELTA_DATA``
        on a frame's data) as ``feed`` would read its payload; every other event is decoded and fed
        whole. Runs once per event, hence inlined."""
        blocks = self._blocks  # never rebound: clear() empties it in place
        for event in events:
            if self._stopped:
                return  # nothing after message_stop is even decoded (``stream.feed_events``)
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
            if field in _WHOLE_FIELDS:
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
                if isinstance(parsed, dict) and not has_non_finite(parsed):
                    final["input"] = parsed
                else:
                    # The call fails with arguments_error on the raw text (raw_inputs) and never runs. The
                    # block sent back must say what the model wrote, not the start's {}: Anthropic's
                    # fine-grained tool streaming docs ("Handling invalid JSON in tool responses") say to
                    # wrap it, as {"INVALID_JSON": "<the text>"}, since input must be an object. So does
                    # input holding NaN, Infinity or 1e400 (parsed to nan/inf): kept, it would put a bare
                    # Infinity in the next request, which is no JSON (finite.py).
                    self._raw_inputs[index] = joined
                    final["input"] = invalid_json(joined)
            # Only an empty partial_json (a tool without arguments) keeps the start's input: {}.
        block.parts = {}
        return True

    def finish(self, raw_sha256: str) -> ModelTurn:
        raise NotImplementedError  # the adapter's subclass maps the Message to a turn

    def message(self) -> tuple[dict[str, Any], dict[int, str]]:
        """The Message as the plain API returns it, and the joined input text of tool_use blocks that
        did not parse, by content position. Call once, after ``message_stop``."""
        for index in self._blocks:
            self._finalise(index)  # a max_tokens cut can end a block without content_block_stop
        msg = {**self._message, **self._delta}
        msg["content"] = [self._blocks[i].base for i in sorted(self._blocks)]
        msg["usage"] = self._usage
        if not msg.get("model"):
            msg["model"] = self._model
        # Indices may be sparse in theory; map raw inputs from block index to content position.
        positions = {i: pos for pos, i in enumerate(sorted(self._blocks))}
        return msg, {positions[i]: text for i, text in self._raw_inputs.items()}
