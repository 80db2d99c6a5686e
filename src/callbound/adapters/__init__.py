"""Provider adapters: wire format dict <-> core types. API names are strings resolved by :func:`get`."""

from __future__ import annotations

import importlib

from ..core.errors import UsageError
from .base import Adapter

API_NAMES = (
    "openai-responses",
    "openai-chat",
    "anthropic-messages",
    "gemini-generate",
    "gemini-interactions",
)

_MODULES = {
    "openai-responses": "openai_responses",
    "openai-chat": "openai_chat",
    "anthropic-messages": "anthropic_messages",
    "gemini-generate": "gemini_generate",
    "gemini-interactions": "gemini_interactions",
}


def get(api: str) -> Adapter:
    """The adapter for an API name (see ``API_NAMES``); modules load on first use."""
    module = _MODULES.get(api)
    if module is None:
        raise UsageError(f"unknown API {api!r}; use one of {', '.join(API_NAMES)}")
    try:
        mod = importlib.import_module(f"{__name__}.{module}")
    except ModuleNotFoundError as exc:
        raise UsageError(f"the {api} adapter is not available in this build") from exc
    adapter: Adapter = mod.ADAPTER
    return adapter


__all__ = ["API_NAMES", "Adapter", "get"]
