"""Limits that no wait lifts are not retried (D26), however the provider words them.

Each body is shaped like one a provider returned, as quoted in public issue threads (texts shortened):
- OpenAI 429 ``rate_limit_exceeded`` "Request too large for gpt-4o ... on tokens per min (TPM): Limit
  30000, Requested 36278. The input or output tokens must be reduced" (Aider-AI/aider 1880): the request
  alone is over the per-minute limit; retrying only repeats the 429. An ordinary "Rate limit reached"
  429 still waits and retries.
- Gemini 429 RESOURCE_EXHAUSTED whose ErrorInfo names the quota in its metadata (``quota_limit``
  "...PerDay...", ``quota_limit_value`` "0"; home-assistant/core 132832, gemini-cli 10513), read as a
  QuotaFailure with the same quota already was; a per-minute quota with a value is still retried.
- Gemini 429 "Your prepayment credits are depleted" with no details (dyad-sh/dyad 3626).
- Anthropic 400 "Your credit balance is too low" (anthropics/claude-code 66314): fatal before, now also
  named quota_exceeded, as billing_error is.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import callbound as cb
from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import ModelTurn, RawFailure
from callbound.testing import ApiError, FakeClock, ScriptedModel

TOO_LARGE = {
    "message": "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, "
    "Requested 36278. The input or output tokens must be reduced in order to run successfully. Visit "
    "https://platform.openai.com/account/rate-limits to learn more.",
    "type": "tokens",
    "param": None,
    "code": "rate_limit_exceeded",
}
REACHED = {
    "message": "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, "
    "Used 29000, Requested 2000. Please try again in 2s.",
    "type": "tokens",
    "param": None,
    "code": "rate_limit_exceeded",
}


def _http(api: str, status: int, body: Any) -> ModelTurn:
    return get(api).map_error(RawFailure("http", status, json.dumps(body), {}))


def _reading(turn: ModelTurn) -> tuple[str | None, bool | None]:
    return turn.reason, turn.failure.retryable if turn.failure else None


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses"])
def test_an_openai_request_over_its_per_minute_limit_is_not_retried(api: str) -> None:
    assert _reading(_http(api, 429, {"error": TOO_LARGE})) == ("quota_exceeded", False)
    assert _reading(_http(api, 429, {"error": REACHED})) == ("rate_limited", True)


def test_the_same_words_in_a_stream_error_read_the_same() -> None:
    feed = StreamFeed(get("openai-responses").stream_assembler())
    feed.feed(f"event: error\ndata: {json.dumps({'type': 'error', 'error': TOO_LARGE})}\n\n".encode())
    feed.close()
    assert _reading(feed.finish()) == ("quota_exceeded", False)
    feed = StreamFeed(get("openai-chat").stream_assembler())
    feed.feed(f"data: {json.dumps({'error': TOO_LARGE})}\n\n".encode())
    feed.close()
    assert _reading(feed.finish()) == ("quota_exceeded", False)


def test_a_run_is_not_retried_on_it() -> None:
    model = ScriptedModel("openai-chat", [ApiError(429, {"error": TOO_LARGE})])
    runner = cb.Runner(model=model, registry=cb.Registry([]), clock=FakeClock(), settings={"model": "gpt-4o"})
    out = runner.run_sync("a long prompt", tenant="t", subject="s")
    assert (out.state, out.reason) == (cb.State.FAILED, "QUOTA_EXCEEDED")
    assert len(model.requests) == 1


def _google_429(
    metadata: dict[str, str] | None, message: str = "Resource has been exhausted."
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": 429, "message": message, "status": "RESOURCE_EXHAUSTED"}
    if metadata is not None:
        error["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "RATE_LIMIT_EXCEEDED",
                "domain": "googleapis.com",
                "metadata": metadata,
            }
        ]
    return {"error": error}


@pytest.mark.parametrize("api", ["gemini-generate", "gemini-interactions"])
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            _google_429(
                {
                    "quota_limit": "GenerateContentRequestsPerMinutePerProjectPerRegion",
                    "quota_limit_value": "0",
                }
            ),
            ("quota_exceeded", False),
        ),
        (
            _google_429(
                {"quota_limit": "Gemini25ProRequestsPerDayPerUserPerTier", "quota_limit_value": "100"}
            ),
            ("quota_exceeded", False),
        ),
        (
            _google_429(
                {
                    "quota_limit": "GenerateContentRequestsPerMinutePerProjectPerRegion",
                    "quota_limit_value": "60",
                }
            ),
            ("rate_limited", True),
        ),
        (
            _google_429(
                None,
                "Your prepayment credits are depleted. Please go to AI Studio to manage your project and billing.",
            ),
            ("quota_exceeded", False),
        ),
        (_google_429(None), ("rate_limited", True)),
    ],
    ids=["limit 0", "per day", "per minute", "credits depleted", "plain 429"],
)
def test_gemini_quotas_no_wait_lifts(api: str, body: dict[str, Any], expected: tuple[str, bool]) -> None:
    assert _reading(_http(api, 429, body)) == expected


def test_anthropic_credit_balance_too_low_is_a_quota() -> None:
    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing "
            "to upgrade or purchase credits.",
        },
    }
    assert _reading(_http("anthropic-messages", 400, body)) == ("quota_exceeded", False)
    other = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: must be positive"},
    }
    assert _reading(_http("anthropic-messages", 400, other)) == ("api_error", False)
