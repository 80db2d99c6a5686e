"""Every stop reason, finish reason and status the installed SDKs list is mapped deliberately (review
round 20, b): each has its row in docs/stop-reasons.md, and only D1's explicit completions end an
operation COMPLETED or propose calls, whatever calls the turn holds.

The values are read from the SDK types at run time (openai-python ``ResponseStatus``,
``IncompleteDetails.reason``, Chat ``Choice.finish_reason``; anthropic-sdk-python ``StopReason``;
python-genai ``FinishReason``, ``BlockedReason`` and the Interactions status), so an SDK that adds one
fails here until the value has its row and its mapping.
"""

from __future__ import annotations

from typing import Any, get_args

import pytest

from callbound.adapters import get
from callbound.core.machine import classify_turn
from callbound.core.states import State
from callbound.core.types import Finish
from tests.docs.stop_reason_bodies import BUILDERS
from tests.docs.test_stop_reasons_doc import rows

responses_status = pytest.importorskip("openai.types.responses.response_status")
responses_body = pytest.importorskip("openai.types.responses.response")
chat_completion = pytest.importorskip("openai.types.chat.chat_completion")
anthropic_stop = pytest.importorskip("anthropic.types.stop_reason")
genai_types = pytest.importorskip("google.genai.types")
interaction_status = pytest.importorskip("google.genai._gaos.types.interactions.interactionstatusupdate")


def literals(tp: Any) -> list[str]:
    """The strings of a Literal, through Optional/Union (and python-genai's open unions)."""
    found: list[str] = []
    for arg in get_args(tp):
        found.extend([arg] if isinstance(arg, str) else literals(arg))
    return found


SDK_VALUES: dict[str, list[str]] = {
    "openai-responses": literals(responses_status.ResponseStatus)
    + literals(responses_body.IncompleteDetails.model_fields["reason"].annotation),
    "openai-chat": literals(chat_completion.Choice.model_fields["finish_reason"].annotation),
    "anthropic-messages": literals(anthropic_stop.StopReason),
    "gemini-generate": [e.value for e in genai_types.FinishReason],
    "gemini-interactions": literals(interaction_status.InteractionStatusUpdateStatus),
}
BLOCKED = [e.value for e in genai_types.BlockedReason]
# D1's explicit completions: the only values that may end COMPLETED (no calls) or propose calls.
COMPLETIONS = {
    "openai-responses": {"completed"},
    "openai-chat": {"stop", "tool_calls", "function_call"},
    "anthropic-messages": {"end_turn", "stop_sequence", "tool_use"},
    "gemini-generate": {"STOP"},
    "gemini-interactions": {"completed", "requires_action"},
}
CASES = [(api, value) for api, values in sorted(SDK_VALUES.items()) for value in values]


def test_the_sdks_list_values() -> None:
    assert all(len(values) >= 5 for values in SDK_VALUES.values()), SDK_VALUES
    assert len(BLOCKED) >= 5


@pytest.mark.parametrize(("api", "value"), CASES, ids=[f"{a}:{v}" for a, v in CASES])
def test_every_sdk_value_has_its_row(api: str, value: str) -> None:
    documented = {(r[0], r[1].partition("+")[0]) for r in rows()} | {(r[0], r[2]) for r in rows()}
    assert (api, value) in documented, f"docs/stop-reasons.md has no row for {api} {value!r}"


@pytest.mark.parametrize(("api", "value"), CASES, ids=[f"{a}:{v}" for a, v in CASES])
@pytest.mark.parametrize("variant", ["", "+calls"])
def test_only_explicit_completions_complete_or_propose_calls(api: str, value: str, variant: str) -> None:
    turn = get(api).parse_response(BUILDERS[api](value + variant))
    verdict = classify_turn(turn)
    if value not in COMPLETIONS[api]:
        assert verdict.target is not State.COMPLETED, (api, value, variant)
        assert turn.finish is not Finish.TOOL_PROPOSALS and not turn.executable, (api, value, variant)
        assert turn.finish is not Finish.FINAL_TEXT, (api, value, variant)


@pytest.mark.parametrize("block", BLOCKED)
def test_every_blocked_prompt_is_a_refusal(block: str) -> None:
    # promptFeedback.blockReason wins over everything in the response (D1, D31), whatever its value
    turn = get("gemini-generate").parse_response(BUILDERS["gemini-generate"](f"{block}+blocked"))
    assert (turn.finish, turn.raw_stop_reason, turn.calls) == (Finish.REFUSAL, block, ())
    assert classify_turn(turn).target is State.REFUSED
