"""Backoff for retryable API failures (D26): exponential with full jitter, honouring Retry-After,
never past the time left (D14: the active deadline and ``not_after``); and the failed turn of a model
client that raised."""

from __future__ import annotations

import logging
import random
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..core.guards import Stop, check_running, check_time, remaining_s
from ..core.states import State
from ..core.types import ModelTurn, RawFailure

if TYPE_CHECKING:
    from .operation import Operation
    from .runner import Runner

log = logging.getLogger("callbound.runtime")


def raised_turn(adapter: Any, model: Any, operation_id: str, exc: Exception) -> ModelTurn:
    """D4: a model client reports failures as turns; one that raises anyway (an error type its
    transport does not map, a bug) is a failed request, retried like a broken connection, never a
    crash that leaves the operation half-way. Only the type is logged: messages of HTTP errors can
    carry URLs, and URLs can carry keys."""
    log.warning(
        "operation %s: the model client raised %s.%s; treated as a failed connection",
        operation_id,
        type(exc).__module__,
        type(exc).__name__,
    )
    failure = RawFailure("connection", body=f"the model client raised {type(exc).__name__}")
    turn: ModelTurn = adapter.map_error(failure, model=model if isinstance(model, str) else None)
    return turn


def backoff_wanted(
    attempt: int,
    retry_after_s: float | None,
    *,
    base_s: float = 0.5,
    cap_s: float = 30.0,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based): full jitter, at least Retry-After."""
    r = rng or random
    # 2 ** 1024 has no float: past that many retries (Budgets.max_retries has no upper bound) the
    # product raised OverflowError out of run (D4; review round 18, c F5). The cap binds long before.
    delay = r.uniform(0, min(cap_s, base_s * (2 ** min(attempt - 1, 64))))
    if retry_after_s is not None:
        delay = max(delay, retry_after_s)
    return delay


def backoff_delay(
    attempt: int,
    retry_after_s: float | None,
    remaining_s: float,
    *,
    base_s: float = 0.5,
    cap_s: float = 30.0,
    rng: random.Random | None = None,
) -> float | None:
    """``backoff_wanted``, or None when the wait would not fit in the remaining time."""
    delay = backoff_wanted(attempt, retry_after_s, base_s=base_s, cap_s=cap_s, rng=rng)
    return None if delay >= remaining_s else delay


def after_retryable(runner: Runner, op: Operation, turn: ModelTurn, reason: str | None) -> None:
    """A retryable failed turn (D26). Retries used up: FAILED, or INCOMPLETE for a cut stream. Else
    RETRY after a backoff that ends within the time left; when the deadline or ``not_after`` has passed,
    or the backoff (a long Retry-After) would end past it, STOPPED(DEADLINE) at once: the deadline ends
    the operation, not the provider (D14), and nothing sleeps past it."""
    now = runner.clock.now()
    ids: dict[str, Any] = {"response_id": turn.response_id, "raw_stop_reason": turn.raw_stop_reason}
    if turn.failure is not None:
        # D32: the provider's own error type and code beside the status, on a retried failure as on the
        # one that ends the operation (runner._finish_failure)
        ids.update(
            error_type=turn.failure.error_type, error_code=turn.failure.error_code, status=turn.failure.status
        )
    late = check_time(op.budgets, op.spent, now)
    if not isinstance(late, Stop) and op.retries >= op.budgets.max_retries:
        target = State.INCOMPLETE if turn.reason == "stream_interrupted" else State.FAILED
        runner._finish_failure(op, turn, target, reason or "API_ERROR", retries=op.retries)
        return
    left = remaining_s(op.budgets, op.spent, now)
    retry_after = turn.failure.retry_after_s if turn.failure else None
    delay = None if isinstance(late, Stop) else backoff_wanted(op.retries + 1, retry_after, rng=runner.rng)
    if delay is None or delay >= left:
        detail = (
            late.detail
            if isinstance(late, Stop)
            else f"retry {op.retries + 1} would wait {delay:.3f}s (Retry-After {retry_after}), past the "
            f"deadline: {left:.3f}s left"
        )
        # The failed request under its own key: ``response_id`` is the turn last handled, named with its
        # calls and their effects (escalation._last_turn), as retry_step's stop names it; their results
        # were in the request that failed and never reached the model (review round 21, d).
        runner._stop(
            op,
            "DEADLINE",
            detail,
            retries=op.retries,
            failed_response_id=turn.response_id,
            raw_stop_reason=turn.raw_stop_reason,
        )
        return
    op.retries += 1
    op.retry_after_s = delay
    cause = reason.lower() if reason else "retry"
    runner._move(op, State.RETRY, cause, attempt=op.retries, delay_s=round(delay, 3), **ids)


async def retry_step(runner: Runner, op: Operation) -> None:
    """RETRY → MODEL_REQUESTED after the saved wait, or STOPPED when a guard trips or the wait (saved
    by another process, say) would now end past the deadline (D14, D26)."""
    now = runner.clock.now()
    verdict = check_running(op.budgets, op.spent, now)
    delay = op.retry_after_s or 0.0
    left = remaining_s(op.budgets, op.spent, now)
    if not isinstance(verdict, Stop) and delay > 0 and delay >= left:
        verdict = Stop(
            "DEADLINE", f"the retry's wait of {delay:.3f}s would end past the deadline: {left:.3f}s left"
        )
    if isinstance(verdict, Stop):
        runner._stop(op, verdict.reason, verdict.detail)
        await runner._flush(op)
        return
    await runner.clock.sleep(delay)
    op.retry_after_s = None
    runner._move(op, State.MODEL_REQUESTED, "retry", attempt=op.retries)
    await runner._flush(op)


# The provider no longer holds the response a chained request continues from (its retention ran out, or
# it was deleted): OpenAI's 400 ``previous_response_not_found`` ("Previous response with id '...' not
# found", maximhq/bifrost issue 2441), Gemini Interactions' 404 / ``not_found``. The transcript is all
# saved (D8), so the request is sent again replayed in full, once, instead of ending FAILED with results
# (a paid refund's among them) that never reach the model. Other 4xx stay fatal (D26).
def chain_lost(turn: ModelTurn) -> bool:
    f = turn.failure
    if f is None or f.retryable:
        return False
    if f.error_code == "previous_response_not_found":
        return True
    return turn.api == "gemini-interactions" and (
        f.status == 404 or f.error_code in ("not_found", "NOT_FOUND")
    )


def replayable(turn: ModelTurn) -> ModelTurn:
    assert turn.failure is not None
    return replace(turn, failure=replace(turn.failure, retryable=True))
