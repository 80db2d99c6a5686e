"""D14 inside a turn: no handler starts once the operation's deadline is spent.

Active time is added up when the runner ticks (``Runner._tick``, at each commit), so inside a turn
``op.spent.active_s`` lags by whatever the turn's handlers took since: every check here ticks first and
decides on the active time used up to now. A handler that finds the deadline spent never starts: its
call stays PLANNED and the operation stops DEADLINE (``executing._stop_before_handlers``). A write's
reconcile hook is the exception (D35, ``reconcile_bounds``): it runs under the tool's own timeout even
once the deadline is spent, and the operation stops DEADLINE after it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..core.guards import Stop, check_running, remaining_s
from ..core.registry import CallContext, ToolSpec, is_async_callable
from .operation import PLANNED, CallRecord, Operation

if TYPE_CHECKING:
    from .runner import Runner


class DeadlineSpent(Exception):
    """Raised where a handler was about to start once the deadline was spent, so it never starts."""

    def __init__(self, stop: Stop) -> None:
        super().__init__(stop.detail)
        self.stop = stop


def deadline_stop(runner: Runner, op: Operation) -> Stop | None:
    """The stop due now (D14: the active deadline or ``not_after``), on the active time used up to now."""
    runner._tick(op)
    verdict = check_running(op.budgets, op.spent, runner.clock.now())
    return verdict if isinstance(verdict, Stop) else None


def time_left_s(runner: Runner, op: Operation) -> float:
    """Seconds left (D14): the nearer of the active deadline and ``not_after``, never below 0."""
    runner._tick(op)
    return remaining_s(op.budgets, op.spent, runner.clock.now())


# The latest moment a datetime holds: what a handler is told when its deadline lies past it.
_LATEST = datetime.max.replace(tzinfo=UTC)


def deadline_at(now: datetime, left_s: float) -> datetime:
    """``now`` plus ``left_s`` seconds, or the latest moment a ``datetime`` holds when that lies past it:
    ``Budgets(deadline_s=1e12)``, a finite deadline meant as "no limit", raised OverflowError out of
    run and resume after the paid turn, the handler never called (D4; review round 18, c F4)."""
    if left_s >= (_LATEST - now).total_seconds():
        return _LATEST
    return now + timedelta(seconds=left_s)


def ctx_for(runner: Runner, op: Operation, rec: CallRecord, spec: ToolSpec, attempt: int = 1) -> CallContext:
    now = runner.clock.now()
    deadline = deadline_at(now, time_left_s(runner, op))  # the nearer of the two (D14)
    return CallContext(
        op.operation_id,
        op.tenant,
        op.subject,
        rec.call_id,
        spec.name,
        rec.idempotency_key,
        deadline,
        attempt,
        op.fence,
    )


def timeout_for(runner: Runner, op: Operation, spec: ToolSpec) -> float:
    """The tool's timeout, cut to the time left: active deadline and not_after (D14)."""
    return min(spec.timeout_ms / 1000.0, time_left_s(runner, op))


def reconcile_bounds(
    runner: Runner, op: Operation, rec: CallRecord, spec: ToolSpec
) -> tuple[CallContext, float]:
    """A reconcile hook's context and timeout (D35): the tool's own timeout, never cut to the time left.
    An unknown write is often unknown because the deadline (or ``not_after``) cut its handler: cut to
    0 s as a handler is, the hook was never asked and the operation always ended OUTCOME_UNKNOWN, where
    a lookup of a few seconds tells whether the money moved. Its ``CallContext.deadline`` is no earlier
    than the end of that timeout."""
    timeout_s = spec.timeout_ms / 1000.0
    ctx = ctx_for(runner, op, rec, spec)
    own = deadline_at(runner.clock.now(), timeout_s)
    if ctx.deadline is None or ctx.deadline < own:
        ctx = replace(ctx, deadline=own)
    return ctx, timeout_s


def raise_if_reads_left(runner: Runner, op: Operation, reads: Iterable[CallRecord]) -> None:
    """A read still PLANNED after its run found the deadline spent (nothing else leaves one so): the
    turn goes no further, as when a write finds it spent (D14)."""
    if any(r.status == PLANNED for r in reads):
        # the clock cannot be read as spent once and not later, unless it was set back (a test's)
        stop = deadline_stop(runner, op) or Stop(
            "DEADLINE", "the deadline was spent before a call could start"
        )
        raise DeadlineSpent(stop)


class ReadGate:
    """The check for reads run side by side. Such a read may wait for a handler slot (D15) inside the
    executor, behind another read that uses up the deadline, and a sync handler starts in a worker
    thread: so the check runs there, just before the handler, and reads only the clock. It compares
    with the instant the active time runs out, fixed on the loop when the reads begin (active time
    grows with the runner's monotonic clock while the operation is driven, D14)."""

    __slots__ = ("_clock", "_ends", "_not_after")

    def __init__(self, runner: Runner, op: Operation) -> None:
        runner._tick(op)
        self._clock = runner.clock
        self._ends = self._clock.monotonic() + (op.budgets.deadline_s - op.spent.active_s)
        self._not_after: datetime | None = op.budgets.not_after

    def spent(self) -> bool:
        if self._clock.monotonic() >= self._ends:
            return True
        return self._not_after is not None and self._clock.now() >= self._not_after

    def wrap(self, handler: Callable[..., Any]) -> GatedHandler:
        return (_AsyncGated if is_async_callable(handler) else _SyncGated)(self, handler)


class GatedHandler:
    """A read's handler behind its gate; ``refused``: it found the deadline spent and did not call it."""

    __slots__ = ("_gate", "_handler", "refused")

    def __init__(self, gate: ReadGate, handler: Callable[..., Any]) -> None:
        self._gate = gate
        self._handler = handler
        self.refused = False

    def __call__(self, args: Any, ctx: CallContext) -> Any:
        raise NotImplementedError  # _SyncGated or _AsyncGated, by the handler's kind

    def never_ran(self, started: bool) -> bool:
        """Refused by the gate, or withdrawn unstarted (its timeout, cut to the time left, ran out
        while it waited for a thread): either way it never ran, and stays PLANNED."""
        return self.refused or (not started and self._gate.spent())

    def _may_start(self) -> bool:
        self.refused = self._gate.spent()
        return not self.refused


class _SyncGated(GatedHandler):
    __slots__ = ()

    def __call__(self, args: Any, ctx: CallContext) -> Any:
        return self._handler(args, ctx) if self._may_start() else None


class _AsyncGated(GatedHandler):
    __slots__ = ()

    async def __call__(self, args: Any, ctx: CallContext) -> Any:
        if not self._may_start():
            return None
        result: Awaitable[Any] = self._handler(args, ctx)
        return await result
