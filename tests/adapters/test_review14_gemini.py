"""Review 14: gemini-generate streams whose finishReason is not the end of the turn.

1. A code execution stream carries a finishReason STOP on a middle chunk: pydantic-ai
   tests/models/cassettes/test_google/test_google_model_builtin_code_execution_stream.yaml, chunk 8 of 13
   holds the model's second executableCode part and STOP; the codeExecutionResult, the answer text and a
   second STOP follow. Cut after that chunk, or after any later one but the last, the stream holds half an
   answer: it is TRUNCATED(stream_interrupted) and retried (issue 3 §4, D26), not a final answer.
2. Every finishReason but STOP is sticky: a later STOP does not turn MALFORMED_FUNCTION_CALL or MAX_TOKENS
   into calls that run (WIRE.md 4.3: do not execute any functionCall present with such a reason); only a
   refusal replaces it (D31). Shape UNCONFIRMED (several finishReasons per stream: the recording above).
3. A streamed candidate whose ``index`` is present and not 0 (candidateCount > 1, one candidate per chunk)
   is no part of the turn, as a plain body's turn is its first candidate only. Shape UNCONFIRMED.

All bodies below are synthetic, written in the shapes those sources show.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters.gemini_generate import ADAPTER
from callbound.core.types import Finish
from callbound.testing import FakeClock, ScriptedModel, Stream
from tests.adapters import streaming


def sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


def chunk(
    parts: list[dict[str, Any]], finish: str | None = None, index: int | None = 0, **extra: Any
) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if index is not None:
        cand["index"] = index
    if finish:
        cand["finishReason"] = finish
    return {"candidates": [cand], "modelVersion": "gemini-2.5-pro", "responseId": "r1", **extra}


def usage(cand: int) -> dict[str, Any]:
    return {"promptTokenCount": 46, "candidatesTokenCount": cand, "thoughtsTokenCount": 563}


# ---- 1. a STOP mid-stream (code execution) --------------------------------------------------------

CODE = {"executableCode": {"language": "PYTHON", "code": "print(6 * 7)\n"}}
RESULT = {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "42\n"}}
# The recording's order: thought code and result, the answer's start, the second executableCode with the
# first STOP, its result, the answer in pieces, the second STOP.
CODE_EXEC = [
    chunk([{**CODE, "thought": True}], usageMetadata=usage(33)),
    chunk([{**RESULT, "thought": True}], usageMetadata=usage(33)),
    chunk([{"text": "Here is the calculation performed using Python:\n"}], usageMetadata=usage(51)),
    chunk([CODE], "STOP", usageMetadata=usage(180)),  # chunk 8 of 13 in the recording
    chunk([RESULT], usageMetadata=usage(180)),
    chunk([{"text": "The result is "}], usageMetadata=usage(181)),
    chunk([{"text": "**42**."}], "STOP", usageMetadata=usage(235)),
]
MID_STOP = 3  # the chunk index of the mid-stream STOP


def test_the_whole_code_execution_stream_is_a_final_answer() -> None:
    turn, _ = streaming.fed(ADAPTER, sse(*CODE_EXEC))
    assert (turn.finish, turn.raw_stop_reason) == (Finish.FINAL_TEXT, "STOP")
    assert turn.text == "Here is the calculation performed using Python:\nThe result is **42**."


@pytest.mark.parametrize("cut", range(MID_STOP + 1, len(CODE_EXEC)), ids=lambda n: f"after_chunk_{n}")
def test_a_code_execution_stream_cut_after_its_mid_stream_stop_is_cut(cut: int) -> None:
    turn, _ = streaming.fed(ADAPTER, sse(*CODE_EXEC[:cut]))
    assert (turn.finish, turn.reason, turn.raw_stop_reason) == (Finish.TRUNCATED, "stream_interrupted", None)
    assert turn.failure is not None and turn.failure.kind == "stream_cut" and turn.failure.retryable
    assert turn.usage.input_tokens == 46  # D27: a cut stream's running usage still counts
    # The same chunks as a JSON array (streamGenerateContent without alt=sse) read alike.
    assert ADAPTER.parse_response(json.dumps(CODE_EXEC[:cut])).reason == "stream_interrupted"


def test_a_closing_chunk_after_a_code_execution_answer_does_not_make_it_cut() -> None:
    # An empty text part after the STOP (closing chunks carry {"text": ""}) is no content.
    turn, _ = streaming.fed(ADAPTER, sse(*CODE_EXEC, chunk([{"text": ""}])))
    assert turn.finish is Finish.FINAL_TEXT


def test_max_tokens_on_an_executable_code_part_keeps_its_reason() -> None:
    # Only a STOP can be taken for a complete answer; a length stop ends the turn however it ends.
    turn, _ = streaming.fed(ADAPTER, sse(*CODE_EXEC[:MID_STOP], chunk([CODE], "MAX_TOKENS")))
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "max_tokens")


def test_the_runner_retries_the_cut_code_execution_stream_and_completes_with_the_whole_answer() -> None:
    cut = sse(*CODE_EXEC[: MID_STOP + 1]).decode()
    whole = sse(*CODE_EXEC).decode()
    model = ScriptedModel("gemini-generate", [Stream(cut, chunk_size=64), Stream(whole, chunk_size=64)])
    outcome = cb.Runner(
        model=model, registry=cb.Registry([]), clock=FakeClock(), settings={"stream": True}
    ).run_sync(input="6 * 7?", tenant="t", subject="s")
    assert outcome.state.value == "COMPLETED"
    assert outcome.text == "Here is the calculation performed using Python:\nThe result is **42**."
    assert len(model.requests) == 2  # D26: the cut stream was retried


# ---- 2. a later STOP does not undo a failure ------------------------------------------------------

REFUND = {"functionCall": {"name": "refund", "args": {"order_id": "A"}}}


@pytest.mark.parametrize(
    ("bad", "finish", "reason"),
    [
        ("MALFORMED_FUNCTION_CALL", Finish.API_FAILURE, "malformed_function_call"),
        ("MAX_TOKENS", Finish.TRUNCATED, "max_tokens"),
        ("UNEXPECTED_TOOL_CALL", Finish.API_FAILURE, "unexpected_tool_call"),
        ("FINISH_REASON_UNSPECIFIED", Finish.API_FAILURE, "unknown_stop_reason"),
    ],
)
def test_a_later_stop_does_not_undo_a_failure_finish_reason(bad: str, finish: Finish, reason: str) -> None:
    raw = sse(
        chunk([REFUND], bad, finishMessage="Malformed function call: refund(order_id=A"),
        chunk([{"text": ""}], "STOP", finishMessage="later"),
    )
    turn, _ = streaming.fed(ADAPTER, raw)
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (finish, bad, reason)
    assert not turn.executable  # WIRE.md 4.3: no functionCall present runs


def test_a_refusal_still_replaces_an_earlier_failure() -> None:
    raw = sse(chunk([REFUND], "MALFORMED_FUNCTION_CALL"), chunk([], "SAFETY"), chunk([], "STOP"))
    turn, _ = streaming.fed(ADAPTER, raw)
    assert (turn.finish, turn.raw_stop_reason) == (Finish.REFUSAL, "SAFETY")  # D31


def test_a_failure_after_a_mid_stream_stop_is_kept() -> None:
    raw = sse(chunk([{"text": "Partial"}], "STOP"), chunk([REFUND], "MAX_TOKENS"))
    turn, _ = streaming.fed(ADAPTER, raw)
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "max_tokens")


class Order(BaseModel):
    order_id: str


def test_the_runner_never_runs_a_call_of_a_malformed_function_call_stream_closed_by_a_stop() -> None:
    ran: list[str] = []

    def refund(args: Order, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.order_id)
        return {"refunded": True}

    registry = cb.Registry(
        [cb.ToolSpec(name="refund", description="Refund", params=Order, handler=refund, schema_version="v1")]
    )
    bad = sse(chunk([REFUND], "MALFORMED_FUNCTION_CALL"), chunk([{"text": ""}], "STOP")).decode()
    model = ScriptedModel("gemini-generate", [Stream(bad)] * 4)
    outcome = cb.Runner(
        model=model, registry=registry, clock=FakeClock(), settings={"stream": True}
    ).run_sync(input="Refund A", tenant="t", subject="s")
    assert ran == [] and outcome.state.value == "FAILED"  # retried (D1), never executed


# ---- 3. candidates other than 0 ---------------------------------------------------------------------


def test_a_streamed_candidate_other_than_0_is_no_part_of_the_turn() -> None:
    other = {"functionCall": {"name": "refund", "args": {"order_id": "B"}}}
    raw = sse(
        chunk([REFUND], index=0),
        chunk([other], index=1),
        chunk([{"text": ""}], "STOP", index=0),
        chunk([{"text": ""}], "MALFORMED_FUNCTION_CALL", index=1),
    )
    turn, _ = streaming.fed(ADAPTER, raw)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [c.arguments for c in turn.calls] == [{"order_id": "A"}]
    assert turn.continuation[0]["parts"] == [REFUND]


def test_candidate_0_is_found_in_a_chunk_holding_both() -> None:
    both = chunk([{"text": "B"}], "STOP", index=1)
    both["candidates"].append(chunk([{"text": "A"}], "STOP", index=0)["candidates"][0])
    turn, _ = streaming.fed(ADAPTER, sse(both))
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "A")


def test_a_stream_whose_only_finish_is_another_candidates_is_cut() -> None:
    raw = sse(chunk([{"text": "A"}], index=None), chunk([{"text": "B"}], "STOP", index=1))
    turn, _ = streaming.fed(ADAPTER, raw)
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "stream_interrupted")


def test_a_candidate_without_index_is_candidate_0() -> None:
    # Vertex chunks leave index out (ai__google-stream-tool-call-arguments.chunks.txt).
    turn, _ = streaming.fed(ADAPTER, sse(chunk([{"text": "A"}], "STOP", index=None)))
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "A")


def test_a_part_of_only_a_thought_signature_after_the_stop_is_no_content() -> None:
    # A closing part holding only metadata ({"thoughtSignature": ...}, no text key) after the STOP chunk:
    # nothing more was said, so the stream ended, it was not cut (regression review, round 14).
    def chunk(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate], "modelVersion": "gemini-3-pro-preview", "responseId": "r"}

    chunks = [
        chunk([{"text": "Hello"}]),
        chunk([{"text": ""}], "STOP"),
        chunk([{"thoughtSignature": "EqsG"}]),
    ]
    raw = "".join("data: " + json.dumps(c) + "\r\n\r\n" for c in chunks).encode()
    turn, _ = streaming.fed(ADAPTER, raw)
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "Hello")
