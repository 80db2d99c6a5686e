"""Operation rows a command cannot use as they are: a head edited by hand or damaged (review round 16,
r2 F3). A head without a field the command reads (``state``, ``tenant``, ...) raised ``KeyError``: a
traceback and exit 1 (the code of tampering) from ``ops list``, ``ops show``, ``resume``, ``ops
cancel`` and the approval commands, and one such row kept ``ops list`` from listing any operation.

Now ``ops list`` lists every other operation and marks the damaged one (state ``DAMAGED`` and why,
``"damaged"`` in ``--json``, a warning on stderr); the commands about that one operation end with the
one ``error:`` line of any other unreadable row (exit 2, D28), as a head that is not JSON already did.
``audit verify`` names it as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from ..core.states import State
from ..stores.rows import UnreadableRow

# What each command reads from a head.
LISTED = ("operation_id", "tenant", "state", "created_at")
SHOWN = ("tenant", "subject", "api", "state")
DAMAGED = "DAMAGED"
T = TypeVar("T")


def fault(head: Any, keys: Iterable[str]) -> str | None:
    """Why ``head`` cannot give ``keys`` as text (the state a known one); None if it can."""
    if not isinstance(head, dict):
        return "it does not hold a JSON object"
    for key in keys:
        if key not in head:
            return f"it has no {key!r} field"
        if not isinstance(head[key], str):
            return f"its {key!r} field is not a string"
    if "state" in keys and head["state"] not in State.__members__:
        return f"its state {head['state']!r} is not one callbound knows"
    return None


def damaged(operation_id: Any, why: str) -> str:
    """The one-line message for such a row, in the words of any other unreadable row."""
    return str(UnreadableRow("operation row", why, None if operation_id is None else str(operation_id)))


def why_not_loaded(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"it has no {exc.args[0]!r} field"
    return f"it does not read as an operation ({type(exc).__name__}: {exc})"


def check_loadable(stored: Any, operation_id: str) -> str | None:
    """The message for an operation whose stored rows a runner could not load (``resume``, ``ops
    cancel``, ``approvals approve|deny``); None if it loads."""
    from ..runtime.operation import Operation

    try:
        Operation.from_stored(stored, None)
    except UnreadableRow as exc:  # a head or journal row missing a field, or one of the wrong type
        return str(UnreadableRow(exc.where, exc.why, operation_id))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # anything from_stored leaves unnamed
        return damaged(operation_id, why_not_loaded(exc))
    return None


def listed_heads(
    store: Any, tenant: str | None, state: str | None, limit: int
) -> list[tuple[dict[str, Any], str | None]]:
    """``list_operations``, each head with why it is damaged (None if it is not). When one head does
    not even load (not JSON, an array), every operation is read one by one instead, a damaged one kept
    as its id: those are the ones to look at, so the filters leave them in."""
    try:
        return [(h, fault(h, LISTED)) for h in store.list_operations(tenant=tenant, state=state, limit=limit)]
    except UnreadableRow:
        ids = getattr(store, "operation_ids", None)
        if ids is None:
            raise
    heads: list[tuple[dict[str, Any], str | None]] = []
    for operation_id in ids():
        if len(heads) >= limit:
            break
        try:
            stored = store.load_operation(operation_id)
        except UnreadableRow as exc:
            where = "" if exc.where == "operation row" else f"its {exc.where}: "
            heads.append(({"operation_id": operation_id}, where + exc.why))
            continue
        if stored is None:  # deleted meanwhile
            continue
        head = stored.head
        if (tenant is None or head.get("tenant") == tenant) and (state is None or head.get("state") == state):
            heads.append((head, fault(head, LISTED)))
    return heads


def shown_row(head: dict[str, Any], why: str | None) -> dict[str, Any]:
    """A head as the ``ops list`` table shows it: a damaged one with the fields it lacks as ``?``, its
    state ``DAMAGED`` and why as its reason."""
    if why is None:
        return head
    shown: dict[str, Any] = {k: (v if isinstance(v := head.get(k), str) else "?") for k in LISTED}
    updated = head.get("updated_at")
    shown.update(state=DAMAGED, reason=why, updated_at=updated if isinstance(updated, str) else None)
    return shown


def in_order(rows: Sequence[T], damaged: Sequence[UnreadableRow]) -> list[T | UnreadableRow]:
    """A listing's rows and its damaged ones (``damaged=`` of ``list_approvals``, ``ledger_list``) in the
    store's order: ``approvals list`` and ``ledger list`` list around a damaged row as ``ops list`` does,
    where one such row made them list nothing, exit 2 (review round 21, b)."""
    merged: list[T | UnreadableRow] = list(rows)
    for d in sorted(damaged, key=lambda d: d.index or 0):
        merged.insert(len(merged) if d.index is None else d.index, d)
    return merged


def at_most(rows: list[T], limit: int, listed: str) -> list[T]:
    """The first ``limit`` of ``rows``, read with ``limit + 1``: when there were more, a note on stderr
    says so. ``ops list`` (50 by default) and ``ledger list`` (100) cut a long list without a word, so an
    operator looking for the UNKNOWN entries to settle among thousands saw the first 100 as if they were
    all (review round 21, b; ``approvals list`` has said so since review round 18, d F4)."""
    if len(rows) <= limit:
        return rows
    from rich.text import Text

    from .errors import err

    note = f" listed {listed}; there are more: pass --limit to list more"
    err.print(Text.assemble(("note:", "yellow"), note), highlight=False)
    return rows[:limit]
