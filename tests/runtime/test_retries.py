"""Retries of model requests (D26): what is retried, how long it waits, and that retries are not turns."""

from __future__ import annotations

import json
from typing import Any

import pytest

import callbound as cb
from callbound.core.types import RawFailure
from callbound.testing import ApiError, Stream, StreamCut

from .helpers import (
    Counter,
    calls,
    fc,
    final,
    get_order_tool,
    last_outputs,
    make,
    stream_events,
)

A1 = {"order_id": "A1"}


def error_body(etype: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"type": etype, "code": code, "message": "nope", "param": None}}


def retry_transitions(out: cb.Outcome) -> list[Any]:
    return [t for t in out.history if t.state == "RETRY"]


async def test_429_with_retry_after_then_success() -> None:
    h = make(
        [ApiError(429, error_body("rate_limit_error"), headers={"retry-after": "2"}), final("resp_1", "hi")],
        [get_order_tool()],
        budgets=cb.Budgets(max_model_turns=1),  # the retry must not use up a turn
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED and out.text == "hi"
    assert any(s >= 2.0 for s in h.clock.slept)
    assert len(h.model.requests) == 2
    assert out.spent["model_turns"] == 1
    assert len(retry_transitions(out)) == 1


async def test_a_retried_failure_keeps_the_providers_type_and_code() -> None:
    """D32: beside the status on the RETRY transition too, not only on a failure that ends the run."""
    body = error_body("tokens", "rate_limit_exceeded")
    h = make([ApiError(429, body), final("resp_1", "hi")], [get_order_tool()])
    out = await h.run()
    (retry,) = retry_transitions(out)
    assert (retry.details["raw_stop_reason"], retry.details["status"]) == ("429", 429)
    assert (retry.details["error_type"], retry.details["error_code"]) == ("tokens", "rate_limit_exceeded")


async def test_retries_do_not_count_as_turns_in_a_tool_loop() -> None:
    counter = Counter()
    script = [
        ApiError(503),
        calls("resp_1", fc("call_1", "get_order", A1)),
        ApiError(500),
        ApiError(502),
        final("resp_2"),
    ]
    h = make(script, [get_order_tool(counter)], budgets=cb.Budgets(max_model_turns=2, max_retries=2))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert counter.n == 1
    assert out.spent["model_turns"] == 2
    assert len(h.model.requests) == 5
    # the results of the tool turn went to every retried request
    assert last_outputs(h.model)["call_1"]["ok"] is True


async def test_fatal_400_fails_at_once_with_error_details() -> None:
    h = make(
        [ApiError(400, error_body("invalid_request_error", "bad_param")), final("resp_1")], [get_order_tool()]
    )
    out = await h.run()
    assert out.state == cb.State.FAILED
    assert len(h.model.requests) == 1
    assert h.clock.slept == []
    last = out.history[-1]
    assert last.state == "FAILED"
    assert last.details["raw_stop_reason"] == "400"
    assert last.details["error_type"] == "invalid_request_error"
    assert last.details["error_code"] == "bad_param"
    assert last.details["status"] == 400


@pytest.mark.parametrize("status", [401, 403, 404, 422])
async def test_other_4xx_are_fatal(status: int) -> None:
    h = make([ApiError(status), final("resp_1")], [get_order_tool()])
    out = await h.run()
    assert out.state == cb.State.FAILED and len(h.model.requests) == 1


async def test_quota_429_is_fatal() -> None:
    h = make(
        [ApiError(429, error_body("insufficient_quota", "insufficient_quota")), final("resp_1")],
        [get_order_tool()],
    )
    out = await h.run()
    assert out.state == cb.State.FAILED
    assert len(h.model.requests) == 1


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503, 529])
async def test_retryable_statuses(status: int) -> None:
    h = make([ApiError(status), final("resp_1")], [get_order_tool()])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert len(h.model.requests) == 2


@pytest.mark.parametrize("max_retries", [0, 1, 3])
async def test_more_than_max_retries_fails(max_retries: int) -> None:
    script = [ApiError(503)] * (max_retries + 1) + [final("resp_1")]
    h = make(script, [get_order_tool()], budgets=cb.Budgets(max_retries=max_retries))
    out = await h.run()
    assert out.state == cb.State.FAILED
    assert len(h.model.requests) == max_retries + 1
    assert len(retry_transitions(out)) == max_retries
    assert out.history[-1].details["status"] == 503


async def test_exactly_max_retries_then_success() -> None:
    script = [ApiError(503)] * 3 + [final("resp_1")]
    h = make(script, [get_order_tool()], budgets=cb.Budgets(max_retries=3))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert len(h.model.requests) == 4
    assert len(h.clock.slept) == 3


async def test_retry_count_is_per_model_request() -> None:
    counter = Counter()
    script = [
        ApiError(503),
        ApiError(503),
        calls("resp_1", fc("call_1", "get_order", A1)),
        ApiError(503),
        ApiError(503),
        final("resp_2"),
    ]
    h = make(script, [get_order_tool(counter)], budgets=cb.Budgets(max_retries=2))
    out = await h.run()
    assert out.state == cb.State.COMPLETED


async def test_retry_after_beyond_the_deadline_is_not_waited_for() -> None:
    h = make(
        [ApiError(429, headers={"retry-after": "120"}), final("resp_1")],
        [get_order_tool()],
        budgets=cb.Budgets(deadline_s=60),
    )
    out = await h.run()
    # D14/D26: the retry cannot happen within the deadline, so the deadline ends it, at once (review 9;
    # was FAILED(RATE_LIMITED), which blamed the provider for what the deadline stopped)
    assert (out.state, out.reason) == (cb.State.STOPPED, "DEADLINE")
    assert len(h.model.requests) == 1
    assert all(s < 60 for s in h.clock.slept)


async def test_backoff_is_bounded_and_honours_retry_after() -> None:
    script = [ApiError(500), ApiError(429, headers={"retry-after": "7"}), ApiError(500), final("resp_1")]
    h = make(script, [get_order_tool()])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert len(h.clock.slept) == 3
    assert h.clock.slept[1] >= 7.0
    assert all(0 <= s <= 30 for s in h.clock.slept)


async def test_failed_status_retryable_code_is_retried() -> None:
    failed = {
        "id": "resp_x",
        "status": "failed",
        "output": [],
        "error": {"type": "server_error", "code": "server_error", "message": "oops"},
    }
    h = make([failed, final("resp_1")], [get_order_tool()])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert len(h.model.requests) == 2


async def test_connection_errors_are_retried() -> None:
    h = make([RawFailure("connection"), RawFailure("timeout"), final("resp_1")], [get_order_tool()])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert len(h.model.requests) == 3


# ---- streams --------------------------------------------------------------------------------------


async def test_streamed_round_trip() -> None:
    counter = Counter()
    script = [
        stream_events(calls("resp_1", fc("call_1", "get_order", A1))),
        stream_events(final("resp_2", "Shipped.")),
    ]
    h = make(script, [get_order_tool(counter)], settings={"stream": True})
    out = await h.run()
    assert out.state == cb.State.COMPLETED and out.text == "Shipped."
    assert counter.calls == ["A1"]
    assert all(req.get("stream") is True for req in h.model.requests)
    assert last_outputs(h.model)["call_1"]["ok"] is True
    assert out.usage.input_tokens == 20


async def test_raw_sse_stream() -> None:
    events = stream_events(final("resp_1", "from sse"))
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    h = make([Stream(text, chunk_size=7)], [get_order_tool()], settings={"stream": True})
    out = await h.run()
    assert out.state == cb.State.COMPLETED and out.text == "from sse"


async def test_cut_stream_is_retried_then_succeeds() -> None:
    counter = Counter()
    full = stream_events(calls("resp_1", fc("call_1", "get_order", A1)))
    script = [
        [*full[:3], StreamCut()],  # dropped after the arguments started: the call must not run
        full,
        stream_events(final("resp_2")),
    ]
    h = make(
        script, [get_order_tool(counter)], settings={"stream": True}, budgets=cb.Budgets(max_model_turns=2)
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert counter.n == 1
    assert len(h.model.requests) == 3
    assert out.spent["model_turns"] == 2
    assert [t.cause for t in retry_transitions(out)] == ["stream_interrupted"]


async def test_cut_streams_exhausting_retries_end_incomplete() -> None:
    counter = Counter()
    cut = [*stream_events(calls("resp_1", fc("call_1", "get_order", A1)))[:4], StreamCut()]
    h = make(
        [cut] * 3 + [stream_events(final("resp_2"))],
        [get_order_tool(counter)],
        settings={"stream": True},
        budgets=cb.Budgets(max_retries=2),
    )
    out = await h.run()
    assert out.state == cb.State.INCOMPLETE
    assert out.reason == "STREAM_INTERRUPTED"
    assert counter.n == 0
    assert len(h.model.requests) == 3


async def test_stream_ending_without_terminal_event_is_a_cut() -> None:
    events = stream_events(final("resp_1", "partial"))[:-1]  # no response.completed
    h = make([events], [get_order_tool()], settings={"stream": True}, budgets=cb.Budgets(max_retries=0))
    out = await h.run()
    assert out.state == cb.State.INCOMPLETE and out.reason == "STREAM_INTERRUPTED"


async def test_stream_max_tokens_is_not_retried() -> None:
    body = {
        **calls("resp_1", fc("call_1", "get_order", A1)),
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
    }
    counter = Counter()
    h = make(
        [stream_events(body), stream_events(final("resp_2"))],
        [get_order_tool(counter)],
        settings={"stream": True},
    )
    out = await h.run()
    assert out.state == cb.State.INCOMPLETE and out.reason == "MAX_TOKENS"
    assert counter.n == 0
    assert len(h.model.requests) == 1


async def test_progress_events_are_delivered_while_streaming() -> None:
    seen: list[tuple[str, Any]] = []
    script = [stream_events(calls("resp_1", fc("call_1", "get_order", A1))), stream_events(final("resp_2"))]
    h = make(
        script,
        [get_order_tool()],
        settings={"stream": True},
        on_progress=lambda op_id, ev: seen.append((op_id, ev)),
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    kinds = [type(ev).__name__ for _, ev in seen]
    assert kinds[0] == "CallStarted" and "CallReady" in kinds
    assert {op_id for op_id, _ in seen} == {out.operation_id}


async def test_backoff_jitter_comes_from_the_runners_random_source() -> None:
    """Runner(rng=...) makes retry timing reproducible: the same seed, the same waits (D26)."""
    import random

    async def waits(seed: int) -> list[float]:
        h = make(
            [
                ApiError(503, error_body("server_error")),
                ApiError(503, error_body("server_error")),
                final("resp_1", "ok"),
            ],
            [get_order_tool()],
            rng=random.Random(seed),
        )
        out = await h.run()
        assert out.state == cb.State.COMPLETED
        return list(h.clock.slept)

    a, b, c = await waits(7), await waits(7), await waits(8)
    assert len(a) == 2 and a == b and a != c


class _Raising:
    """A model client that breaks its contract: it raises instead of returning a failure turn."""

    def __init__(self, inner: Any, failures: int, exc: BaseException) -> None:
        self.inner, self.failures, self.exc = inner, failures, exc
        self.calls = 0

    @property
    def adapter(self) -> Any:
        return self.inner.adapter

    async def complete(self, body: dict[str, Any], **kw: Any) -> Any:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.exc
        return await self.inner.complete(body, **kw)


@pytest.mark.parametrize(("failures", "state"), [(1, cb.State.COMPLETED), (10, cb.State.FAILED)])
async def test_a_model_client_that_raises_is_a_failed_request_not_a_crash(
    failures: int, state: cb.State
) -> None:
    """D4: an exception out of a transport (an error type it does not map, a bug) is retried like a
    broken connection and ends in an Outcome; it never escapes run and leaves the operation half-way."""
    # the scripted model answers by request index: the first index goes to the raised request
    h = make([final("resp_0"), final("resp_1", "hi")], [get_order_tool()], budgets=cb.Budgets(max_retries=2))
    raising = _Raising(h.runner.model, failures, ValueError("https://example.test/?key=secret"))
    h.runner.model = raising
    out = await h.run()
    assert out.state == state
    assert raising.calls == min(failures + 1, 3)
    if state == cb.State.FAILED:
        assert out.reason == "CONNECTION_ERROR"
        assert "secret" not in json.dumps(h.store.load_operation(out.operation_id).head)


async def test_a_usage_error_from_the_model_client_still_escapes() -> None:
    h = make([], [get_order_tool()])  # the scripted model has nothing to answer: ScriptExhausted
    with pytest.raises(cb.UsageError):
        await h.run()


async def test_a_request_that_runs_out_the_deadline_stops_the_operation_on_the_deadline() -> None:
    """D14: a retryable failure (here the transport's whole-request timeout) that leaves no active time
    to try again ends STOPPED(DEADLINE) with an escalation, not FAILED as if the provider had failed."""
    h = make([final("resp_0")], [get_order_tool()], budgets=cb.Budgets(deadline_s=30))
    inner = h.runner.model

    class TimesOut:
        adapter = inner.adapter

        async def complete(self, body: dict[str, Any], **kw: Any) -> Any:
            h.clock.advance(31)  # the request used up the deadline
            return inner.adapter.map_error(RawFailure("timeout"))

    h.runner.model = TimesOut()
    out = await h.run()
    assert out.state == cb.State.STOPPED and out.reason == "DEADLINE"
    assert out.escalation is not None and out.escalation["reason"] == "DEADLINE"
