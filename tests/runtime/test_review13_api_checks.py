"""Misuse of the public API is a UsageError where it is made, before anything is stored (D4); what a
handler or hook hands back never stops the loop with an exception.

Found by a reviewer (round 13):
- ``settle_intent(applied="no")`` was read by its truth and recorded an unknown refund SUCCEEDED (never
  made); ``by=5`` or ``now="2026"`` raised AttributeError, ``result="x"`` was replayed as the result;
- a ``redact`` hook returning a Decimal, NaN or a set left a paid write without its stored result
  (StoreError out of run, then STOPPED(OUTCOME_UNKNOWN) on resume);
- a ToolError / NotApplied text with a lone surrogate raised CanonicalizationError out of run (a read
  re-ran its handler on every resume);
- a decision's reason (``reason=5``, or a Latin-1 byte from the shell) was recorded, then every resume
  raised: the approval is single use, so the operation was stuck in WAITING_APPROVAL;
- ToolSpec, make_client, Registry, stores.open and App took arguments of any type, failing later with
  TypeError, AttributeError, or only after a paid model turn.

Bodies are synthetic, in the Responses shape of the reviewer's scripts (``tests/runtime/helpers.py``).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
import callbound.stores
from callbound.core.approvals import Decision
from callbound.core.idempotency import LedgerStatus
from callbound.runtime.app import App, load_app
from callbound.runtime.settle import settle_intent
from callbound.stores.memory import MemoryStore
from callbound.transports import make_client

from .helpers import (
    Counter,
    OrderArgs,
    calls,
    error_code,
    fc,
    final,
    get_order_tool,
    last_outputs,
    make,
    refund_tool,
    write_tool,
)

LONE = b"report-\xe9t\xe9.pdf".decode("utf-8", "surrogateescape")  # os.listdir's Latin-1 file name
KEY = "ik_note:A1"


def _script(tool: str = "set_note", args: dict[str, Any] | None = None) -> list[Any]:
    return [calls("r1", fc("c1", tool, args or {"order_id": "A1"})), final("r2"), final("r3")]


# ---- 1. settle_intent checks its arguments before anything is written --------------------------------


def _unknown_entry() -> Any:
    """A write whose outcome nobody could tell: the ledger holds KEY as UNKNOWN, its operation ended."""

    def boom(args: OrderArgs, ctx: cb.CallContext) -> Any:
        raise RuntimeError("gateway timeout")

    tool = write_tool(handler=boom, intent_key=lambda a, c: f"note:{a.order_id}")
    h = make(_script(), [tool])
    out = h.runner.run_sync("note A1", "acme", "u")
    assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    entry = h.store.ledger_get("acme", KEY)
    assert entry is not None and entry.status is LedgerStatus.UNKNOWN
    return h


@pytest.mark.parametrize("applied", ["no", "yes", None, 1, 0])
def test_settle_applied_must_be_a_bool_and_nothing_is_written(applied: Any) -> None:
    h = _unknown_entry()
    with pytest.raises(cb.UsageError, match="applied must be True"):
        settle_intent(h.store, "acme", KEY, applied=applied, by="alice", now=h.clock.now())
    entry = h.store.ledger_get("acme", KEY)
    assert entry is not None and entry.status is LedgerStatus.UNKNOWN and entry.settled is None


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"by": 5}, "by must be text"),
        ({"by": None}, "by must be text"),
        ({"note": 5}, "note must be text"),
        ({"by": "Ren" + LONE}, "lone surrogate"),
        ({"note": "checked " + LONE}, "lone surrogate"),
        ({"now": "2026-01-01T00:00:00+00:00"}, "now must be a timezone-aware datetime"),
        ({"now": 1767225600}, "now must be a timezone-aware datetime"),
        ({"result": "x"}, "JSON object"),
        ({"result": [1]}, "JSON object"),
    ],
)
def test_settle_arguments_of_the_wrong_type_are_refused(kw: dict[str, Any], match: str) -> None:
    h = _unknown_entry()
    args: dict[str, Any] = {"applied": True, "by": "alice", "note": "", "now": h.clock.now(), **kw}
    with pytest.raises(cb.UsageError, match=match):
        settle_intent(h.store, "acme", KEY, **args)
    entry = h.store.ledger_get("acme", KEY)
    assert entry is not None and entry.status is LedgerStatus.UNKNOWN and entry.settled is None


def test_settle_with_the_right_types_still_settles() -> None:
    h = _unknown_entry()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    settled = settle_intent(h.store, "acme", KEY, applied=False, by="alice", note="no such note", now=now)
    assert settled.status is LedgerStatus.FAILED


# ---- 2. a redact hook's answer is checked like a handler's result ------------------------------------


@pytest.mark.parametrize(
    "redacted",
    [
        {"order_id": Decimal("40.00")},
        {"order_id": math.nan},
        {"order_id": {"A1"}},
        {"order_id": "A1 " + LONE},
        {1: "A1"},
    ],
    ids=["decimal", "nan", "set", "lone-surrogate", "int-key"],
)
@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_redaction_that_is_not_json_stores_the_placeholder_and_the_write_completes(
    redacted: Any, backend: str, tmp_path: Path
) -> None:
    store = MemoryStore() if backend == "memory" else callbound.stores.open(f"sqlite:///{tmp_path}/cb.db")
    counter = Counter()
    tool = write_tool(counter, redact=lambda args: redacted)
    h = make(_script(), [tool], store=store)  # type: ignore[arg-type]
    out = h.runner.run_sync("note A1", "acme", "u", operation_id="op_1")
    assert out.state == cb.State.COMPLETED, out.reason
    assert counter.n == 1  # the handler ran once, and its result is stored
    assert [e.status for e in store.ledger_list()] == [LedgerStatus.SUCCEEDED]
    stored = store.load_operation("op_1")
    assert stored is not None
    (env,) = [e for row in stored.journal if row.kind == "results" for e in row.data["envelopes"]]
    assert env["protected_audit"]["input"] == "[redaction failed]"


def test_a_redaction_that_is_not_json_is_the_placeholder_shown_to_approvers() -> None:
    tool = refund_tool(redact=lambda args: {**args, "amount": Decimal(str(args["amount"]))})
    h = make(_script("refund", {"order_id": "A1", "amount": 40.0}), [tool])
    out = h.runner.run_sync("refund A1", "acme", "u")
    assert out.state == cb.State.WAITING_APPROVAL
    assert out.pending_approvals[0].arguments == "[redaction failed]"


def test_a_json_redaction_is_kept_as_plain_json_data() -> None:
    tool = write_tool(redact=lambda args: {"order_id": "A*", "seen": ("x", 1.5)})
    assert tool.redacted({"order_id": "A1"}) == {"order_id": "A*", "seen": ["x", 1.5]}


# ---- 3. a handler's error text with a lone surrogate reaches the model -------------------------------


def _sync_raiser(exc: Exception) -> Any:
    def handler(args: OrderArgs, ctx: cb.CallContext) -> Any:
        raise exc

    return handler


def _async_raiser(exc: Exception) -> Any:
    async def handler(args: OrderArgs, ctx: cb.CallContext) -> Any:
        raise exc

    return handler


@pytest.mark.parametrize("wrap", [_sync_raiser, _async_raiser], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("risk", "exc"),
    [("read", cb.ToolError(f"cannot open {LONE}")), ("write", cb.NotApplied(f"declined for {LONE}"))],
    ids=["read-toolerror", "write-notapplied"],
)
def test_an_error_text_with_a_lone_surrogate_is_sent_escaped(risk: str, exc: Exception, wrap: Any) -> None:
    tool = get_order_tool(handler=wrap(exc), risk=risk)
    h = make(_script("get_order"), [tool])
    out = h.runner.run_sync("open it", "acme", "u")
    assert out.state == cb.State.COMPLETED, out.reason
    result = last_outputs(h.model)["c1"]
    assert error_code(result) == "HANDLER_ERROR"
    assert "report-\\udce9t\\udce9.pdf" in result["error"]["message"]
    if risk == "write":
        (entry,) = h.store.ledger_list()
        assert entry.status is LedgerStatus.FAILED  # NotApplied: definitely not applied (D16)


def test_an_error_text_that_cannot_be_read_sends_the_kind_only() -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise ValueError("no text")

    tool = get_order_tool(handler=_sync_raiser(cb.ToolError(Unprintable())))
    h = make(_script("get_order"), [tool])
    out = h.runner.run_sync("open it", "acme", "u")
    assert out.state == cb.State.COMPLETED, out.reason
    assert last_outputs(h.model)["c1"]["error"]["message"] == "the tool failed (ToolError)"


# ---- 4. a decision's reason and approver are checked where it is made ---------------------------------


@pytest.mark.parametrize(
    ("make_decision", "match"),
    [
        (lambda: Decision("apr_1", "deny", "alice", 5), "reason must be text"),  # type: ignore[arg-type]
        (lambda: Decision.deny("apr_1", "alice", reason=5), "reason must be text"),  # type: ignore[arg-type]
        (lambda: Decision.approve("apr_1", "alice", reason=["ok"]), "reason must be text"),  # type: ignore[arg-type]
        (lambda: Decision.deny("apr_1", "alice", reason="trop cher, d" + LONE), "reason holds a lone"),
        (lambda: Decision.approve("apr_1", "Ren" + LONE), "approver name holds a lone"),
    ],
)
def test_a_decision_with_unrecordable_text_is_a_usage_error(make_decision: Any, match: str) -> None:
    with pytest.raises(cb.UsageError, match=match):
        make_decision()


def test_runner_deny_with_a_bad_reason_records_nothing_and_the_operation_goes_on() -> None:
    h = make(_script("refund", {"order_id": "A1", "amount": 40.0}), [refund_tool()])
    out = h.runner.run_sync("refund A1", "acme", "u")
    approval = out.pending_approvals[0].approval_id
    with pytest.raises(cb.UsageError, match="reason must be text"):
        h.runner.deny(approval, "alice", "acme", reason=5)  # type: ignore[arg-type]
    stored = h.store.get_approval(approval)
    assert stored is not None and stored.status == "pending"
    h.runner.deny(approval, "alice", "acme", reason="too much")
    done = h.runner.resume_sync(out.operation_id)
    assert done.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["c1"]) == "DENIED"


def _cli(args: list[bytes], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable.encode(), b"-m", b"callbound.cli", *args],
        cwd=cwd,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        # the environment as given: the callbound this test run imports (PYTHONPATH included)
        timeout=120,
    )


def test_cli_deny_with_a_latin1_reason_exits_2_and_the_operation_can_still_be_decided(tmp_path: Path) -> None:
    """repro_cli_deny_latin1.sh: `--reason "$(printf 'd\\351sol\\351')"` in a UTF-8 locale."""
    store = f"--store=sqlite:///{tmp_path}/cb.db".encode()
    assert _cli([b"demo", b"refund", store], tmp_path).returncode == 0
    listed = _cli([b"approvals", b"list", b"--json", store], tmp_path)
    approval = json.loads(listed.stdout)[0]["approval_id"].encode()
    r = _cli(
        [b"approvals", b"deny", approval, b"--approver", b"alice", b"--reason", b"d\xe9sol\xe9", store],
        tmp_path,
    )
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert b"Traceback" not in r.stderr and b"lone surrogate" in r.stderr
    # nothing was recorded: a valid decision is still taken
    r = _cli(
        [b"approvals", b"deny", approval, b"--approver", b"alice", b"--reason", b"too much", store], tmp_path
    )
    assert r.returncode == 0, (r.stdout, r.stderr)


# ---- 5. ToolSpec checks its fields' types --------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"handler": "submit_refund"}, "handler must be the function"),
        ({"handler": None}, "handler must be the function"),
        ({"description": None}, "description must be a string"),
        ({"description": 42}, "description must be a string"),
        ({"schema_version": ["v1"]}, "schema_version must be a non-empty string"),
        ({"schema_version": 1}, "schema_version must be a non-empty string"),
        ({"schema_version": "  "}, "schema_version must be a non-empty string"),
        ({"authorize": True}, "authorize must be a function or None"),
        ({"intent_key": "order_id"}, "intent_key must be a function or None"),
        ({"reconcile": "lookup"}, "reconcile must be a function or None"),
        ({"redact": ["card"]}, "redact must be a function or None"),
        ({"requires_approval": "yes"}, "requires_approval must be True, False, None"),
        ({"requires_approval": 1}, "requires_approval must be True, False, None"),
    ],
)
def test_toolspec_fields_of_the_wrong_type_are_refused(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(cb.UsageError, match=match):
        write_tool(**kw)


@pytest.mark.parametrize(
    "kw",
    [
        {"requires_approval": True},
        {"requires_approval": False},
        {"requires_approval": lambda a, c: False},
        {"authorize": lambda a, c: True, "reconcile": lambda k, c: None, "redact": lambda a: a},
        {"description": ""},
    ],
)
def test_toolspec_fields_of_the_right_type_are_taken(kw: dict[str, Any]) -> None:
    assert write_tool(**kw).name == "set_note"


# ---- 6. make_client checks its arguments' types ------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"timeout_s": "30"}, "timeout_s"),
        ({"timeout_s": -1}, "timeout_s"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": math.inf}, "timeout_s"),
        ({"timeout_s": True}, "timeout_s"),
        ({"api_key": 123}, "api_key"),
        ({"base_url": 5}, "base_url"),
        ({"base_url": " "}, "base_url"),
        ({"model": 4}, "model"),
        ({"api_key": "k" + LONE}, "lone surrogate"),
    ],
)
def test_make_client_arguments_of_the_wrong_type_are_refused(kw: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"transport": "http", "base_url": "http://127.0.0.1:9", "api_key": "k", **kw}
    with pytest.raises(cb.UsageError, match=match):
        make_client("openai-responses", **args)


def test_make_client_with_an_api_that_is_not_a_name_is_refused() -> None:
    with pytest.raises(cb.UsageError, match="API is a name"):
        make_client(["openai-responses"], transport="http", api_key="k")  # type: ignore[arg-type]


def test_make_client_with_the_right_types_builds_a_client() -> None:
    client = make_client(
        "openai-responses", transport="http", base_url="http://127.0.0.1:9", api_key="k", timeout_s=30
    )
    assert client.api == "openai-responses"


# ---- 7. Registry, stores.open and App ------------------------------------------------------------------


@pytest.mark.parametrize("specs", [get_order_tool(), None, 5], ids=["one-spec", "none", "int"])
def test_registry_of_something_other_than_a_list_is_a_usage_error(specs: Any) -> None:
    with pytest.raises(cb.UsageError, match="list of ToolSpec"):
        cb.Registry(specs)


@pytest.mark.parametrize("url", [123, b"memory:", ["memory:"]])
def test_stores_open_of_a_url_that_is_not_text_is_a_usage_error(url: Any) -> None:
    with pytest.raises(cb.UsageError, match="store URL is a string"):
        callbound.stores.open(url)


def _app(**runner_options: Any) -> App:
    return App(
        cb.Registry([get_order_tool()]),
        make([final("r1")], [get_order_tool()]).model,
        runner_options=runner_options,
    )


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"price": {}}, "does not take"),
        # no App fields: App.runner(store, ref) takes them (review round 16, F7)
        ({"store": MemoryStore()}, r"pass it to App\.runner\(store, ref\)"),
        ({"app": "m:f"}, r"pass it to App\.runner\(store, ref\) as ref"),
        ({"registry": cb.Registry([])}, "App's own field"),
    ],
)
def test_app_runner_options_that_runner_does_not_take_are_refused(
    options: dict[str, Any], match: str
) -> None:
    with pytest.raises(cb.UsageError, match=match):
        _app(**options)


def test_app_runner_options_checked_again_when_the_runner_is_built() -> None:
    app = _app()
    app.runner_options = {"price": {}}
    with pytest.raises(cb.UsageError, match="does not take"):
        app.runner(MemoryStore())
    app.runner_options = None  # type: ignore[assignment]
    with pytest.raises(cb.UsageError, match="takes a dict"):
        app.runner(MemoryStore())


def test_app_runner_options_runner_takes_are_passed() -> None:
    runner = _app(prices={}, lease_s=10.0).runner(MemoryStore())
    assert runner.model.api == "openai-responses"


def test_an_app_factory_with_a_misspelt_option_is_a_usage_error_from_load_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "r13_bad_app.py").write_text(
        "import callbound as cb\n"
        "from callbound.runtime.app import App\n"
        "from callbound.testing import ScriptedModel\n"
        "def make_app():\n"
        "    return App(cb.Registry([]), ScriptedModel('openai-responses', []), runner_options={'price': {}})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(cb.UsageError, match="does not take"):
        load_app("r13_bad_app:make_app")


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_an_intent_key_with_a_lone_surrogate_is_refused_before_anything_runs(
    backend: str, tmp_path: Path
) -> None:
    store = MemoryStore() if backend == "memory" else callbound.stores.open(f"sqlite:///{tmp_path}/cb.db")
    counter = Counter()
    tool = write_tool(counter, intent_key=lambda a, c: "note:" + LONE)
    h = make(_script(), [tool], store=store)  # type: ignore[arg-type]
    out = h.runner.run_sync("note A1", "acme", "u")
    assert out.state == cb.State.COMPLETED, out.reason
    result = last_outputs(h.model)["c1"]
    assert error_code(result) == "HANDLER_ERROR" and "could not name the intent" in result["error"]["message"]
    assert counter.n == 0 and store.ledger_list() == []
