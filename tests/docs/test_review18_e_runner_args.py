"""Review round 18, e F5: docs/reference.md names every argument of ``Runner(...)`` and what it does.
``on_transition``, ``audit_key``, ``executor`` (whose grace period docs/durability.md speaks of), ``ids``,
``rng`` and ``lease_s`` were on no page of the reference; the claims the new paragraph makes are tried
here."""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest

import callbound as cb
from callbound.runtime.tools import ToolExecutor
from callbound.testing import ScriptedModel
from tests.recordings import REPO_ROOT

REFERENCE = REPO_ROOT / "docs" / "reference.md"


def _paragraph() -> str:
    text = REFERENCE.read_text(encoding="utf-8")
    found: list[str] = re.findall(r"^`Runner\(model, registry.*?(?=\n\n)", text, re.S | re.M)
    assert len(found) == 1
    return found[0]


def test_the_reference_names_every_runner_argument_with_its_default() -> None:
    documented = " ".join(_paragraph().split())
    signature, said = documented.split("`:", 1)
    for name, param in inspect.signature(cb.Runner.__init__).parameters.items():
        if name == "self":
            continue
        if param.default is inspect.Parameter.empty:
            assert re.search(rf"\b{name}\b", signature), name
        else:
            assert f"{name}={param.default!r}" in signature, name
        if name not in ("model", "registry"):  # the positional two are the Runner itself
            assert re.search(rf"`{name}[`(]", said), f"{name} is in the signature; nothing says what it does"


def test_the_executor_defaults_are_as_documented() -> None:
    executor = ToolExecutor()
    assert executor.grace_s == 2.0
    assert "ToolExecutor(max_threads=16, grace_s=2.0)" in _paragraph().replace("\n", " ")
    assert inspect.signature(ToolExecutor).parameters["max_threads"].default == 16


def _final() -> dict[str, Any]:
    return {
        "id": "r1",
        "status": "completed",
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}
        ],
    }


def test_on_transition_sees_every_state_change_and_a_raising_one_is_ignored() -> None:
    seen: list[tuple[str, str]] = []

    def observer(operation_id: str, transition: Any) -> None:
        seen.append((operation_id, transition.state))
        raise RuntimeError("observer bug")

    runner = cb.Runner(
        model=ScriptedModel("openai-responses", [_final()]), registry=cb.Registry([]), on_transition=observer
    )
    out = runner.run_sync(input="x", tenant="acme", subject="u1")
    assert out.state == cb.State.COMPLETED
    assert seen == [(out.operation_id, t.state) for t in out.history]
    assert seen[0][1] == "MODEL_REQUESTED"  # the first (created) included


@pytest.mark.parametrize(
    "kwargs",
    [{"on_transition": 1}, {"audit_key": "text"}, {"executor": object()}, {"ids": object()}, {"lease_s": 0}],
)
def test_an_argument_of_the_wrong_kind_is_a_usage_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(cb.UsageError):
        cb.Runner(model=ScriptedModel("openai-responses", [_final()]), registry=cb.Registry([]), **kwargs)
