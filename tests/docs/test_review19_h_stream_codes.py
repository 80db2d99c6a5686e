"""docs/stop-reasons.md names the ``failure.error_code`` each out-of-order stream gets (review round 19, h).

Round 19 made Anthropic streams out of order (``message_start_missing``, ``message_start_repeated``,
``block_index_reused``) ``API_FAILURE(malformed_response)``. The page names the codes; this guard feeds
each stream through the adapter and checks that the code the turn carries is the one the page names, so
a code renamed in the adapter, or dropped from the page, fails here. Ids are synthetic.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from callbound.adapters import get
from callbound.core.types import Finish
from tests.adapters.streaming import fed
from tests.recordings import REPO_ROOT

DOC = (REPO_ROOT / "docs" / "stop-reasons.md").read_text(encoding="utf-8")

MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": [],
           "stop_reason": None, "usage": {"input_tokens": 9, "output_tokens": 1}}  # fmt: skip
START = {"type": "message_start", "message": MESSAGE}


def _tool(index: int, call_id: str) -> list[dict[str, Any]]:
    block = {"type": "tool_use", "id": call_id, "name": "get_weather", "input": {}}
    return [
        {"type": "content_block_start", "index": index, "content_block": block},
        {"type": "content_block_delta", "index": index,
         "delta": {"type": "input_json_delta", "partial_json": '{"city":"Oslo"}'}},
        {"type": "content_block_stop", "index": index},
    ]  # fmt: skip


END = [
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 20}},
    {"type": "message_stop"},
]

CASES = {
    "message_start_missing": [*_tool(0, "toolu_1"), *END],
    "message_start_repeated": [START, *_tool(0, "toolu_1"), START, *END],
    "block_index_reused": [START, *_tool(0, "toolu_1"), *_tool(0, "toolu_2"), *END],
}


def _sse(events: list[dict[str, Any]]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


@pytest.mark.parametrize("named", sorted(CASES))
def test_the_page_names_the_code_an_anthropic_stream_out_of_order_gets(named: str) -> None:
    turn, _ = fed(get("anthropic-messages"), _sse(CASES[named]))
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "malformed_response")
    assert turn.failure is not None and turn.failure.error_code == named
    assert not turn.executable
    assert re.search(rf"`{named}`", DOC), f"docs/stop-reasons.md does not name {named}"
