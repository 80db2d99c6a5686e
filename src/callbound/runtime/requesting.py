"""MODEL_REQUESTED → VALIDATING | COMPLETED | RETRY | MODEL_REQUESTED | a stop or failure: one model request.

The budgets are checked before the request (D12, D14) and its price found first (a turn that cannot be
priced is never paid for). The request goes out with the time left as its timeout (D14, D26); the turn
that comes back is made storable (D4), accounted (tokens, cost: D27), journalled with its audit entry
and classified (D2, D31): retried, answered, its calls planned (VALIDATING, which may pass into
EXECUTING or WAITING_APPROVAL), continued, or ended with the turn's failure. Every transition here is
committed before the next effect (D18); for a turn of writes only, C1 waits for the first write's
ledger STARTED (executing.writes_only).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..adapters.base import readable_turn
from ..core.errors import StoreError, UsageError
from ..core.guards import (
    Stop,
    check_after_turn,
    check_before_model_request,
    remaining_s,
    settings_for_request,
)
from ..core.machine import classify_turn
from ..core.model import RequestMeta
from ..core.snapshot import turn_to_dict
from ..core.states import State
from ..core.types import ModelTurn, Progress
from ..stores.base import JournalRow
from .checks import check_turn_usage
from .escalation import turn_calls
from .executing import writes_only
from .operation import Operation
from .outcome import Price, priced, with_turn
from .planning import plan
from .retry import after_retryable, chain_lost, raised_turn, replayable
from .storable import storable_turn

if TYPE_CHECKING:
    from .runner import Runner

log = logging.getLogger("callbound.runtime")


def offered_tools(runner: Runner, op: Operation) -> list[dict[str, Any]]:
    """The tools the request offers, rendered: the operation's own, as saved when it was created; a
    resuming runner's registry may be larger (D4)."""
    offered = set(op.offered)
    if offered == set(runner.registry.names()):
        return list(runner.tools)
    decls = [d for d in runner.registry.declarations() if d.name in offered]
    rendered: list[dict[str, Any]] = runner.adapter.render_tools(decls)
    return rendered


async def request_step(runner: Runner, op: Operation) -> None:
    """One model request from MODEL_REQUESTED, and what its turn leads to (module docstring)."""
    price = runner._price(op)  # before the request: a turn that cannot be priced is never paid for
    verdict = check_before_model_request(op.budgets, op.spent, runner.clock.now())
    if isinstance(verdict, Stop):
        runner._stop(op, verdict.reason, verdict.detail)
        await runner._flush(op)
        return
    continuation = op.settings.get("continuation")
    use_prev = (
        continuation == "previous_response_id"
        and op.last_turn is not None
        and op.operation_id not in runner._unchained
    )
    body = runner.adapter.build_request(
        items=op.transcript,
        tools=offered_tools(runner, op),
        settings=settings_for_request(op.settings, op.spent.tool_calls),
        instructions=op.instructions,
        stream=bool(op.settings.get("stream")),
        previous_response_id=op.last_turn.response_id if use_prev and op.last_turn else None,
        new_items=op.transcript[op.new_items_start :] if use_prev else None,
    )
    # the request's timeout: the time left, not_after included (D14, D26)
    now = runner.clock.now()
    meta = RequestMeta(
        op.operation_id, op.model_requests, op.last_turn, remaining_s(op.budgets, op.spent, now), now
    )
    progress = None
    if runner.on_progress is not None:
        cb, oid = runner.on_progress, op.operation_id

        def progress(ev: Progress) -> None:
            try:
                cb(oid, ev)
            except (Exception, SystemExit) as exc:  # an observer's bug is not a model failure (D4)
                log.warning("on_progress observer raised %s; ignored", type(exc).__name__)

    try:
        turn = await runner.model.complete(
            body, stream=bool(op.settings.get("stream")), meta=meta, on_progress=progress
        )
    except (UsageError, StoreError):
        raise
    except Exception as exc:  # D4: a failed request, never a crash half-way
        turn = raised_turn(runner.adapter, runner.settings.get("model"), op.operation_id, exc)
    if not isinstance(turn, ModelTurn):
        # a custom client's bug, not a provider failure: nothing of it is recorded, and the
        # operation stays where it was (resumable once the client is fixed)
        raise UsageError(
            f"{type(runner.model).__name__}.complete() returned a {type(turn).__name__}, not a ModelTurn: "
            "build it with the adapter (runner.adapter.parse_response(body) or its stream_assembler)"
        )
    check_turn_usage(runner.model, turn.usage)
    turn = storable_turn(readable_turn(turn))  # unhashable ids, unstorable numbers: not a crash (D4)
    # The request's own time counts first: one that used up the deadline stops its calls (D14).
    runner._tick(op)
    op.model_requests += 1
    account(runner, op, turn, price)
    turn_plain = turn_to_dict(turn)
    runner._turn_plain = (turn, turn_plain)  # reused by the head while this turn is under work
    op.pending_journal.append(JournalRow("turn", {"turn": turn_plain}))
    op.audit(
        runner.clock.now(),
        "model_turn",
        {
            "response_id": turn.response_id,
            "finish": turn.finish._value_,
            "raw_stop_reason": turn.raw_stop_reason,
            "reason": turn.reason,
            "raw_sha256": turn.raw_sha256,
            "call_ids": [c.call_id for c in turn.calls],
        },
        runner.audit_key,
    )
    if use_prev and chain_lost(turn):  # sent again replayed in full, once (retry.py)
        runner._unchained.add(op.operation_id)
        turn = replayable(turn)
    v = classify_turn(turn)
    ids = {"response_id": turn.response_id, "raw_stop_reason": turn.raw_stop_reason}
    if v.retryable:
        after_retryable(runner, op, turn, v.reason)  # RETRY, or an end: retries or time used up
        await runner._flush(op)
        return
    op.retries = 0
    runner._unchained.discard(op.operation_id)  # a new response to chain to
    op.spent.model_turns += 1
    # A turn that answers or goes on: the deadline and not_after (D14), usage a budget needs but the
    # provider did not report (USAGE_UNKNOWN, D12/D27), its own tokens and cost (issue 2 §5).
    after = (
        check_after_turn(op.budgets, op.spent, turn.usage, runner.clock.now())
        if v.target in (State.COMPLETED, State.VALIDATING, State.MODEL_REQUESTED)
        else None
    )
    if v.target is State.COMPLETED:
        if isinstance(after, Stop):  # the answer came, but over a limit: its text is kept
            op.text = turn.text or None
            runner._stop(
                op, after.reason, after.detail, ended_by=turn.response_id, response_id=turn.response_id
            )
        else:
            op.text = turn.text
            runner._move(op, State.COMPLETED, "final_text", **ids)
    elif v.target is State.VALIDATING:
        runner._move(op, State.VALIDATING, "tool_proposals", call_ids=[c.call_id for c in turn.calls], **ids)
        if isinstance(after, Stop):  # none of its calls runs: the escalation names them
            runner._stop(op, after.reason, after.detail, response_id=turn.response_id, **turn_calls(turn))
        else:
            plan(runner, op, turn)
    elif isinstance(after, Stop):  # CONTINUE whose turn trips a guard
        runner._stop(op, after.reason, after.detail, response_id=turn.response_id)
    elif v.target is State.MODEL_REQUESTED:  # CONTINUE: resend the output unchanged
        op.append_items(runner.adapter.turn_items(turn))
        op.new_items_start = len(op.transcript)
        op.last_turn = turn
        runner._move(op, State.MODEL_REQUESTED, "continue", **ids)
    else:
        finish_failure(runner, op, turn, v.target, v.reason or "API_ERROR")
    if op.state is State.EXECUTING and writes_only(runner, op):
        return  # C1 goes out with the first write's ledger STARTED (D18)
    await runner._flush(op)


def finish_failure(
    runner: Runner, op: Operation, turn: ModelTurn, target: State, reason: str, **extra: Any
) -> None:
    """End ``op`` in ``target`` (FAILED, INCOMPLETE, REFUSED) with ``turn``'s text, refusal and failure
    on the transition (D32: the raw stop reason, the provider's error type, code and status)."""
    op.reason = reason
    op.text = turn.text or None
    op.refusal = turn.refusal
    details: dict[str, Any] = {
        "response_id": turn.response_id,
        "raw_stop_reason": turn.raw_stop_reason,
        "reason": reason,
        **extra,
    }
    if turn.failure is not None:
        details.update(
            error_type=turn.failure.error_type,
            error_code=turn.failure.error_code,
            status=turn.failure.status,
        )
    runner._move(op, target, reason.lower(), **details)


def account(runner: Runner, op: Operation, turn: ModelTurn, price: Price | None) -> None:
    """Add ``turn``'s usage, priced (D27: cost a Decimal, missing counts null on the turn), to ``op``."""
    usage = priced(turn.usage, price)
    op.usage = with_turn(op.usage, turn, usage, first=op.model_requests == 1)
    op.spent.input_tokens += usage.input_tokens or 0
    op.spent.output_tokens += usage.output_tokens or 0
    if usage.cost is not None:
        op.spent.cost += usage.cost
