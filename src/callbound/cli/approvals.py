"""``callbound approvals``: list pending approvals and decide them (D17) from any shell."""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.text import Text

from ..core.approvals import PendingApproval
from ..core.errors import CallboundError
from ..core.states import TERMINAL
from ..stores.rows import UnreadableRow
from .errors import err, fail, out
from .heads import DAMAGED, at_most, in_order
from .render import (
    DEFAULT_STORE,
    AppRefOpt,
    StoreOpt,
    print_table,
    resume_command,
    resume_hint,
    shown,
    store_flag,
)

approvals_app = typer.Typer(no_args_is_help=True, help="List and decide pending approvals.")

# A blank --approver, refused before anything is read or written; the error named the library call
# (Decision.approve) a command user never made, and the demo gave it after saving its pause (review
# round 20, e).
NO_APPROVER = "--approver needs a name: who decides (recorded with the decision and in the audit chain)"


@approvals_app.command("list")
def approvals_list(
    tenant: Annotated[str | None, typer.Option()] = None,
    all_: Annotated[bool, typer.Option("--all", help="Include decided approvals.")] = False,
    limit: Annotated[
        int, typer.Option(min=1, help="List at most this many (a note says if there are more).")
    ] = 1000,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Pending approvals, oldest first."""
    from .app import _open  # app.py registers this module
    from .errors import MAX_LIMIT

    st = _open(store, create=False)
    # One more than asked: the stores' default of 1000 cut the list without a word, so past 1000 approvals
    # `--all` never showed the newest decisions, where `ApprovalAlreadyDecided` sends the reader (review
    # round 18, d F4).
    limit = min(limit, MAX_LIMIT)
    # A damaged row is listed as such, the others with it (as ops list does): one row that did not load
    # made the whole list exit 2, and the library's call raise, so a store of 10,000 paused approvals
    # showed none of them to decide (review round 21, b).
    damaged: list[UnreadableRow] = []
    found = st.list_approvals(
        tenant=tenant, status=None if all_ else "pending", limit=limit + 1, damaged=damaged
    )
    rows = at_most(in_order(found, damaged), limit, f"the oldest {limit} approvals")
    for d in rows:
        if isinstance(d, UnreadableRow):
            said = unusable(d, _state_of(st, d.columns.get("operation_id")), store)
            err.print(Text.assemble(("warning:", "yellow"), f" {shown(said)}"), highlight=False)
    if as_json:
        listed = [
            r.to_dict() if isinstance(r, PendingApproval) else r.columns | {"damaged": r.why} for r in rows
        ]
        out.print_json(json.dumps(listed))
        return
    from datetime import UTC

    from rich.table import Table

    # A pending approval past its expiry can no longer let its call run (D17): shown as such, not as one
    # waiting for a decision (review round 19, d F4). Its row stays pending until the resume that tells
    # the model APPROVAL_EXPIRED (or stops the operation) withdraws it.
    now = datetime.now(UTC)
    table = Table("approval id", "operation", "tool", "arguments", "status", "expires")
    for a in rows:
        if isinstance(a, UnreadableRow):
            cols = a.columns
            table.add_row(
                shown(cols.get("approval_id")), shown(cols.get("operation_id")), "?", "?", DAMAGED, "?"
            )
            continue
        table.add_row(
            a.approval_id,
            a.operation_id,
            a.tool,
            # Whole, and ASCII: the approver must see every argument that will run (a cut at 60
            # characters hid an amount the model padded past it), and escapes make look-alike and
            # bidi characters visible.
            json.dumps(a.arguments, ensure_ascii=True),
            "pending (expired)" if a.status == "pending" and a.expires_at <= now else a.status,
            a.expires_at.isoformat(),
        )
    print_table(out, table)


def _state_of(st: Any, operation_id: object) -> str | None:
    """The stored state of a damaged approval's operation, or None when it cannot be told."""
    if not isinstance(operation_id, str):
        return None
    try:
        stored = st.load_operation(operation_id)
    except CallboundError:
        return None
    return None if stored is None else str(stored.head.get("state"))


def unusable(d: UnreadableRow, state: str | None, store: str) -> str:
    """What a damaged approval row means for its operation, and what to do. Cancelling ends an operation
    whose approval row does not load (review round 22, c): it said the operation could not be cancelled
    either, and only a restore from a backup was left."""
    op = d.columns.get("operation_id")
    said = f"{d}; it is listed as {DAMAGED} and the other approvals as usual"
    if state in TERMINAL:
        return f"{said}; operation {op} has ended {state}: nothing waits on this row (restore it, or keep it as evidence)"
    return (
        f"{said}: restore the row from a backup to decide it; until then operation {op} cannot be resumed, "
        f"and callbound ops cancel {shlex.quote(str(op))}{store_flag(store)} ends it without a decision"
    )


def _when(at: datetime | None) -> str:
    """A decision's time as every other time the CLI prints (ISO 8601: ``approvals list --json``, the
    error of a repeated decision); ``str()`` gave "2026-12-02 09:47:17+00:00" (review round 20, e)."""
    return "?" if at is None else at.isoformat()


def _decide(
    approval_id: str,
    approver: str,
    verdict: str,
    reason: str | None,
    tenant: str | None,
    store: str,
    app_ref: str | None,
    as_json: bool = False,
) -> None:
    from ..core.approvals import Decision
    from ..runtime.decisions import stale_context
    from .app import _open, _runner_for

    if not approver.strip():
        raise fail(NO_APPROVER)
    st = _open(store, create=False, wanted=f"approval {approval_id!r}")
    try:
        approval = st.get_approval(approval_id)
    except UnreadableRow as exc:
        # what to do, as approvals list says it: a cancel ends its operation (review round 22, c)
        raise fail(
            f"{exc}: restore the row from a backup to decide it, or end its operation without a decision "
            f"with callbound ops cancel OPERATION{store_flag(store)} (approvals list names the operation)"
        ) from exc
    if approval is None:
        raise fail(f"no approval {approval_id!r} in this store")
    try:
        runner = _runner_for(st, approval.operation_id, app_ref)
        decision = (
            Decision.approve(approval_id, approver, reason)
            if verdict == "approve"
            else Decision.deny(approval_id, approver, reason)
        )
        decided = runner.decide(decision, tenant=tenant or approval.tenant)
    except CallboundError as exc:
        raise fail(str(exc)) from exc
    # D17: deciding a decided approval again returns the original decision; nothing was recorded now
    said = f"already {decided.status}" if approval.status != "pending" else decided.status
    if approval.status != "pending" and reason is not None and reason != decided.reason:
        # D17: the same verdict from the same approver returns the original, its reason included; a
        # second denial's new reason looked recorded when it was not (review round 14, h5 r6).
        kept = "no reason" if decided.reason is None else f"the reason {decided.reason!r}"
        err.print(
            Text.assemble(
                ("warning:", "yellow"),
                f" the reason given now was not recorded: the decision stands as first recorded, with {kept}",
            ),
            highlight=False,
        )
    stored = st.load_operation(approval.operation_id)
    state = None if stored is None else str(stored.head.get("state"))
    ended = state is None or state in TERMINAL
    # The decision is recorded (D17) but cannot take effect when it came after the expiry, or when the
    # approved call no longer matches what was approved: "approved" alone read as if the call would run.
    late = decided.decided_at is not None and decided.decided_at >= decided.expires_at
    stale = None if ended or late or decided.status != "approved" else stale_context(runner, decided)
    saved = None if stored is None else (stored.head.get("app") or {}).get("ref")
    wanted_app = app_ref if app_ref not in (None, saved) else None
    if late and not ended:
        err.print(
            Text.assemble(
                ("warning:", "yellow"),
                f" approval {approval_id} had expired at {decided.expires_at.isoformat()}; the decision is "
                "recorded but cannot take effect: the call will not run, and resuming "
                + (
                    "stops the operation STOPPED(APPROVAL_EXPIRED)"
                    if runner.policy.on_approval_expired == "stop"
                    else "tells the model APPROVAL_EXPIRED"
                ),
            ),
            highlight=False,
        )
    elif stale is not None:
        err.print(
            Text.assemble(
                ("warning:", "yellow"),
                f" approval {approval_id} was asked under {stale}; the decision is recorded, but resuming "
                "with this application tells the model APPROVAL_STALE and the call will not run",
            ),
            highlight=False,
        )
    if as_json:
        # one object a script can act on without parsing the text; the warnings above stay on stderr
        out.print_json(
            json.dumps(
                {
                    "approval": decided.to_dict(),
                    "recorded_now": approval.status == "pending",
                    "operation_state": state,
                    "takes_effect": not ended and not late and stale is None,
                    "resume": None if ended else resume_command(approval.operation_id, store, wanted_app),
                }
            )
        )
        return
    if ended:
        # Review round 14 (h5 r6): a repeat after the operation ended printed "resume with: ...", a
        # command that exits 2 on a finished operation (D2)
        gone = "is no longer in this store" if state is None else f"has ended {state}"
        out.print(f"approval {approval_id}: {said} by {decided.approver} at {_when(decided.decided_at)}")
        out.print(f"operation {approval.operation_id} {gone}: there is nothing to resume")
        return
    if late:
        out.print(f"approval {approval_id}: {said} by {decided.approver} after it expired")
    else:
        out.print(f"approval {approval_id}: {said} by {decided.approver} at {_when(decided.decided_at)}")
    out.print(resume_hint(approval.operation_id, store, wanted_app))


@approvals_app.command("approve")
def approvals_approve(
    approval_id: str,
    approver: Annotated[str, typer.Option(help="Who approves.")],
    tenant: Annotated[str | None, typer.Option(help="Tenant the approver acts for.")] = None,
    app_ref: AppRefOpt = None,
    store: StoreOpt = DEFAULT_STORE,
    as_json: Annotated[bool, typer.Option("--json", help="Print the decision as one JSON object.")] = False,
) -> None:
    """Approve a pending call (single use; repeating the same decision is a no-op)."""
    _decide(approval_id, approver, "approve", None, tenant, store, app_ref, as_json)


@approvals_app.command("deny")
def approvals_deny(
    approval_id: str,
    approver: Annotated[str, typer.Option(help="Who denies.")],
    reason: Annotated[str, typer.Option(help="Why; the model is told.")] = "denied",
    tenant: Annotated[str | None, typer.Option()] = None,
    app_ref: AppRefOpt = None,
    store: StoreOpt = DEFAULT_STORE,
    as_json: Annotated[bool, typer.Option("--json", help="Print the decision as one JSON object.")] = False,
) -> None:
    """Deny a pending call; the model receives DENIED."""
    _decide(approval_id, approver, "deny", reason, tenant, store, app_ref, as_json)
