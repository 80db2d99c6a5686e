"""Argument objects holding a number JSON cannot carry, and how they go back to the provider.

A provider body is read leniently (``loads_body``), so a number a double cannot hold (``1e400``,
which is valid JSON a model may write) reads as ``inf``, and ``NaN`` / ``Infinity`` (which fine-grained
streaming does not rule out) as ``nan`` / ``inf``. D5 refuses the call; but the continuation (D8) must
still go back as JSON, and a bare ``Infinity`` in the next request is not JSON: the API answers 400,
and the SDK transports raise before sending. So such input goes back as input that never parsed:
``{"INVALID_JSON": "<the text>"}``, as Anthropic's fine-grained tool streaming docs ("Handling invalid
JSON in tool responses") say to send it, the number written inside the string.

So does an argument value of another JSON type than an object (a string, a list, a number: a
compatible server's, or a body read whole from a stream's start): each API takes only an object there
in a request (anthropic-sdk-python ``ToolUseBlockParam.input``, python-genai ``FunctionCall.args``,
``FunctionCallStepParam.arguments``), so sent back as is the next request is refused (400) after the
turn's other calls ran. The call gets the value's JSON text, which the parser refuses (D5: a string
holding JSON is not read as the object it spells, as a streamed call's ``"{...}"`` literal is not).

Shared by the adapters whose calls carry parsed argument objects: Anthropic ``input``, Gemini
``functionCall.args`` and Interactions ``arguments``. Pure: no I/O.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..core.errors import ProtocolViolation

INVALID_JSON = "INVALID_JSON"


def has_non_finite(value: Any) -> bool:
    """True when ``value`` holds a float that is NaN or infinite anywhere inside it (dict values, list
    and tuple items, at any depth). Iterative: a body nested as deep as the JSON parser allows must not
    hit the recursion limit here."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def invalid_json(text: str) -> dict[str, str]:
    """What an argument object that did not parse (or holds a non-finite number) is sent back as."""
    return {INVALID_JSON: text}


def json_text(value: Any) -> str:
    """``value`` as compact JSON text with NaN and infinities written as ``NaN`` / ``Infinity`` (not
    JSON, but only ever used as the string inside ``invalid_json``, where it is text)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=True)


def unsendable_text(value: Any) -> str | None:
    """The JSON text of an argument value that cannot go back as the object it must be (D8): one that
    is there (not missing or null) and is no object, or an object holding a non-finite number; None for
    any other value. The call gets this text and the continuation ``invalid_json(text)``."""
    if value is None or (isinstance(value, dict) and not has_non_finite(value)):
        return None
    return json_text(value)


def check_object_arguments(value: Any, where: str) -> None:
    """The request guard (D24): an argument value sent back must be an object (missing or null
    aside), as the API requires; a ``ProtocolViolation`` naming ``where`` otherwise."""
    if value is not None and not isinstance(value, dict):
        raise ProtocolViolation(f"{where} must be a JSON object, not {type(value).__name__}")
