"""The same answer makes the same turn whichever transport carries it (review round 20, f).

Each reply below is sent by a loopback server (real sockets) to ``HttpModel`` and to the SDK client of
the same API (``OpenAIModel``, ``AnthropicModel``, ``GeminiModel``), and the two turns must agree on
everything the adapter reads from the wire: finish, reason, raw stop reason, the failure (kind,
retryable, status, the provider's error type and code, Retry-After), the digest and id, the calls and
the text. Each reply's classification is checked as well (D1, D26, D32): 401 and 403 are fatal, 408,
409, 429, 5xx and 529 retryable, a quota 429 not, a context-window 400 TRUNCATED, Retry-After read in
seconds, as an HTTP date and as ``retry-after-ms``.

google-genai takes every status but 200 for an error: a 203 (a transforming proxy's answer) or any other
2xx was a fatal ``API_FAILURE`` over ``GeminiModel`` and the model's turn over ``HttpModel`` (f F2).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from callbound.core.model import RequestMeta
from callbound.core.types import ModelTurn
from tests.transports.test_loopback import SCENARIOS, Loopback, Reply, make_model

pytest.importorskip("openai", reason="the openai SDK (extra 'openai') is not installed")
pytest.importorskip("anthropic", reason="the anthropic SDK (extra 'anthropic') is not installed")
pytest.importorskip("google.genai", reason="google-genai (extra 'gemini') is not installed")

APIS = ["openai-responses", "openai-chat", "anthropic-messages", "gemini-generate"]
# the SDK clients stream only these; GeminiModel streams over HttpModel itself
STREAM_APIS = ["openai-responses", "openai-chat", "anthropic-messages"]


@pytest.fixture(scope="module")
def server() -> Iterator[Loopback]:
    loop = Loopback()
    try:
        yield loop
    finally:
        loop.close()


def error_body(api: str, status: int, kind: str, message: str, code: str | None = None) -> bytes:
    """Each provider's error JSON: OpenAI ``{"error": {...}}``, Anthropic ``{"type": "error", "error":
    {...}}``, Gemini ``{"error": {"code", "message", "status"}}``."""
    if api.startswith("openai-"):
        body: dict[str, Any] = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    elif api == "anthropic-messages":
        body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_01"}
    else:
        body = {"error": {"code": status, "message": message, "status": kind}}
    return json.dumps(body).encode()


# (status, OpenAI type, Anthropic type, Gemini status)
KINDS = {
    400: ("invalid_request_error", "invalid_request_error", "INVALID_ARGUMENT"),
    401: ("invalid_request_error", "authentication_error", "UNAUTHENTICATED"),
    403: ("invalid_request_error", "permission_error", "PERMISSION_DENIED"),
    404: ("invalid_request_error", "not_found_error", "NOT_FOUND"),
    408: ("timeout", "timeout_error", "DEADLINE_EXCEEDED"),
    409: ("conflict", "conflict_error", "ABORTED"),
    429: ("requests", "rate_limit_error", "RESOURCE_EXHAUSTED"),
    500: ("server_error", "api_error", "INTERNAL"),
    503: ("server_error", "api_error", "UNAVAILABLE"),
    529: ("server_error", "overloaded_error", "UNAVAILABLE"),
}


def kind_of(api: str, status: int) -> str:
    openai, anthropic, gemini = KINDS[status]
    return openai if api.startswith("openai-") else anthropic if api == "anthropic-messages" else gemini


def context_window(api: str) -> Reply:
    if api.startswith("openai-"):
        body = error_body(
            api, 400, "invalid_request_error", "This model's maximum context length is 128000 tokens.",
            "context_length_exceeded",
        )  # fmt: skip
    elif api == "anthropic-messages":
        body = error_body(
            api, 400, "invalid_request_error", "prompt is too long: 200021 tokens > 200000 maximum"
        )
    else:
        message = "The input token count (1100010) exceeds the maximum number of tokens allowed (1048575)."
        body = error_body(api, 400, "INVALID_ARGUMENT", message)
    return Reply(body, status=400)


# name -> (stream?, reply for an API, what the turn must say: finish, reason, retryable, status, retry-after)
Expect = tuple[str, str | None, bool | None, int | None, float | None]
CASES: dict[str, tuple[bool, Callable[[str], Reply], Expect]] = {}


def _status_case(status: int, retryable: bool) -> None:
    def reply(api: str) -> Reply:
        body = error_body(api, status, kind_of(api, status), "boom")
        return Reply(body, status=status, headers={"retry-after": "3"})

    CASES[f"http-{status}"] = (False, reply, ("API_FAILURE", None, retryable, status, 3.0))


for _status, _retryable in [
    (400, False), (401, False), (403, False), (404, False), (408, True), (409, True),
    (429, True), (500, True), (503, True), (529, True),
]:  # fmt: skip
    _status_case(_status, _retryable)

CASES["429-retry-after-date"] = (
    False,
    lambda api: Reply(
        error_body(api, 429, kind_of(api, 429), "slow down"),
        status=429,
        headers={"retry-after": format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)},
    ),
    ("API_FAILURE", "rate_limited", True, 429, 120.0),
)
CASES["429-retry-after-ms"] = (
    False,
    lambda api: Reply(
        error_body(api, 429, kind_of(api, 429), "slow down"),
        status=429,
        headers={"retry-after-ms": "2500", "retry-after": "9"},
    ),
    ("API_FAILURE", "rate_limited", True, 429, 2.5),
)


def quota(api: str) -> Reply:
    """A quota no wait lifts: OpenAI's insufficient_quota, Gemini's per-day QuotaFailure."""
    message = "You exceeded your current quota, please check your plan and billing details."
    if api != "gemini-generate":
        return Reply(error_body(api, 429, "insufficient_quota", message, "insufficient_quota"), status=429)
    violation = {
        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
        "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
        "quotaValue": "50",
    }
    err = {
        "code": 429,
        "message": message,
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"},
        ],
    }
    return Reply(json.dumps({"error": err}).encode(), status=429)


CASES["429-quota"] = (False, quota, ("API_FAILURE", "quota_exceeded", False, 429, None))
CASES["400-context-window"] = (
    False,
    context_window,
    ("TRUNCATED", "context_window_exceeded", False, 400, None),
)
CASES["503-html-page"] = (
    False,
    lambda api: Reply(b"<html><body>503 Service Unavailable</body></html>", status=503),
    ("API_FAILURE", "api_error", True, 503, None),
)
CASES["502-empty"] = (
    False,
    lambda api: Reply(b"", status=502),
    ("API_FAILURE", "api_error", True, 502, None),
)
CASES["200-not-json"] = (
    False,
    lambda api: Reply(b"<html>captive portal</html>"),
    ("API_FAILURE", "api_error", False, 200, None),
)
CASES["200-answer"] = (
    False,
    lambda api: SCENARIOS[(api, False)]().first,
    ("TOOL_PROPOSALS", None, None, None, None),
)
CASES["203-answer"] = (
    False,
    lambda api: Reply(SCENARIOS[(api, False)]().first.body, status=203),
    ("TOOL_PROPOSALS", None, None, None, None),
)
CASES["201-not-json"] = (
    False,
    lambda api: Reply(b"<html>", status=201),
    ("API_FAILURE", "api_error", False, 201, None),
)
CASES["stream-429"] = (
    True,
    lambda api: Reply(error_body(api, 429, kind_of(api, 429), "slow down"), status=429, headers={"retry-after": "4"}),
    ("API_FAILURE", "rate_limited", True, 429, 4.0),
)  # fmt: skip
CASES["stream-529"] = (
    True,
    lambda api: Reply(error_body(api, 529, kind_of(api, 529), "Overloaded"), status=529),
    ("API_FAILURE", None, True, 529, None),
)
CASES["stream-401"] = (
    True,
    lambda api: Reply(error_body(api, 401, kind_of(api, 401), "invalid x-api-key"), status=401),
    ("API_FAILURE", "api_error", False, 401, None),
)
CASES["stream-answer"] = (
    True,
    lambda api: SCENARIOS[(api, True)]().first,
    ("TOOL_PROPOSALS", None, None, None, None),
)
CASES["stream-cut"] = (
    True,
    lambda api: Reply(
        SCENARIOS[(api, True)]().first.body, sse=True, cut_after=len(SCENARIOS[(api, True)]().first.body) // 2
    ),
    ("TRUNCATED", "stream_interrupted", True, None, None),
)


def _params() -> list[Any]:
    out = []
    for name, (stream, _, _) in CASES.items():
        for api in STREAM_APIS if stream else APIS:
            out.append(pytest.param(name, api, id=f"{name}-{api}"))
    return out


async def _turn(server: Loopback, transport: str, api: str, name: str) -> ModelTurn:
    stream, reply, _ = CASES[name]
    sc = SCENARIOS[(api, stream)]()
    client = make_model(transport, api, server.root, sc.model)
    adapter = client.adapter
    body = adapter.build_request(
        items=adapter.initial_items("hi", []),
        tools=[],
        settings={"model": sc.model},
        instructions=None,
        stream=stream,
    )
    server.script(reply(api))
    turn: ModelTurn = await client.complete(
        body, stream=stream, meta=RequestMeta("op", 0, None, timeout_s=10)
    )
    return turn


def _view(turn: ModelTurn) -> dict[str, Any]:
    f = turn.failure
    return {
        "finish": turn.finish.value,
        "reason": turn.reason,
        "raw_stop_reason": turn.raw_stop_reason,
        "failure": None if f is None else (f.kind, f.retryable, f.status, f.error_type, f.error_code),
        "raw_sha256": turn.raw_sha256,
        "response_id": turn.response_id,
        "calls": [(c.call_id, c.name, c.arguments) for c in turn.calls],
        "text": turn.text,
    }


@pytest.mark.parametrize(("name", "api"), _params())
async def test_one_answer_one_turn_on_both_transports(server: Loopback, name: str, api: str) -> None:
    over_http = await _turn(server, "http", api, name)
    over_sdk = await _turn(server, "sdk", api, name)

    assert _view(over_sdk) == _view(over_http)
    waits = [t.failure.retry_after_s if t.failure else None for t in (over_http, over_sdk)]
    if waits[0] is None or waits[1] is None:
        assert waits[0] == waits[1]
    else:
        assert abs(waits[0] - waits[1]) < 2

    finish, reason, retryable, status, retry_after = CASES[name][2]
    assert over_http.finish.value == finish
    if reason is not None:
        assert over_http.reason == reason
    failure = over_http.failure
    if retryable is None:
        assert failure is None
        return
    assert failure is not None and failure.retryable is retryable
    assert failure.status == status
    if status is not None:
        assert over_http.raw_stop_reason == str(status), "D32: the status code as a string"
    if retry_after is not None:
        assert failure.retry_after_s is not None and abs(failure.retry_after_s - retry_after) < 5
    if name.startswith(("http-", "stream-")) and status is not None and status >= 400:
        assert failure.error_type == kind_of(api, status) or failure.error_code == kind_of(api, status), (
            "the provider's error type is kept beside the status (D32)"
        )
