"""OpenAI Chat Completions stream assembly, what a chunk holds besides calls: content streamed as a
list of parts (Mistral), rebuilt as the plain body has it, and provider members kept as sent (split
out of ``openai_chat_stream``)."""

from __future__ import annotations

from typing import Any

from .base import held_len, join_fragments, utf8_len


def keep(into: dict[str, Any], source: dict[str, Any], skip: frozenset[str]) -> None:
    """Copy the non-null members of ``source`` not in ``skip``: the first value of a member stays, and
    objects sent again in a later fragment are merged into it."""
    for key, value in source.items():
        if key in skip or value is None:
            continue
        held = into.get(key)
        if held is None:
            into[key] = value
        elif isinstance(held, dict) and isinstance(value, dict):
            into[key] = {**held, **value}


class Parts:
    """Content streamed as a list of parts (Mistral: ``[{"type": "thinking", "thinking": [{"type": "text",
    "text": ...}]}, {"type": "text", "text": ...}]``), rebuilt as the plain body has it: consecutive
    pieces of one kind make one part, their texts joined once; string deltas are text parts."""

    __slots__ = ("parts",)

    def __init__(self, earlier: list[str] | None) -> None:
        # (kind, members other than the text, text fragments); kind "" is a part kept as sent
        self.parts: list[tuple[str, dict[str, Any], list[str]]] = []
        if earlier and any(earlier):
            self.parts.append(("text", {"type": "text"}, list(earlier)))

    def add(self, kind: str, members: dict[str, Any], text: str) -> None:
        last = self.parts[-1] if self.parts else None
        if kind and last is not None and last[0] == kind:
            last[1].update(members)  # e.g. "closed": true, sent on some pieces of a thinking part only
            last[2].append(text)
        else:
            self.parts.append((kind, dict(members), [text]))

    def feed(self, content: list[Any]) -> int:
        size = 0
        for part in content:
            if not isinstance(part, dict):
                continue
            inner = part.get("thinking")
            if part.get("type") == "thinking" and isinstance(inner, list):
                text = "".join(
                    t["text"] for t in inner if isinstance(t, dict) and isinstance(t.get("text"), str)
                )
                self.add("thinking", {k: v for k, v in part.items() if k != "thinking"}, text)
                size += utf8_len(text)
            elif isinstance(part.get("text"), str):
                self.add(
                    str(part.get("type") or "text"),
                    {k: v for k, v in part.items() if k != "text"},
                    part["text"],
                )
                size += utf8_len(part["text"])
            else:  # an image or other part, held whole: counts as Anthropic's and Gemini's pieces do
                self.add("", part, "")
                size += held_len(part)
        return size

    def content(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for kind, members, texts in self.parts:
            if kind == "thinking":
                thinking = [{"type": "text", "text": join_fragments(texts)}]
                out.append(
                    {
                        "type": "thinking",
                        "thinking": thinking,
                        **{k: v for k, v in members.items() if k != "type"},
                    }
                )
            elif kind:
                out.append({**members, "text": join_fragments(texts)})
            else:
                out.append(members)
        return out
