"""What the audit chain vouches for, checked against the stored operation before it runs again (D20).

The chain hashes digests of an operation's inputs and outputs. Besides transitions, turns and
results, the runtime audits:

- ``created`` with ``digests: 1``, the tools offered and digests of the instructions, budgets and
  model settings: the marker that this operation records what follows (operations saved before it
  carry none, and for those only the chain itself is checked);
- on the commit link itself (next to its ``events``), to keep the chain small: ``plan``, the response
  id and one digest of its calls (id, tool and the canonical arguments the handler will be given) in
  the commit that holds the turn (C1); ``transcript``, the position, count and digest of the items the
  commit appends, which the model reads on its next request;
- ``sealed``: the binding of every result envelope committed before the turn's results are sent
  (a mixed turn's reads while a write waits for approval), which ``result`` entries record at C2.

``problems`` compares a loaded operation with those entries, so an edit of the database between two
commits (a pending write's arguments, a result or transcript item the model will read, the tools
offered, the budgets) is found before any handler runs or any request is sent. Without ``CALLBOUND_AUDIT_KEY`` a
writer who also recomputes the chain gets through (D20: naive edits only); with it, they do not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.audit import AuditEvent, audit_entries, items_digest, verify_chain
from ..core.canonical import sha256_hex
from ..core.errors import StaleLease, UsageError
from ..core.states import TERMINAL, State
from ..core.types import ModelTurn
from .operation import CallRecord, CurrentTurn, Operation
from .results import call_arguments_json

if TYPE_CHECKING:
    from .outcome import Outcome
    from .runner import Runner

DIGESTS_VERSION = 1


def plan_digest(records: Iterable[CallRecord]) -> str | None:
    """One digest of a turn's planned calls: what each handler will be given."""
    return items_digest([[r.call_id, r.tool, r.arguments_json] for r in records])


def _turn_plan_digest(turn: ModelTurn) -> str | None:
    """The same digest from the stored turn: first calls of each id, in order, as planning takes them."""
    seen: set[str] = set()
    calls = []
    for c in turn.calls:
        if c.call_id not in seen:
            seen.add(c.call_id)
            calls.append([c.call_id, c.name, call_arguments_json(c)])
    return items_digest(calls)


def created_entry(op: Operation, input_sha256: str) -> dict[str, Any]:
    return {
        "tenant": op.tenant,
        "subject": op.subject,
        "api": op.api,
        "input_sha256": input_sha256,
        "digests": DIGESTS_VERSION,
        "offered": list(op.offered),
        "instructions_sha256": None if op.instructions is None else sha256_hex(op.instructions),
        # what the operation may spend and how the model is asked (model name, continuation, ...)
        "budgets_sha256": items_digest([op.budgets.to_dict()]),
        "settings_sha256": items_digest([op.settings]),
    }


@dataclass(frozen=True, slots=True)
class Problem:
    where: str  # "transcript items 4..6", "call call_1 (response resp_1)"
    why: str


@dataclass(frozen=True, slots=True)
class ChainFault:
    """The chain itself does not verify. ``at_start`` when not even its first link does under the
    key given: written with another key (or none), which is a configuration fault, not an edit."""

    where: str
    why: str
    at_start: bool


def chain_fault(events: Sequence[AuditEvent], head: dict[str, Any], key: bytes | None) -> ChainFault | None:
    """The first fault of the chain, or of its end as the operation row records it."""
    brk = verify_chain(events, key)
    if brk is not None:
        return ChainFault(f"audit seq {brk.seq}", brk.why, brk.seq == 0)
    if "audit_seq" not in head:  # heads written before it was recorded carry none
        return None
    seq, digest = head.get("audit_seq"), head.get("audit_hash")
    last = events[-1] if events else None
    if last is None and seq is None:
        return None
    if last is None or last.seq != seq or last.hash != digest:
        found = "no events" if last is None else f"its last event is seq {last.seq}"
        why = (
            f"the operation row records seq {seq} as the last link but {found}: "
            "events were deleted from, or added to, the end of the chain"
        )
        return ChainFault("audit chain end", why, False)
    return None


def problems(
    op: Operation, events: Sequence[AuditEvent], turns: dict[str, ModelTurn] | None = None
) -> list[Problem]:
    """Where the operation differs from what its audit chain records. ``turns``: every stored model
    turn by response id (``audit verify`` passes them; a resume checks the turn under work only)."""
    entries = audit_entries(events)
    created = next((e.data for e in entries if e.kind == "created"), None)
    if created is None or created.get("digests") != DIGESTS_VERSION:
        return []  # saved before these entries existed: the chain is all there is to check
    out: list[Problem] = []
    out += _created_problems(op, created)
    transcripts: list[Any] = []
    plans: dict[Any, Any] = {}
    for ev in events:
        if ev.kind == "commit":
            if "transcript" in ev.data:
                transcripts.append(ev.data["transcript"])
            plan = ev.data.get("plan")
            if isinstance(plan, list) and len(plan) == 2:
                plans[plan[0]] = plan[1]
    out += _items_problems(op.transcript, transcripts)
    raws: dict[Any, Any] = {}
    bindings: dict[tuple[Any, Any], Any] = {}
    for e in entries:
        if e.kind == "model_turn":
            raws[e.data.get("response_id")] = e.data.get("raw_sha256")
        elif e.kind in ("sealed", "result"):
            bindings[(e.data.get("response_id"), e.data.get("call_id"))] = e.data.get("call_binding_sha256")
    if op.current is not None:
        out += _current_problems(op.current, plans, raws, bindings)
    last = op.last_turn  # previous_response_id continues from it
    if last is not None and raws.get(last.response_id) != last.raw_sha256:
        out.append(Problem(f"model turn {last.response_id}", "differs from the audited model turn"))
    for rid, turn in (turns or {}).items():
        if rid in plans and _turn_plan_digest(turn) != plans[rid]:
            out.append(
                Problem(f"model turn {rid}", "its calls (tool or arguments) differ from the audited plan")
            )
    return out


def _created_problems(op: Operation, created: dict[str, Any]) -> list[Problem]:
    out = []
    for name, have in (("tenant", op.tenant), ("subject", op.subject), ("api", op.api)):
        if created.get(name) != have:
            out.append(Problem("operation", f"its {name} differs from the audited one"))
    if created.get("offered") != list(op.offered):
        out.append(Problem("operation", "the tools it offers differ from the audited ones"))
    want = created.get("instructions_sha256")
    if want != (None if op.instructions is None else sha256_hex(op.instructions)):
        out.append(Problem("operation", "its instructions differ from the audited ones"))
    if created.get("budgets_sha256") != items_digest([op.budgets.to_dict()]):
        out.append(Problem("operation", "its budgets differ from the audited ones"))
    if created.get("settings_sha256") != items_digest([op.settings]):
        out.append(Problem("operation", "its model settings differ from the audited ones"))
    return out


def _items_problems(transcript: list[Any], audited: list[Any]) -> list[Problem]:
    out = []
    end = 0
    for entry in audited:
        start, count, digest = entry if isinstance(entry, list) and len(entry) == 3 else (None, None, None)
        if not isinstance(start, int) or not isinstance(count, int) or start + count > len(transcript):
            out.append(Problem(f"transcript items from {start}", "audited but missing from the journal"))
            continue
        if items_digest(transcript[start : start + count]) != digest:
            out.append(
                Problem(f"transcript items {start}..{start + count - 1}", "differ from the audited digest")
            )
        end = max(end, start + count)
    if end < len(transcript):
        out.append(
            Problem(f"transcript items from {end}", "in the journal but not in the audit chain (added)")
        )
    return out


def _current_problems(
    current: CurrentTurn,
    plans: dict[Any, Any],
    raws: dict[Any, Any],
    bindings: dict[tuple[Any, Any], Any],
) -> list[Problem]:
    turn = current.turn
    where = f"turn under work {turn.response_id}"
    if raws.get(turn.response_id) != turn.raw_sha256:
        return [Problem(where, "differs from the audited model turn")]
    if turn.response_id not in plans:
        return [Problem(where, "no audited plan holds its calls")]
    audited = plans[turn.response_id]
    if audited != plan_digest(current.records) or audited != _turn_plan_digest(turn):
        return [Problem(where, "its calls (tool or arguments) differ from the audited plan")]
    out: list[Problem] = []
    for rec in current.records:
        if rec.envelope is None:
            continue
        binding = rec.envelope.get("protected_audit", {}).get("call_binding_sha256")
        if bindings.get((rec.response_id, rec.call_id)) != binding:
            out.append(
                Problem(
                    f"result {rec.call_id} (response {rec.response_id})",
                    "a saved result that the audit chain does not record",
                )
            )
    return out


async def load_to_drive(
    runner: Runner, operation_id: str, fence: int | None = None
) -> tuple[Operation, Outcome | None]:
    """Load an operation to drive it on, checked against its audit chain first. Where its rows differ
    from what the chain vouches for, it ends FAILED(INTEGRITY) (D4) before any decision is recorded,
    handler runs or request is sent, and that Outcome comes back with it; the escalation lists what
    differs. Raises ``UsageError`` for a finished operation, and when not even the chain's first link
    verifies under the runner's key: a chain written with another ``CALLBOUND_AUDIT_KEY`` (or none),
    which neither running it nor failing it for good would answer."""
    stored, events = runner._stored(operation_id)
    op = Operation.from_stored(stored, events[-1] if events else None)
    if fence is not None and op.fence != fence:
        # The lease this drive holds (``fence``) was taken over before the operation was read: the
        # stored token is the new owner's. Driving on with it would pass every fenced commit and run
        # the new owner's calls a second time (D21). Nothing is written.
        raise StaleLease(
            f"operation {operation_id}: lease token {fence} is no longer current ({op.fence} is); "
            "another driver owns the operation now"
        )
    if op.state in TERMINAL:
        raise UsageError(
            f"operation {operation_id} is {op.state.value}; a finished operation cannot be resumed"
        )
    fault = chain_fault(events, stored.head, runner.audit_key)
    if fault is not None and fault.at_start:
        raise UsageError(
            f"the audit chain of operation {operation_id} does not verify from its first link "
            f"under this runner's audit key ({fault.why}): resume it with the CALLBOUND_AUDIT_KEY "
            "it was written with, or run `callbound audit verify` to see whether it was edited"
        )
    found = (
        [f"{fault.where}: {fault.why}"]
        if fault is not None
        else [f"{p.where}: {p.why}" for p in problems(op, events)]
    )
    if not found:
        return op, None
    detail = "stored data differs from its audit chain: " + "; ".join(found)
    runner._stop(op, "INTEGRITY", detail, target=State.FAILED, problems=found)
    await runner._flush(op)
    return op, runner._outcome(op)
