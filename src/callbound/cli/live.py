"""``callbound run``: the refund demo's tools against a live provider.

``callbound run --api API --model M [--transport sdk|http] [--store URL] [--json] "prompt"`` runs the
demo tools (look up an order, draft a refund, submit it with approval) with a real model through a
live transport. The key comes from the provider's usual environment variable; when it is missing the
command names that variable and exits 2. Exit codes (D28): 0 on COMPLETED or WAITING_APPROVAL, 3 on
any other terminal state, 2 on a usage error or while another process that took the operation over still
runs it. The application is saved with the operation
(``callbound.cli.live:live_app``), so ``callbound resume`` continues it after an approval.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.text import Text

from ..core.errors import StaleLease, StoreError, UsageError
from ..runtime.app import App
from .errors import audit_key

APP_REF = "callbound.cli.live:live_app"
INSTRUCTIONS = (
    "You are a support agent for a shop. Use the tools to look up orders and to draft and submit "
    "refunds. Reply briefly."
)


def live_app(
    api: str,
    model: str,
    transport: str = "sdk",
    payments: str = "callbound-payments.db",
    stream: bool = False,
    base_url: str | None = None,
) -> App:
    """The live application (``callbound.cli.live:live_app``): the demo's tools on the happy path,
    with a model client for ``api`` over ``transport``.

    The key is checked when a request is made, not here: ``callbound approvals approve`` and
    ``deny`` rebuild this application only to record a decision, which never talks to the model, so
    any shell may decide without the provider's key. ``callbound run`` checks the key before it
    starts."""
    from ..core.guards import Budgets
    from ..demo.payments import FakePayments
    from ..demo.refund import build_registry
    from ..runtime.runner import Policy
    from ..transports import make_client

    return App(
        registry=build_registry(FakePayments(payments), "happy"),
        model=make_client(api, transport=transport, model=model, base_url=base_url, require_key=False),
        policy=Policy(revision="live-1"),
        budgets=Budgets(max_model_turns=8),
        settings={"model": model, "stream": stream},
        instructions=INSTRUCTIONS,
    )


def require_key(api: str) -> None:
    """Exit 2 before anything starts when ``api``'s key variable is not set (`run`, and `resume` of
    a live operation: the live app's client itself checks only at its first request)."""
    from ..transports import missing_key
    from .errors import fail as _fail

    missing = missing_key(api)
    if missing is not None:
        raise _fail(f"{api} needs an API key: the environment variable {missing} is not set")


def register(app: typer.Typer) -> None:
    """Add ``callbound run`` to the typer app."""

    @app.command("run")
    def run_cmd(
        prompt: Annotated[str, typer.Argument(help="What the customer asks, e.g. 'Refund order A1'.")],
        api: Annotated[
            str | None,
            typer.Option(
                "--api",
                help="openai-responses | openai-chat | anthropic-messages | gemini-generate | gemini-interactions",
            ),
        ] = None,
        model: Annotated[str | None, typer.Option("--model", help="Model name, e.g. gpt-4.1-mini.")] = None,
        app_ref: Annotated[
            str | None,
            typer.Option(
                "--app",
                help="module:factory returning a callbound App: run your own tools and model client "
                "instead of the refund tools (no --api/--model then)",
            ),
        ] = None,
        transport: Annotated[
            str, typer.Option("--transport", help="sdk (official SDK) | http (raw httpx)")
        ] = "sdk",
        stream: Annotated[bool, typer.Option("--stream", help="Stream model responses.")] = False,
        base_url: Annotated[
            str | None,
            typer.Option(
                "--base-url",
                help="Another server for the API (a proxy or a local test server): its root, the same "
                "for both transports (a trailing /v1 is accepted).",
            ),
        ] = None,
        tenant: Annotated[str, typer.Option(help="Tenant recorded with the operation.")] = "acme",
        subject: Annotated[
            str, typer.Option(help="Who asks; may not approve their own refund.")
        ] = "customer-1",
        as_json: Annotated[bool, typer.Option("--json", help="Print the outcome's fields as JSON.")] = False,
        store: Annotated[
            str,
            typer.Option(
                "--store", help="sqlite:///path.db (default ./callbound.db), postgresql://..., or memory:"
            ),
        ] = "sqlite:///callbound.db",
    ) -> None:
        """Run the refund tools against a live model (the key comes from the provider's env var)."""
        from ..adapters import API_NAMES
        from ..transports import TRANSPORTS
        from .app import _open, _payments_path
        from .errors import fail as _fail
        from .errors import out
        from .render import print_timeline_row, progress_printer, shown_store

        if app_ref is not None:
            if api is not None or model is not None or base_url is not None:
                # the App names its own model and API: these would be ignored without a word
                raise _fail(
                    "--app takes the model, API and server from the App; drop --api, --model and --base-url"
                )
            _run_app(app_ref, prompt, tenant, subject, as_json, store)
        if api is None or model is None:
            raise _fail("callbound run needs --api and --model (or --app module:factory)")
        if api not in API_NAMES:
            raise _fail(f"unknown API {api!r}; use one of {', '.join(API_NAMES)}")
        if transport not in TRANSPORTS:
            raise _fail(f"unknown transport {transport!r}; use one of {', '.join(TRANSPORTS)}")
        require_key(api)
        audit_key()  # the runner reads CALLBOUND_AUDIT_KEY: refused if it has no UTF-8 form
        model_name = model
        st = _open(store)
        args: dict[str, Any] = {
            "api": api,
            "model": model_name,
            "transport": transport,
            "payments": _payments_path(store),
            "stream": stream,
            "base_url": base_url,
        }
        try:
            live = live_app(**args)
            runner = live.runner(st, ref={"ref": APP_REF, "args": args})
        except UsageError as exc:
            raise _fail(str(exc)) from exc
        if not as_json:
            out.print(
                Text.assemble(
                    ("callbound run", "bold"),
                    f" api={api} model={model_name} transport={transport} store={shown_store(store)}",
                ),
                highlight=False,
            )
            runner.on_transition = lambda op_id, t: print_timeline_row(out, op_id, t)
            if stream:
                runner.on_progress = progress_printer(out)
        _drive(runner, prompt, tenant, subject, store, as_json)


def _run_app(app_ref: str, prompt: str, tenant: str, subject: str, as_json: bool, store: str) -> None:
    """`callbound run --app module:factory` (D21): one operation of the user's own App, saved with its
    reference so `resume`, `approvals approve` and workers rebuild the same runner."""
    from ..runtime.app import load_app
    from .app import _open
    from .errors import fail as _fail
    from .errors import out
    from .render import print_timeline_row, shown_store

    try:
        loaded = load_app(app_ref)  # first: a bad --app must not leave a new store behind
    except UsageError as exc:
        raise _fail(str(exc)) from exc
    audit_key()  # the runner reads it
    st = _open(store)
    try:
        runner = loaded.runner(st, ref={"ref": app_ref, "args": {}})
    except UsageError as exc:
        raise _fail(str(exc)) from exc
    if not as_json:
        out.print(
            Text.assemble(("callbound run", "bold"), f" app={app_ref} store={shown_store(store)}"),
            highlight=False,
        )
        runner.on_transition = lambda op_id, t: print_timeline_row(out, op_id, t)
    _drive(runner, prompt, tenant, subject, store, as_json)


def _drive(runner: Any, prompt: str, tenant: str, subject: str, store: str, as_json: bool) -> None:
    """Run one operation and report it. When another process takes it over meanwhile (`ops cancel`
    moves its fencing token, a worker claims it), this drive's next write fails with StaleLease: the
    operation is not lost, so its state as the store now holds it is reported, not a lease error."""
    from .errors import fail as _fail

    operation_id = runner.ids.new_id("op")
    try:
        outcome = runner.run_sync(input=prompt, tenant=tenant, subject=subject, operation_id=operation_id)
    except KeyboardInterrupt:  # say where it was left and how to go on (review round 16, r2 F5)
        from .errors import err
        from .lifecycle import interrupted
        from .render import store_flag

        raise interrupted(err, runner.store, operation_id, store_flag(store)) from None
    except StaleLease:
        from .render import store_flag

        outcome = taken_over(runner, operation_id, store_flag(store))
    except StoreError as exc:  # where the operation was left, and the resume (review round 18, d F3)
        from .lifecycle import store_failed
        from .render import store_flag

        raise _fail(
            store_failed(exc, runner.store, operation_id, store_flag(store), "callbound run")
        ) from exc
    except UsageError as exc:
        raise _fail(str(exc)) from exc
    _report(outcome, store, as_json)


def taken_over(runner: Any, operation_id: str, flag: str, app: str = "") -> Any:
    """The outcome of an operation another process took over while this one drove it (its write failed
    with StaleLease), as the store holds it now, with a note on stderr (``run`` and ``resume``). One
    that process has ended (``ops cancel``) or paused for approval is reported as such (exit 3 or 0,
    D28); one still in a running state is not an end state of any kind, so the command fails as a second
    driver does (``OperationBusy``, exit 2), saying who drives it and how to follow it. ``flag`` is the
    ``--store`` part of the commands to print, ``app`` the ``--app`` part of the resume that continues
    the operation once nobody drives it."""
    from ..core.states import TERMINAL
    from .errors import err
    from .errors import fail as _fail

    try:
        outcome = runner.outcome(operation_id)
    except (UsageError, StoreError) as exc:
        raise _fail(str(exc)) from exc
    if outcome.state != "WAITING_APPROVAL" and outcome.state not in TERMINAL:
        resume = f"callbound resume {operation_id}{app}{flag}"
        try:
            holder = runner.store.lease_holder(operation_id)
        except (AttributeError, StoreError):
            holder = None
        now = (
            f"{holder} drives it now; follow it with `callbound ops show {operation_id}{flag}`, and if that "
            f"process stops before it ends, `{resume}` continues it"
            if holder
            else f"no process holds it now: `{resume}` continues it"
        )
        raise _fail(
            f"operation {operation_id} was taken over by another process (a worker, or another resume) "
            f"while this one drove it and is still running ({outcome.state}); nothing is lost: {now}"
        )
    err.print(
        f"note: operation {operation_id} was taken over by another process (a cancel, or a worker) "
        f"while this one drove it; it is {outcome.state} now",
        highlight=False,
    )
    return outcome


def _report(outcome: Any, store: str, as_json: bool) -> None:
    """Print the outcome and exit as D28 says: 0 on COMPLETED or WAITING_APPROVAL, else 3."""
    from .errors import out
    from .render import print_outcome, print_waiting

    if outcome.state == "WAITING_APPROVAL":
        print_waiting(out, outcome, store, as_json, "run")
    elif as_json:
        out.print_json(json.dumps(outcome.to_dict(), default=str))
    else:
        print_outcome(out, outcome)
    raise typer.Exit(0 if outcome.state in ("COMPLETED", "WAITING_APPROVAL") else 3)
