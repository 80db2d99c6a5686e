"""Review 9: misuse of the public API is a ``UsageError`` at the call (D4), before anything is stored or
any request is made.

D4: only ``UsageError`` and ``StoreError`` escape ``run``/``resume``. Before: a ``Policy`` or ``Price`` of
the wrong types was accepted and raised ``TypeError`` out of ``run_sync`` after the model was paid (a
resume paid again); a truthy string for ``allow_self_approval`` let a subject approve its own write
(D17); int tenants/subjects/operation ids were stored and then broke approvals, ``ops list`` and audit
verification; decisions, inputs, models and stores of the wrong kind raised ``TypeError`` or
``AttributeError``; a saved application reference as a plain string broke ``callbound resume`` (D21);
and ``--app module:factory`` did not find ``module.py`` in the working directory.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.runtime.app import App, load_app
from callbound.stores.memory import MemoryStore

from .helpers import MODEL, Counter, calls, fc, final, get_order_tool, make, refund_tool

REFUND = {"order_id": "A1", "amount": 40.0}


def paused_script() -> list[Any]:
    return [calls("resp_1", fc("call_1", "refund", REFUND)), final("resp_2")]


# ---- D17 / D4: Policy fields of the wrong type ------------------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [
        {"allow_self_approval": "false"},
        {"allow_self_approval": 1},
        {"approval_ttl": 3600},
        {"approval_ttl": timedelta(seconds=-5)},
        {"revision": 2},
        {"revision": ""},
        {"authorize": "allow"},
        {"approver_allowed": True},
        {"on_approval_expired": "ignore"},
    ],
)
def test_policy_fields_of_the_wrong_type_are_refused(kw: dict[str, Any]) -> None:
    """D17: a truthy string must not allow self-approval; D4: no TypeError later, after a paid turn."""
    with pytest.raises(cb.UsageError, match=next(iter(kw))):
        cb.Policy(**kw)


def test_a_valid_policy_is_accepted() -> None:
    p = cb.Policy(revision="7", approval_ttl=timedelta(minutes=5), allow_self_approval=True, authorize=None)
    assert p.approval_ttl == timedelta(minutes=5)
    # 0: every approval expires at once (the demo's approval-expired scenario relies on it)
    assert cb.Policy(approval_ttl=timedelta(0)).approval_ttl == timedelta(0)


# ---- D4 / D27: Price numbers ------------------------------------------------------------------------


def test_price_numbers_become_decimals() -> None:
    """D27: cost is a Decimal; floats are converted through their text (3.0 -> Decimal('3.0'))."""
    p = cb.Price(3.0, 15)  # type: ignore[arg-type]
    assert (p.input_per_mtok, p.output_per_mtok) == (Decimal("3.0"), Decimal("15"))
    assert isinstance(p.input_per_mtok, Decimal) and isinstance(p.output_per_mtok, Decimal)
    assert cb.Price("0.5", Decimal(0)).input_per_mtok == Decimal("0.5")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), Decimal("-0.1"), True, "abc", None, [1]])
def test_bad_prices_are_refused(bad: Any) -> None:
    with pytest.raises(cb.UsageError, match="Price"):
        cb.Price(bad, Decimal(1))
    with pytest.raises(cb.UsageError, match="Price"):
        cb.Price(Decimal(1), bad)


async def test_a_run_priced_with_floats_completes_and_counts_cost() -> None:
    """D4: a float price no longer raises TypeError out of run after the model was paid."""
    prices = {MODEL: cb.Price(3.0, 15.0)}  # type: ignore[arg-type]
    h = make(
        [final("resp_1", tokens=(1_000_000, 0))], [], budgets=cb.Budgets(max_cost=Decimal(5)), prices=prices
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert out.usage.cost == Decimal("3.0")


# ---- D4: tenant, subject, operation id and input ----------------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [
        {"tenant": 42},
        {"subject": 1001},
        {"tenant": ""},
        {"subject": ""},
        {"operation_id": 7},
        {"input": 5},
        {"input": {"role": "user", "content": "hi"}},
    ],
)
async def test_run_and_submit_refuse_non_string_identities_before_storing(kw: dict[str, Any]) -> None:
    """D4: a UsageError at the call; nothing is stored and no request is made."""
    args: dict[str, Any] = {"input": "Refund A1", "tenant": "acme", "subject": "user-1", **kw}
    h = make(paused_script(), [refund_tool()])
    with pytest.raises(cb.UsageError):
        await h.runner.run(**args)
    with pytest.raises(cb.UsageError):
        h.runner.submit(**args)
    assert h.store.list_operations() == [] and h.model.requests == []


async def test_none_input_and_own_operation_id_are_fine() -> None:
    h = make([final("resp_1")], [], messages=[{"role": "user", "content": "where is A1?"}])
    out = await h.runner.run(None, tenant="acme", subject="u", operation_id="op-mine")
    assert out.operation_id == "op-mine" and out.state == cb.State.COMPLETED


# ---- D4 / D17: decisions, tenants on approve ----------------------------------------------------------


async def test_resume_takes_a_single_decision_as_a_list_of_one() -> None:
    """D17: resume(op, decisions) records each decision; a lone Decision is one decision."""
    refunds = Counter()
    h = make(paused_script(), [refund_tool(refunds)])
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    aid = out.pending_approvals[0].approval_id
    out = await h.runner.resume(out.operation_id, cb.Decision.approve(aid, approver="alice"))  # type: ignore[arg-type]
    assert out.state == cb.State.COMPLETED and refunds.n == 1


@pytest.mark.parametrize("decisions", ["ids", "string", "int"])
async def test_resume_refuses_what_is_not_a_decision_before_recording_anything(decisions: str) -> None:
    h = make(paused_script(), [refund_tool()])
    out = await h.run()
    aid = out.pending_approvals[0].approval_id
    given: Any = {"ids": [aid], "string": aid, "int": 5}[decisions]
    with pytest.raises(cb.UsageError, match="Decision"):
        await h.runner.resume(out.operation_id, given)
    assert h.runner.outcome(out.operation_id).state == cb.State.WAITING_APPROVAL
    assert h.store.get_approval(aid).status == "pending"  # type: ignore[union-attr]


async def test_resume_refuses_a_non_string_operation_id() -> None:
    h = make([final("resp_1")], [])
    with pytest.raises(cb.UsageError, match="operation_id"):
        await h.runner.resume(7)  # type: ignore[arg-type]


async def test_approve_refuses_a_non_string_tenant() -> None:
    """D17: approvals are looked up by tenant; an int tenant is misuse, not a TypeError."""
    h = make(paused_script(), [refund_tool()])
    out = await h.run()
    aid = out.pending_approvals[0].approval_id
    with pytest.raises(cb.UsageError, match="tenant"):
        h.runner.approve(aid, approver="alice", tenant=42)  # type: ignore[arg-type]


# ---- D4: Runner arguments ------------------------------------------------------------------------------


def _runner(**kw: Any) -> cb.Runner:
    from callbound.testing import ScriptedModel

    args: dict[str, Any] = {
        "model": ScriptedModel("openai-responses", [final("resp_1")]),
        "registry": cb.Registry([get_order_tool()]),
    }
    args.update(kw)
    return cb.Runner(**args)


def test_runner_refuses_a_missing_model() -> None:
    with pytest.raises(cb.UsageError, match="model"):
        _runner(model=None)


def test_runner_refuses_a_store_url_and_names_stores_open() -> None:
    with pytest.raises(cb.UsageError, match=r"callbound\.stores\.open"):
        _runner(store="sqlite:///x.db")


@pytest.mark.parametrize(
    ("kw", "word"),
    [
        ({"registry": [get_order_tool()]}, "registry"),
        ({"budgets": {"max_model_turns": 3}}, "budgets"),
        ({"policy": {"revision": "1"}}, "policy"),
        ({"prices": {MODEL: (3, 15)}}, "prices"),
        ({"store": object()}, "store"),
        ({"instructions": 5}, "instructions"),
        ({"lease_s": "30"}, "lease_s"),
    ],
)
def test_runner_refuses_arguments_of_the_wrong_kind(kw: dict[str, Any], word: str) -> None:
    with pytest.raises(cb.UsageError, match=word):
        _runner(**kw)


# ---- D21: the saved application reference ----------------------------------------------------------------


def test_a_plain_module_factory_string_is_saved_in_the_documented_shape() -> None:
    """D21: {"ref": "module:factory", "args": {...}} is what resume/approve/cancel and workers read."""
    assert _runner(app="myapp:make_app").app == {"ref": "myapp:make_app", "args": {}}
    assert _runner(app={"ref": "myapp:make_app"}).app == {"ref": "myapp:make_app", "args": {}}
    assert _runner(app={"ref": "m:f", "args": {"api": "x"}}).app == {"ref": "m:f", "args": {"api": "x"}}
    assert _runner(app=None).app is None


@pytest.mark.parametrize(
    "app",
    [
        "myapp",
        ":make_app",
        5,
        {"ref": 5},
        {"args": {}},
        {"ref": "m:f", "args": "x"},
        {"ref": "m:f", "args": {"when": object()}},
        {"ref": "m:f", "args": {}, "extra": 1},
    ],
)
def test_a_malformed_application_reference_is_refused_when_the_runner_is_built(app: Any) -> None:
    with pytest.raises(cb.UsageError, match="app"):
        _runner(app=app)


def test_app_runner_takes_the_plain_string_too() -> None:
    from callbound.testing import ScriptedModel

    app = App(registry=cb.Registry([]), model=ScriptedModel("openai-responses", [final("resp_1")]))
    runner = app.runner(MemoryStore(), ref="myapp:make_app")  # type: ignore[arg-type]
    assert runner.app == {"ref": "myapp:make_app", "args": {}}


# ---- D21: --app module:factory from the working directory ---------------------------------------------


def test_load_app_finds_a_module_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """D21: `--app module:factory` run from the folder holding module.py imports it (as uvicorn does)."""
    (tmp_path / "cwdapp_review9.py").write_text(
        "import callbound as cb\n"
        "from callbound.runtime.app import App\n"
        "from callbound.testing import ScriptedModel\n"
        "def make_app():\n"
        "    return App(registry=cb.Registry([]), model=ScriptedModel('openai-responses', []))\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "cwdapp_review9", raising=False)
    app = load_app("cwdapp_review9:make_app")
    assert isinstance(app, App)
    monkeypatch.delitem(sys.modules, "cwdapp_review9", raising=False)
