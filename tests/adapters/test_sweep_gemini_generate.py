"""gemini-generate: stream shapes seen in public recordings during the sweep (synthetic bodies, real shapes).

The sweep found no defect in this adapter; these pin the recorded behaviours no other test covers."""

from __future__ import annotations

import json
from typing import Any

from callbound.adapters.gemini_generate import ADAPTER
from callbound.core.types import Finish, ok_result
from tests.adapters import streaming


def sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


def chunk(parts: list[dict[str, Any]], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    return {"candidates": [cand], "modelVersion": "gemini-x", "responseId": "r1", **extra}


def piece(path: str, value: str, more: bool = True) -> dict[str, Any]:
    entry: dict[str, Any] = {"jsonPath": path, "stringValue": value}
    if more:
        entry["willContinue"] = True
    return {"functionCall": {"partialArgs": [entry], "willContinue": True}}


def test_vertex_bare_will_continue_parts_between_array_items_keep_one_call() -> None:
    # Mirrors vercel/ai packages/google/src/__fixtures__/google-vertex-stream-tool-call-arguments-nested.1.chunks.txt:
    # a {"functionCall": {"willContinue": true}} part (no name, no partialArgs) between array items, and
    # the call closed by {"functionCall": {}} on the finish chunk.
    raw = sse(
        chunk(
            [{"functionCall": {"name": "cookRecipe", "willContinue": True}, "thoughtSignature": "CmIBsig"}]
        ),
        chunk([piece("$.recipe.ingredients[0].amount", "16 oz")]),
        chunk([piece("$.recipe.ingredients[0].amount", "", more=False)]),
        chunk([piece("$.recipe.ingredients[0].name", "Lasagna noodles")]),
        chunk([piece("$.recipe.ingredients[0].name", "", more=False)]),
        chunk([{"functionCall": {"willContinue": True}}]),
        chunk([piece("$.recipe.ingredients[1].amount", "1 lb")]),
        chunk([piece("$.recipe.ingredients[1].amount", "", more=False)]),
        chunk([{"functionCall": {"willContinue": True}}]),
        chunk([piece("$.recipe.steps[0]", "Cook noodles")]),
        chunk([piece("$.recipe.steps[0]", ".")]),
        chunk([piece("$.recipe.steps[0]", "", more=False)]),
        chunk(
            [{"functionCall": {}}],
            "STOP",
            usageMetadata={"promptTokenCount": 31, "candidatesTokenCount": 684, "thoughtsTokenCount": 1026},
        ),
    )
    turn, _ = streaming.fed(ADAPTER, raw)
    assert turn.finish is Finish.TOOL_PROPOSALS
    [call] = turn.calls
    assert call.arguments == {
        "recipe": {
            "ingredients": [{"amount": "16 oz", "name": "Lasagna noodles"}, {"amount": "1 lb"}],
            "steps": ["Cook noodles."],
        }
    }
    assert call.arguments_error is None and call.synthetic_id
    [part] = turn.continuation[0]["parts"]
    assert part == {
        "functionCall": {"name": "cookRecipe", "args": call.arguments},
        "thoughtSignature": "CmIBsig",
    }
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (31, 1710)


def test_code_execution_stream_with_a_finish_reason_mid_stream_reads_to_the_end() -> None:
    # Mirrors pydantic/pydantic-ai tests/models/cassettes/test_google/test_google_model_builtin_code_execution_stream.yaml:
    # the chunk with the second executableCode carries finishReason STOP, yet the result, more text and
    # a second STOP follow; usage grows toolUsePromptTokenCount on the way (D27: it is prompt input).
    def usage(cand: int, tool: int | None) -> dict[str, Any]:
        meta = {"promptTokenCount": 46, "candidatesTokenCount": cand, "thoughtsTokenCount": 563}
        return meta if tool is None else {**meta, "toolUsePromptTokenCount": tool}

    code = {"executableCode": {"language": "PYTHON", "code": "print(1 + 1)\n"}}
    result = {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "2\n"}}
    raw = sse(
        chunk([{**code, "thought": True}], usageMetadata=usage(33, None)),
        chunk([{**result, "thought": True}], usageMetadata=usage(33, None)),
        chunk([{"text": "Here is the calculation:\n"}], usageMetadata=usage(51, 476)),
        chunk([code], "STOP", usageMetadata=usage(180, 476)),
        chunk([result], usageMetadata=usage(180, 476)),
        chunk([{"text": "The result is "}], usageMetadata=usage(181, 1268)),
        chunk([{"text": "**2**."}], "STOP", usageMetadata=usage(235, 1268)),
    )
    turn, _ = streaming.fed(ADAPTER, raw)
    assert (turn.finish, turn.raw_stop_reason, turn.calls) == (Finish.FINAL_TEXT, "STOP", ())
    assert turn.text == "Here is the calculation:\nThe result is **2**."
    parts = turn.continuation[0]["parts"]
    assert [next(iter(p)) for p in parts] == [
        "executableCode",
        "codeExecutionResult",
        "text",
        "executableCode",
        "codeExecutionResult",
        "text",
    ]
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (46 + 1268, 235 + 563)


def test_signature_on_the_first_answer_chunk_stays_on_that_part() -> None:
    # Mirrors pydantic/pydantic-ai tests/models/cassettes/test_google/test_google_model_thinking_part_iter.yaml:
    # thought summaries in several chunks (usage without candidatesTokenCount), then the answer whose first
    # chunk carries the thoughtSignature, then plain text chunks, finish on the last one (D8).
    raw = sse(
        chunk([{"text": "**Defining**\n", "thought": True}], usageMetadata={"promptTokenCount": 34, "thoughtsTokenCount": 70}),
        chunk([{"text": "**Refining**\n", "thought": True}], usageMetadata={"promptTokenCount": 34, "thoughtsTokenCount": 759}),
        chunk([{"text": "Here is a guide:", "thoughtSignature": "CiIBsig"}]),
        chunk([{"text": " look left"}]),
        chunk(
            [{"text": ", then right."}],
            "STOP",
            usageMetadata={"promptTokenCount": 34, "candidatesTokenCount": 387, "thoughtsTokenCount": 759},
        ),
    )  # fmt: skip
    turn, _ = streaming.fed(ADAPTER, raw)
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "Here is a guide: look left, then right.")
    assert turn.continuation[0]["parts"] == [
        {"text": "**Defining**\n**Refining**\n", "thought": True},
        {"text": "Here is a guide:", "thoughtSignature": "CiIBsig"},
        {"text": " look left, then right."},
    ]
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (34, 387 + 759)


def test_recorded_id_less_call_is_answered_without_an_id() -> None:
    # Mirrors vercel/ai packages/google/src/__fixtures__/issue-16072-google-pdf-tool-result-live.json: a
    # no-arg call without id (gemini-2.5-flash-lite); the answer goes back without an id (D7).
    turn = ADAPTER.parse_response(
        {
            "candidates": [
                {
                    "content": {
                        "parts": [{"functionCall": {"name": "catalogSearch", "args": {}}}],
                        "role": "model",
                    },
                    "finishReason": "STOP",
                    "index": 0,
                    "finishMessage": "Model generated function call(s).",
                }
            ],
            "usageMetadata": {"promptTokenCount": 44, "candidatesTokenCount": 9, "totalTokenCount": 53},
            "modelVersion": "gemini-2.5-flash-lite",
            "responseId": "kpNPapqwA76LkdUP0vGIOA",
        }
    )
    [call] = turn.calls
    assert (turn.finish, call.arguments, call.synthetic_id) == (Finish.TOOL_PROPOSALS, {}, True)
    [answer] = ADAPTER.result_items(turn, [(call, ok_result({"content": "metadata"}))])
    assert answer == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "name": "catalogSearch",
                    "response": {"ok": True, "data": {"content": "metadata"}},
                }
            }
        ],
    }
    body = ADAPTER.build_request(
        items=[{"role": "user", "parts": [{"text": "q"}]}, *ADAPTER.turn_items(turn), answer],
        tools=[],
        settings={},
        instructions=None,
        stream=False,
    )
    ADAPTER.check_request(body, turn)
