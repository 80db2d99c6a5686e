"""Review round 20, g: docs/reference.md says how to write a model client of one's own (the page said
only that "a custom model client's complete() returns" a ModelTurn). A client built the way the page
says runs; what the page says of failures, exceptions (D4: a failed connection, retried, D26), the
request meta (D24: k counted from what is stored) and the checks of Runner(...) holds; and every
failure kind it lists is one each adapter reads."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import API_NAMES, get
from callbound.core.model import ModelClient, RequestMeta
from callbound.core.types import RawFailure
from callbound.testing import FakeClock
from tests.recordings import REPO_ROOT

REFERENCE = REPO_ROOT / "docs" / "reference.md"


def _section() -> str:
    text = REFERENCE.read_text(encoding="utf-8")
    return " ".join(text.split("### A model client of your own", 1)[1].split("\n## ", 1)[0].split())


class _Order(BaseModel):
    order_id: str


REGISTRY = cb.Registry(
    [
        cb.ToolSpec(
            name="get_order",
            description="Look up an order",
            params=_Order,
            handler=lambda args, ctx: {"order_id": args.order_id},
            schema_version="v1",
            risk="read",
        )
    ]
)
ANSWER = {
    "id": "r9",
    "status": "completed",
    "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}
    ],
}


class Mine:
    """A client as the page describes it: a canned answer per request instead of a network."""

    api = "openai-responses"

    def __init__(self, answers: list[Any]) -> None:
        self.adapter = get(self.api)
        self.answers = answers
        self.metas: list[RequestMeta] = []

    async def complete(
        self, body: dict[str, Any], *, stream: bool, meta: RequestMeta, on_progress: Any = None
    ) -> cb.ModelTurn:
        self.metas.append(meta)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, RawFailure):
            return self.adapter.map_error(answer, model=body.get("model"))
        return self.adapter.parse_response(json.dumps(answer).encode(), model=body.get("model"))


def _run(answers: list[Any]) -> tuple[cb.Outcome, Mine]:
    model = Mine(answers)
    outcome = cb.Runner(model=model, registry=REGISTRY, clock=FakeClock()).run_sync(
        input="A1?", tenant="acme", subject="user-1"
    )
    return outcome, model


def test_the_page_names_the_protocol() -> None:
    section = _section()
    assert "async def complete(self, body, *, stream, meta, on_progress=None)" in section
    for name in ("api", "adapter", "complete"):
        assert hasattr(ModelClient, name) or name in ModelClient.__annotations__
    fields = [f.name for f in dataclasses.fields(RequestMeta)]
    (said,) = re.findall(
        r"holds `(\w+)`, `(\w+)` \(.*?\), `(\w+)` \(.*?\), `(\w+)` \(.*?\) and `(\w+)` \(", section
    )
    assert list(said) == fields


def test_a_client_built_as_the_page_says_runs_and_its_failures_are_retried() -> None:
    outcome, model = _run(
        [
            RuntimeError("a bug in the client"),
            RawFailure("timeout"),
            RawFailure("http", 503, b"{}", {}),
            ANSWER,
        ]
    )
    assert (outcome.state, outcome.text) == ("COMPLETED", "done")
    retried = [t.cause for t in outcome.history if t.state == "RETRY"]
    assert retried == ["connection_error", "timeout", "api_error"]
    # "the operation's k-th request, retries included"; "the active time left"
    assert [m.index for m in model.metas] == [0, 1, 2, 3]
    assert all(m.operation_id == outcome.operation_id for m in model.metas)
    assert model.metas[0].timeout_s == cb.Budgets().deadline_s


def test_too_large_ends_the_turn_response_too_large() -> None:
    assert 'past it, `RawFailure("too_large")` ends the turn `TRUNCATED(response_too_large)`' in _section()
    outcome, _ = _run([RawFailure("too_large")])
    assert (outcome.state, outcome.reason) == ("INCOMPLETE", "RESPONSE_TOO_LARGE")


def _kinds() -> list[str]:
    listed = _section().split("`kind` being ", 1)[1].split("; the adapter decides", 1)[0]
    return re.findall(r'`"(\w+)"`', listed)


@pytest.mark.parametrize("api", API_NAMES)
def test_every_failure_kind_the_page_lists_is_read_by_each_adapter(api: str) -> None:
    kinds = _kinds()
    assert kinds == ["http", "connection", "timeout", "stream_cut", "too_large"]
    for kind in kinds:
        turn = get(api).map_error(RawFailure(kind, 500 if kind == "http" else None), model="m")
        assert turn.finish in (cb.Finish.API_FAILURE, cb.Finish.TRUNCATED), (kind, turn)


class _NoAdapter:
    async def complete(self, body: dict[str, Any], **kw: Any) -> Any:
        raise AssertionError("never called")


class _SyncComplete:
    api = "openai-responses"
    adapter = get("openai-responses")

    def complete(self, body: dict[str, Any], **kw: Any) -> Any:
        raise AssertionError("never called")


@pytest.mark.parametrize("model", [_NoAdapter(), _SyncComplete()], ids=["no-adapter", "sync-complete"])
def test_a_model_without_an_adapter_or_an_async_complete_is_a_usage_error(model: Any) -> None:
    assert (
        "a model without an adapter or an async `complete` is a `UsageError` from `Runner(...)`" in _section()
    )
    with pytest.raises(cb.UsageError):
        cb.Runner(model=model, registry=REGISTRY)
