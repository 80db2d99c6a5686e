"""Review 9: every documented stop reason has a row in docs/stop-reasons.md and a test (issue 3 §2),
here for the values the SDKs document that had none. Each is mapped by D1: only an explicit completion
is success; a policy stop is REFUSAL; a length-like stop is TRUNCATED; anything else API_FAILURE, and
an unlisted value FAILED(UNKNOWN_STOP_REASON). Calls in a turn that is not TOOL_PROPOSALS never run.

Sources: Gemini ``FinishReason`` and ``BlockedReason`` (google-genai google/genai/types.py; WIRE.md 4.3,
4.4), Interactions ``InteractionStatus`` (google-genai _gaos/types/interactions/interaction.py; WIRE.md
5.3, 5.4), Responses ``IncompleteDetails.reason`` (openai-python src/openai/types/responses/response.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.machine import classify_turn
from callbound.core.types import ModelTurn
from tests.recordings import REPO_ROOT

ARGS = {"order_id": "A1"}
DOC = (REPO_ROOT / "docs" / "stop-reasons.md").read_text(encoding="utf-8")

# (raw value, finish, state, ModelTurn.reason, Outcome.reason)
GEMINI_FINISH = [
    # "The image generation stopped for a reason not otherwise specified": no policy or length stop.
    ("IMAGE_OTHER", "API_FAILURE", "FAILED", "unknown_stop_reason", "UNKNOWN_STOP_REASON"),
    # "The model was expected to generate an image, but didn't."
    ("NO_IMAGE", "API_FAILURE", "FAILED", "unknown_stop_reason", "UNKNOWN_STOP_REASON"),
    # "Request has at least one thought signature missing": a request fault, not retried unchanged.
    ("MISSING_THOUGHT_SIGNATURE", "API_FAILURE", "FAILED", "unknown_stop_reason", "UNKNOWN_STOP_REASON"),
    ("MALFORMED_RESPONSE", "API_FAILURE", "FAILED", "unknown_stop_reason", "UNKNOWN_STOP_REASON"),
    # "Request was filtered by an escalation rule": a provider policy stop.
    ("ESCALATION", "REFUSAL", "REFUSED", "escalation", "ESCALATION"),
    # "token generation stopped because the user account is limited or disabled due to Prohibited Use
    # Policy (PUP) violations": a provider policy stop.
    ("PUP_LIMITED_DISABLED", "REFUSAL", "REFUSED", "pup_limited_disabled", "PUP_LIMITED_DISABLED"),
    # "the response reached the per-request token limit, but generation is not yet complete": length.
    ("CONTINUATION", "TRUNCATED", "INCOMPLETE", "continuation", "CONTINUATION"),
]
GEMINI_BLOCK = [
    ("JAILBREAK", "REFUSAL", "REFUSED", "jailbreak", "JAILBREAK"),
    ("IMAGE_SAFETY", "REFUSAL", "REFUSED", "image_safety", "IMAGE_SAFETY"),
    (
        "BLOCKED_REASON_UNSPECIFIED",
        "REFUSAL",
        "REFUSED",
        "blocked_reason_unspecified",
        "BLOCKED_REASON_UNSPECIFIED",
    ),
]
INTERACTIONS = [
    # An agent or interaction budget ran out before the answer: length-like.
    ("budget_exceeded", "TRUNCATED", "INCOMPLETE", "budget_exceeded", "BUDGET_EXCEEDED"),
    # "the per-request decode token limit was reached" (google-genai _interactions_continuation.py): length.
    ("requires_continuation", "TRUNCATED", "INCOMPLETE", "requires_continuation", "REQUIRES_CONTINUATION"),
    # not terminal (background mode): a plain body must not stop here
    ("queued", "API_FAILURE", "FAILED", "unknown_stop_reason", "UNKNOWN_STOP_REASON"),
    ("idle", "API_FAILURE", "FAILED", "unknown_stop_reason", "UNKNOWN_STOP_REASON"),
]
RESPONSES = [
    # the response stopped at a message-count limit: length-like
    ("max_messages", "TRUNCATED", "INCOMPLETE", "max_messages", "MAX_MESSAGES"),
    # stopped at a safe boundary after a WebSocket response.steer (callbound never steers): neither a
    # completion, a policy stop nor a length stop
    ("steered", "API_FAILURE", "FAILED", "unknown_stop_reason", "UNKNOWN_STOP_REASON"),
]


def gemini(raw: str, calls: bool) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"text": "hello"}]
    if calls:
        parts.append({"functionCall": {"name": "get_order", "args": ARGS}})
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": raw, "index": 0}],
        "responseId": "g1",
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3},
    }


def interaction(raw: str, calls: bool) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"type": "model_output", "content": [{"type": "text", "text": "hello"}]}]
    if calls:
        steps.append({"type": "function_call", "id": "fc_1", "name": "get_order", "arguments": ARGS})
    return {
        "id": "v1_1",
        "status": raw,
        "steps": steps,
        "usage": {"total_input_tokens": 5, "total_output_tokens": 3},
    }


def response(raw: str, calls: bool) -> dict[str, Any]:
    output: list[dict[str, Any]] = [
        {
            "type": "message",
            "id": "m",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hello"}],
        }
    ]
    if calls:
        output.append(
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_order",
                "arguments": "{}",
            }
        )
    return {"id": "resp_1", "status": "incomplete", "incomplete_details": {"reason": raw}, "output": output}


def check(turn: ModelTurn, raw: str, finish: str, state: str, reason: str, code: str) -> None:
    verdict = classify_turn(turn)
    assert (turn.raw_stop_reason, turn.finish.value, turn.reason) == (raw, finish, reason)
    assert (verdict.target.value, verdict.reason) == (state, code)
    assert not turn.executable, "calls in a turn that is not TOOL_PROPOSALS never run"


def doc_row(api: str, raw: str, finish: str, state: str, reason: str, code: str) -> str:
    return f"| `{api}` | `{raw}` | `{raw}` | {finish} | {state} | `{reason}` | `{code}` |"


@pytest.mark.parametrize("calls", [False, True], ids=["", "calls"])
@pytest.mark.parametrize(("raw", "finish", "state", "reason", "code"), GEMINI_FINISH)
def test_gemini_finish_reasons(
    raw: str, finish: str, state: str, reason: str, code: str, calls: bool
) -> None:
    turn = get("gemini-generate").parse_response(json.dumps(gemini(raw, calls)).encode())
    check(turn, raw, finish, state, reason, code)
    feed = StreamFeed(get("gemini-generate").stream_assembler())
    feed.feed(f"data: {json.dumps(gemini(raw, calls))}\r\n\r\n".encode())
    feed.close()
    check(feed.finish(), raw, finish, state, reason, code)  # streamed, the same


@pytest.mark.parametrize(("raw", "finish", "state", "reason", "code"), GEMINI_BLOCK)
def test_gemini_block_reasons(raw: str, finish: str, state: str, reason: str, code: str) -> None:
    """D1: promptFeedback.blockReason is a refusal, whatever its value."""
    body = {
        "promptFeedback": {"blockReason": raw},
        "responseId": "g1",
        "usageMetadata": {"promptTokenCount": 5},
    }
    check(get("gemini-generate").parse_response(json.dumps(body).encode()), raw, finish, state, reason, code)
    assert (
        f"| `gemini-generate` | `{raw}+blocked` | `{raw}` | {finish} | {state} | `{reason}` | `{code}` |"
        in DOC
    )


@pytest.mark.parametrize("calls", [False, True], ids=["", "calls"])
@pytest.mark.parametrize(("raw", "finish", "state", "reason", "code"), INTERACTIONS)
def test_interactions_statuses(
    raw: str, finish: str, state: str, reason: str, code: str, calls: bool
) -> None:
    check(
        get("gemini-interactions").parse_response(json.dumps(interaction(raw, calls)).encode()),
        raw,
        finish,
        state,
        reason,
        code,
    )


def test_interactions_status_from_a_stream_terminal() -> None:
    events = [
        {"event_type": "interaction.created", "interaction": {"id": "v1_1", "status": "in_progress"}},
        {"event_type": "step.start", "index": 0, "step": {"type": "model_output", "content": []}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "text", "text": "hel"}},
        {"event_type": "step.stop", "index": 0},
        {
            "event_type": "interaction.completed",
            "interaction": {"id": "v1_1", "status": "requires_continuation"},
        },
    ]
    feed = StreamFeed(get("gemini-interactions").stream_assembler())
    feed.feed("".join(f"data: {json.dumps(e)}\n\n" for e in events).encode())
    feed.close()
    turn = feed.finish()
    check(
        turn,
        "requires_continuation",
        "TRUNCATED",
        "INCOMPLETE",
        "requires_continuation",
        "REQUIRES_CONTINUATION",
    )


@pytest.mark.parametrize("calls", [False, True], ids=["", "calls"])
@pytest.mark.parametrize(("raw", "finish", "state", "reason", "code"), RESPONSES)
def test_responses_incomplete_reasons(
    raw: str, finish: str, state: str, reason: str, code: str, calls: bool
) -> None:
    check(
        get("openai-responses").parse_response(json.dumps(response(raw, calls)).encode()),
        raw,
        finish,
        state,
        reason,
        code,
    )


@pytest.mark.parametrize(
    ("api", "row"),
    [("gemini-generate", r) for r in GEMINI_FINISH]
    + [("gemini-interactions", r) for r in INTERACTIONS]
    + [("openai-responses", r) for r in RESPONSES],
)
def test_each_value_has_its_row_in_the_doc(api: str, row: tuple[str, str, str, str, str]) -> None:
    """Issue 3 §2: a row per documented value (tests/docs/test_stop_reasons_doc.py checks each row)."""
    assert doc_row(api, *row) in DOC
