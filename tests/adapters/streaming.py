"""A stream read the way the transports read one: bytes through ``StreamFeed`` (fast paths included)."""

from __future__ import annotations

from typing import Any

from callbound.adapters.stream import StreamFeed
from callbound.core.types import ModelTurn, Progress


def fed(adapter: Any, raw: bytes, *args: Any) -> tuple[ModelTurn, list[Progress]]:
    """The finished turn and its progress events; ``args`` go to ``adapter.stream_assembler``."""
    progress: list[Progress] = []
    feed = StreamFeed(adapter.stream_assembler(*args), progress.append)
    feed.feed(raw)
    feed.close()
    return feed.finish(), progress
