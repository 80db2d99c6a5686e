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
offered, the budgets) is found before any handler runs or any request is sent. It also holds the
operation row's state, reason, escalation and text to the chain's last transition and escalation
(an edited state would revive a finished operation), the journal's transitions to the chain's, and
the chain's transitions to the table (D2); ``approval_problems`` holds approval rows to their
``approval_requested`` and ``approval_resolved`` entries. Turns are paired with the chain's in
order, never by response id: providers may repeat one in every turn. Without ``CALLBOUND_AUDIT_KEY`` a
writer who also recomputes the chain gets through (D20: naive edits only); with it, they do not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

from ..core.approvals import PendingApproval, seal_holds
from ..core.audit import AuditEntry, AuditEvent, audit_entries, items_digest, verify_chain
from ..core.binding import request_sha256, verify_binding
from ..core.canonical import sha256_hex
from ..core.errors import BindingMismatch, StaleLease, UsageError
from ..core.snapshot import envelope_from_dict
from ..core.states import INITIAL, TERMINAL, TRANSITIONS, State
from ..core.types import ModelTurn, Transition
from .operation import CallRecord, CurrentTurn, Operation
from .results import call_arguments_json, payload_digest, trusted_calls

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


@dataclass(slots=True)
class AuditedTurn:
    """One model turn as the chain records it, with the plan and results the chain holds for it.
    Turns are kept in order, not keyed by response id: a provider may repeat an id in every turn (an
    OpenAI-compatible server answering ``chatcmpl-1``), and only the order says which plan and which
    results belong to which turn."""

    response_id: Any
    raw_sha256: Any
    finish: Any
    plan: Any = None
    planned: bool = False
    # (response id, call id) -> binding: "sealed" and "result" entries, as a resume checks them
    bindings: dict[tuple[Any, Any], Any] = field(default_factory=dict)
    # (response id, call id) -> the "result" entry, as `audit verify` checks the journal's results
    results: dict[tuple[Any, Any], dict[str, Any]] = field(default_factory=dict)


@dataclass(slots=True)
class AuditedChain:
    """What a chain records, read once for all the checks below."""

    created: dict[str, Any] | None = None
    turns: list[AuditedTurn] = field(default_factory=list)
    stray_results: dict[tuple[Any, Any], dict[str, Any]] = field(default_factory=dict)  # before any turn
    transcripts: list[Any] = field(default_factory=list)
    transitions: list[AuditEntry] = field(default_factory=list)
    escalation: dict[str, Any] | None = None  # the last one: the one the operation ended with
    requested: dict[Any, dict[str, Any]] = field(default_factory=dict)  # approval id -> entry data
    resolved: dict[Any, dict[str, Any]] = field(default_factory=dict)

    @property
    def digests(self) -> bool:
        return self.created is not None and self.created.get("digests") == DIGESTS_VERSION


def read_chain(events: Sequence[AuditEvent]) -> AuditedChain:
    chain = AuditedChain()
    for ev in events:
        for e in audit_entries([ev]):
            _take(chain, e)
        if ev.kind != "commit":
            continue
        if "transcript" in ev.data:
            chain.transcripts.append(ev.data["transcript"])
        plan = ev.data.get("plan")
        if isinstance(plan, list) and len(plan) == 2:
            # the plan sits on the link of the commit holding its turn: the latest turn of that id
            for turn in reversed(chain.turns):
                if turn.response_id == plan[0]:
                    turn.plan, turn.planned = plan[1], True
                    break
    return chain


def _take(chain: AuditedChain, e: AuditEntry) -> None:
    d, kind = e.data, e.kind
    if kind == "created" and chain.created is None:
        chain.created = d
    elif kind == "model_turn":
        chain.turns.append(AuditedTurn(d.get("response_id"), d.get("raw_sha256"), d.get("finish")))
    elif kind in ("sealed", "result"):
        key = (d.get("response_id"), d.get("call_id"))
        turn = chain.turns[-1] if chain.turns else None
        if turn is not None:
            turn.bindings[key] = d.get("call_binding_sha256")
        if kind == "result":
            (turn.results if turn is not None else chain.stray_results)[key] = d
    elif kind == "transition":
        chain.transitions.append(e)
    elif kind == "escalation":
        chain.escalation = d
    elif kind == "approval_requested":
        chain.requested[d.get("approval_id")] = d
    elif kind == "approval_resolved":
        chain.resolved[d.get("approval_id")] = d


def problems(op: Operation, chain: AuditedChain, turns: Sequence[ModelTurn] | None = None) -> list[Problem]:
    """Where the operation differs from what its audit chain records. ``turns``: every stored model
    turn in journal order (``audit verify`` passes them; a resume checks the turn under work only)."""
    if not chain.digests:
        return []  # saved before these entries existed: the chain is all there is to check
    assert chain.created is not None
    out: list[Problem] = []
    out += _created_problems(op, chain.created)
    out += _items_problems(op.transcript, chain.transcripts)
    out += _head_problems(op, chain, turns)
    out += _history_problems(op.machine.history, chain.transitions)
    out += _table_problems(chain.transitions)
    if op.current is not None:
        out += _current_problems(op.current, chain.turns[-1] if chain.turns else None)
    last = op.last_turn  # previous_response_id continues from it
    if last is not None:
        continued = [t for t in chain.turns if t.finish in ("TOOL_PROPOSALS", "CONTINUE")]
        audited = continued[-1] if continued else None
        if audited is None or (audited.response_id, audited.raw_sha256) != (
            last.response_id,
            last.raw_sha256,
        ):
            out.append(Problem(f"model turn {last.response_id}", "differs from the audited model turn"))
    for turn, audited in zip(turns or (), chain.turns, strict=False):
        # a turn paired with another (an id or raw digest differs) is named by `audit verify` itself
        paired = audited.planned and audited.response_id == turn.response_id
        if paired and _turn_plan_digest(turn) != audited.plan:
            where = f"model turn {turn.response_id}"
            out.append(Problem(where, "its calls (tool or arguments) differ from the audited plan"))
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


def _head_problems(op: Operation, chain: AuditedChain, turns: Sequence[ModelTurn] | None) -> list[Problem]:
    """The operation row's state, reason, escalation and text against what the chain says they are:
    the state its last transition moved to, that move's reason (set by every terminal move, by
    nothing else), the escalation it ended with, and the text of the turn that ended it. An edited
    state would otherwise revive a finished operation, or report a success it never had."""
    out = []
    last = chain.transitions[-1].data if chain.transitions else None
    state = INITIAL.value if last is None else last.get("state")
    if op.state.value != state:
        out.append(Problem("operation", f"its state {op.state.value} differs from the audited one ({state})"))
    ended = isinstance(state, str) and state in TERMINAL
    reason = last.get("reason") if last is not None and ended else None
    if op.reason != reason:
        out.append(
            Problem("operation", f"its reason {op.reason!r} differs from the audited one ({reason!r})")
        )
    if items_digest([op.escalation]) != items_digest([chain.escalation]):
        out.append(Problem("operation", "its escalation record differs from the audited one"))
    text: Any = None
    refusal: Any = None
    if ended and last is not None and "response_id" in last:
        # ended by a model turn (a final text, a refusal, a truncation, a failure): the runtime
        # copies that turn's text; a stop (a guard, a cancel) copies none
        if turns is None or not turns:
            return out  # not loaded: a resume never gets here, it refuses a finished operation
        turn = turns[-1]
        text = turn.text if state == State.COMPLETED else (turn.text or None)
        refusal = None if state == State.COMPLETED else turn.refusal
    if op.text != text:
        what = "final text" if state == State.COMPLETED else "text"
        out.append(Problem("operation", f"its {what} differs from the last model turn's"))
    if op.refusal != refusal:
        out.append(Problem("operation", "its refusal differs from the last model turn's"))
    return out


def _history_problems(history: Sequence[Transition], audited: Sequence[AuditEntry]) -> list[Problem]:
    """The journal's transitions (``Outcome.history``) against the chain's, in order. The first is the
    creation, which the chain records as ``created``. Only the first difference is named: a row
    deleted or added shifts every later one."""
    first = history[0] if history else None
    if first is None or (first.state, first.cause) != (INITIAL.value, "created"):
        return [Problem("transition 0", "the journal does not start with the operation's creation")]
    for n, (t, e) in enumerate(zip_longest(history[1:], audited), start=1):
        if t is None:
            assert e is not None
            return [
                Problem(f"transition {n} ({e.data.get('state')})", "audited but missing from the journal")
            ]
        where = f"transition {n} ({t.state})"
        if e is None:
            return [Problem(where, "in the journal but not in the audit chain (added)")]
        details = {k: v for k, v in e.data.items() if k not in ("state", "cause")}
        if (
            (e.data.get("state"), e.data.get("cause")) != (t.state, t.cause)
            or not _same_time(e.at, t.at)
            or items_digest([details]) != items_digest([t.details])
        ):
            counts = (len(history) - 1, len(audited))
            more = (
                "" if counts[0] == counts[1] else " (the journal holds {} after the creation, the chain {})"
            )
            return [Problem(where, "differs from the audited transition" + more.format(*counts))]
    return []


def _same_time(iso: str, at: datetime) -> bool:
    return _time(iso) == at


def _time(iso: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(iso) if isinstance(iso, str) else None
    except ValueError:
        return None


def _table_problems(audited: Sequence[AuditEntry]) -> list[Problem]:
    """D2: the chain's own moves follow the transition table. A move out of a finished state means
    the operation was driven on after it ended (its row revived by an edit)."""
    out: list[Problem] = []
    prev = INITIAL
    for e in audited:
        raw = e.data.get("state")
        target = State._value2member_map_.get(raw) if isinstance(raw, str) else None
        if not isinstance(target, State):
            return [*out, Problem(f"audit seq {e.seq}", f"records a move to {raw!r}, which is no state")]
        if target not in TRANSITIONS[prev]:
            why = (
                f"records the move {prev.value} -> {target.value}, which the transition table does not allow"
            )
            out.append(Problem(f"audit seq {e.seq}", why))
        prev = target
    return out


def approval_problems(
    chain: AuditedChain,
    approvals: Iterable[PendingApproval],
    *,
    before_run: bool = False,
    key: bytes | None = None,
) -> list[Problem]:
    """Approval rows against the chain: the call, digest and expiry asked for (``approval_requested``)
    and, once a resume acted on it, the decision (``approval_resolved``). A decision recorded since
    the last resume is not in the chain yet: nothing vouches for it until a resume audits it.

    ``before_run``: a resume holds the expiry only to not being later than audited. A later one would
    let a decision made after the real expiry run the call (D17); an earlier one only withholds it,
    as the resume's own re-validation does for an edited digest (APPROVAL_STALE).

    ``key``: the runner's ``CALLBOUND_AUDIT_KEY``. A decision the chain does not hold yet must carry
    the seal of what it says (``core.approvals.decision_seal``) where its request was audited as
    sealed: a row whose status was edited to "approved" in the database was acted on, and the resume
    wrote the forged decision into the chain (review round 17, r3 F1)."""
    if not chain.digests:
        return []
    out = []
    for a in approvals:
        where = f"approval {a.approval_id}"
        asked = chain.requested.get(a.approval_id)
        if asked is None:
            out.append(Problem(where, "in the store but not in the audit chain (added)"))
            continue
        if (asked.get("call_id"), asked.get("tool"), asked.get("argument_digest")) != (
            a.call_id,
            a.tool,
            a.argument_digest,
        ):
            out.append(Problem(where, "its call, tool or argument digest differs from the audited request"))
        shown = asked.get("shown_sha256")  # absent from requests audited before it was recorded
        if shown is not None and shown != payload_digest(a.arguments):
            out.append(Problem(where, "the arguments it shows the approver differ from the audited request"))
        expires = _time(asked.get("expires_at"))
        if expires is None or (a.expires_at > expires if before_run else a.expires_at != expires):
            out.append(Problem(where, "its expiry differs from the audited request"))
        decided = chain.resolved.get(a.approval_id)
        if decided is None:
            if a.status in ("approved", "denied") and asked.get("sealed_decision") and not seal_holds(a, key):
                out.append(Problem(where, "its decision was not recorded by callbound (no valid seal)"))
            continue
        said = decided.get("status")
        # undecided when a resume resolved it on expiry: withdrawn in that same commit
        if a.status != ("withdrawn" if said == "pending" else said):
            out.append(Problem(where, f"its status {a.status} differs from the audited decision ({said})"))
        elif said != "pending" and a.approver != decided.get("approver"):
            out.append(Problem(where, "its approver differs from the audited decision"))
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


def _current_problems(current: CurrentTurn, audited: AuditedTurn | None) -> list[Problem]:
    """The turn under work is the chain's last model turn: nothing asks the model again before its
    results are sent."""
    turn = current.turn
    where = f"turn under work {turn.response_id}"
    if audited is None or (audited.response_id, audited.raw_sha256) != (turn.response_id, turn.raw_sha256):
        return [Problem(where, "differs from the audited model turn")]
    if not audited.planned:
        return [Problem(where, "no audited plan holds its calls")]
    if audited.plan != plan_digest(current.records) or audited.plan != _turn_plan_digest(turn):
        return [Problem(where, "its calls (tool or arguments) differ from the audited plan")]
    out: list[Problem] = []
    for rec in current.records:
        if rec.envelope is None:
            continue
        binding = rec.envelope.get("protected_audit", {}).get("call_binding_sha256")
        if audited.bindings.get((rec.response_id, rec.call_id)) != binding:
            out.append(
                Problem(
                    f"result {rec.call_id} (response {rec.response_id})",
                    "a saved result that the audit chain does not record",
                )
            )
    return out


def resume_problems(runner: Runner, op: Operation, events: Sequence[AuditEvent]) -> list[Problem]:
    """What a resume checks: the operation, and the approvals of its turn under work (their expiry
    decides whether an approved call runs)."""
    chain = read_chain(events)
    out = problems(op, chain)
    if op.current is not None:
        out += saved_result_problems(runner, op)
    if op.current is not None and chain.digests:
        # every approval row of the operation, not only those its records name: a row added for a
        # call of the turn under work is a difference like any other (r3 F4)
        asked = runner.store.list_approvals(operation_id=op.operation_id, status=None, limit=1_000_000)
        out += approval_problems(chain, asked, before_run=True, key=runner.audit_key)
    return out


# What a saved result's audit record (protected_audit) copies from the trusted context it was bound
# under (core.binding.make_envelope), beside the binding itself.
# CONTEXT_COPIES are those ``audit verify`` holds to the call as stored (it has no registry or ledger
# at hand; it recomputes the binding with the rest as the record says them).
CONTEXT_COPIES = (
    "provider",
    "api",
    "adapter_revision",
    "response_id",
    "call_id",
    "operation_id",
    "tenant",
    "subject",
    "tool",
)
_BOUND_COPIES = (
    *CONTEXT_COPIES,
    "idempotency_key",
    "handler",
    "schema_version",
    "policy_revision",
    "effect",
    "producer",
)


def saved_result_problems(runner: Runner, op: Operation) -> list[Problem]:
    """Results of the turn under work saved before a pause (reads of a mixed turn whose write waits
    for approval), each recomputed from trusted context as RESULTS_READY will (D10), before a decision
    is recorded or a handler runs. ``_current_problems`` holds the stored binding to the chain's
    ``sealed`` entry, but a result edited with its binding left alone passed that: the approved write
    ran, and only then did RESULTS_READY end the operation FAILED(INTEGRITY) (review round 17, r2 F1).
    The record's copies of its trusted context (tenant, handler, policy revision, ...) go into the
    chain's ``result`` entry at C2, so an edit of them is found here too (r2 F4)."""
    assert op.current is not None
    trusted = trusted_calls(runner, op)
    out: list[Problem] = []
    for rec in op.current.records:
        if rec.envelope is None:
            continue
        where = f"result {rec.call_id} (response {rec.response_id})"
        tc = trusted.get((rec.response_id, rec.call_id))
        try:
            envelope = envelope_from_dict(rec.envelope)
            if tc is None:
                raise BindingMismatch("no call of the turn under work proposed it")
            verify_binding(envelope, tc)
        except (BindingMismatch, KeyError, TypeError, ValueError, AttributeError) as exc:
            why = exc if isinstance(exc, BindingMismatch) else f"cannot be read ({type(exc).__name__})"
            out.append(Problem(where, f"a saved result that differs from what it was bound to: {why}"))
            continue
        p = envelope.protected_audit
        copied = [n for n in _BOUND_COPIES if p.get(n) != getattr(tc, n)]
        if p.get("request_sha256") != request_sha256(tc.arguments_json):
            copied.append("request_sha256")
        if copied:
            out.append(
                Problem(where, "its audit record differs from the trusted context: " + ", ".join(copied))
            )
    return out


def refuse_finished(operation_id: str, state: object) -> None:
    """``UsageError`` for a finished operation: there is nothing to drive. ``resume`` asks before it
    takes the lease, so a refused resume writes nothing (taking a lease moves the fencing token)."""
    if isinstance(state, str) and state in TERMINAL:
        raise UsageError(f"operation {operation_id} is {state}; a finished operation cannot be resumed")


def refuse_if_finished(store: Any, operation_id: str) -> None:
    """``refuse_finished`` on the stored operation, if there is one (a missing one is reported later)."""
    stored = store.load_operation(operation_id)
    if stored is not None:
        refuse_finished(operation_id, stored.head.get("state"))


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
    refuse_finished(operation_id, op.state.value)
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
        else [f"{p.where}: {p.why}" for p in resume_problems(runner, op, events)]
    )
    if not found:
        if op.api != runner.adapter.api:
            # Its transcript holds another API's items: the next request could not be built, and only
            # after the approved calls had run (an irreversible one paid, then a 400). Nothing is written.
            raise UsageError(
                f"operation {operation_id} was created for {op.api}, and this runner's model client speaks "
                f"{runner.adapter.api}: resume it with a runner (or --app) for {op.api}"
            )
        return op, None
    detail = "stored data differs from its audit chain: " + "; ".join(found)
    runner._stop(op, "INTEGRITY", detail, target=State.FAILED, problems=found)
    await runner._flush(op)
    return op, runner._outcome(op)
