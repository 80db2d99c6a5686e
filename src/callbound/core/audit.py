"""Audit events and the per-operation hash chain (D20).

Each event carries the hash of the one before it in the same operation. The chain hashes digests
of payloads, so payloads can be purged without breaking it. With a key (``CALLBOUND_AUDIT_KEY``,
read at the edge and passed in) each link is an HMAC, which protects against anyone who can write
to the database but not read the key; without a key the chain detects accidental and naive edits
only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .canonical import FlatRecord, canonical_json_sha256_str_keys
from .errors import CanonicalizationError

GENESIS = "0" * 64
_ITEMS_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
# A link's hashed object, keys in canonical order.
_LINK = FlatRecord(("at", "data_sha256", "kind", "op", "prev", "seq"))


@dataclass(frozen=True, slots=True)
class AuditEvent:
    operation_id: str
    seq: int
    kind: str
    at: str  # ISO-8601 UTC
    data: dict[str, Any]  # ids, states and digests; values only where the redaction hook allows
    prev_hash: str
    hash: str
    # ``data`` as JSON text, written while computing its digest and set by ``next_event``: a store
    # keeps that text rather than encoding ``data`` again (it loads back equal). Not part of the event's
    # identity, and not an init field, so ``dataclasses.replace(ev, data=...)`` cannot carry the
    # old text along with new data.
    data_json: str | None = field(default=None, init=False, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation_id": self.operation_id,
            "seq": self.seq,
            "kind": self.kind,
            "at": self.at,
            "data": self.data,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> AuditEvent:
        return AuditEvent(
            d["operation_id"], int(d["seq"]), d["kind"], d["at"], d["data"], d["prev_hash"], d["hash"]
        )


def link_hash(
    prev_hash: str, operation_id: str, seq: int, kind: str, at: str, data: dict[str, Any], key: bytes | None
) -> str:
    """Hash of one link: the canonical JSON (RFC 8785) of
    ``{"at", "data_sha256", "kind", "op", "prev", "seq"}``, written out field by field because this
    runs for every commit (keys listed in canonical order)."""
    return _link(prev_hash, operation_id, seq, kind, at, data, key)[0]


def _link(
    prev_hash: str, operation_id: str, seq: int, kind: str, at: str, data: dict[str, Any], key: bytes | None
) -> tuple[str, str]:
    """``link_hash`` and a JSON text of ``data`` whose canonical form it hashed."""
    data_json, data_sha256 = canonical_json_sha256_str_keys(data)
    body = _LINK.encode((at, data_sha256, kind, operation_id, prev_hash, seq))
    if key:
        return hmac.new(key, body, hashlib.sha256).hexdigest(), data_json
    return hashlib.sha256(body).hexdigest(), data_json


def next_event(
    prev: AuditEvent | None,
    operation_id: str,
    kind: str,
    at: str,
    data: dict[str, Any],
    key: bytes | None = None,
) -> AuditEvent:
    seq = 0 if prev is None else prev.seq + 1
    prev_hash = GENESIS if prev is None else prev.hash
    link, data_json = _link(prev_hash, operation_id, seq, kind, at, data, key)
    ev = AuditEvent(operation_id, seq, kind, at, data, prev_hash, link)
    object.__setattr__(ev, "data_json", data_json)  # frozen; see the field
    return ev


@dataclass(frozen=True, slots=True)
class ChainBreak:
    seq: int
    why: str


def verify_chain(events: Sequence[AuditEvent], key: bytes | None = None) -> ChainBreak | None:
    """None if the chain is intact; else the first bad event and why."""
    prev_hash = GENESIS
    for expected_seq, ev in enumerate(events):
        if ev.seq != expected_seq:
            # Fix: this reported the found ``ev.seq``, so a deleted event 2 was blamed on event 3 and an
            # edited seq pointed at an event that does not exist. Report the first bad position.
            why = f"expected sequence {expected_seq}, found {ev.seq} (row missing, inserted or moved)"
            return ChainBreak(expected_seq, why)
        if ev.prev_hash != prev_hash:
            return ChainBreak(ev.seq, "prev_hash does not match the previous event")
        # Fix: a tampered row could make verification raise instead of report: hmac.compare_digest
        # raises TypeError on a non-ASCII (or non-str) hash, and a data value with no canonical form
        # raised CanonicalizationError. Both are now a ChainBreak at that event.
        try:
            want = link_hash(prev_hash, ev.operation_id, ev.seq, ev.kind, ev.at, ev.data, key)
        except CanonicalizationError:
            return ChainBreak(ev.seq, "the event's content has no canonical form")
        got = ev.hash.encode("utf-8", "replace") if isinstance(ev.hash, str) else b""
        if not hmac.compare_digest(want.encode(), got):
            return ChainBreak(ev.seq, "hash does not match the event's content")
        prev_hash = ev.hash
    return None


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One thing that happened (a transition, a model turn, a result, an approval, an escalation)."""

    seq: int  # the chained event (one per commit) that holds it
    kind: str
    at: str
    data: dict[str, Any]


def audit_entries(events: Sequence[AuditEvent]) -> list[AuditEntry]:
    """Flatten a chain into entries. The runtime chains one ``commit`` event per store commit holding
    that commit's entries; events of any other kind are entries themselves."""
    out: list[AuditEntry] = []
    for ev in events:
        items = ev.data.get("events") if ev.kind == "commit" else None
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict) and isinstance(item.get("data"), dict):
                    out.append(AuditEntry(ev.seq, str(item.get("kind")), str(item.get("at")), item["data"]))
        else:
            out.append(AuditEntry(ev.seq, ev.kind, ev.at, ev.data))
    return out


def items_digest(items: Sequence[Any]) -> str | None:
    """Digest of transcript items, the same for the values any store gives back: stores keep
    documents as JSON text, which loads back equal, and sorted keys make the text independent of key
    order. None where the items have no JSON form (no store could save them either), nested too
    deeply for the stack included."""
    try:
        text = _ITEMS_JSON.encode(items)
    except (TypeError, ValueError, RecursionError):  # RecursionError: nested deeper than the stack
        return None
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
