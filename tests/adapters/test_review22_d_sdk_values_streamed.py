"""Every stop reason, finish reason and status the installed SDKs list reads the same streamed as plain
(review round 22, d).

Review 20 (b) checks each SDK value against its row of docs/stop-reasons.md on a plain body. A stream
reaches the finish through another module (``*_stream.py``, the assembler), so a value mapped in one and
forgotten in the other would end a streamed turn in a fallback by accident. Here the same body is sent
as the API streams it (the events the SDK types name, in their order) and read through ``StreamFeed``:
finish, raw stop reason, reason, calls, text and refusal must be the plain body's, for each value with
and without calls. Values a stream cannot end on (a Responses ``queued``, ``in_progress`` or
``cancelled`` status: no terminal event carries them) are left out. Skipped, saying so, when an SDK is
not installed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.core.types import ModelTurn
from tests.adapters import streaming
from tests.adapters.plain_as_stream import STREAMERS, gemini
from tests.docs.stop_reason_bodies import BUILDERS

sdk = pytest.importorskip(
    "tests.adapters.test_review20_b_sdk_stop_reasons",
    reason="the openai, anthropic and google-genai SDKs (the extras) are needed to list their values",
)


def _essence(turn: ModelTurn) -> dict[str, Any]:
    return {
        "finish": turn.finish,
        "raw_stop_reason": turn.raw_stop_reason,
        "reason": turn.reason,
        "retryable": turn.failure.retryable if turn.failure else None,
        "calls": [(c.call_id, c.name, c.arguments, c.arguments_error) for c in turn.calls],
        "text": turn.text,
        "refusal": turn.refusal,
    }


beta = pytest.importorskip("anthropic.types.beta.beta_stop_reason")
# the beta Messages API adds compaction (pause_after_compaction), which the adapter reads too
BETA = [v for v in sdk.literals(beta.BetaStopReason) if v not in sdk.SDK_VALUES["anthropic-messages"]]
CASES = [*sdk.CASES, *[("anthropic-messages", v) for v in BETA]]


def test_the_beta_stop_reasons_have_their_rows() -> None:
    assert BETA == ["compaction"], "a new beta stop reason: give it its row in docs/stop-reasons.md"
    for value in BETA:
        sdk.test_every_sdk_value_has_its_row("anthropic-messages", value)
        for variant in ("", "+calls"):
            sdk.test_only_explicit_completions_complete_or_propose_calls("anthropic-messages", value, variant)


@pytest.mark.parametrize(("api", "value"), CASES, ids=[f"{a}:{v}" for a, v in CASES])
@pytest.mark.parametrize("variant", ["", "+calls"])
def test_every_sdk_value_reads_the_same_streamed(api: str, value: str, variant: str) -> None:
    body = BUILDERS[api](value + variant)
    raw = STREAMERS[api](body)
    if raw is None:
        pytest.skip(f"{api} {value!r}: no stream ends on it")
    adapter = get(api)
    plain = adapter.parse_response(json.dumps(body).encode())
    streamed, _ = streaming.fed(adapter, raw)
    assert _essence(streamed) == _essence(plain)


@pytest.mark.parametrize("block", sdk.BLOCKED)
def test_every_blocked_prompt_reads_the_same_streamed(block: str) -> None:
    body = BUILDERS["gemini-generate"](f"{block}+blocked")
    adapter = get("gemini-generate")
    plain = adapter.parse_response(json.dumps(body).encode())
    streamed, _ = streaming.fed(adapter, gemini(body))
    assert _essence(streamed) == _essence(plain)
