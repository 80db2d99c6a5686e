"""``callbound ledger``: inspect the idempotency ledger and settle by hand a write whose outcome nobody
could tell (D16; docs/durability.md, Idempotency).

Exit codes (D28): 0 done; 2 usage error or unreadable input (bad options, ``--result`` that is not a
JSON object, no such entry, a store that cannot be opened or read); 3 the settle was refused and nothing
was written (the entry is settled already, its operation has not ended and reconciles it itself, or the
entry changed while settling: read it again and decide again).
"""

from __future__ import annotations

import json
import shlex
from typing import Annotated, Any

import typer
from rich.text import Text

from ..core.errors import LedgerChanged, SettleRefused, StoreError, UsageError
from ..core.idempotency import LedgerEntry, LedgerStatus, settle_refusal
from ..stores.rows import UnreadableRow
from .errors import MAX_LIMIT, err
from .heads import DAMAGED, at_most, in_order
from .render import password_note, shown, shown_text, store_flag

ledger_app = typer.Typer(
    no_args_is_help=True, help="Inspect idempotency-ledger entries and settle unknown write outcomes."
)

# As in app.py (imported lazily from there: app.py registers this module).
StoreOpt = Annotated[
    str,
    typer.Option("--store", help="sqlite:///path.db (default ./callbound.db), postgresql://..., or memory:"),
]
DEFAULT_STORE = "sqlite:///callbound.db"
TenantOpt = Annotated[str, typer.Option("--tenant", help="The tenant the key belongs to.")]
REFUSED = 3


def _holder_state(st: Any, entry: LedgerEntry) -> str | None:
    stored = st.load_operation(entry.operation_id)
    return None if stored is None else str(stored.head.get("state"))


@ledger_app.command("list")
def ledger_list(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's entries.")] = None,
    status: Annotated[
        str | None, typer.Option(help="Only entries in this status: STARTED, SUCCEEDED, FAILED or UNKNOWN.")
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, help="List at most this many (a note says if there are more).")
    ] = 100,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Ledger entries by tenant and key; --status UNKNOWN lists the outcomes waiting to be settled."""
    from .app import _open, _print_table
    from .errors import fail as _fail
    from .errors import out

    if status is not None and status not in LedgerStatus.__members__:
        raise _fail(f"unknown status {status!r}; use one of {', '.join(LedgerStatus.__members__)}")
    st = _open(store, create=False)
    # A damaged entry is listed as such, the others with it (as ops list does); one made the whole list
    # exit 2 and the library's call raise (review round 21, b).
    damaged: list[UnreadableRow] = []
    limit = min(limit, MAX_LIMIT)
    try:
        found = st.ledger_list(tenant=tenant, status=status, limit=limit + 1, damaged=damaged)
    except StoreError as exc:
        raise _fail(str(exc)) from exc
    entries = at_most(in_order(found, damaged), limit, f"the first {limit} entries by tenant and key")
    for d in (e for e in entries if isinstance(e, UnreadableRow)):
        err.print(
            Text.assemble(
                ("warning:", "yellow"),
                f" {shown(d)}; it is listed as {DAMAGED} and the other entries as usual: restore the row "
                "from a backup (until then it cannot be shown or settled)",
            ),
            highlight=False,
        )
    if as_json:
        listed = [
            e.to_dict() if isinstance(e, LedgerEntry) else e.columns | {"damaged": e.why} for e in entries
        ]
        out.print_json(json.dumps(listed))
        return
    from rich.table import Table

    table = Table("key", "tenant", "status", "tool", "operation", "attempts", "notes")
    for e in entries:
        if isinstance(e, UnreadableRow):
            c = e.columns
            row = (c.get("key"), c.get("tenant"), DAMAGED, "?", c.get("operation_id"), "?", e.why)
            table.add_row(*(shown(v) for v in row))
            continue
        notes = []
        if e.handler_alive:
            notes.append("handler was still running")
        if e.settled:
            notes.append(f"settled by {e.settled.get('by')} at {e.settled.get('at')}")
        table.add_row(
            shown(e.key),
            shown(e.tenant),
            e.status.value,
            shown(e.tool),
            shown(e.operation_id),
            str(e.attempts),
            shown("; ".join(notes)),
        )
    _print_table(table)


@ledger_app.command("show")
def ledger_show(
    key: str,
    tenant: TenantOpt,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """One entry, the state of the operation holding it, and whether it may be settled."""
    from .app import _open
    from .errors import fail as _fail
    from .errors import out

    st = _open(store, create=False, wanted=f"ledger entry {key!r}")
    try:
        entry = st.ledger_get(tenant, key)
        state = None if entry is None else _holder_state(st, entry)
    except StoreError as exc:
        raise _fail(str(exc)) from exc
    if entry is None:
        raise _fail(f"no ledger entry {shown(key)!r} of tenant {shown(tenant)!r} in this store")
    from ..core.states import TERMINAL

    refusal = settle_refusal(entry, state is None or state in TERMINAL)
    if as_json:
        data = {"entry": entry.to_dict(), "holder_state": state, "settle_refused": refusal}
        out.print_json(json.dumps(data))
        return
    out.print(Text.assemble(("ledger entry ", "bold"), (shown(key), "bold"), f" tenant={shown(tenant)}"))
    alive = " (its handler was still running when its operation gave up on it)" if entry.handler_alive else ""
    out.print(f"status: {entry.status.value}{alive}", highlight=False)
    holder = "no longer in the store" if state is None else shown(state)
    out.print(
        f"tool: {shown(entry.tool)}  operation: {shown(entry.operation_id)} ({holder})  "
        f"attempts: {entry.attempts}",
        highlight=False,
    )
    if entry.result is not None:
        out.print(f"result: {shown(json.dumps(entry.result, ensure_ascii=True))}", highlight=False)
    if entry.settled:
        s = entry.settled
        out.print(
            f"settled by {shown(s.get('by'))} at {shown(s.get('at'))} (was {shown(s.get('was'))}, held "
            f"by operation {shown(s.get('operation_id'))})"
            + (f": {shown_text(s.get('note'))}" if s.get("note") else ""),
            highlight=False,
        )
    if refusal is None:
        # The command as it runs from any shell: the key and tenant quoted, the store named by its absolute
        # path (it named none: with --store it settled in the default ./callbound.db, or failed there;
        # review round 22, c).
        out.print(
            f"may be settled: callbound ledger settle {shown(shlex.quote(key))} --tenant "
            f"{shown(shlex.quote(tenant))} --applied|--not-applied --by <you>{store_flag(store)}",
            highlight=False,
        )
        if note := password_note(store):
            out.print(note, highlight=False)
    else:
        out.print(f"cannot be settled now: {shown_text(refusal)}", highlight=False)


def _parse_result(raw: str) -> dict[str, Any]:
    from ..core.arguments import parse_arguments
    from .errors import fail as _fail

    if not raw.strip():
        raise _fail("--result is empty; give the tool's result as a JSON object, or leave --result out")
    value, why = parse_arguments(raw)
    if value is None:
        raise _fail(f"--result is not a JSON object callbound can replay exactly: {why}")
    return value


@ledger_app.command("settle")
def ledger_settle(
    key: str,
    tenant: TenantOpt,
    by: Annotated[str, typer.Option("--by", help="Who settles it (recorded in the entry).")],
    applied: Annotated[
        bool, typer.Option("--applied", help="The effect happened (checked downstream).")
    ] = False,
    not_applied: Annotated[
        bool,
        typer.Option(
            "--not-applied",
            help="The effect definitely did not happen, and cannot any more (a handler that was still "
            "running has stopped).",
        ),
    ] = False,
    result: Annotated[
        str | None,
        typer.Option(
            "--result",
            help="With --applied: the tool's result as a JSON object, replayed to later proposals of the "
            "intent (default: a plain 'applied' record).",
        ),
    ] = None,
    note: Annotated[str, typer.Option("--note", help="Why: what was checked, a ticket.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print the settled entry as JSON.")] = False,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Record whether a write nobody could tell was applied, after checking the downstream system."""
    from ..runtime.clock import SystemClock
    from ..runtime.settle import settle_intent
    from .app import _open
    from .errors import err, out
    from .errors import fail as _fail

    if applied == not_applied:
        raise _fail("say what happened: exactly one of --applied or --not-applied")
    if result is not None and not applied:
        raise _fail("--result goes with --applied only: an effect that did not happen has no result")
    data = None if result is None else _parse_result(result)
    st = _open(store, create=False, wanted=f"ledger entry {key!r}")
    try:
        settled = settle_intent(
            st, tenant, key, applied=applied, result=data, by=by, note=note, now=SystemClock().now()
        )
    except (SettleRefused, LedgerChanged) as exc:
        err.print(Text.assemble(("refused:", "red"), f" {shown(exc)}"), highlight=False)
        raise typer.Exit(REFUSED) from exc
    except (UsageError, StoreError) as exc:
        raise _fail(shown(exc)) from exc
    if as_json:
        out.print_json(json.dumps(settled.to_dict()))
        return
    was = settled.settled["was"] if settled.settled else "?"
    out.print(
        f"ledger entry {shown(key)} of tenant {shown(tenant)}: settled {settled.status.value} by "
        f"{shown(by.strip())} (was {was}, held by operation {shown(settled.operation_id)})",
        highlight=False,
    )
    out.print(
        "a later operation proposing this intent replays the recorded result without running the tool"
        if applied
        else "a later operation proposing this intent runs the tool again",
        highlight=False,
    )
