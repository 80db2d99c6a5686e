"""OpenAI Responses stream assembly, its end: the turn's items once the terminal event came. Each
item is its ``response.output_item.done`` item, else the terminal snapshot's, else the added item with
its deltas (split out of ``openai_responses_stream``, whose ``_Assembler`` holds the state read here)."""

from __future__ import annotations

import json
from typing import Any

from ..core.arguments import parse_arguments
from .base import StreamCaps, compact_json_len, join_fragments, utf8_len
from .openai_responses import says_unfinished


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _no_arguments(arguments: Any) -> bool:
    """No arguments sent at all: missing, null, or blank text (an object, even ``{}``, is some)."""
    return arguments is None or (isinstance(arguments, str) and not arguments.strip())


def _size(arguments: Any) -> int:
    """Bytes of a call's arguments for the caps: text as received, an object as compact JSON (as
    ``base.capped`` counts a plain body's)."""
    if isinstance(arguments, str):
        return utf8_len(arguments)
    return compact_json_len(arguments) if isinstance(arguments, dict) else 0


def _same_reading(a: Any, b: Any) -> bool:
    """Two argument values that parse (D5) to the same object, or are the same unparsable value."""
    (pa, ea), (pb, eb) = parse_arguments(a), parse_arguments(b)
    if ea is None and eb is None:
        return json.dumps(pa, sort_keys=True) == json.dumps(pb, sort_keys=True)
    return bool(a == b)


def _has_text(item: dict[str, Any]) -> bool:
    """The item (a message) holds an output_text part itself."""
    content = item.get("content")
    parts = content if isinstance(content, list) else []
    return any(isinstance(p, dict) and p.get("type") == "output_text" for p in parts)


def _has_refusal(item: dict[str, Any] | None) -> bool:
    """The item (a message) holds a refusal part itself: the turn reads it from there."""
    content = item.get("content") if item is not None else None
    parts = content if isinstance(content, list) else []
    return any(isinstance(p, dict) and p.get("type") == "refusal" for p in parts)


class FinalItems:
    """The terminal-event half of the Responses stream assembler (``openai_responses_stream``): the
    turn's final items from what the events left. Holds no state of its own."""

    _caps: StreamCaps
    _items: dict[int, dict[str, Any]]
    _done: dict[int, dict[str, Any]]
    _args: dict[int, list[str]]
    _args_done: set[int]
    _refusals: dict[tuple[int, int], list[str]]
    _reused_index: bool
    _texts: dict[tuple[int, int], list[str]]
    _conflict: str | None  # the error code of a stream that says two things (``finish``)

    def _final_output(self, resp: dict[str, Any]) -> tuple[list[dict[str, Any]], bool, list[str]]:
        """The turn's items, whether one of its calls never finished, and the refusal text no item
        carries."""
        snapshot = resp.get("output")
        snap = snapshot if isinstance(snapshot, list) else []
        if self._reused_index:
            return self._snapshot_output(snap)
        chosen, unfinished = self._choose(snap)
        # Refusal text no chosen item carries; text placed at no item counts when no item has any.
        carried = {i for i, item in chosen.items() if _has_refusal(item)}
        refusals = [
            join_fragments(parts)
            for (i, _), parts in sorted(self._refusals.items())
            if i not in carried and (i >= 0 or not carried)
        ]
        return list(chosen.values()), bool(unfinished), refusals

    def _choose(self, snap: list[Any]) -> tuple[dict[int, dict[str, Any]], set[int]]:
        """The turn's item at each output_index, in order, and the indices of its calls that never
        finished."""
        indices = sorted(set(self._done) | set(range(len(snap))) | set(self._items))
        # A snapshot item whose id a streamed item already has is that item, even at another position
        # (a stream whose output_index values leave gaps: vercel-ai packages/openai/src/responses/
        # __fixtures__/openai-custom-text-tool.1.chunks.txt); taking it again would replay it twice
        # (400 "Duplicate item") or repeat its call id (D7).
        streamed = {
            item["id"]
            for item in (*self._done.values(), *self._items.values())
            if isinstance(item.get("id"), str) and item["id"]
        }
        in_snapshot = {
            item["id"]: item for item in snap if isinstance(item, dict) and isinstance(item.get("id"), str)
        }
        by_call_id = {
            item["call_id"]: item
            for item in snap
            if isinstance(item, dict) and item.get("type") == "function_call" and _str(item.get("call_id"))
        }
        chosen: dict[int, dict[str, Any]] = {}
        taken: set[Any] = set()  # ids of the items chosen so far
        unfinished: set[int] = set()
        for i in indices:
            item = self._done.get(i)
            if item is not None and item.get("type") == "function_call":
                item_id, call_id = _str(item.get("id")), _str(item.get("call_id"))
                same = (in_snapshot.get(item_id) if item_id else None) or by_call_id.get(call_id or "")
                item = self._with_snapshot_arguments(item, same)
            if item is None and i < len(snap) and isinstance(snap[i], dict):
                item = snap[i] if _str(snap[i].get("id")) not in streamed or i in self._items else None
            if item is None and i in self._items:
                # Never done, but the snapshot may hold it at another position (gaps, as above).
                key = self._items[i].get("id")
                item = in_snapshot.get(key) if isinstance(key, str) and key not in taken else None
            if item is not None:
                # A done or snapshot item speaks for itself: its status is judged as a plain body's.
                if says_unfinished(item):
                    unfinished.add(i)
                if i not in self._done and i in self._items:
                    self._same_call(self._items[i], item)  # the snapshot's copy of a call never done
            elif i in self._items:
                # Added, never done, absent from the snapshot: the added copy (whose status still says
                # in_progress), with its deltas, kept for display and the record. Unless
                # function_call_arguments.done came, no done event ended the call: it never runs.
                item = self._items[i]
                if item.get("type") == "function_call":
                    if i not in self._args_done:
                        unfinished.add(i)
                    if not item.get("arguments") and i in self._args:
                        item = {**item, "arguments": join_fragments(self._args[i])}
            if item is not None and self._texts and item.get("type") == "message" and not _has_text(item):
                item = self._with_streamed_text(i, item)
            if item is not None:
                chosen[i] = item
                if isinstance(item.get("id"), str):
                    taken.add(item["id"])
        return chosen, unfinished

    def _same_call(self, announced: dict[str, Any], item: dict[str, Any]) -> bool:
        """Whether ``item`` is the call ``announced`` (its output_item.added item, which CallStarted
        named): the same call_id, as the SDK's accumulator tells them (``_output_identity``), and the
        same name where the added item had one, since CallStarted showed it. A call that changes
        between them cannot be told (openai-python raises "Completed output item identity changed."):
        ``_conflict`` is ``conflicting_call`` and none of the turn's calls runs. The item id may
        change (a gateway that rotates ids: ``test_responses_reused_index``); the call id the results
        answer and the tool that runs may not."""
        if announced.get("type") != "function_call" or item.get("type") != "function_call":
            return True
        name = _str(announced.get("name"))
        same = _str(announced.get("call_id")) == _str(item.get("call_id"))
        same = same and (name is None or name == item.get("name"))
        if not same:
            self._conflict = self._conflict or "conflicting_call"
        return same

    def _with_snapshot_arguments(self, done: dict[str, Any], same: Any) -> dict[str, Any]:
        """A done call item, with the arguments the terminal snapshot holds for the same item when the
        done item has none (OpenRouter's Responses stream: no argument deltas, and "the complete
        arguments are only available in the final response.completed event", OpenRouterTeam
        ai-sdk-provider changeset "Fix streaming tool call arguments not being passed to execute").
        When both hold arguments and they read differently, the call's arguments cannot be told
        (``_conflict`` ``conflicting_arguments``), and when the two name different call ids or tools,
        nor can the call (``conflicting_call``: openai-python's final response is the snapshot's, the
        turn's would be the done item's): none of the turn's calls runs (never with arguments the
        provider did not send)."""
        if not isinstance(same, dict):
            return done
        for key in ("call_id", "name"):  # the snapshot names another call: which one ran cannot be told
            mine, other = _str(done.get(key)), _str(same.get(key))
            if mine is not None and other is not None and mine != other:
                self._conflict = self._conflict or "conflicting_call"
        theirs = same.get("arguments")
        if _no_arguments(theirs):
            return done
        if _no_arguments(done.get("arguments")):
            return {**done, "arguments": theirs}
        if not _same_reading(done.get("arguments"), theirs):
            self._conflict = self._conflict or "conflicting_arguments"
        return done

    def _snapshot_output(self, snap: list[Any]) -> tuple[list[dict[str, Any]], bool, list[str]]:
        """The turn of a stream that reused an output_index: its events overwrote one item with
        another, so the terminal snapshot's items are the turn, read as a plain body's are. Without
        them nothing says which calls were made: the turn is unfinished and none of its calls runs."""
        output = [item for item in snap if isinstance(item, dict)]
        unfinished = not output or any(says_unfinished(item) for item in output)
        if not output:
            output = [self._done.get(i) or self._items[i] for i in sorted(set(self._done) | set(self._items))]
        if any(_has_refusal(item) for item in output):
            return output, unfinished, []
        return output, unfinished, [join_fragments(parts) for _, parts in sorted(self._refusals.items())]

    def _with_streamed_text(self, idx: int, item: dict[str, Any]) -> dict[str, Any]:
        """A message item that came without its text (no content, or no text part: some compatible
        servers' done item and snapshot), given the text its output_text deltas carried, as the
        assistant message a plain body holds. Joined once; a character split over two deltas as
        surrogate halves is rejoined (``join_fragments``). Without deltas the item stays as it is."""
        parts = sorted((c, fragments) for (i, c), fragments in self._texts.items() if i == idx)
        if not parts:
            return item
        content = item.get("content")
        kept = [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []
        texts = [{"type": "output_text", "text": join_fragments(f), "annotations": []} for _, f in parts]
        return {**item, "role": item.get("role") or "assistant", "content": [*texts, *kept]}

    def _output_over_caps(self, output: list[dict[str, Any]]) -> str | None:
        """The ``StreamCaps`` field the final items' arguments go over, if any."""
        total = 0
        for item in output:
            if item.get("type") == "function_call":
                size = _size(item.get("arguments"))
                total += size
                if size > self._caps.max_call_bytes:
                    return "max_call_bytes"
        return "max_response_bytes" if total > self._caps.max_response_bytes else None
