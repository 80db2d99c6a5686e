"""Every request an operation sends, in every state that makes one, read by the official SDKs' request
types (review round 22, f).

tests/adapters/test_review20_b_sdk_requests.py reads the answer to each recorded turn built by the
adapters directly (one ``ok`` and one ``HANDLER_ERROR`` result, plain requests). Here the Runner itself
drives operations over ScriptedModel, plain and streamed, and every body the model client is handed is
read: the first request (tools, tool choice, settings, stream flag), the answer to a turn of seven
parallel calls whose results are the envelopes the runtime makes (ok, UNKNOWN_TOOL, INVALID_ARGUMENTS,
DENIED, HANDLER_ERROR, TIMEOUT, RESULT_TOO_LARGE), with the turn's reasoning (taken from the shared
recordings: an encrypted Responses reasoning item, Anthropic thinking with its signature and
redacted_thinking, a Gemini thoughtSignature, an Interactions thought step) and its text sent back, then
the answer to a call whose approval expired (APPROVAL_EXPIRED) or went stale (APPROVAL_STALE), in each
continuation mode (replay, ``store: false``, ``previous_response_id``).

The readers: openai-python ``ResponseCreateParams{Non,}Streaming`` and
``CompletionCreateParams{Non,}Streaming``, anthropic-sdk-python ``MessageCreateParams{Non,}Streaming``
and python-genai's Interactions ``CreateModelInteractionParam``, read strictly by the walker of round 20
(a key the TypedDict does not declare, a missing required key, a value outside a ``Literal`` fail); for
generateContent, python-genai's pydantic models (``extra="forbid"``) read each member of the body by its
REST name only (``by_name=False``: the REST API's JSON names are lowerCamelCase, WIRE.md 4.5; a
snake_case key is refused) from JSON text (so a ``thoughtSignature`` must be base64, as the SDK's bytes
field requires), and the SDK's own request builder, given what was read, must produce the same body.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

import callbound as cb
from callbound.adapters import get
from callbound.core.ids import SequentialIds
from callbound.core.registry import ToolDeclaration
from callbound.runtime.tools import ToolExecutor
from callbound.stores.memory import MemoryStore
from callbound.testing import ApiError, FakeClock, ScriptedModel
from callbound.transports.http import ANTHROPIC_VERSION
from tests.adapters.plain_as_stream import STREAMERS, sse
from tests.recordings import load_cassette, read_bytes, response_body

openai_responses = pytest.importorskip("openai.types.responses.response_create_params")
openai_chat = pytest.importorskip("openai.types.chat.completion_create_params")
anthropic_params = pytest.importorskip("anthropic.types.message_create_params")
genai = pytest.importorskip("google.genai")
interactions_params = pytest.importorskip("google.genai._gaos.types.interactions.createmodelinteraction")

from google.genai import models as genai_models  # noqa: E402
from google.genai import types as genai_types  # noqa: E402

from tests.adapters.test_review20_b_sdk_requests import violations  # noqa: E402

APIS = ("openai-responses", "openai-chat", "anthropic-messages", "gemini-generate", "gemini-interactions")
REQUEST_TYPES: dict[tuple[str, bool], Any] = {
    ("openai-responses", False): openai_responses.ResponseCreateParamsNonStreaming,
    ("openai-responses", True): openai_responses.ResponseCreateParamsStreaming,
    ("openai-chat", False): openai_chat.CompletionCreateParamsNonStreaming,
    ("openai-chat", True): openai_chat.CompletionCreateParamsStreaming,
    ("anthropic-messages", False): anthropic_params.MessageCreateParamsNonStreaming,
    ("anthropic-messages", True): anthropic_params.MessageCreateParamsStreaming,
    ("gemini-interactions", False): interactions_params.CreateModelInteractionParam,
    ("gemini-interactions", True): interactions_params.CreateModelInteractionParam,
}
# Chat Completions ignores unknown members of a message; the assistant message goes back as received (D8)
# and carries `annotations` (test_review20_b_sdk_requests.CHAT_IGNORED).
CHAT_IGNORED = frozenset({"annotations"})
MODELS = {
    "openai-responses": "gpt-5",
    "openai-chat": "gpt-4o",
    "anthropic-messages": "claude-sonnet-4-5",
    "gemini-generate": None,  # in the URL, not the body
    "gemini-interactions": "gemini-2.5-flash",
}

# ---- generateContent: the REST body read by python-genai's models and request builder ----------------

# The members of a generateContent REST body (python-genai models._GenerateContentParameters_to_mldev and
# _GenerateContentConfig_to_mldev: what they put at the top level) and the SDK type of each.
GEMINI_TOP: dict[str, Any] = {
    "contents": list[genai_types.Content],
    "systemInstruction": genai_types.Content,
    "tools": list[genai_types.Tool],
    "toolConfig": genai_types.ToolConfig,
    "generationConfig": genai_types.GenerationConfig,
    "safetySettings": list[genai_types.SafetySetting],
    "cachedContent": str,
}


def gemini_violations(body: dict[str, Any]) -> list[str]:
    found = [f"$.{key}: no member of a generateContent body" for key in body if key not in GEMINI_TOP]
    read: dict[str, Any] = {}
    for key, value in body.items():
        if key not in GEMINI_TOP:
            continue
        try:
            # JSON text, REST (alias) names only: a snake_case key is an unknown field (extra="forbid")
            read[key] = TypeAdapter(GEMINI_TOP[key]).validate_json(
                json.dumps(value), by_alias=True, by_name=False
            )
        except ValueError as exc:
            found.append(f"$.{key}: {exc}")
    if found:
        return found
    # What python-genai itself would send for what was read (Models.generate_content's own steps).
    config = genai_types.GenerateContentConfig(
        system_instruction=read.get("systemInstruction"),
        tools=read.get("tools"),
        tool_config=read.get("toolConfig"),
        safety_settings=read.get("safetySettings"),
        cached_content=read.get("cachedContent"),
        **(read["generationConfig"].model_dump(exclude_none=True) if "generationConfig" in read else {}),
    )
    client = genai.Client(api_key="unused")
    params = genai_types._GenerateContentParameters(
        model="gemini-x", contents=read["contents"], config=config
    )
    sdk = genai_models._GenerateContentParameters_to_mldev(client._api_client, params, None, params)
    for key in ("_url", "_query", "config"):
        sdk.pop(key, None)
    sdk = genai._common.encode_unserializable_types(genai._common.convert_to_dict(sdk))
    if sdk.get("generationConfig") == {}:
        del sdk["generationConfig"]
    # python-genai holds a thoughtSignature as bytes and writes them back in the URL-safe alphabet; callbound
    # echoes the recorded string byte for byte (WIRE.md 4.6: the documented rule). Compared as bytes.
    if _signatures_as_bytes(sdk) != _signatures_as_bytes(body):
        return [f"python-genai builds another body: {json.dumps(sdk)[:2000]} != {json.dumps(body)[:2000]}"]
    return []


def _signatures_as_bytes(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: base64.urlsafe_b64decode(v.replace("+", "-").replace("/", "_"))
            if k == "thoughtSignature" and isinstance(v, str)
            else _signatures_as_bytes(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_signatures_as_bytes(v) for v in value]
    return value


def sdk_violations(api: str, body: dict[str, Any], stream: bool) -> list[str]:
    if api == "gemini-generate":
        return gemini_violations(body)
    if api == "anthropic-messages" and "temperature" in body:
        # anthropic-sdk-python 2.x types are written for anthropic-version 2026-10-21, which dropped the
        # sampling parameters (MessageCreateParamsBase has no temperature, top_p or top_k; that version
        # answers 400 "temperature: Extra inputs are not permitted"). callbound pins anthropic-version
        # 2023-06-01 on both transports (transports/http.py ANTHROPIC_VERSION, transports/anthropic.py),
        # whose Messages API takes temperature: the SDK type is stricter than the API callbound speaks.
        assert ANTHROPIC_VERSION == "2023-06-01"
        assert isinstance(body["temperature"], int | float)
        body = {k: v for k, v in body.items() if k != "temperature"}
    ignored = CHAT_IGNORED if api == "openai-chat" else frozenset()
    return violations(body, REQUEST_TYPES[(api, stream)], ignored=ignored)


def test_the_gemini_reader_refuses_snake_case_bad_signatures_and_unknown_members() -> None:
    good = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    assert gemini_violations(good) == []
    snake = {"contents": [{"role": "model", "parts": [{"function_call": {"name": "f", "args": {}}}]}]}
    assert gemini_violations(snake)
    signed = {"contents": [{"role": "model", "parts": [{"text": "x", "thoughtSignature": "not base64!"}]}]}
    assert gemini_violations(signed)
    assert gemini_violations({**good, "tool_config": {}})
    assert gemini_violations({**good, "generationConfig": {"max_output_tokens": 5}})
    assert gemini_violations({**good, "generationConfig": {"maxOutputTokens": 5}}) == []


# ---- realistic reasoning, from the shared recordings --------------------------------------------------


def _recorded(path: str, pick: Any) -> Any:
    for interaction in load_cassette(path):
        body = response_body(interaction)
        if isinstance(body, dict):
            for found in pick(body):
                return found
    raise AssertionError(f"nothing to pick in {path}")


def reasoning() -> dict[str, Any]:
    """An encrypted reasoning item of gpt-5 (summary included)."""
    return _recorded(
        "openai-responses/pydantic-ai__test_openai_responses_thinking_with_tool_calls.yaml",
        lambda b: [o for o in b.get("output", []) if o["type"] == "reasoning"],
    )


def thinking() -> list[dict[str, Any]]:
    """Claude's signed thinking block and a redacted_thinking block."""
    signed = _recorded(
        "anthropic/pydantic-ai__test_anthropic_tool_with_thinking.yaml",
        lambda b: [o for o in b.get("content", []) if o["type"] == "thinking"],
    )
    redacted = _recorded(
        "anthropic/pydantic-ai__test_anthropic_model_thinking_part_redacted.yaml",
        lambda b: [o for o in b.get("content", []) if o["type"] == "redacted_thinking"],
    )
    return [signed, redacted]


def thought_signature() -> str:
    return str(
        _recorded(
            "gemini/pydantic-ai__test_google_instructions_only_with_tool_calls.yaml",
            lambda b: [
                p["thoughtSignature"]
                for p in b["candidates"][0]["content"]["parts"]
                if "thoughtSignature" in p
            ],
        )
    )


def thought_step() -> dict[str, Any]:
    body = json.loads(read_bytes("gemini-interactions/ai__steps__tool-call-step1.json"))
    return next(s for s in body["steps"] if s["type"] == "thought")


# ---- provider bodies for one turn ---------------------------------------------------------------------

Call = tuple[str, str, dict[str, Any]]
CITY = {"city": "Oslo"}
# One parallel turn whose results are every error envelope a run makes without an approval.
PARALLEL: list[Call] = [
    ("c1", "get_weather", CITY),  # ok
    ("c2", "get_forecast", CITY),  # UNKNOWN_TOOL
    ("c3", "get_weather", {"town": "Oslo"}),  # INVALID_ARGUMENTS
    ("c4", "guarded", CITY),  # DENIED (authorize answers False)
    ("c5", "broken", CITY),  # HANDLER_ERROR (ToolError)
    ("c6", "slow", CITY),  # TIMEOUT
    ("c7", "big", CITY),  # RESULT_TOO_LARGE
]
CODES = [None, "UNKNOWN_TOOL", "INVALID_ARGUMENTS", "DENIED", "HANDLER_ERROR", "TIMEOUT", "RESULT_TOO_LARGE"]
REFUND: list[Call] = [("c9", "refund", {"order_id": "A1", "amount": 40.0})]


def turn_body(api: str, rid: str, calls: list[Call], *, text: str | None, think: bool) -> dict[str, Any]:
    if api == "openai-responses":
        output: list[dict[str, Any]] = [reasoning()] if think else []
        if text is not None:
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{rid}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [part],
                }
            )
        output += [
            {
                "type": "function_call",
                "id": f"fc_{k}_{cid}",
                "call_id": f"call_{cid}",
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
            for k, (cid, name, args) in enumerate(calls)
        ]
        usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        return {
            "id": rid,
            "object": "response",
            "status": "completed",
            "model": "gpt-5",
            "output": output,
            "usage": usage,
        }
    if api == "openai-chat":
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None, "annotations": []}
        if calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{cid}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for cid, name, args in calls
            ]
        choice = {
            "index": 0,
            "message": message,
            "finish_reason": "tool_calls" if calls else "stop",
            "logprobs": None,
        }
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        return {
            "id": rid,
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o",
            "choices": [choice],
            "usage": usage,
        }
    if api == "anthropic-messages":
        content: list[dict[str, Any]] = thinking() if think else []
        if text is not None:
            content.append({"type": "text", "text": text})
        content += [
            {"type": "tool_use", "id": f"toolu_{cid}", "name": name, "input": args}
            for cid, name, args in calls
        ]
        return {
            "id": rid,
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    if api == "gemini-generate":
        parts: list[dict[str, Any]] = [{"text": "Checking the tools.", "thought": True}] if think else []
        if text is not None:
            parts.append({"text": text})
        for k, (cid, name, args) in enumerate(calls):
            part: dict[str, Any] = {"functionCall": {"id": cid, "name": name, "args": args}}
            if k == 0 and think:  # only the first call of a parallel turn is signed (WIRE.md 4.6)
                part["thoughtSignature"] = thought_signature()
            parts.append(part)
        candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
        return {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": "gemini-3-pro-preview",
            "responseId": rid,
        }
    steps: list[dict[str, Any]] = [thought_step()] if think else []
    if text is not None:
        steps.append({"type": "model_output", "content": [{"type": "text", "text": text}]})
    steps += [
        {"type": "function_call", "id": cid, "name": name, "arguments": args} for cid, name, args in calls
    ]
    return {
        "id": rid,
        "object": "interaction",
        "status": "requires_action" if calls else "completed",
        "model": "gemini-2.5-flash",
        "steps": steps,
        "usage": {"total_input_tokens": 10, "total_output_tokens": 5, "total_tokens": 15},
    }


def played(api: str, body: dict[str, Any], stream: bool) -> Any:
    if not stream:
        return body
    raw = STREAMERS[api](body)
    assert raw is not None
    return raw


# ---- the tools ---------------------------------------------------------------------------------------


class City(BaseModel):
    city: str


class RefundArgs(BaseModel):
    order_id: str
    amount: float


def weather(args: City, ctx: cb.CallContext) -> dict[str, Any]:
    return {"city": args.city, "temp_c": 3, "note": 'Zürich-style "quotes"'}


def broken(args: City, ctx: cb.CallContext) -> dict[str, Any]:
    raise cb.ToolError("the weather service is down")


async def slow(args: City, ctx: cb.CallContext) -> dict[str, Any]:
    await asyncio.sleep(5)
    return {}


def big(args: City, ctx: cb.CallContext) -> dict[str, Any]:
    return {"blob": "x" * 5000}


def refund(args: RefundArgs, ctx: cb.CallContext) -> dict[str, Any]:
    return {"refund_id": "rf_A1"}


def registry() -> cb.Registry:
    def spec(name: str, handler: Any, **kw: Any) -> cb.ToolSpec:
        return cb.ToolSpec(
            name=name, description=f"The {name} tool.", params=kw.pop("params", City), handler=handler,
            schema_version="v1", **kw,
        )  # fmt: skip

    return cb.Registry(
        [
            spec("get_weather", weather),
            spec("guarded", weather, authorize=lambda args, ctx: False),
            spec("broken", broken),
            spec("slow", slow, timeout_ms=50),
            spec("big", big, max_result_bytes=200),
            spec("refund", refund, params=RefundArgs, risk="irreversible"),
        ]
    )


MODES: dict[str, list[dict[str, Any]]] = {
    "openai-responses": [{}, {"store": False}, {"continuation": "previous_response_id"}],
    "gemini-interactions": [{}, {"store": False}, {"continuation": "previous_response_id"}],
}
CASES = [(api, stream, mode) for api in APIS for stream in (False, True) for mode in MODES.get(api, [{}])]


def runner(api: str, model: ScriptedModel, store: MemoryStore, clock: FakeClock, settings: dict[str, Any],
           policy: cb.Policy | None = None) -> cb.Runner:  # fmt: skip
    base: dict[str, Any] = {"temperature": 0.2, "max_output_tokens": 512}
    if MODELS[api]:
        base["model"] = MODELS[api]
    return cb.Runner(
        model=model,
        registry=registry(),
        store=store,
        clock=clock,
        policy=policy,
        settings={**base, **settings},
        instructions="Answer briefly; say which tools failed.",
        ids=SequentialIds(),
        executor=ToolExecutor(grace_s=0.05),
    )


def operation_requests(api: str, stream: bool, settings: dict[str, Any], ending: str) -> list[dict[str, Any]]:
    """The bodies of one operation: first request, the answer to the parallel turn (with its reasoning and
    text), and the answer to the refund call once its approval ``ending`` ("expired" or "stale")."""
    script = [
        played(api, turn_body(api, "r1", PARALLEL, text="Let me check.", think=True), stream),
        played(api, turn_body(api, "r2", REFUND, text=None, think=False), stream),
        played(api, turn_body(api, "r3", [], text="Done.", think=False), stream),
    ]
    store, clock = MemoryStore(), FakeClock()
    settings = {**settings, "stream": stream}
    model = ScriptedModel(api, script)
    out = runner(api, model, store, clock, settings).run_sync(
        input="Weather in Oslo?", tenant="t", subject="s"
    )
    assert out.state is cb.State.WAITING_APPROVAL, out
    [pending] = out.pending_approvals
    resumed = ScriptedModel(api, script)
    if ending == "expired":
        clock.advance(24 * 3600 + 1)
        out = runner(api, resumed, store, clock, settings).resume_sync(out.operation_id)
    else:
        later = runner(api, resumed, store, clock, settings, policy=cb.Policy(revision="2"))
        decision = cb.Decision.approve(pending.approval_id, approver="alice")
        out = later.resume_sync(out.operation_id, [decision])
    assert out.state is cb.State.COMPLETED and out.text == "Done.", out
    return [*model.requests, *resumed.requests]


def result_codes(api: str, body: dict[str, Any]) -> list[str | None]:
    """The error code of each result in the last answer of ``body``, in order."""
    if api == "openai-responses":
        texts = [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]
    elif api == "openai-chat":
        texts = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    elif api == "anthropic-messages":
        texts = [b["content"] for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]
    elif api == "gemini-generate":
        found = [p["functionResponse"]["response"] for p in body["contents"][-1]["parts"]]
        return [None if r["ok"] else r["error"]["code"] for r in found]
    else:
        texts = [s["result"] for s in body["input"] if s.get("type") == "function_result"]
    envelopes = [json.loads(t) for t in texts]
    return [None if e["ok"] else e["error"]["code"] for e in envelopes]


@pytest.mark.parametrize(
    ("api", "stream", "mode"), CASES, ids=lambda v: json.dumps(v) if isinstance(v, dict) else str(v)
)
@pytest.mark.parametrize("ending", ["expired", "stale"])
def test_every_request_of_an_operation_fits_the_sdk_request_type(
    api: str, stream: bool, mode: dict[str, Any], ending: str
) -> None:
    requests = operation_requests(api, stream, mode, ending)
    assert len(requests) == 3
    for k, body in enumerate(requests):
        assert sdk_violations(api, body, stream) == [], (k, json.dumps(body)[:3000])
    _, answered, approval = requests
    # the states the requests were meant to show did happen
    assert result_codes(api, answered)[-len(PARALLEL) :] == CODES
    expected = "APPROVAL_EXPIRED" if ending == "expired" else "APPROVAL_STALE"
    assert result_codes(api, approval)[-1:] == [expected]
    if stream and api != "gemini-generate":  # generateContent streams by URL, not by a body member
        assert all(body["stream"] is True for body in requests)
    if api == "openai-responses" and mode.get("continuation"):
        assert answered["previous_response_id"] == "r1" and approval["previous_response_id"] == "r2"
    if api == "gemini-interactions" and mode.get("continuation"):
        assert answered["previous_interaction_id"] == "r1" and approval["previous_interaction_id"] == "r2"


def test_the_reasoning_of_the_turn_went_back() -> None:
    # the replayed history holds the recorded reasoning pieces, unchanged (D8), and they passed the types
    _, answered, _ = operation_requests("openai-responses", False, {"store": False}, "expired")
    assert reasoning() in answered["input"] and "reasoning.encrypted_content" in answered["include"]
    _, answered, _ = operation_requests("anthropic-messages", True, {}, "expired")
    assistant = answered["messages"][1]["content"]
    assert assistant[:2] == thinking()
    _, answered, _ = operation_requests("gemini-generate", True, {}, "expired")
    assert answered["contents"][1]["parts"][2]["thoughtSignature"] == thought_signature()
    _, answered, _ = operation_requests("gemini-interactions", False, {}, "expired")
    assert thought_step() in answered["input"]


# ---- tool choice forms and the declarations beside them ------------------------------------------------

CHOICES: dict[str, list[Any]] = {api: ["auto", "required", "none", {"name": "get_weather"}] for api in APIS}
CHOICES["anthropic-messages"] += [
    "any",
    {"type": "auto", "disable_parallel_tool_use": True},
    {"type": "any", "disable_parallel_tool_use": True},
    {"type": "none"},
    {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
]
CHOICE_CASES = [(api, choice, stream) for api in APIS for choice in CHOICES[api] for stream in (False, True)]


@pytest.mark.parametrize(("api", "choice", "stream"), CHOICE_CASES, ids=str)
def test_every_tool_choice_form_fits(api: str, choice: Any, stream: bool) -> None:
    adapter = get(api)
    tools = adapter.render_tools(
        [
            ToolDeclaration(
                "get_weather",
                "Weather",
                {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            )
        ]
    )
    settings: dict[str, Any] = {"tool_choice": choice, "temperature": 0.0, "max_output_tokens": 64}
    if MODELS[api]:
        settings["model"] = MODELS[api]
    body = adapter.build_request(
        items=adapter.initial_items("Weather in Oslo?", []),
        tools=tools,
        settings=settings,
        instructions="Answer briefly.",
        stream=stream,
    )
    assert sdk_violations(api, body, stream) == [], json.dumps(body)


def test_a_forced_choice_is_on_the_first_request_only_and_each_fits() -> None:
    # reset_tool_choice (the default): the forced choice is lifted after the first tool round; both
    # bodies were read above, here the choice is seen where it should be
    for api in APIS:
        requests = operation_requests(api, False, {"tool_choice": {"name": "get_weather"}}, "expired")
        for body in requests:
            assert sdk_violations(api, body, False) == []
        keys = [json.dumps(body, sort_keys=True) for body in requests]
        assert "get_weather" in keys[0]
        if api == "gemini-generate":
            assert ["toolConfig" in body for body in requests] == [True, False, False]
        elif api == "gemini-interactions":
            assert ["tool_choice" in body.get("generation_config", {}) for body in requests] == [
                True,
                False,
                False,
            ]
        else:
            assert ["tool_choice" in body for body in requests] == [True, False, False]


def test_interactions_result_placement_user_input_is_what_the_sdk_type_refuses() -> None:
    # GeminiInteractionsAdapter(result_placement="user_input") is the opt-in form vercel-ai sent in its
    # recorded tool-call-step2 exchange (fixtures ai__steps__tool-call-step2.*, answered 200): results as
    # function_result objects inside one user_input step. python-genai's UserInputStepParam.content admits
    # only text, image, document, audio and video, so its type is stricter than what the API accepted
    # (WIRE.md 5.5, 7.1); the default placement (a top-level function_result step) fits it, above.
    from callbound.adapters.gemini_interactions import GeminiInteractionsAdapter

    adapter = GeminiInteractionsAdapter(result_placement="user_input")
    turn = adapter.parse_response(turn_body("gemini-interactions", "r1", PARALLEL[:1], text=None, think=True))
    results = adapter.result_items(turn, [(turn.calls[0], {"ok": True, "data": {}})])
    items = [*adapter.initial_items("Weather?", []), *adapter.turn_items(turn), *results]
    body = adapter.build_request(
        items=items, tools=[], settings={"model": "gemini-2.5-flash"}, instructions=None, stream=False
    )
    found = sdk_violations("gemini-interactions", body, False)
    assert found and all("input" in f for f in found)


# ---- more states that make a request --------------------------------------------------------------------

LOST = {
    # OpenAI's 400 previous_response_not_found and Gemini Interactions' 404 (tests/runtime/test_chain_lost.py)
    "openai-responses": ApiError(
        400,
        {
            "error": {
                "message": "Previous response with id 'r1' not found.",
                "type": "invalid_request_error",
                "param": "previous_response_id",
                "code": "previous_response_not_found",
            }
        },
    ),
    "gemini-interactions": ApiError(
        404, {"error": {"code": 404, "message": "Interaction not found.", "status": "NOT_FOUND"}}
    ),
}


def simple_run(
    api: str, script: list[Any], settings: dict[str, Any]
) -> tuple[cb.Outcome, list[dict[str, Any]]]:
    model = ScriptedModel(api, script)
    out = runner(api, model, MemoryStore(), FakeClock(), settings).run_sync(
        input="Weather in Oslo?", tenant="t", subject="s"
    )
    return out, model.requests


@pytest.mark.parametrize("api", sorted(LOST))
@pytest.mark.parametrize("stream", [False, True])
def test_a_lost_chain_replayed_in_full_fits(api: str, stream: bool) -> None:
    script = [
        played(api, turn_body(api, "r1", PARALLEL, text="Let me check.", think=True), stream),
        LOST[api],
        played(api, turn_body(api, "r3", [], text="Done.", think=False), stream),
    ]
    out, requests = simple_run(api, script, {"continuation": "previous_response_id", "stream": stream})
    assert out.state is cb.State.COMPLETED, out
    _, chained, replayed = requests
    for body in requests:
        assert sdk_violations(api, body, stream) == [], json.dumps(body)[:3000]
    assert len(replayed["input"]) > len(chained["input"])
    assert result_codes(api, replayed) == CODES


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [False, True])
def test_a_call_id_used_twice_is_answered_in_a_body_that_fits(api: str, stream: bool) -> None:
    # D7: one response used a call id for two calls; neither runs, one DUPLICATE_CALL_ID result answers it
    twice: list[Call] = [
        ("c1", "get_weather", CITY),
        ("c1", "get_weather", {"city": "Rome"}),
        ("c2", "get_weather", CITY),
    ]
    script = [
        played(api, turn_body(api, "r1", twice, text=None, think=True), stream),
        played(api, turn_body(api, "r2", [], text="Done.", think=False), stream),
    ]
    out, requests = simple_run(api, script, {"stream": stream})
    assert out.state is cb.State.COMPLETED, out
    for body in requests:
        assert sdk_violations(api, body, stream) == [], json.dumps(body)[:3000]
    assert "DUPLICATE_CALL_ID" in result_codes(api, requests[1])


@pytest.mark.parametrize("api", ["openai-responses", "openai-chat"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_refusal_beside_calls_ends_the_run_and_its_items_would_fit(api: str, stream: bool) -> None:
    # A turn that refuses (Responses: a refusal content part; Chat: the message's refusal) and also calls
    # a tool ends REFUSED: no call runs and nothing is sent back, so the runtime never replays a refusal.
    # Its items, sent back by the adapter as for any turn (D8), would still fit the request type.
    body = turn_body(api, "r1", PARALLEL[:1], text=None, think=False)
    if api == "openai-responses":
        part = {"type": "refusal", "refusal": "I won't share that part."}
        message = {
            "type": "message",
            "id": "msg_x",
            "role": "assistant",
            "status": "completed",
            "content": [part],
        }
        body["output"].insert(0, message)
    else:
        body["choices"][0]["message"]["refusal"] = "I won't share that part."
    script = [
        played(api, body, stream),
        played(api, turn_body(api, "r2", [], text="Done.", think=False), stream),
    ]
    out, requests = simple_run(api, script, {"stream": stream})
    assert (out.state, out.reason, len(requests)) == (cb.State.REFUSED, "REFUSAL", 1)
    assert sdk_violations(api, requests[0], stream) == []
    adapter = get(api)
    turn = adapter.parse_response(body)
    items = [*adapter.initial_items("Weather in Oslo?", []), *adapter.turn_items(turn)]
    items += adapter.result_items(turn, [(turn.calls[0], {"ok": True, "data": {}})])
    sent = adapter.build_request(
        items=items, tools=[], settings={"model": MODELS[api]}, instructions=None, stream=stream
    )
    assert sdk_violations(api, sent, stream) == [], json.dumps(sent)


@pytest.mark.parametrize("stream", [False, True])
def test_an_anthropic_pause_turn_is_continued_in_a_body_that_fits(stream: bool) -> None:
    # The recorded pause_turn (server web_search, its server_tool_use and web_search_tool_result blocks,
    # text with citations) is sent back as the assistant message to continue (D1 CONTINUE).
    [paused] = [
        response_body(i)
        for i in load_cassette("anthropic/pydantic-ai__test_pause_turn_web_search_vcr.yaml")
        if isinstance(response_body(i), dict) and response_body(i).get("stop_reason") == "pause_turn"  # type: ignore[union-attr]
    ][:1]
    api = "anthropic-messages"
    script = [
        played(api, paused, stream),
        played(api, turn_body(api, "r2", [], text="Done.", think=False), stream),
    ]
    out, requests = simple_run(api, script, {"stream": stream})
    assert out.state is cb.State.COMPLETED, out
    assert len(requests) == 2
    for sent in requests:
        assert sdk_violations(api, sent, stream) == [], json.dumps(sent)[:3000]
    assert requests[1]["messages"][-1]["role"] == "assistant"


def test_every_gemini_recording_answered_is_the_body_python_genai_would_build() -> None:
    # Round 20 read these with model_validate (snake_case names and any signature string let through);
    # here the REST names only, signatures as base64, and the SDK's builder must give the same body: Vertex
    # partialArgs streams (ai__google-stream-*.chunks.txt) go back as whole calls, without the
    # partialArgs/willContinue python-genai refuses to send to the Gemini Developer API.
    from callbound.core.types import Finish
    from tests.adapters.test_review20_b_sdk_requests import answered, recorded_turns

    adapter = get("gemini-generate")
    checked = 0
    for name, turn in recorded_turns("gemini-generate"):
        if turn.finish is Finish.TOOL_PROPOSALS:
            body, _ = answered("gemini-generate", turn, {})
        elif turn.continuation:
            items = [
                *adapter.initial_items("Go on.", []),
                *adapter.turn_items(turn),
                *adapter.initial_items("And?", []),
            ]
            body = adapter.build_request(items=items, tools=[], settings={}, instructions=None, stream=False)
        else:
            continue
        assert "model" not in body  # settings["model"] goes in the URL
        assert gemini_violations(body) == [], name
        checked += 1
    assert checked >= 15


@pytest.mark.parametrize("mode", [{}, {"store": False}])
def test_an_interactions_thought_streamed_in_deltas_goes_back_as_a_thought_step_that_fits(
    mode: dict[str, Any],
) -> None:
    # The steps stream of WIRE.md 5.6, by python-genai's delta types: a thought step whose signature
    # (ThoughtSignatureDelta) and summary (ThoughtSummaryDelta, text content in two pieces) come as
    # deltas, then a call whose arguments come as arguments_delta fragments.
    signature = thought_step()["signature"]
    events: list[Any] = [
        {"event_type": "interaction.created", "interaction": {"id": "r1", "status": "in_progress"}},
        {"event_type": "step.start", "index": 0, "step": {"type": "thought"}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "thought_summary", "content": {"type": "text", "text": "Look up "}}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "thought_summary", "content": {"type": "text", "text": "the weather."}}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "thought_signature", "signature": signature}},
        {"event_type": "step.stop", "index": 0},
        {"event_type": "step.start", "index": 1, "step": {"type": "function_call", "id": "c1", "name": "get_weather", "arguments": {}}},
        {"event_type": "step.delta", "index": 1, "delta": {"type": "arguments_delta", "arguments": '{"city":'}},
        {"event_type": "step.delta", "index": 1, "delta": {"type": "arguments_delta", "arguments": ' "Oslo"}'}},
        {"event_type": "step.stop", "index": 1},
        {"event_type": "interaction.completed", "interaction": {"id": "r1", "status": "requires_action",
                                                                "usage": {"total_tokens": 3}}},
    ]  # fmt: skip
    api = "gemini-interactions"
    script = [sse(events), played(api, turn_body(api, "r2", [], text="Done.", think=False), True)]
    out, requests = simple_run(api, script, {**mode, "stream": True})
    assert out.state is cb.State.COMPLETED, out
    for body in requests:
        assert sdk_violations(api, body, True) == [], json.dumps(body)[:3000]
    thought = {
        "type": "thought",
        "summary": [{"type": "text", "text": "Look up the weather."}],
        "signature": signature,
    }
    assert thought in requests[1]["input"]
