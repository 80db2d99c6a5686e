"""Which streamed Chat tool call a fragment belongs to (WIRE.md 2.4): the call being assembled
(``Slot``) and the tests the stream assembler (``openai_chat_stream``) keys fragments by: index,
id, and whether a call is already whole."""

from __future__ import annotations

import json
from typing import Any

from ..core.arguments import parse_arguments
from .base import join_fragments


class Slot:
    """One streamed tool call: fragments are appended and joined once at the end."""

    __slots__ = ("args", "conflict", "extra", "id", "name", "nbytes", "obj", "started", "type")

    def __init__(self) -> None:
        self.id: str | None = None  # as sent ("" included); None while no fragment sent one
        self.type: str | None = None
        self.name: str | None = None
        self.args: list[str] = []
        # Arguments sent as a JSON object, not a string (LiteLLM's ollama_chat stream before BerriAI/
        # litellm PR 37792): kept and echoed as the plain body reader keeps them (``_calls``, D5).
        self.obj: dict[str, Any] | None = None
        self.conflict = False  # a second, different object: which one did the model mean?
        self.extra: dict[str, Any] = {}  # provider members of the call (Gemini's extra_content), as sent
        self.nbytes = 0
        self.started = False


def sorted_json(value: dict[str, Any]) -> str:
    """An argument object as JSON text with sorted keys: two objects that say the same compare equal
    (``True`` and ``1`` do not)."""
    return json.dumps(value, sort_keys=True, default=repr)


def arguments_of(slot: Slot) -> str | dict[str, Any]:
    """A call's arguments as the plain body would hold them: the object when one was sent (D8: echoed
    as received, as a plain body's message is), else the text fragments joined once."""
    return slot.obj if slot.obj is not None else join_fragments(slot.args)


def whole(slot: Slot) -> bool:
    """The call's arguments are already one whole JSON object."""
    if slot.obj is not None:
        return True
    last = next((a for a in reversed(slot.args) if a.strip()), "")
    return last.rstrip().endswith("}") and parse_arguments(join_fragments(slot.args))[1] is None


def another_call(held: Slot, function: Any) -> bool:
    """A whole call (a ``function`` with a name and arguments that are one JSON object) at an index
    whose call, sent without an id, is already whole: another call reusing the index with ``"id": ""``
    or none (two calls at index 0, the shape of Ollama issue 15457 without ids), not more of the first,
    which no fragment could extend and still parse. The same call sent again is not another one: it
    never runs twice (its text joins onto the first, which then does not parse: fail closed; an object
    sent again is kept once).
    Arguments "" or a part of an object start no call: only a whole one does."""
    name, args = (
        (function.get("name"), function.get("arguments")) if isinstance(function, dict) else (None, None)
    )
    if not isinstance(name, str) or held.name is None or not whole(held) or not isinstance(args, str | dict):
        return False
    new = parse_arguments(args if isinstance(args, dict) or args.rstrip().endswith("}") else None)[0]
    old = parse_arguments(arguments_of(held))[0]
    if new is None or old is None or (name, sorted_json(new)) == (held.name, sorted_json(old)):
        return False
    # A snapshot that only adds to the call held ({"to": "bob"}, then {"to": "bob", "amount": 10}) may be
    # the same call sent again as it grew: never two calls then (one would run with half its
    # arguments); it joins onto the first and fails closed (regression review, round 14).
    grows = (
        isinstance(new, dict)
        and isinstance(old, dict)
        and all(k in new and new[k] == v for k, v in old.items())
    )
    return not (name == held.name and grows)


def wire_index(frag: dict[str, Any]) -> int | None:
    index = frag.get("index")
    return index if type(index) is int else None
