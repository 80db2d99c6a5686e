"""A far deadline is a long request timeout that every transport takes (D4, D14, D26; review round 18).

The request timeout is the time the operation has left, so ``Budgets(deadline_s=1e300)`` makes it
1e300 s. A blocking socket cannot hold that (``socket.settimeout`` overflows from about 1e10 s); the
async clients callbound uses (httpx, and the SDKs over it) take it as a deadline on the event loop's
clock. This pins that every transport sends such a request and reads its answer."""

from __future__ import annotations

import pytest

from callbound.core.model import RequestMeta
from tests.transports.test_loopback import CASES, SCENARIOS, Loopback, make_model, server  # noqa: F401


@pytest.mark.parametrize(("transport", "api", "stream"), CASES)
async def test_a_request_with_a_far_deadline_is_sent_and_answered(
    server: Loopback,  # noqa: F811
    transport: str,
    api: str,
    stream: bool,
) -> None:
    sc = SCENARIOS[(api, stream)]()
    model = make_model(transport, api, server.root, sc.model)
    body = model.adapter.build_request(
        items=model.adapter.initial_items("hi", []),
        tools=[],
        settings={"model": sc.model},
        instructions=None,
        stream=stream,
    )
    server.script(sc.first)
    turn = await model.complete(body, stream=stream, meta=RequestMeta("op_far", 0, None, timeout_s=1e300))
    assert turn.failure is None, turn.failure
    assert len(server.seen) == 1
