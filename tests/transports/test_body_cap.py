"""Every live transport applies ``StreamCaps.max_body_bytes`` (a plain body, or one stream event) over a
real socket: over it the operation ends INCOMPLETE(RESPONSE_TOO_LARGE) after one request, no tool
runs, and nothing is retried; at the largest body or event of the exchange, the same loop completes.
The loopback server and scenarios are the ones ``test_loopback`` drives whole tool loops with."""

from __future__ import annotations

import pytest

from callbound.adapters.base import StreamCaps
from callbound.adapters.sse import SSEReader
from tests.transports.test_loopback import (
    CASES,
    SCENARIOS,
    Loopback,
    Recording,
    Reply,
    make_model,
    runner_for,
    server,
)

__all__ = ["server"]  # the fixture, used by name


def _largest(reply: Reply) -> int:
    """What the cap must allow for this reply: its body, or its largest event's data."""
    if not reply.sse:
        return len(reply.body)
    reader = SSEReader()
    frames = [*reader.feed_frames(reply.body), *reader.close_frames()]
    return max(len(data) for _, data in frames)


@pytest.mark.parametrize(("transport", "api", "stream"), CASES)
async def test_a_response_over_the_body_cap_is_not_read_and_not_retried(
    server: Loopback, transport: str, api: str, stream: bool
) -> None:
    sc = SCENARIOS[(api, stream)]()
    cap = _largest(sc.first) - 1
    model = Recording(make_model(transport, api, server.root, sc.model, caps=StreamCaps(max_body_bytes=cap)))
    server.script(sc.first, sc.second, sc.first, sc.second)
    outcome = await runner_for(model, sc, stream).run("Please help.", tenant="acme", subject="user-1")
    assert (outcome.state, outcome.reason) == ("INCOMPLETE", "RESPONSE_TOO_LARGE")
    assert len(server.seen) == 1
    (turn,) = model.turns
    assert turn.calls == () and turn.failure is not None and turn.failure.kind == "byte_cap"


@pytest.mark.parametrize(("transport", "api", "stream"), CASES)
async def test_a_response_within_the_body_cap_completes(
    server: Loopback, transport: str, api: str, stream: bool
) -> None:
    sc = SCENARIOS[(api, stream)]()
    # A stream's event may be held with the "data: " of a line not yet ended: 6 characters of slack.
    cap = max(_largest(sc.first), _largest(sc.second)) + (len("data: ") if stream else 0)
    model = make_model(transport, api, server.root, sc.model, caps=StreamCaps(max_body_bytes=cap))
    server.script(sc.first, sc.second)
    outcome = await runner_for(model, sc, stream).run("Please help.", tenant="acme", subject="user-1")
    assert outcome.state == "COMPLETED", outcome
    assert len(server.seen) == 2


async def test_an_endless_event_line_is_cut_off_at_the_cap(server: Loopback) -> None:
    """A server streaming one 8 MB line: callbound stops at 64 KiB, whatever follows."""
    sc = SCENARIOS[("openai-chat", True)]()
    model = make_model("http", "openai-chat", server.root, sc.model, caps=StreamCaps(max_body_bytes=65_536))
    server.script(Reply(b'data: {"id":"x","pad":"' + b"q" * 8_000_000, sse=True))
    outcome = await runner_for(model, sc, True).run("Please help.", tenant="acme", subject="user-1")
    assert (outcome.state, outcome.reason) == ("INCOMPLETE", "RESPONSE_TOO_LARGE")
    assert len(server.seen) == 1
