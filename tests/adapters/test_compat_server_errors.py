"""Errors from OpenAI-compatible servers read as what they say (D1, D26, D32).

Bodies are shaped like the answers quoted in public issue threads and server sources (texts shortened):
- context window, in each server's words: xAI ``{"code": "invalid-argument", "error": "This model's
  maximum prompt length is 500000 but the request contains 637815 tokens."}`` (the message under
  ``error`` as a string), older vLLM "The decoder prompt (length 12324) is longer than the maximum model
  length of 8192", llama.cpp type ``exceed_context_size_error`` (HTTP 400, or 500 in some versions), TGI
  and Together HTTP 422 "`inputs` tokens + `max_new_tokens` must be <= 8193": TRUNCATED, not retried;
- Cerebras puts the error's fields at the top without ``"object": "error"``: type and code are kept;
- a Responses ``failed`` whose code is an HTTP status as text (a proxy's "500", Azure's "429") reads as
  that status, as the same code in a Chat error chunk already did; ``slow_down`` is an overload, retried;
- DeepSeek's ``finish_reason: "insufficient_system_resource"`` (the inference system ran out of capacity
  mid-answer) is a server fault, retried, not an unknown stop reason.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn, RawFailure


def _http(api: str, status: int, body: Any) -> ModelTurn:
    return get(api).map_error(RawFailure("http", status, json.dumps(body), {}))


CONTEXT = [
    pytest.param(
        400,
        {"code": "invalid-argument", "error": "This model's maximum prompt length is 500000 but the request contains 637815 tokens."},
        (None, "invalid-argument"),
        id="xai",
    ),
    pytest.param(
        400,
        {"object": "error", "message": "The decoder prompt (length 12324) is longer than the maximum model length of 8192.", "type": "BadRequestError", "param": None, "code": 400},
        ("BadRequestError", "400"),
        id="vllm-old",
    ),
    pytest.param(
        400,
        {"error": {"code": 400, "message": "request (8708 tokens) exceeds the available context size (8192 tokens), try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 8708, "n_ctx": 8192}},
        ("exceed_context_size_error", "400"),
        id="llama.cpp-400",
    ),
    pytest.param(
        500,
        {"error": {"code": 500, "message": "the request exceeds the available context size", "type": "exceed_context_size_error"}},
        ("exceed_context_size_error", "500"),
        id="llama.cpp-500",
    ),
    pytest.param(
        422,
        {"error": {"message": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8193. Given: 8000 `inputs` tokens and 1000 `max_new_tokens`", "type": "invalid_request_error", "param": None, "code": None}},
        ("invalid_request_error", None),
        id="together-422",
    ),
    pytest.param(
        422,
        {"error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 1512. Given: 30 `inputs` tokens and 3984 `max_new_tokens`", "error_type": "validation"},
        ("validation", None),
        id="tgi-422",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("status", "body", "kept"), CONTEXT)
def test_a_compatible_servers_context_error_is_truncated(
    status: int, body: dict[str, Any], kept: tuple[str | None, str | None]
) -> None:
    turn = _http("openai-chat", status, body)
    assert (turn.finish, turn.reason, turn.raw_stop_reason) == (
        Finish.TRUNCATED,
        "context_window_exceeded",
        str(status),
    )
    assert turn.failure is not None and turn.failure.retryable is False
    assert (turn.failure.error_type, turn.failure.error_code) == kept


def test_other_422s_stay_fatal_api_errors() -> None:
    turn = _http(
        "openai-chat",
        422,
        {"error": {"message": "temperature must be positive", "type": "invalid_request_error"}},
    )
    assert (turn.finish, turn.reason, turn.failure and turn.failure.retryable) == (
        Finish.API_FAILURE,
        "api_error",
        False,
    )


def test_a_top_level_error_without_object_keeps_type_and_code() -> None:
    body = {
        "message": "Requests per minute limit exceeded.",
        "type": "too_many_requests_error",
        "param": "quota",
        "code": "request_quota_exceeded",
    }
    turn = _http("openai-chat", 429, body)
    assert turn.failure is not None
    assert (turn.failure.error_type, turn.failure.error_code, turn.failure.retryable) == (
        "too_many_requests_error",
        "request_quota_exceeded",
        True,
    )


def _failed(code: str) -> ModelTurn:
    body = {
        "id": "resp_1",
        "object": "response",
        "status": "failed",
        "error": {"code": code, "message": "x"},
        "output": [],
    }
    return get("openai-responses").parse_response(body)


@pytest.mark.parametrize(
    ("code", "expected"),
    [("500", ("api_error", True)), ("502", ("api_error", True)), ("429", ("rate_limited", True)),
     ("400", ("api_error", False)), ("slow_down", ("api_error", True))],
)  # fmt: skip
def test_a_responses_failure_code_that_is_a_status_reads_as_that_status(
    code: str, expected: tuple[str, bool]
) -> None:
    turn = _failed(code)
    assert (turn.reason, turn.failure and turn.failure.retryable) == expected


def _deepseek(finish: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "model": "deepseek-chat",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Partial ans"}, "finish_reason": finish}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }


def test_deepseek_insufficient_system_resource_is_a_retried_server_fault() -> None:
    plain = get("openai-chat").parse_response(_deepseek("insufficient_system_resource"))
    chunks = [
        {"id": "c1", "object": "chat.completion.chunk", "model": "deepseek-chat",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Partial"}, "finish_reason": None}]},
        {"id": "c1", "object": "chat.completion.chunk", "model": "deepseek-chat",
         "choices": [{"index": 0, "delta": {}, "finish_reason": "insufficient_system_resource"}],
         "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}},
    ]  # fmt: skip
    feed = StreamFeed(get("openai-chat").stream_assembler())
    feed.feed(("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode())
    feed.close()
    for turn in (plain, feed.finish()):
        assert (turn.finish, turn.reason, turn.raw_stop_reason) == (
            Finish.API_FAILURE,
            "api_error",
            "insufficient_system_resource",
        )
        assert turn.failure is not None and turn.failure.retryable is True
        assert turn.usage.output_tokens == 3
