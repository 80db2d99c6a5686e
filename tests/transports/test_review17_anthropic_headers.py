"""Both Anthropic transports send the same API version and authentication (review round 17, r4 F3; the
one adapter reads one API version, issue 3 "the same adapter code runs").

anthropic 2.15 sent ``Authorization: Bearer <key>`` and its own ``anthropic-version: 2026-10-21``
where HttpModel sends ``x-api-key`` and ``2023-06-01``, and test_loopback only checked that an
``anthropic-version`` was present."""

from __future__ import annotations

import pytest

from callbound.transports.http import ANTHROPIC_VERSION
from tests.transports.test_loopback import KEY, SCENARIOS, Loopback, make_model, runner_for, server

__all__ = ["server"]  # the fixture, used by name


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("transport", ["http", "sdk"])
async def test_both_anthropic_transports_send_x_api_key_and_one_version(
    server: Loopback, transport: str, stream: bool
) -> None:
    sc = SCENARIOS[("anthropic-messages", stream)]()
    model = make_model(transport, "anthropic-messages", server.root, sc.model)
    server.script(sc.first, sc.second)
    outcome = await runner_for(model, sc, stream).run("Please help.", tenant="acme", subject="user-1")
    assert outcome.state == "COMPLETED", outcome
    assert len(server.seen) == 2
    for seen in server.seen:
        assert seen.headers.get("x-api-key") == KEY
        assert seen.headers.get("anthropic-version") == ANTHROPIC_VERSION == "2023-06-01"
        assert "authorization" not in seen.headers


async def test_a_client_you_pass_gets_the_same_api_version(server: Loopback) -> None:
    anthropic = pytest.importorskip(
        "anthropic", reason="the anthropic SDK (extra 'anthropic') is not installed"
    )
    from callbound.transports.anthropic import AnthropicModel

    sc = SCENARIOS[("anthropic-messages", False)]()
    own = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.root)
    model = AnthropicModel(base_url=server.root, model=sc.model, client=own)
    server.script(sc.first, sc.second)
    outcome = await runner_for(model, sc, False).run("Please help.", tenant="acme", subject="user-1")
    assert outcome.state == "COMPLETED", outcome
    assert [seen.headers.get("anthropic-version") for seen in server.seen] == [ANTHROPIC_VERSION] * 2
    await own.close()
