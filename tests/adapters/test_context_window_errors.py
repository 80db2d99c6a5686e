"""An input too long for the model's context window is TRUNCATED(context_window_exceeded), not retried,
on every API (D1), also where no error code says so and only the message does.

The bodies mirror the real HTTP 400 answers recorded in pydantic/pydantic-ai
tests/cassettes/test_context_window_exceeded/ (one per provider): Anthropic's invalid_request_error
"prompt is too long", Gemini's INVALID_ARGUMENT "The input token count (...) exceeds the maximum number
of tokens allowed (...)", and Mistral's top-level error object ({"object": "error", "type", "code",
"message"}), whose type and code are kept beside the status (D32). The numbers are synthetic.
"""

from __future__ import annotations

from typing import Any

import pytest

import callbound as cb
from callbound.adapters import get
from callbound.core.machine import classify_turn
from callbound.core.states import State
from callbound.core.types import Finish, RawFailure
from callbound.testing import ApiError, FakeClock, ScriptedModel

ANTHROPIC_TOO_LONG = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 200100 tokens > 200000 maximum",
    },
    "request_id": "req_1",
}
ANTHROPIC_WITH_MAX_TOKENS = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "input length and `max_tokens` exceed context limit: 190000 + 21333 > 200000, decrease input "
        "length or `max_tokens` and try again",
    },
}
GEMINI_TOO_LONG = {
    "error": {
        "code": 400,
        "message": "The input token count (1100000) exceeds the maximum number of tokens allowed (1048576).",
        "status": "INVALID_ARGUMENT",
    }
}
# Vertex AI's wording (google-gemini/gemini-cli issue 19727, the error as Vertex returned it)
VERTEX_TOO_LONG = {
    "error": {
        "code": 400,
        "message": "Unable to submit request because the input token count is 1251952 but model only supports up "
        "to 1048576. Reduce the input token count and try again.",
        "status": "INVALID_ARGUMENT",
    }
}
MISTRAL_TOO_LONG = {
    "object": "error",
    "message": "Prompt contains 150000 tokens and 0 draft tokens, too large for model with 131072 maximum "
    "context length",
    "type": "invalid_request_invalid_args",
    "param": None,
    "code": "3051",
}
VLLM_TOO_LONG = {
    "object": "error",
    "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}

CASES = [
    pytest.param("anthropic-messages", ANTHROPIC_TOO_LONG, "invalid_request_error", None, id="anthropic"),
    pytest.param(
        "anthropic-messages",
        ANTHROPIC_WITH_MAX_TOKENS,
        "invalid_request_error",
        None,
        id="anthropic-max-tokens",
    ),
    pytest.param("gemini-generate", GEMINI_TOO_LONG, "INVALID_ARGUMENT", None, id="gemini"),
    pytest.param("gemini-interactions", GEMINI_TOO_LONG, "invalid_argument", None, id="interactions"),
    pytest.param("gemini-generate", VERTEX_TOO_LONG, "INVALID_ARGUMENT", None, id="vertex"),
    pytest.param("openai-chat", MISTRAL_TOO_LONG, "invalid_request_invalid_args", "3051", id="mistral"),
    pytest.param("openai-chat", VLLM_TOO_LONG, "BadRequestError", "400", id="vllm"),
]


@pytest.mark.parametrize(("api", "body", "error_type", "error_code"), CASES)
def test_an_input_too_long_is_truncated_not_retried(
    api: str, body: dict[str, Any], error_type: str, error_code: str | None
) -> None:
    turn = get(api).map_error(RawFailure("http", 400, body, {}))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
        Finish.TRUNCATED,
        "400",
        "context_window_exceeded",
    )
    assert turn.failure is not None and not turn.failure.retryable
    assert (turn.failure.error_type, turn.failure.error_code) == (error_type, error_code)
    verdict = classify_turn(turn)
    assert (verdict.target, verdict.reason) == (State.INCOMPLETE, "CONTEXT_WINDOW_EXCEEDED")


def _other_400(api: str) -> dict[str, Any]:
    message = "temperature: must be at most 1"
    if api == "anthropic-messages":
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    if api.startswith("gemini"):
        return {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
    return {"object": "error", "message": message, "type": "invalid_request_error", "code": None}


@pytest.mark.parametrize(
    "api", ["anthropic-messages", "gemini-generate", "gemini-interactions", "openai-chat"]
)
def test_other_400s_stay_fatal_api_errors(api: str) -> None:
    turn = get(api).map_error(RawFailure("http", 400, _other_400(api), {}))
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "api_error")
    assert turn.failure is not None and not turn.failure.retryable


def test_the_message_decides_only_for_a_400_or_413() -> None:
    """A 429 or 5xx that mentions the context length is still what its status says (D26)."""
    body = {"error": {"message": "maximum context length is busy", "type": "server_error"}}
    turn = get("openai-chat").map_error(RawFailure("http", 503, body, {}))
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "api_error")
    assert turn.failure is not None and turn.failure.retryable


def test_a_mistral_error_keeps_its_type_and_code() -> None:
    """D32: the provider's error type and code beside the status, from a top-level error object."""
    body = {"object": "error", "message": "Invalid model", "type": "invalid_model", "code": "1500"}
    turn = get("openai-chat").map_error(RawFailure("http", 400, body, {}))
    assert turn.raw_stop_reason == "400"
    assert turn.failure is not None
    assert (turn.failure.error_type, turn.failure.error_code) == ("invalid_model", "1500")


def test_a_run_ends_incomplete_after_one_request() -> None:
    model = ScriptedModel("anthropic-messages", [ApiError(400, ANTHROPIC_TOO_LONG)])
    runner = cb.Runner(model=model, registry=cb.Registry([]), clock=FakeClock())
    out = runner.run_sync("a very long prompt", tenant="t", subject="s")
    assert (out.state, out.reason) == (State.INCOMPLETE, "CONTEXT_WINDOW_EXCEEDED")
    assert len(model.requests) == 1
