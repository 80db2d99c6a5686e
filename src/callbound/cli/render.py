"""Readable timeline rows and outcome summaries for the terminal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.text import Text

from ..core.types import ArgumentsProgress, CallReady, CallStarted, Progress, Transition
from ..runtime.runner import Outcome

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


_: Any = None
