"""The public surface: ``callbound.__all__`` and ``callbound.testing``, and what ``import callbound``
may load (D30)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from datetime import UTC, datetime

import callbound as cb
import callbound.testing as cbt
from callbound.core import errors as core_errors

from .helpers import final, get_order_tool, make

REQUIRED = {
    "Registry",
    "ToolSpec",
    "CallContext",
    "Budgets",
    "Runner",
    "Outcome",
    "State",
    "Decision",
    "ResultEnvelope",
    "ModelTurn",
    "ToolCall",
    "Policy",
    "Price",
    "PendingApproval",
    "Usage",
    "Finish",
    "ToolError",
    # progress events for user interfaces (issue 3 §4)
    "CallStarted",
    "ArgumentsProgress",
    "CallReady",
    # the error tree
    "CallboundError",
    "UsageError",
    "UnsupportedSchema",
    "ScriptExhausted",
    "ApprovalAlreadyDecided",
    "UnknownApproval",
    "ApproverNotAllowed",
    "ProtocolViolation",
    "CorrelationError",
    "BindingMismatch",
    "IllegalTransition",
    "CanonicalizationError",
    "StoreError",
    "OperationExists",
    "SchemaVersionError",
    "StaleLease",
    "NotApplied",
}


def test_all_is_sorted_and_unique() -> None:
    assert list(cb.__all__) == sorted(cb.__all__)
    assert len(set(cb.__all__)) == len(cb.__all__)


def test_all_names_the_public_api() -> None:
    missing = REQUIRED - set(cb.__all__)
    assert not missing, f"missing from callbound.__all__: {sorted(missing)}"


def test_every_name_in_all_exists() -> None:
    for name in cb.__all__:
        assert hasattr(cb, name), name


def test_every_error_class_is_exported() -> None:
    errors = {
        name
        for name, obj in vars(core_errors).items()
        if inspect.isclass(obj) and issubclass(obj, core_errors.CallboundError)
    }
    assert errors <= set(cb.__all__)


def test_every_public_class_of_the_package_namespace_is_exported() -> None:
    public = {
        name
        for name, obj in vars(cb).items()
        if not name.startswith("_") and inspect.isclass(obj) and obj.__module__.startswith("callbound")
    }
    assert public <= set(cb.__all__)


def test_error_tree_shape() -> None:
    for name in cb.__all__:
        obj = getattr(cb, name)
        if inspect.isclass(obj) and issubclass(obj, Exception) and obj is not cb.ToolError:
            assert issubclass(obj, cb.CallboundError), name
    for sub in (
        cb.UnsupportedSchema,
        cb.ScriptExhausted,
        cb.ApprovalAlreadyDecided,
        cb.UnknownApproval,
        cb.ApproverNotAllowed,
    ):
        assert issubclass(sub, cb.UsageError)
    for sub in (cb.SchemaVersionError, cb.StaleLease, cb.OperationExists):
        assert issubclass(sub, cb.StoreError)


def test_testing_exports() -> None:
    for name in ("ScriptedModel", "ApiError", "FakeClock", "Stream", "StreamCut", "ScriptExhausted"):
        assert name in cbt.__all__, name
        assert hasattr(cbt, name)
    assert list(cbt.__all__) == sorted(cbt.__all__)
    for name in cbt.__all__:
        assert hasattr(cbt, name), name
    assert cbt.ScriptExhausted is cb.ScriptExhausted


def test_state_values_compare_equal_to_their_names() -> None:
    assert {s.name for s in cb.State} == {
        "MODEL_REQUESTED",
        "VALIDATING",
        "WAITING_APPROVAL",
        "EXECUTING",
        "RESULTS_READY",
        "COMPLETED",
        "REFUSED",
        "INCOMPLETE",
        "FAILED",
        "RETRY",
        "STOPPED",
    }
    for s in cb.State:
        assert s == s.name
        assert s.value == s.name
        assert str(s) == s.name
        assert f"{s}" == s.name
        assert cb.State(s.name) is s
        assert json.dumps(s) == json.dumps(s.name)


def test_outcome_state_compares_with_a_plain_string() -> None:
    h = make([final("resp_1")], [get_order_tool()])
    out = h.runner.run_sync("hi", tenant="acme", subject="u")
    assert out.state == "COMPLETED"
    d = out.to_dict()
    assert d["state"] == "COMPLETED"
    json.dumps(d)  # an Outcome serialises as plain JSON


def test_version() -> None:
    assert isinstance(cb.__version__, str) and cb.__version__


FORBIDDEN = ("openai", "anthropic", "google", "httpx", "psycopg", "typer", "rich", "sqlite3")


def test_import_loads_no_sdk_cli_or_driver() -> None:
    code = (
        "import sys, json, callbound, callbound.testing\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(json.loads(done.stdout))
    assert "callbound" in loaded and "pydantic" in loaded
    leaked = sorted(set(FORBIDDEN) & loaded)
    assert not leaked, f"import callbound loaded {leaked}"


def test_plain_import_in_a_subprocess() -> None:
    code = (
        "import sys, callbound\n"
        f"print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == ""


def test_outcome_repr_is_a_summary_not_the_whole_history() -> None:
    """asyncio.run formats the main task's result when it restores the SIGINT handler, so a repr that
    printed every transition cost run_sync time proportional to the operation's length."""
    from callbound.core.states import State
    from callbound.core.types import Transition, Usage
    from callbound.runtime.outcome import Outcome

    at = datetime(2026, 1, 1, tzinfo=UTC)
    history = tuple(Transition(State.MODEL_REQUESTED, at, "results_sent", {}) for _ in range(5000))
    out = Outcome(State.COMPLETED, "END_TURN", "op-1", "done " * 100, (), Usage(), history)
    text = repr(out)
    assert len(text) < 300
    assert "COMPLETED" in text and "'op-1'" in text and "transitions=5000" in text
