"""Inputs shaped as the official SDK types allow, that the adapters mishandled (review against the SDKs).

Every body and stream here is written by hand from the SDK type definitions named in each test:
anthropic-sdk-python (src/anthropic/types/*, src/anthropic/lib/streaming/_messages.py), openai-python
(src/openai/types/responses/*) and python-genai (google/genai/_gaos/types/interactions/*).
"""

from __future__ import annotations

import json
from typing import Any

from callbound.adapters import get
from callbound.core.types import Finish
from tests.adapters import streaming


def named_sse(*events: dict[str, Any], key: str = "type") -> bytes:
    return b"".join(f"event: {e[key]}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


# ---- Anthropic Messages ---------------------------------------------------------------------------

ANTHROPIC = get("anthropic-messages")

MESSAGE_START = {
    "type": "message_start",
    "message": {
        "id": "msg_review",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 100,
            "cache_creation_input_tokens": 5,
            "cache_read_input_tokens": 20,
            "output_tokens": 1,
        },
    },
}


def test_anthropic_message_delta_null_usage_fields_keep_message_start_counts() -> None:
    # MessageDeltaUsage (types/message_delta_usage.py): input_tokens and the cache counts are
    # Optional; the SDK's accumulate_event only takes them over when they are not None.
    raw = named_sse(
        MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {
                "input_tokens": None,
                "cache_creation_input_tokens": None,
                "cache_read_input_tokens": None,
                "output_tokens": 12,
                "server_tool_use": None,
            },
        },
        {"type": "message_stop"},
    )
    turn, _ = streaming.fed(ANTHROPIC, raw)
    assert turn.finish is Finish.FINAL_TEXT
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (125, 12)


def test_anthropic_signature_delta_replaces_the_start_signature() -> None:
    # The SDK sets ``content.signature = event.delta.signature`` (lib/streaming/_messages.py): a
    # signature_delta carries the whole signature, it is not appended to what the block started with.
    raw = named_sse(
        MESSAGE_START,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": "EarlySig"},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Hm."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "FinalSig"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    )  # fmt: skip
    turn, _ = streaming.fed(ANTHROPIC, raw)
    assert turn.continuation[0]["content"] == [
        {"type": "thinking", "thinking": "Hm.", "signature": "FinalSig"}
    ]


# ---- OpenAI Responses -----------------------------------------------------------------------------

RESPONSES = get("openai-responses")

RESPONSE = {
    "id": "resp_review",
    "object": "response",
    "status": "in_progress",
    "model": "gpt-x",
    "output": [],
}


def test_responses_function_call_arguments_done_is_authoritative_without_an_item_done() -> None:
    # ResponseFunctionCallArgumentsDoneEvent (types/responses/response_function_call_arguments_done_event.py)
    # carries the finalised arguments. A stream whose item never gets output_item.done and whose terminal
    # snapshot has an empty output must still run the call with those arguments, not with the added
    # item's empty ones.
    raw = named_sse(
        {"type": "response.created", "sequence_number": 0, "response": RESPONSE},
        {
            "type": "response.output_item.added",
            "sequence_number": 1,
            "output_index": 0,
            "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "", "status": "in_progress"},
        },
        {
            "type": "response.function_call_arguments.done",
            "sequence_number": 2,
            "item_id": "fc_1",
            "output_index": 0,
            "name": "f",
            "arguments": "{\"city\":\"Oslo\"}",
        },
        {"type": "response.completed", "sequence_number": 3, "response": {**RESPONSE, "status": "completed"}},
    )  # fmt: skip
    turn, _ = streaming.fed(RESPONSES, raw)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.call_id, c.arguments) for c in turn.calls] == [("call_1", {"city": "Oslo"})]
    assert turn.continuation[0]["arguments"] == '{"city":"Oslo"}'


def test_responses_arguments_done_after_deltas_wins_over_the_fragments() -> None:
    raw = named_sse(
        {"type": "response.created", "sequence_number": 0, "response": RESPONSE},
        {
            "type": "response.output_item.added",
            "sequence_number": 1,
            "output_index": 0,
            "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "", "status": "in_progress"},
        },
        {"type": "response.function_call_arguments.delta", "sequence_number": 2, "item_id": "fc_1", "output_index": 0, "delta": "{\"city\":"},
        {"type": "response.function_call_arguments.delta", "sequence_number": 3, "item_id": "fc_1", "output_index": 0, "delta": "\"Oslo\"}"},
        {"type": "response.function_call_arguments.done", "sequence_number": 4, "item_id": "fc_1", "output_index": 0, "arguments": "{\"city\":\"Oslo\"}"},
        {"type": "response.completed", "sequence_number": 5, "response": {**RESPONSE, "status": "completed"}},
    )  # fmt: skip
    turn, _ = streaming.fed(RESPONSES, raw)
    assert [(c.call_id, c.arguments) for c in turn.calls] == [("call_1", {"city": "Oslo"})]


# ---- Gemini Interactions --------------------------------------------------------------------------

INTERACTIONS = get("gemini-interactions")
CREATED = {
    "event_type": "interaction.created",
    "interaction": {"id": "v1_review", "status": "in_progress", "object": "interaction", "model": "gemini-x"},
}


def test_interactions_completed_event_with_steps_and_no_step_events() -> None:
    # InteractionSseEventInteraction (interactionsseeventinteraction.py): ``steps`` is "the steps that
    # make up the interaction, if included in this event". When they are, and no step.* event came,
    # they are the turn.
    call = {"type": "function_call", "id": "c1", "name": "f", "arguments": {"a": 1}}
    raw = named_sse(
        CREATED,
        {
            "event_type": "interaction.completed",
            "interaction": {"id": "v1_review", "status": "requires_action", "steps": [call]},
        },
        key="event_type",
    )
    turn, _ = streaming.fed(INTERACTIONS, raw)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.call_id, c.arguments) for c in turn.calls] == [("c1", {"a": 1})]
    assert turn.continuation == (call,)


def test_interactions_thought_deltas_without_their_optional_fields_add_no_nulls() -> None:
    # ThoughtSummaryDelta.content is Optional (thoughtsummarydelta.py); a delta without it (or a
    # thought_signature delta without a signature) must not put a null into the thought step that goes
    # back to the API (D8 replays it as received).
    raw = named_sse(
        CREATED,
        {"event_type": "step.start", "index": 0, "step": {"type": "thought", "signature": "Sig0"}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "thought_summary"}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "thought_signature"}},
        {"event_type": "step.stop", "index": 0},
        {"event_type": "step.start", "index": 1, "step": {"type": "model_output"}},
        {"event_type": "step.delta", "index": 1, "delta": {"type": "text", "text": "hi"}},
        {"event_type": "step.stop", "index": 1},
        {"event_type": "interaction.completed", "interaction": {"id": "v1_review", "status": "completed"}},
        key="event_type",
    )
    turn, _ = streaming.fed(INTERACTIONS, raw)
    assert turn.finish is Finish.FINAL_TEXT
    assert turn.continuation[0] == {"type": "thought", "signature": "Sig0"}
