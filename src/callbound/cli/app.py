"""``callbound`` commands. Exit codes (D28): 0 success (COMPLETED or WAITING_APPROVAL for run/resume;
the documented end state for demo), 1 audit tampering, 2 usage error or unreadable input, 3 any
other terminal state."""

from __future__ import annotations

import atexit
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from ..core.errors import CallboundError, StaleLease, StoreError, UsageError
from ..runtime.runner import Outcome
from .approvals import NO_APPROVER, approvals_app
from .consoles import adopt_typer_consoles, discard, finish_output, note_write_error, write_failure
from .errors import (
    MAX_LIMIT,
    CallboundGroup,
    audit_key,
    err,
    guard,
    in_memory,
    out,
    sqlite_busy_timeout,
    with_busy_timeout,
)
from .errors import fail as _fail
from .heads import SHOWN, at_most, check_loadable, damaged, fault, listed_heads, shown_row
from .ledger import ledger_app
from .lifecycle import interrupted, let_tool_handlers_finish, serve, store_failed
from .render import (
    DEFAULT_STORE,
    AppRefOpt,
    StoreOpt,
    print_outcome,
    print_table,
    print_timeline_row,
    print_waiting,
    progress_printer,
    shown_store,
    store_flag,
)

app = typer.Typer(
    cls=CallboundGroup, no_args_is_help=True, add_completion=False, help="Run LLM tool-calling loops safely."
)
demo_app = typer.Typer(no_args_is_help=True, help="Demonstrations driven by a scripted model.")
ops_app = typer.Typer(no_args_is_help=True, help="Inspect and cancel stored operations.")
audit_app = typer.Typer(no_args_is_help=True, help="Verify the audit chain and result bindings.")
app.add_typer(demo_app, name="demo")
app.add_typer(ops_app, name="ops")
app.add_typer(approvals_app, name="approvals")
app.add_typer(audit_app, name="audit")
app.add_typer(ledger_app, name="ledger")


def _open(url: str, *, create: bool = True, wanted: str | None = None) -> Any:
    """The store at ``url``. ``create=False`` for commands that only read or decide what is stored: a
    SQLite path that does not exist is a usage error (D28), not a new empty database that reads as "no
    approvals, audit intact". ``wanted`` (what the command looks for) leads the message."""
    from .. import stores

    try:
        # inside the try: the URL checks raise UsageError too (a sqlite: URL with ?mode=ro, a byte that
        # is not UTF-8), a traceback and exit 1 from the read-only commands (review round 14, h5 r4)
        missing = None if create else stores.missing_database(url) or in_memory(url, "to read")
        if missing is None:
            busy = sqlite_busy_timeout()  # first: a bad value must not leave a new store behind
            st = stores.open(url, create=create)  # refuses too, should the database go meanwhile
            return st if busy is None else with_busy_timeout(st, busy)
    except (UsageError, StoreError) as exc:
        raise _fail(str(exc)) from exc
    raise _fail(f"no {wanted} in this store: {missing}" if wanted else missing)


def _exit_code(outcome: Outcome) -> int:
    return 0 if outcome.state in ("COMPLETED", "WAITING_APPROVAL") else 3


def _runner_for(store: Any, operation_id: str, app_ref: str | None) -> Any:
    from ..runtime.app import load_app

    audit_key()  # the runner reads CALLBOUND_AUDIT_KEY: refused here if it has no UTF-8 form
    stored = store.load_operation(operation_id)
    if stored is None:
        raise _fail(f"no operation {operation_id!r} in this store")
    unloadable = check_loadable(stored, operation_id)  # a KeyError deep in the runtime otherwise (r2 F3)
    if unloadable is not None:
        raise _fail(unloadable)
    saved = stored.head.get("app") or {}
    ref = app_ref or saved.get("ref")
    if not ref:
        raise _fail(f"operation {operation_id} has no saved application; pass --app module:factory")
    args = saved.get("args") if not app_ref or app_ref == saved.get("ref") else None
    try:
        app_obj = load_app(ref, args)
    except UsageError as exc:  # what to do, not only what failed (review round 22, c)
        if app_ref:
            raise
        raise UsageError(
            f"{exc}; operation {operation_id} was saved with --app {ref}: make it importable here (the "
            "same PYTHONPATH, working directory or virtualenv), or pass --app module:factory naming an "
            "application with the same tools"
        ) from exc
    return app_obj.runner(store, ref={"ref": ref, "args": args or {}})


def _payments_path(store_url: str) -> str:
    from ..stores import sqlite_path

    path = sqlite_path(store_url)
    if path is not None and path != ":memory:":
        # Absolute: the path is saved with the operation, and a resume or a worker started from
        # another directory must reach the same payments file.
        p = Path(path).absolute()
        return str(p.with_name(p.stem + "-payments.db"))
    import tempfile

    return os.path.join(tempfile.mkdtemp(prefix="callbound-demo-"), "payments.db")


@demo_app.command("refund")
def demo_refund(
    scenario: Annotated[
        str,
        typer.Option(
            help="happy | max-tokens | unknown-tool | approval-expired | submit-timeout | repeated-call"
        ),
    ] = "happy",
    approve: Annotated[bool, typer.Option("--approve", help="Approve without asking.")] = False,
    deny: Annotated[bool, typer.Option("--deny", help="Deny without asking.")] = False,
    approver: Annotated[str, typer.Option(help="Name recorded as the approver.")] = "demo-approver",
    stream: Annotated[
        bool, typer.Option("--stream", help="Stream model responses and show progress.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome and history as JSON.")] = False,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Refund a broken kettle: look up, draft, submit (needs approval), explain."""
    from ..core.approvals import Decision
    from ..demo.refund import SCENARIOS, make_app

    if scenario not in SCENARIOS:
        raise _fail(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
    if approve and deny:
        raise _fail("--approve and --deny exclude each other")
    if not approver.strip():  # before the store: Decision refused it only after the pause was saved
        raise _fail(NO_APPROVER)
    audit_key()  # the runner reads it too
    st = _open(store)
    payments = _payments_path(store)
    if store.startswith("memory:"):
        # nothing outlives this process with an in-memory store: neither may its payments file
        atexit.register(shutil.rmtree, os.path.dirname(payments), True)
    args: dict[str, Any] = {"scenario": scenario, "payments": payments, "stream": stream}
    demo = make_app(scenario=scenario, payments=payments, stream=stream)
    runner = demo.runner(st, ref={"ref": "callbound.demo.refund:make_app", "args": args})
    quiet = as_json
    if not quiet:
        out.print(
            Text.assemble(
                ("callbound demo refund", "bold"), f" scenario={scenario} store={shown_store(store)}"
            )
        )
        runner.on_transition = lambda op_id, t: print_timeline_row(out, op_id, t)
        if stream:
            runner.on_progress = progress_printer(out)
    operation_id = runner.ids.new_id("op")  # known before the drive: a Ctrl-C message names it
    try:
        outcome = runner.run_sync(
            input="My kettle from order A1 arrived broken. Please refund it.",
            tenant="acme",
            subject="customer-1",
            operation_id=operation_id,
        )
        while outcome.state == "WAITING_APPROVAL":
            pending = outcome.pending_approvals
            now = runner.clock.now()
            if pending and all(a.expires_at <= now for a in pending):
                if not quiet:
                    out.print(Text("the approval expired before anyone decided; resuming", style="yellow"))
                outcome = runner.resume_sync(outcome.operation_id, [])
                continue
            decisions = []
            for a in pending:
                verdict = "approve" if approve else "deny" if deny else None
                # stdin closed (<&-) is None: no terminal, as the README says (review round 16, r2 F4)
                if verdict is None and sys.stdin is not None and sys.stdin.isatty():
                    out.print(
                        Text.assemble(
                            "approval ",
                            (a.approval_id, "bold"),
                            f": {a.tool}({json.dumps(a.arguments)}) digest {a.argument_digest[:12]}… "
                            f"expires {a.expires_at.isoformat()}",
                        )
                    )
                    try:
                        confirmed = typer.confirm("Approve this call?", default=False)
                    except (typer.Abort, EOFError, KeyboardInterrupt):
                        # no answer (end of input, Ctrl-C): the pause is saved, as without a terminal
                        out.print()
                        print_waiting(out, outcome, store, as_json, "demo")
                        raise typer.Exit(0) from None
                    verdict = "approve" if confirmed else "deny"
                if verdict is None:
                    print_waiting(out, outcome, store, as_json, "demo")
                    raise typer.Exit(0)
                decisions.append(
                    Decision.approve(a.approval_id, approver)
                    if verdict == "approve"
                    else Decision.deny(a.approval_id, approver, "denied in the demo")
                )
            outcome = runner.resume_sync(outcome.operation_id, decisions)
    except KeyboardInterrupt:
        raise interrupted(err, st, operation_id, store_flag(store)) from None
    except StoreError as exc:  # where the operation was left, and the resume (review round 18, d F3)
        raise _fail(store_failed(exc, st, operation_id, store_flag(store), "callbound demo refund")) from exc
    except UsageError as exc:
        raise _fail(str(exc)) from exc
    expected_state, expected_reason = SCENARIOS[scenario]
    refunds = demo.registry  # keep a reference alive for the payments summary below
    del refunds
    from ..demo.payments import FakePayments
    from ..demo.refund import refund_key

    count = FakePayments(payments).count(refund_key(outcome.operation_id))
    if as_json:
        data = outcome.to_dict()
        data["refunds_for_intent"] = count
        out.print_json(json.dumps(data, default=str))
    else:
        print_outcome(out, outcome)
        out.print(f"refunds recorded downstream for this intent: {count}")
    ok = outcome.state == expected_state and (expected_reason is None or outcome.reason == expected_reason)
    if not ok and not as_json:
        err.print(
            f"expected {expected_state} {expected_reason or ''}, got {outcome.state} {outcome.reason or ''}"
        )
    raise typer.Exit(0 if ok else 3)


def _require_live_key(runner: Any) -> None:
    """A live app's client checks its key only at its first request (so approvals need none); a
    resume fails before it runs anything instead, as `callbound run` does."""
    from .live import APP_REF, require_key

    saved = runner.app or {}
    api = (saved.get("args") or {}).get("api")
    if saved.get("ref") == APP_REF and isinstance(api, str):
        require_key(api)


@app.command("resume")
def resume_cmd(
    operation_id: str,
    app_ref: AppRefOpt = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Resume a stored operation (after approvals were decided, or after a crash)."""
    st = _open(store, create=False, wanted=f"operation {operation_id!r}")
    driving = False
    # the --app of the resume printed when this one stops: an operation saved without its application
    # is resumed with it again (review round 19, d F6)
    app = "" if app_ref is None else f" --app {shlex.quote(app_ref)}"
    try:
        runner = _runner_for(st, operation_id, app_ref)
        _require_live_key(runner)
        if not as_json:
            runner.on_transition = lambda op_id, t: print_timeline_row(out, op_id, t)
        driving = True
        outcome = runner.resume_sync(operation_id)
    except KeyboardInterrupt:
        raise interrupted(err, st, operation_id, app + store_flag(store)) from None
    except StaleLease:  # cancelled or claimed while this resume drove it: report what the store holds
        from .live import taken_over

        outcome = taken_over(runner, operation_id, store_flag(store), app)
    except StoreError as exc:  # mid-drive: where it was left, and the resume (review round 18, d F3)
        said = store_failed(exc, st, operation_id, store_flag(store), None, app) if driving else str(exc)
        raise _fail(said) from exc
    except UsageError as exc:
        raise _fail(str(exc)) from exc
    if as_json:
        out.print_json(json.dumps(outcome.to_dict(), default=str))
    else:
        print_outcome(out, outcome)
    raise typer.Exit(_exit_code(outcome))


@ops_app.command("list")
def ops_list(
    tenant: Annotated[str | None, typer.Option()] = None,
    state: Annotated[
        str | None, typer.Option(help="Only operations in this state, e.g. WAITING_APPROVAL.")
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, help="List at most this many (a note says if there are more).")
    ] = 50,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Operations, newest first."""
    from ..core.states import State

    if state is not None and state not in State.__members__:
        raise _fail(f"unknown state {state!r}; use one of {', '.join(State.__members__)}")
    st = _open(store, create=False)
    limit = min(limit, MAX_LIMIT)
    heads = at_most(listed_heads(st, tenant, state, limit + 1), limit, f"the newest {limit} operations")
    for h, why in heads:  # r2 F3: listed and marked, the others still listed
        if why is not None:
            err.print(
                Text.assemble(("warning:", "yellow"), f" {damaged(h.get('operation_id'), why)}"),
                highlight=False,
            )
    if as_json:
        fields = ("operation_id", "tenant", "subject", "state", "reason", "created_at", "updated_at")
        listed = [
            {k: h.get(k) for k in fields} | ({} if why is None else {"damaged": why}) for h, why in heads
        ]
        out.print_json(json.dumps(listed, default=str))
        return
    from rich.table import Table

    table = Table("operation", "tenant", "state", "reason", "created", "updated")
    for h, why in heads:
        r = shown_row(h, why)
        table.add_row(
            r["operation_id"],
            r["tenant"],
            r["state"],
            r.get("reason") or "",
            r["created_at"],
            r.get("updated_at") or "",
        )
    _print_table(table)


def _print_table(table: Any) -> None:  # cli/ledger.py imports it too
    print_table(out, table)


@ops_app.command("show")
def ops_show(
    operation_id: str,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """The timeline of one operation with all its ids."""
    st = _open(store, create=False, wanted=f"operation {operation_id!r}")
    stored = st.load_operation(operation_id)
    if stored is None:
        raise _fail(f"no operation {operation_id!r} in this store")
    transitions = [r.data for r in stored.journal if r.kind == "transition"]
    if as_json:
        out.print_json(json.dumps({"head": stored.head, "timeline": transitions}, default=str))
        return
    h = stored.head
    from datetime import datetime

    from ..core.types import Transition

    why = fault(h, SHOWN)
    try:
        timeline = [
            Transition(t["state"], datetime.fromisoformat(t["at"]), t["cause"], t.get("details", {}))
            for t in transitions
        ]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        why = why or f"a transition of its journal does not read ({type(exc).__name__}: {exc})"
    if why is not None:  # r2 F3: a KeyError traceback before; --json still prints it as stored
        raise _fail(f"{damaged(operation_id, why)}; ops show --json prints it as stored")
    out.print(
        Text.assemble(
            (operation_id, "bold"),
            f" tenant={h['tenant']} subject={h['subject']} api={h['api']} state={h['state']} "
            f"reason={h.get('reason')}",
        )
    )
    for t in timeline:
        print_timeline_row(out, operation_id, t)
    if h.get("escalation"):
        out.print(Text.assemble(("escalation:", "red"), f" {json.dumps(h['escalation'])}"))


@ops_app.command("cancel")
def ops_cancel(operation_id: str, app_ref: AppRefOpt = None, store: StoreOpt = DEFAULT_STORE) -> None:
    """End an operation STOPPED(CANCELLED); refused while a write handler runs."""
    import time

    st = _open(store, create=False, wanted=f"operation {operation_id!r}")
    started = time.monotonic()
    try:
        runner = _runner_for(st, operation_id, app_ref)
        outcome = runner.cancel(operation_id)
    except CallboundError as exc:
        waited = time.monotonic() - started
        # r2 F6: a cancel reads the operation again and retries its commit, so a locked store was
        # waited for more than once; the message says how long in all
        said = f"; ops cancel tried again on a fresh read, {waited:.0f} s in all" if waited >= 1.5 else ""
        raise _fail(f"{exc}{said}") from exc
    print_outcome(out, outcome)


@audit_app.command("verify")
def audit_verify(
    operation_id: Annotated[str | None, typer.Argument()] = None, store: StoreOpt = DEFAULT_STORE
) -> None:
    """Recompute every hash chain and binding; exit 1 naming the first bad row."""
    from ..runtime.verify import verify_store

    st = _open(store, create=False, wanted=None if operation_id is None else f"operation {operation_id!r}")
    if operation_id is not None:
        from ..stores.rows import UnreadableRow

        try:
            absent = st.load_operation(operation_id) is None and not st.audit_events(operation_id)
        except UnreadableRow:
            absent = False  # its rows are there but do not load: verify names them (exit 1, not 2)
        if absent:
            # nothing of it anywhere: a wrong id, not tampering (an operation row deleted under its chain is)
            raise _fail(f"no operation {operation_id!r} in this store")
    found = verify_store(st, operation_id, audit_key())
    problems = [p for p in found if not p.unreadable]
    # D19, D28: an operation a newer callbound wrote is unreadable input (exit 2), not tampering;
    # tampering found in another operation still decides the exit code (1)
    unreadable = [p for p in found if p.unreadable]
    if problems:
        p = problems[0]
        err.print(
            Text.assemble(("TAMPERED", "red"), f" operation {p.operation_id}, {p.where}: {p.why}"),
            highlight=False,
        )
        for q in problems[1:]:
            err.print(f"  also: operation {q.operation_id}, {q.where}: {q.why}", highlight=False)
    for q in unreadable:
        err.print(
            Text.assemble(("cannot verify", "yellow"), f" operation {q.operation_id}: {q.why}"),
            highlight=False,
        )
    if found:
        raise typer.Exit(1 if problems else 2)
    n = 1 if operation_id else len(st.list_operations(limit=1_000_000))
    out.print(f"audit verified: {n} operation(s), chains and bindings intact")


@app.command("parse")
def parse_cmd(
    api: Annotated[
        str,
        typer.Option(
            "--api",
            help="openai-responses | openai-chat | anthropic-messages | gemini-generate | gemini-interactions",
        ),
    ],
    file: Annotated[
        str, typer.Argument(help="A response body, SSE stream or JSON-lines file; - for stdin")
    ] = "-",
) -> None:
    """Print the normalised turn of a recorded response as one JSON object."""
    from .parse import parse_input

    if file == "-" and sys.stdin is None:  # closed (<&-), not empty (review round 16, r2 F4)
        raise _fail("cannot read standard input: it is closed; pipe the response in, or name its file")
    try:
        data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as exc:
        raise _fail(f"cannot read {file}: {exc.strerror}") from exc
    try:
        result = parse_input(api, data)
    except CallboundError as exc:
        raise _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
    text = json.dumps(result, ensure_ascii=False)
    # A lone surrogate escape in the response (text may hold one, as read) has no UTF-8 form: written as
    # the same JSON escape, the line stays JSON that loads back equal (issue 3 §5, D28: exit 0).
    try:
        sys.stdout.write(text.encode("utf-8", "backslashreplace").decode("utf-8") + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # the reader took what it wanted (| head -c): parsed, exit 0 (r2 F1)
        discard(sys.stdout)
    except OSError as exc:  # a full disk: reported by main(), exit 2 (cli/consoles.py)
        note_write_error("stdout", exc)
        discard(sys.stdout)


_WORKER_OPTIONS = {
    "lease_s": "--lease",
    "poll_s": "--poll",
    "idle_exit_s": "--idle-exit",
    "max_operations": "--max-operations",
}


@app.command("worker")
def worker_cmd(
    app_ref: Annotated[str, typer.Option("--app", help="module:factory returning a callbound App")],
    store: StoreOpt = DEFAULT_STORE,
    worker_id: Annotated[str | None, typer.Option("--id", help="Worker name (default host:pid)")] = None,
    lease: Annotated[float, typer.Option(help="Lease length in seconds (at most 86400, a day)")] = 30.0,
    poll: Annotated[float, typer.Option(help="Seconds between polls when idle")] = 0.2,
    max_operations: Annotated[
        int | None, typer.Option("--max-operations", help="Exit after driving this many operations")
    ] = None,
    idle_exit: Annotated[
        float | None, typer.Option("--idle-exit", help="Exit after this many idle seconds")
    ] = None,
) -> None:
    """Claim runnable operations from the store and drive them (D21)."""
    import logging

    from ..runtime.app import load_app
    from ..runtime.sync import run_blocking
    from ..runtime.worker import Worker, check_options

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    audit_key()  # each runner reads it too
    try:
        # first: a bad option or --app must not leave a new store behind (the checks Worker and run make)
        try:
            check_options(lease, poll, max_operations, idle_exit)
        except UsageError as exc:  # named as typed here, not as Worker's parameters (review round 19, d F5)
            said, _, rest = str(exc).partition(" ")
            raise _fail(f"{_WORKER_OPTIONS.get(said, said)} {rest}") from exc
        if empty := in_memory(store, "for a worker to claim (only what its own process submits)"):
            raise UsageError(empty)
        loaded = load_app(app_ref)
    except UsageError as exc:
        raise _fail(str(exc)) from exc
    st = _open(store)
    try:
        worker = Worker(
            loaded,
            st,
            app_ref={"ref": app_ref, "args": {}},
            worker_id=worker_id,
            lease_s=lease,
            poll_s=poll,
        )
        # not asyncio.run: it would wait for ever for an abandoned async handler that ignores cancels
        stats = run_blocking(serve(worker, err, max_operations, idle_exit), worker.runner.executor.grace_s)
    except (UsageError, StoreError) as exc:
        raise _fail(str(exc)) from exc
    out.print(
        f"worker {worker.worker_id}: claimed {stats.claimed}, finished {stats.finished}, paused "
        f"{stats.paused}, lost leases {stats.lost_lease}, errors {stats.errors}"
    )


from .live import register as _register_live  # noqa: E402

_register_live(app)
guard(app)  # every command checks its text arguments first (cli/errors.py)
adopt_typer_consoles()  # help and usage errors go quiet at a closed pipe too (cli/consoles.py)


def main() -> None:
    """The console script. Whatever the command ended with, the tool handlers still running get their
    grace period, and what is still buffered for stdout is flushed (a closed pipe discarded, not exit
    120). A Ctrl-C while waiting for them exits 130 at once, without a traceback (review round 16, r2 F5)."""
    # _finish inside each handler: the exception's frames keep the command's runner, and with it the
    # (weakly registered) executor of its handlers, alive while they are waited for
    try:
        app()
    except SystemExit as exc:
        code = _finish(exc.code)
    except KeyboardInterrupt:  # outside a command (typer turns one inside into exit 130 itself)
        code = _finish(130)
    except BaseException:
        _finish()
        raise
    else:
        code = _finish(0)
    raise SystemExit(code)


def _finish(code: int | str | None = None) -> int | str | None:
    try:
        let_tool_handlers_finish(err)
    except KeyboardInterrupt:
        err.print("interrupted again: exiting now, without waiting for the tool handlers", highlight=False)
        code = 130
    finish_output()
    failed = write_failure()
    if failed is not None:  # the output is lost or cut: never exit 0 for it (cli/consoles.py)
        err.print(Text.assemble(("error:", "red"), f" {failed}"), highlight=False)
        if code in (0, None):
            code = 2
    return code
