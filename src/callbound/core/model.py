"""What the runtime needs from a model client (ScriptedModel, SDK and httpx transports)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from .types import ModelTurn, Progress


@dataclass(frozen=True, slots=True)
class RequestMeta:
    """``index`` is the operation's k-th model request (0-based), counted from what the operation has
    stored, so a resumed process or another worker asks for the same k (D24)."""

    operation_id: str
    index: int
    previous: ModelTurn | None  # the turn this request answers, if any
    timeout_s: float | None = None  # remaining active deadline (D26)
    now: datetime | None = None  # the runner's clock at the request (D23): what an HTTP-date is measured from


ProgressCallback = Callable[[Progress], None]


class ModelClient(Protocol):
    api: str

    @property
    def adapter(self) -> Any:
        """The ``callbound.adapters`` adapter for ``api``."""
        ...

    async def complete(
        self,
        body: dict[str, Any],
        *,
        stream: bool,
        meta: RequestMeta,
        on_progress: ProgressCallback | None = None,
    ) -> ModelTurn:
        """Send ``body``; return the adapter's turn. Failures come back as API_FAILURE / TRUNCATED
        turns (via ``adapter.map_error``), never as exceptions, except ``UsageError``."""
        ...
