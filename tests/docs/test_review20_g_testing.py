"""Review round 20, g: ``callbound.testing`` is documented in docs/reference.md, name by name, and
its example and claims hold: ScriptedModel's responses (bodies, stream events with StreamCut, ApiError),
a script run out leaving the operation for a resume that goes on from the stored requests (D24), and
FakeClock (D23). The page listed only ScriptedModel and FakeClock, with nothing on how to script an
HTTP error or a dropped stream."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import re

import pytest

import callbound as cb
import callbound.testing
from callbound.stores.memory import MemoryStore
from callbound.testing import FakeClock, ScriptedModel
from tests.docs.order_script import ANSWER, call_response, registry
from tests.recordings import REPO_ROOT

REFERENCE = REPO_ROOT / "docs" / "reference.md"


def _testing_section() -> str:
    return REFERENCE.read_text(encoding="utf-8").split("## Testing with `callbound.testing`", 1)[1]


def test_every_name_of_callbound_testing_is_documented() -> None:
    section = _testing_section()
    missing = [n for n in callbound.testing.__all__ if not re.search(rf"`{n}\b", section)]
    # ScriptExhausted and ScriptedRequestError also have their rows in the errors table
    assert missing == []
    errors = set(re.findall(r"^\| `(\w+)` \| `", REFERENCE.read_text(encoding="utf-8"), re.M))
    assert {"ScriptExhausted", "ScriptedRequestError"} <= errors


def test_the_testing_example_prints_what_it_says() -> None:
    (block,) = re.findall(r"```python\n(.*?)```", _testing_section(), re.S)
    (said,) = re.findall(r"^# prints (.*)$", block, re.M)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(block, str(REFERENCE), "exec"), {"__name__": "reference"})
    assert buf.getvalue().strip() == said


def test_a_script_run_out_leaves_the_operation_for_a_resume_with_a_longer_script() -> None:
    """'A request past the end of the script raises ScriptExhausted, and the operation stays
    MODEL_REQUESTED, ready for a resume with a longer script'; response k answers the operation's k-th
    request, counted from what it has stored."""
    store = MemoryStore()
    runner = cb.Runner(
        model=ScriptedModel("openai-responses", [call_response("r1")]), registry=registry({}), store=store
    )
    with pytest.raises(cb.ScriptExhausted):
        runner.run_sync(input="Where is A1?", tenant="acme", subject="user-1", operation_id="op_1")
    assert runner.outcome("op_1").state == "MODEL_REQUESTED"
    longer = ScriptedModel("openai-responses", [call_response("r1"), ANSWER])
    outcome = cb.Runner(model=longer, registry=registry({}), store=store).resume_sync("op_1")
    assert (outcome.state, outcome.text, len(longer.requests)) == ("COMPLETED", "done", 1)


def test_the_fake_clock_is_as_documented() -> None:
    assert "It starts at 2026-01-01 00:00 UTC" in " ".join(_testing_section().split())
    clock = FakeClock()
    assert clock.now() == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    clock.advance(90)
    assert clock.now() == dt.datetime(2026, 1, 1, 0, 1, 30, tzinfo=dt.UTC) and clock.slept == []
