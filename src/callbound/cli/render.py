"""Readable timeline rows and outcome summaries for the terminal."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from ..core.types import ArgumentsProgress, CallReady, CallStarted, Progress, Transition
from ..runtime.runner import Outcome
from ..stores.dsn import shown_url
from .consoles import CliConsole

COLOURS = {
    "COMPLETED": "green",
    "WAITING_APPROVAL": "yellow",
    "STOPPED": "red",
    "FAILED": "red",
    "REFUSED": "red",
    "INCOMPLETE": "red",
    "RETRY": "yellow",
}


# Control characters of model-supplied strings (ids, text) would reach the terminal raw: a newline in a
# call id printed a forged timeline row, ESC sequences cleared the screen or hid text. They are shown
# as escapes instead; a text keeps its newlines and tabs (an answer has lines), an id keeps nothing.
_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)]}
_TEXT_CONTROLS = {c: e for c, e in _CONTROLS.items() if c not in (0x09, 0x0A)}


def shown(value: object) -> str:
    """An id or other one-line value as printable text."""
    return str(value).translate(_CONTROLS)


def shown_text(value: object) -> str:
    """Model text as printable text, its line breaks and tabs kept."""
    return str(value).translate(_TEXT_CONTROLS)


def print_timeline_row(console: Console, operation_id: str, t: Transition) -> None:
    colour = COLOURS.get(t.state, "cyan")
    ids = []
    for key in ("response_id", "call_ids", "approval_ids", "idempotency_keys", "reason", "raw_stop_reason"):
        value = t.details.get(key)
        if value:
            ids.append(shown(f"{key}={','.join(map(str, value)) if isinstance(value, list) else value}"))
    console.print(
        Text.assemble(
            f"{t.at.strftime('%H:%M:%S.%f')[:-3]} ",
            (operation_id, "dim"),
            " ",
            (f"{t.state:<16}", colour),
            f" {t.cause:<18} {' '.join(ids)}",
        ),
        highlight=False,
    )


def print_outcome(console: Console, o: Outcome) -> None:
    colour = COLOURS.get(o.state, "cyan")
    console.print(
        Text.assemble(
            "\n",
            (str(o.state), f"bold {colour}"),
            (f" ({o.reason})" if o.reason else "") + f"  operation {o.operation_id}",
        ),
        highlight=False,
    )
    if o.text:
        console.print(f"model: {shown_text(o.text)}", highlight=False)
    if o.refusal:
        console.print(f"refusal: {shown_text(o.refusal)}", highlight=False)
    for a in o.pending_approvals:
        console.print(
            f"pending approval {a.approval_id}: {a.tool} digest={a.argument_digest[:16]}… "
            f"policy={a.policy_revision} expires={a.expires_at.isoformat()}",
            highlight=False,
        )
    if o.escalation:
        console.print(
            f"escalation: {o.escalation.get('reason')}: {o.escalation.get('detail')}", highlight=False
        )
    u = o.usage
    console.print(f"usage: input={u.input_tokens} output={u.output_tokens}", highlight=False)


def progress_printer(console: Console) -> Callable[[str, Progress], None]:
    names: dict[str, str] = {}

    def show(operation_id: str, ev: Progress) -> None:
        if isinstance(ev, CallStarted):
            names[ev.call_id] = ev.name
            console.print(
                f"  model is preparing call {shown(ev.name)} ({shown(ev.call_id)})", highlight=False
            )
        elif isinstance(ev, ArgumentsProgress):
            console.print(
                f"  model is preparing call {shown(names.get(ev.call_id, ev.call_id))} ({ev.bytes} bytes)",
                highlight=False,
            )
        elif isinstance(ev, CallReady):
            console.print(
                f"  call {shown(names.get(ev.call_id, ev.call_id))} is fully received (not run yet)",
                highlight=False,
            )

    return show


DEFAULT_STORE = "sqlite:///callbound.db"
# The options several commands share (app.py, approvals.py).
StoreOpt = Annotated[
    str,
    typer.Option("--store", help="sqlite:///path.db (default ./callbound.db), postgresql://..., or memory:"),
]
AppRefOpt = Annotated[str | None, typer.Option("--app", help="module:factory (default: the one saved)")]


def shown_store(store: str) -> str:
    """A ``--store`` URL as callbound prints it (banners, the commands it suggests): a SQLite file by its
    absolute path, so a command copied into a shell in another directory opens the same file (review
    round 22, c: ``sqlite:///callbound.db`` from /tmp opened /tmp/callbound.db, which does not exist,
    or worse, another store); a PostgreSQL URL with its password shown as ``***`` (stores/dsn.py: what
    callbound prints ends up in terminals' scrollback and CI logs, review round 19, d F2); any other URL
    (``memory:``) as given."""
    from ..core.errors import UsageError
    from ..stores import sqlite_path

    try:
        path = sqlite_path(store or DEFAULT_STORE)
    except UsageError:  # not a URL any store opens: shown as given (its own error says why)
        path = None
    if path is None or path == ":memory:":
        return shown_url(store)
    return f"sqlite:///{os.path.abspath(path)}"


def store_flag(store: str) -> str:
    """The ``--store`` part of a command to print, the default store included: a suggested command must
    work from any directory (``shown_store``)."""
    return f" --store {shlex.quote(shown_store(store))}"


def password_note(store: str) -> str:
    """A line to print below commands whose ``--store`` had its password hidden, else ''."""
    if shown_url(store) == store:
        return ""
    return "(the store URL's password is shown as ***: put it back, or leave it out and set PGPASSWORD)"


def resume_command(operation_id: str, store: str, app_ref: str | None) -> str:
    """The resume command for an operation. ``app_ref`` is the ``--app`` it needs: given for an
    operation saved without that application (D21), or it would fail with "no saved application"."""
    app = "" if app_ref is None else f" --app {shlex.quote(app_ref)}"
    return f"callbound resume {operation_id}{app}{store_flag(store)}"


def resume_hint(operation_id: str, store: str, app_ref: str | None) -> str:
    """The resume command to print after a decision (``resume_command``), with the password note."""
    note = password_note(store)
    return f"resume with: {resume_command(operation_id, store, app_ref)}" + (f"\n{note}" if note else "")


def print_waiting(console: Console, outcome: Outcome, store: str, as_json: bool, command: str) -> None:
    """An operation paused for approval, and what to do next with the options ``command`` (``demo`` or
    ``run``) really has: only the demo decides with --approve/--deny (D28)."""
    if as_json:
        console.print_json(json.dumps(outcome.to_dict(), default=str))
        return
    print_outcome(console, outcome)
    if store.startswith("memory:"):
        # No approve/resume commands "from any shell": an in-memory operation dies with this process.
        if command == "demo":
            console.print(
                "\nWaiting for approval in the in-memory store, which is gone when this process exits: "
                "pass --approve or --deny, or --store sqlite:///callbound.db to continue from another shell."
            )
        else:
            console.print(
                "\nWaiting for approval in the in-memory store: the operation is lost when this process "
                f"exits. To approve it from another shell, {command} it again with a durable store, e.g. "
                "--store sqlite:///callbound.db."
            )
        return
    flag = store_flag(store)
    console.print("\nSaved and waiting for approval. From any shell:")
    for a in outcome.pending_approvals:
        console.print(f"  callbound approvals approve {a.approval_id} --approver alice{flag}")
    console.print(f"  callbound resume {outcome.operation_id}{flag}")
    if note := password_note(store):
        console.print(note)


def print_table(console: Console, table: Any) -> None:
    """Ids are what the next command takes: printed whole, also when the output is not a terminal (rich
    would fit the table to 80 columns and cut them)."""
    for column in table.columns[:2]:
        column.no_wrap = True
        column.overflow = "fold"
    if console.is_terminal:
        console.print(table)
    else:
        wide = CliConsole(width=10_000, soft_wrap=True, markup=False)
        wide.print(table)
        if wide.broken_pipe:  # the reader went away: the command's own console says nothing more either
            console.quiet = True
