"""Identifiers: an injectable id source (D23) and the default idempotency (intent) key."""

from __future__ import annotations

import itertools
import secrets
from typing import Any, Protocol

from .canonical import canonical_sha256


class IdSource(Protocol):
    def new_id(self, prefix: str) -> str:
        """A fresh id starting with ``prefix``; approval ids must carry at least 128 random bits."""
        ...


class RandomIds:
    """128 random bits per id (D17)."""

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{secrets.token_hex(16)}"


class SequentialIds:
    """Deterministic ids for tests and demos. Not for production approvals: they are guessable."""

    def __init__(self, start: int = 1) -> None:
        self._counter = itertools.count(start)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._counter):032x}"


def default_intent_key(tool: str, schema_version: str, arguments: dict[str, Any], operation_id: str) -> str:
    """Tool name + schema version + canonical arguments + operation id; never the call id (D13)."""
    digest = canonical_sha256(
        {"tool": tool, "schema_version": schema_version, "arguments": arguments, "operation_id": operation_id}
    )
    return f"ik_{digest[:48]}"
