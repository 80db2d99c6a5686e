"""Gemini (generateContent and Interactions) end to end: real conversation shapes driven through the Runner
with ScriptedModel (request checking on, D24). Synthetic bodies that mirror the public recordings named in
each test; the recordings themselves are not copied here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.core.errors import ProtocolViolation
from callbound.testing import FakeClock, ScriptedModel, Stream

GEN = get("gemini-generate")
INT = get("gemini-interactions")


class Rate(BaseModel):
    from_currency: str
    to_currency: str


def rate(args: Rate, ctx: cb.CallContext) -> str:
    return "1 USD = 0.92 EUR"


class Loc(BaseModel):
    location: str


def weather(args: Loc, ctx: cb.CallContext) -> dict[str, Any]:
    return {"location": args.location, "weather": "sunny"}


class Screen(BaseModel):
    id: str | None = None


def screen(args: Screen, ctx: cb.CallContext) -> dict[str, Any]:
    return {"screen": args.id}


def registry() -> cb.Registry:
    return cb.Registry(
        [
            cb.ToolSpec(
                name="get_exchange_rate", description="Rate", params=Rate, handler=rate, schema_version="v1"
            ),
            cb.ToolSpec(
                name="getWeather", description="Weather", params=Loc, handler=weather, schema_version="v1"
            ),
            cb.ToolSpec(
                name="read_screen", description="Screen", params=Screen, handler=screen, schema_version="v1"
            ),
        ]
    )


def drive(api: str, responses: list[Any], **settings: Any) -> tuple[cb.Outcome, ScriptedModel]:
    model = ScriptedModel(api, responses)
    runner = cb.Runner(model=model, registry=registry(), settings=settings, clock=FakeClock())
    out = runner.run_sync(input="What is the weather in San Francisco?", tenant="t", subject="s")
    return out, model


def sse(*events: dict[str, Any]) -> str:
    return "".join(f"data: {json.dumps(e)}\r\n\r\n" for e in events)


# ---- generateContent ---------------------------------------------------------------------------------

SIG = "Ev8BCvwBAQw51sd+4Cl6u8Qa/Yd92aP0oGIHnynZfst2=="


def gemini3_call() -> dict[str, Any]:
    # Mirrors pydantic/pydantic-ai tests/cassettes/test_tool_search/test_tool_search_eval[google-gla].yaml:
    # gemini-3 call with an id and its thoughtSignature on the part, finishMessage, STOP.
    return {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {
                            "functionCall": {
                                "args": {"from_currency": "USD", "to_currency": "EUR"},
                                "id": "jusrqat3",
                                "name": "get_exchange_rate",
                            },
                            "thoughtSignature": SIG,
                        }
                    ],
                    "role": "model",
                },
                "finishMessage": "Model generated function call(s).",
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "modelVersion": "gemini-3-flash-preview",
        "responseId": "rLoDavmcDou0qtsPr9nPsAo",
        "usageMetadata": {"candidatesTokenCount": 28, "promptTokenCount": 433, "thoughtsTokenCount": 49},
    }


FINAL = {
    "candidates": [
        {"content": {"parts": [{"text": "0.92"}], "role": "model"}, "finishReason": "STOP", "index": 0}
    ],
    "responseId": "rboDav3UH9_BqtsPw_jIqQg",
    "usageMetadata": {"candidatesTokenCount": 15, "promptTokenCount": 536},
}


def as_stream(body: dict[str, Any]) -> Stream:
    cand = body["candidates"][0]
    chunks = [
        {
            "candidates": [{"content": {"parts": [p], "role": "model"}, "index": 0}],
            "responseId": body["responseId"],
        }
        for p in cand["content"]["parts"]
    ]
    chunks[-1]["candidates"][0].update({k: v for k, v in cand.items() if k != "content"})
    chunks[-1]["usageMetadata"] = body["usageMetadata"]
    return Stream(sse(*chunks), chunk_size=7)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_gemini3_round_trip_echoes_the_part_and_answers_by_id(stream: bool) -> None:
    responses: list[Any] = [gemini3_call(), FINAL]
    if stream:
        responses = [as_stream(r) for r in responses]
    out, model = drive("gemini-generate", responses, stream=stream)
    assert (out.state.value, out.text) == ("COMPLETED", "0.92")
    assert (out.usage.input_tokens, out.usage.output_tokens) == (433 + 536, 28 + 49 + 15)  # D27
    contents = model.requests[1]["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[1] == gemini3_call()["candidates"][0]["content"]  # D8: the part, signature byte-exact
    [part] = contents[2]["parts"]
    assert part["functionResponse"]["id"] == "jusrqat3"
    assert part["functionResponse"]["response"] == {"ok": True, "data": "1 USD = 0.92 EUR"}


def test_vertex_parallel_idless_calls_are_answered_in_call_order_without_ids() -> None:
    # Mirrors vercel/ai packages/google/src/__fixtures__/google-stream-no-args-tool-call.chunks.txt (Vertex
    # partialArgs: several id-less calls of one function with different arguments in one turn).
    def piece(value: str, more: bool) -> dict[str, Any]:
        entry: dict[str, Any] = {"jsonPath": "$.id", "stringValue": value}
        if more:
            entry["willContinue"] = True
        return {"functionCall": {"partialArgs": [entry], "willContinue": True}}

    parts: list[dict[str, Any]] = []
    for sid in ("A", "B", "C"):
        parts += [
            {"functionCall": {"name": "read_screen", "willContinue": True}},
            piece(sid, True),
            piece("", False),
            {"functionCall": {}},
        ]
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [p]}}]} for p in parts]
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    out, model = drive("gemini-generate", [Stream(sse(*chunks)), FINAL], stream=True)
    assert out.state.value == "COMPLETED"
    answers = [p["functionResponse"] for p in model.requests[1]["contents"][2]["parts"]]
    assert [a["name"] for a in answers] == ["read_screen"] * 3
    assert all("id" not in a for a in answers)  # D7: synthetic ids are never sent
    assert [a["response"]["data"]["screen"] for a in answers] == ["A", "B", "C"]


# ---- Interactions: legacy (outputs) schema -------------------------------------------------------------

LEGACY_ID = "v1_ChdzT240YVlHeElfV0p6N0lQZ2R1czRRYxIX"


def legacy_step1() -> list[dict[str, Any]]:
    # Mirrors vercel/ai packages/google/src/interactions/__fixtures__/tool-call-step1.chunks.txt in its
    # legacy form (interaction.start, content.* events, whole function_call delta, interaction.complete).
    return [
        {"interaction": {"id": LEGACY_ID, "status": "in_progress"}, "event_type": "interaction.start"},
        {"index": 0, "content": {"type": "thought"}, "event_type": "content.start"},
        {
            "index": 0,
            "delta": {"signature": "CiQBsig/+=", "type": "thought_signature"},
            "event_type": "content.delta",
        },
        {"index": 0, "event_type": "content.stop"},
        {"index": 1, "content": {"id": "odkxni2w", "type": "function_call"}, "event_type": "content.start"},
        {
            "index": 1,
            "delta": {
                "id": "odkxni2w",
                "type": "function_call",
                "name": "getWeather",
                "arguments": {"location": "San Francisco"},
            },
            "event_type": "content.delta",
        },
        {"index": 1, "event_type": "content.stop"},
        {"interaction": {"id": LEGACY_ID, "status": "requires_action"}, "event_type": "interaction.complete"},
    ]


LEGACY_STEP2 = {
    # Mirrors vercel/ai .../interactions/__fixtures__/tool-call-step2.json (legacy outputs form).
    "id": "v1_ChdsT240YVpfbUdZeWd6N0lQaWRPT3NRWRIX",
    "status": "completed",
    "outputs": [{"type": "text", "text": "Sunny in San Francisco."}],
    "role": "model",
}


def test_a_legacy_transcript_is_sent_in_one_schema() -> None:
    # Found replaying the recordings through the Runner: the user's input was a steps-schema user_input
    # while the model turn and the results were legacy turns, a list the legacy API cannot read.
    out, model = drive(
        "gemini-interactions", [Stream(sse(*legacy_step1()), chunk_size=7), LEGACY_STEP2], stream=True
    )
    assert (out.state.value, out.text) == ("COMPLETED", "Sunny in San Francisco.")
    first, second = (r["input"] for r in model.requests)
    assert first == [
        {"type": "user_input", "content": [{"type": "text", "text": "What is the weather in San Francisco?"}]}
    ]
    assert [i.get("role") for i in second] == ["user", "model", "user"]
    assert second[0] == {
        "role": "user",
        "content": [{"type": "text", "text": "What is the weather in San Francisco?"}],
    }
    assert second[1]["content"][0] == {"type": "thought", "signature": "CiQBsig/+="}  # D8
    assert second[2]["content"][0]["call_id"] == "odkxni2w"


def test_a_stateful_legacy_continuation_sends_only_the_results() -> None:
    out, model = drive(
        "gemini-interactions",
        [Stream(sse(*legacy_step1())), LEGACY_STEP2],
        stream=True,
        continuation="previous_response_id",
    )
    assert out.state.value == "COMPLETED"
    body = model.requests[1]
    assert body["previous_interaction_id"] == LEGACY_ID
    assert [i["role"] for i in body["input"]] == ["user"]


def test_check_request_rejects_an_input_mixing_the_two_schemas() -> None:
    mixed = {
        "input": [
            {"type": "user_input", "content": [{"type": "text", "text": "Weather?"}]},
            {"role": "model", "content": [{"type": "text", "text": "Sunny."}]},
        ]
    }
    with pytest.raises(ProtocolViolation, match="mixes legacy turns and steps"):
        INT.check_request(mixed)


def test_a_steps_transcript_is_left_as_built() -> None:
    # Mirrors vercel/ai .../interactions/__fixtures__/tool-call-step1.json / step2.json (steps schema): the
    # step-2 input is the one vercel/ai sent (convert-to-google-interactions-input.ts), result aside.
    step1 = {
        "id": "v1_ChdUMnNIYXVxU0lJX2lxdHNQX2FicXVBWRIX",
        "status": "requires_action",
        "steps": [
            {"signature": "CtkBAQw51sduvOhi/4ERHaM4Pnc11QLqBpYX==", "type": "thought"},
            {
                "id": "zggxzq8r",
                "type": "function_call",
                "name": "getWeather",
                "arguments": {"location": "San Francisco"},
            },
        ],
    }
    step2 = {
        "id": "v1_ChdVR3NIYXVhR091S3NxdHNQdWI3b3NBWRIX",
        "status": "completed",
        "steps": [{"type": "model_output", "content": [{"type": "text", "text": "Sunny, 8 C."}]}],
    }
    out, model = drive("gemini-interactions", [step1, step2])
    assert (out.state.value, out.text) == ("COMPLETED", "Sunny, 8 C.")
    second = model.requests[1]["input"]
    assert second[0]["type"] == "user_input" and second[1:3] == step1["steps"]
    # the result is a top-level function_result step, not nested in a user_input (WIRE.md 5.5, review 9)
    [result] = second[3:]
    assert (result["type"], result["call_id"], result["name"]) == (
        "function_result",
        "zggxzq8r",
        "getWeather",
    )
