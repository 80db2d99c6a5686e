"""OpenAI Responses adapter against shapes seen in public recordings (robustness sweep). Every body here
is synthetic and small; the comment on each test names the public recording whose shape it mirrors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters.openai_responses import ADAPTER
from callbound.core.machine import classify_turn
from callbound.core.states import State
from callbound.core.types import Finish, ModelTurn
from tests.adapters import streaming


def body(output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    resp = {
        "id": "resp_s",
        "object": "response",
        "status": "completed",
        "model": "gpt-test",
        "output": output,
    }
    resp["usage"] = {"input_tokens": 50, "output_tokens": 20, "total_tokens": 70}
    return {**resp, **extra}


def sse(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def fc(call_id: str, name: str = "get_weather", arguments: str = '{"city":"Oslo"}') -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_" + call_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def msg(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


CUSTOM = {
    "type": "custom_tool_call",
    "id": "ctc_1",
    "call_id": "call_c1",
    "name": "write_sql",
    "input": "SELECT * FROM users",
    "status": "completed",
}


def assert_unexpected_tool_call(turn: ModelTurn, item_type: str) -> None:
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
        Finish.API_FAILURE,
        "completed",
        "unexpected_tool_call",
    )
    assert turn.failure is not None and not turn.failure.retryable
    assert turn.failure.error_code == item_type
    assert not turn.executable
    assert classify_turn(turn).target is State.FAILED


# ---- client-side tool items callbound cannot answer ----------------------------------------------


def test_custom_tool_call_is_no_final_answer() -> None:
    # mirrors vercel/ai packages/openai/src/responses/__fixtures__/openai-custom-tool.1.json and
    # pydantic/pydantic-ai tests/models/cassettes/test_openai_responses/test_gpt5_freeform_text_sql_tool.yaml:
    # the only output item is a custom_tool_call; it was FINAL_TEXT with empty text (COMPLETED), though
    # the model waits for a custom_tool_call_output
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA-opaque"}
    turn = ADAPTER.parse_response(body([reasoning, CUSTOM]))
    assert_unexpected_tool_call(turn, "custom_tool_call")
    assert turn.usage.input_tokens == 50
    assert turn.continuation == (reasoning, CUSTOM)


def test_streamed_custom_tool_call_is_no_final_answer() -> None:
    # mirrors vercel/ai packages/openai/src/responses/__fixtures__/openai-custom-tool.1.chunks.txt
    added = {**CUSTOM, "input": "", "status": "in_progress"}
    raw = sse(
        {"type": "response.created", "response": {"id": "resp_s", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        {
            "type": "response.custom_tool_call_input.delta",
            "item_id": "ctc_1",
            "output_index": 0,
            "delta": "SELECT * ",
        },
        {
            "type": "response.custom_tool_call_input.delta",
            "item_id": "ctc_1",
            "output_index": 0,
            "delta": "FROM users",
        },
        {"type": "response.output_item.done", "output_index": 0, "item": CUSTOM},
        {"type": "response.completed", "response": body([CUSTOM])},
    )
    turn, progress = streaming.fed(ADAPTER, raw)
    assert_unexpected_tool_call(turn, "custom_tool_call")
    assert progress == []  # no CallStarted for a call that can never run
    assert turn.failure == ADAPTER.parse_response(body([CUSTOM])).failure


@pytest.mark.parametrize(
    ("item", "kind"),
    [
        # vercel/ai .../__fixtures__/openai-local-shell-tool.1.json
        (
            {
                "type": "local_shell_call",
                "id": "lsh_1",
                "call_id": "call_l1",
                "status": "completed",
                "action": {"type": "exec", "command": ["ls"], "env": {}},
            },
            "local_shell_call",
        ),
        # vercel/ai .../__fixtures__/openai-apply-patch-tool.1.json
        (
            {
                "type": "apply_patch_call",
                "id": "apc_1",
                "call_id": "call_p1",
                "status": "completed",
                "operation": {"type": "create_file", "path": "a.md", "diff": "+a\n"},
            },
            "apply_patch_call",
        ),
        # vercel/ai .../__fixtures__/openai-shell-local-multiturn.1.json (local shell: no output item)
        (
            {
                "type": "shell_call",
                "id": "sh_1",
                "call_id": "call_s1",
                "status": "completed",
                "action": {"commands": ["ls"]},
            },
            "shell_call",
        ),
        # vercel/ai .../__fixtures__/openai-client-tool-search.1.json
        (
            {
                "type": "tool_search_call",
                "id": "tsc_1",
                "call_id": "call_t1",
                "status": "completed",
                "execution": "client",
                "arguments": {"goal": "weather"},
            },
            "tool_search_call",
        ),
        # vercel/ai .../__fixtures__/openai-mcp-tool-approval.1.chunks.txt (require_approval: always)
        (
            {
                "type": "mcp_approval_request",
                "id": "mcpr_1",
                "name": "create_short_url",
                "server_label": "zip1",
                "arguments": '{"url":"https://example.com/"}',
            },
            "mcp_approval_request",
        ),
    ],
)
def test_pending_client_action_items_are_no_final_answer(item: dict[str, Any], kind: str) -> None:
    assert_unexpected_tool_call(ADAPTER.parse_response(body([item])), kind)


def test_a_function_call_beside_a_pending_client_action_does_not_run() -> None:
    # answering only the function call would leave the custom call unanswered (400 on the next request)
    turn = ADAPTER.parse_response(body([fc("call_f1"), CUSTOM]))
    assert_unexpected_tool_call(turn, "custom_tool_call")
    assert [c.call_id for c in turn.calls] == ["call_f1"]  # kept for display only


def test_a_refusal_still_wins_over_a_pending_client_action() -> None:
    # D31: a refusal signal wins over everything else in the turn
    refusal = {
        "type": "message",
        "id": "msg_r",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "I can't help with that."}],
    }
    turn = ADAPTER.parse_response(body([CUSTOM, refusal]))
    assert (turn.finish, turn.reason) == (Finish.REFUSAL, "refusal")


def test_client_action_items_the_response_answered_itself_are_hosted() -> None:
    # mirrors vercel/ai .../__fixtures__/openai-shell-container.1.json (hosted shell: its output follows)
    shell = {
        "type": "shell_call",
        "id": "sh_1",
        "call_id": "call_s1",
        "status": "completed",
        "action": {"commands": ["uname -a"]},
        "environment": {"type": "container_reference"},
    }
    shell_out = {
        "type": "shell_call_output",
        "id": "sho_1",
        "call_id": "call_s1",
        "status": "completed",
        "output": [{"stdout": "Linux\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
    }
    turn = ADAPTER.parse_response(body([shell, shell_out, msg("It ran.")]))
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "It ran.")
    # mirrors vercel/ai .../__fixtures__/openai-mcp-tool-approval.1.json (the request and its mcp_call)
    request = {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "name": "web_search_exa",
        "server_label": "exa",
        "arguments": "{}",
    }
    call = {
        "type": "mcp_call",
        "id": "mcp_1",
        "status": "completed",
        "approval_request_id": "mcpr_1",
        "name": "web_search_exa",
        "server_label": "exa",
        "arguments": "{}",
        "output": "ok",
        "error": None,
    }
    assert ADAPTER.parse_response(body([request, call, msg("Done.")])).finish is Finish.FINAL_TEXT
    # mirrors vercel/ai .../__fixtures__/openai-tool-search.1.json (server tool search, then a function call)
    search = {
        "type": "tool_search_call",
        "id": "tsc_1",
        "call_id": None,
        "execution": "server",
        "status": "completed",
        "arguments": {"paths": ["get_weather"]},
    }
    found = {
        "type": "tool_search_output",
        "id": "tso_1",
        "call_id": None,
        "execution": "server",
        "status": "completed",
        "tools": [],
    }
    namespaced = {**fc("call_n1"), "namespace": "get_weather"}
    turn = ADAPTER.parse_response(body([search, found, namespaced]))
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.name, c.call_id) for c in turn.calls] == [("get_weather", "call_n1")]
    assert turn.continuation[-1] == namespaced  # namespace replayed unchanged (D8)


# ---- stream assembly --------------------------------------------------------------------------------


def test_stream_whose_output_index_leaves_a_gap_does_not_repeat_the_item() -> None:
    # mirrors vercel/ai packages/openai/src/responses/__fixtures__/openai-custom-text-tool.1.chunks.txt:
    # the only item streams at output_index 1 while the terminal snapshot lists it at position 0; the
    # snapshot copy was taken again, so the call appeared twice (duplicate call id, a duplicate item on replay)
    call = fc("call_g1")
    raw = sse(
        {"type": "response.created", "response": {"id": "resp_s", "status": "in_progress", "output": []}},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**call, "arguments": "", "status": "in_progress"},
        },
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_call_g1",
            "output_index": 1,
            "delta": call["arguments"],
        },
        {"type": "response.output_item.done", "output_index": 1, "item": call},
        {"type": "response.completed", "response": body([call])},
    )
    turn, _ = streaming.fed(ADAPTER, raw)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.call_id, c.arguments) for c in turn.calls] == [("call_g1", {"city": "Oslo"})]
    assert turn.continuation == (call,)


def test_terminal_snapshot_without_status_takes_it_from_the_event_name() -> None:
    # hand-made stream fixtures (vercel/ai .../__fixtures__/issue-19067-parallel-tool-call-wrapper.chunks.txt
    # style: a bare terminal snapshot) and compatible servers: response.completed is an explicit completion
    call = fc("call_p1")
    snapshot = {"id": "resp_s", "output": [], "usage": {"input_tokens": 34, "output_tokens": 28}}
    raw = sse(
        {"type": "response.output_item.added", "output_index": 0, "item": {**call, "arguments": ""}},
        {"type": "response.output_item.done", "output_index": 0, "item": call},
        {"type": "response.completed", "response": snapshot},
    )
    turn, _ = streaming.fed(ADAPTER, raw)
    assert (turn.finish, turn.raw_stop_reason) == (Finish.TOOL_PROPOSALS, "completed")
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (34, 28)
    incomplete = {**snapshot, "incomplete_details": {"reason": "max_output_tokens"}}
    turn, _ = streaming.fed(ADAPTER, sse({"type": "response.incomplete", "response": incomplete}))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
        Finish.TRUNCATED,
        "max_output_tokens",
        "max_tokens",
    )


# An output item type newer than callbound's SDK (openai-python 3.57's ResponseOutputItem union) that
# carries a call_id the response does not answer waits for the client like custom_tool_call does: no
# final answer and no call runs (D1: only an explicit completion is success; review round 14).
FUTURE = {"type": "hologram_call", "id": "hg_1", "call_id": "call_h1", "status": "completed"}


def test_an_unknown_item_with_an_unanswered_call_id_is_no_final_answer() -> None:
    assert_unexpected_tool_call(ADAPTER.parse_response(body([FUTURE])), "hologram_call")
    turn = ADAPTER.parse_response(body([fc("call_f1"), FUTURE]))
    assert_unexpected_tool_call(turn, "hologram_call")


@pytest.mark.parametrize(
    "items",
    [
        [{"type": "hologram_call", "id": "hg_1", "status": "completed"}],  # hosted: no call_id
        [FUTURE, {"type": "hologram_call_output", "call_id": "call_h1", "output": "done"}],  # answered
        [{"type": "program", "id": "pr_1", "call_id": "call_p1", "code": "x"}],  # known, hosted
        # xAI's hosted search, run and answered in the same response: call_id "" (vercel/ai
        # packages/xai/src/responses/__fixtures__/xai-x-search-tool.1.json)
        [
            {
                "type": "x_search_call",
                "id": "fc_x_0",
                "call_id": "",
                "name": "x_semantic_search",
                "arguments": '{"query":"AI"}',
                "status": "completed",
            }
        ],
    ],
)
def test_an_unknown_or_hosted_item_that_waits_for_nothing_is_still_a_final_answer(
    items: list[dict[str, Any]],
) -> None:
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
    }
    assert ADAPTER.parse_response(body([*items, message])).finish is Finish.FINAL_TEXT
