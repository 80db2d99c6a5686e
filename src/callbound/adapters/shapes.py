"""Response containers of the wrong JSON type (D1: only an explicit completion is success).

A body whose content or call container (Chat's ``message``, ``content``, ``tool_calls``; Anthropic's
``content``; Gemini's candidate ``content`` and ``parts``, a part's ``functionCall``; Interactions'
``steps`` / legacy ``outputs`` and a ``model_output`` step's ``content``), or an entry of one, holds a
value of another JSON type than the API's cannot be read whole: read leniently it became a completion
with empty text, or a call vanished while its siblings ran. The adapters make such a turn
API_FAILURE(malformed_response), not retried, with the ``failure.error_code`` these functions return,
as openai-responses does for its ``output`` (``output_not_a_list``, ``output_item_not_an_object``);
streams check the same shapes as their events bring them.

A missing member, and ``null``, read as absent, as before: providers send null for "none" (Chat's
``content`` beside tool calls, ``tool_calls: null``), and an empty list is a legitimate empty answer
(WIRE.md 3.1, 4.3). Only a value that is there and of another type is wrong. Each function returns the
first wrong container or entry, or None.
"""

from __future__ import annotations

from typing import Any


def objects(value: Any, container: str, entry: str) -> str | None:
    """``{container}_not_a_list`` when ``value`` is no list, ``{entry}_not_an_object`` when one of its
    entries is no object; None for a list of objects, or no value (missing or null)."""
    if value is None:
        return None
    if not isinstance(value, list):
        return f"{container}_not_a_list"
    if not all(isinstance(v, dict) for v in value):
        return f"{entry}_not_an_object"
    return None


def chat_message(message: Any, what: str = "message") -> str | None:
    """A Chat ``message`` (or a stream's ``delta``, ``what="delta"``): an object whose ``content`` is a
    string or a list of part objects (compatible servers' text and thinking parts), whose ``tool_calls``
    is a list of objects each with an object ``function`` (a ``custom`` call has none), and whose legacy
    ``function_call`` is an object."""
    if message is None:
        return None
    if not isinstance(message, dict):
        return f"{what}_not_an_object"
    content = message.get("content")
    if not isinstance(content, str | None):
        wrong = objects(content, "content", "content_part")
        if wrong is not None:
            return "content_not_text" if wrong == "content_not_a_list" else wrong
    tool_calls = message.get("tool_calls")
    wrong = objects(tool_calls, "tool_calls", "tool_call")
    if wrong is not None:
        return wrong
    for call in tool_calls or ():
        if not isinstance(call.get("function"), dict | None):
            return "function_not_an_object"
    if not isinstance(message.get("function_call"), dict | None):
        return "function_call_not_an_object"
    return None


def anthropic_content(content: Any) -> str | None:
    """A Message's ``content``: a list of block objects."""
    return objects(content, "content", "content_block")


def gemini_candidate(candidate: dict[str, Any]) -> str | None:
    """A generateContent candidate: ``content`` an object, its ``parts`` a list of objects, a part's
    ``functionCall`` an object."""
    content = candidate.get("content")
    if content is None:
        return None
    if not isinstance(content, dict):
        return "content_not_an_object"
    return gemini_parts(content.get("parts"))


def gemini_parts(parts: Any) -> str | None:
    wrong = objects(parts, "parts", "part")
    if wrong is not None:
        return wrong
    for part in parts or ():
        if not isinstance(part.get("functionCall"), dict | None):
            return "function_call_not_an_object"
    return None


def interaction(inter: dict[str, Any]) -> str | None:
    """An Interaction: ``steps`` (legacy ``outputs``, read when there are no ``steps``) a list of
    objects, and each step's content as ``interaction_step`` says."""
    legacy = "steps" not in inter and inter.get("outputs") is not None
    found = inter.get("outputs") if legacy else inter.get("steps")
    wrong = objects(found, "outputs", "output") if legacy else objects(found, "steps", "step")
    if wrong is not None:
        return wrong
    entry = "output" if legacy else "step"
    return next((w for s in found or () if (w := interaction_step(s, entry)) is not None), None)


def interaction_step(step: dict[str, Any], entry: str = "step") -> str | None:
    """A step's ``type`` a string (a list or object there made the step unreadable, and unhashable where
    the adapter looks it up), and a ``model_output`` step's ``content`` a list of objects (text, image,
    ... blocks)."""
    if not isinstance(step.get("type"), str | None):
        return f"{entry}_type_not_a_string"
    if step.get("type") != "model_output":
        return None
    return objects(step.get("content"), "content", "content_item")
