"""The plain columns a SQL store keeps beside its JSON documents, held to those documents.

An operation's state and tenant, an approval's operation, tenant, status and expiry, and a ledger entry's
operation and status are kept twice: in the document (what callbound reads, and what the audit chain
vouches for) and in a column, for the store's own queries to filter on (which operation a worker claims,
which approvals are listed as pending, which intent a claim finds held). An edit of a column alone changed
what the store does while every document still verified: a paused operation marked COMPLETED was never
claimed again, an expiry moved into the past woke a worker in a loop. ``audit verify`` names such rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from .schema import epoch_us

Execute = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
Drift = tuple[str, str, str]  # (operation id, where, why)


def column_drift(execute: Execute, mark: str, expires: str, operation_id: str | None) -> list[Drift]:
    """Every row whose columns differ from its document. ``mark`` is the driver's placeholder, ``expires``
    the approvals' expiry column (microseconds since the epoch, or a timestamp)."""
    where, params = (
        (f" WHERE operation_id = {mark}", [operation_id]) if operation_id is not None else ("", [])
    )
    out: list[Drift] = []
    for op, tenant, state, head in execute(
        f"SELECT operation_id, tenant, state, head FROM operations{where}", params
    ):
        if (doc := _doc(head)) is None:
            continue
        out += [(op, "operation row", why) for why in _differ(doc, {"state": state, "tenant": tenant})]
    sql = f"SELECT approval_id, operation_id, tenant, status, {expires}, data FROM approvals{where}"
    for approval_id, op, tenant, status, until, data in execute(sql, params):
        if (doc := _doc(data)) is None:
            continue
        columns = {"operation_id": op, "tenant": tenant, "status": status}
        whys = _differ(doc, columns)
        column = epoch_us(until) if isinstance(until, datetime) else until
        if _instant(doc.get("expires_at")) != column:
            whys.append("its expiry column differs from its document's expires_at")
        out += [(op, f"approval {approval_id}", why) for why in whys]
    for tenant, key, op, status, entry in execute(
        f"SELECT tenant, key, operation_id, status, entry FROM ledger{where}", params
    ):
        if (doc := _doc(entry)) is None:
            continue
        whys = _differ(doc, {"operation_id": op, "status": status, "tenant": tenant, "key": key})
        out += [(op, f"ledger {key}", why) for why in whys]
    return out


def _doc(value: Any) -> dict[str, Any] | None:
    """The row's document, or None when it is no JSON object: such a row is named once, by the loader
    (``rows.UnreadableRow``, "cannot be loaded"), not again here for every column it holds."""
    if isinstance(value, str | bytes):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _differ(doc: dict[str, Any], columns: dict[str, Any]) -> list[str]:
    return [
        f"its {name} column ({value!r}) differs from its document ({doc.get(name)!r})"
        for name, value in columns.items()
        if doc.get(name) != value
    ]


def _instant(text: Any) -> int | None:
    try:
        return epoch_us(datetime.fromisoformat(text)) if isinstance(text, str) else None
    except ValueError:
        return None
