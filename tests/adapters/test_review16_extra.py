"""``settings["extra"]`` may not override a field callbound sets from its own checked settings (review round
16, F3; docs/reference.md "Runner settings": extra is "for options callbound has no key for").

Through ``extra`` a ``max_output_tokens`` of ``"1024"`` or a ``temperature`` of ``"hot"`` went out as is, a
``store: true`` replaced ``settings["store"] = False``, and a ``tool_choice`` bypassed the setting's checks:
a bogus value or one naming no registry tool was sent, and ``"required"`` stayed on every request (never
lifted after the first tool round), so the model could not give its final answer. Now each is a
``UsageError`` at ``Runner(...)`` naming the setting to use, as ``model`` already was. A tool choice form
the setting has no spelling for (OpenAI's ``allowed_tools`` or a hosted tool's choice, a Gemini choice among
several functions or ``VALIDATED`` mode, an Anthropic type newer than the setting knows) still goes through
``extra``, but not beside ``settings["tool_choice"]``. Options callbound has no key for keep working
(Gemini's ``thinkingConfig``, Chat's ``max_tokens`` for servers that take only it, Responses' seed
``previous_response_id``), and Chat's ``stream_options`` from extra keep ``include_usage`` (D27).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.testing import ScriptedModel

RESPONSES, CHAT, ANTHROPIC = "openai-responses", "openai-chat", "anthropic-messages"
GEMINI, INTERACTIONS = "gemini-generate", "gemini-interactions"
APIS = [RESPONSES, CHAT, ANTHROPIC, GEMINI, INTERACTIONS]


class Order(BaseModel):
    order_id: str


def _registry() -> cb.Registry:
    def get_order(args: Order, ctx: cb.CallContext) -> dict[str, Any]:
        return {"order_id": args.order_id}

    spec = cb.ToolSpec(
        name="get_order",
        description="Look up",
        params=Order,
        handler=get_order,
        schema_version="v1",
        risk="read",
    )
    return cb.Registry([spec])


def _runner(
    api: str, settings: dict[str, Any], script: list[Any] | None = None
) -> tuple[cb.Runner, ScriptedModel]:
    model = ScriptedModel(api, script or [])
    return cb.Runner(model=model, registry=_registry(), settings=settings), model


OVERRIDES = [
    (RESPONSES, {"temperature": "hot"}, "settings['temperature']"),
    (RESPONSES, {"max_output_tokens": "1024"}, "settings['max_output_tokens']"),
    (RESPONSES, {"store": True}, "settings['store']"),
    (RESPONSES, {"store": False}, "settings['store']"),
    (CHAT, {"temperature": 0.5}, "settings['temperature']"),
    (CHAT, {"max_completion_tokens": "x"}, "settings['max_output_tokens']"),
    (ANTHROPIC, {"max_tokens": "4096"}, "settings['max_output_tokens']"),
    (ANTHROPIC, {"temperature": 2}, "settings['temperature']"),
    (GEMINI, {"generationConfig": {"temperature": 1}}, "settings['temperature']"),
    (GEMINI, {"generationConfig": {"maxOutputTokens": 10, "thinkingConfig": {}}}, "settings['max_output_tokens']"),
    (GEMINI, {"generation_config": {"max_output_tokens": 10}}, "settings['max_output_tokens']"),
    (INTERACTIONS, {"generation_config": {"temperature": 1}}, "settings['temperature']"),
    (INTERACTIONS, {"generation_config": {"max_output_tokens": 10}}, "settings['max_output_tokens']"),
    (INTERACTIONS, {"store": True}, "settings['store']"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("api", "extra", "instead"), OVERRIDES, ids=[f"{a}-{next(iter(e))}" for a, e, _ in OVERRIDES]
)
def test_a_field_callbound_sets_is_refused_in_extra(api: str, extra: dict[str, Any], instead: str) -> None:
    with pytest.raises(
        cb.UsageError, match=r"is set by callbound; use " + instead.replace("[", r"\[").replace("]", r"\]")
    ):
        _runner(api, {"extra": extra})


SAYABLE = [
    (RESPONSES, ("tool_choice",), "required"),
    (RESPONSES, ("tool_choice",), "bogus"),
    (RESPONSES, ("tool_choice",), {"type": "function", "name": "nope"}),
    (RESPONSES, ("tool_choice",), {"name": "get_order"}),
    (CHAT, ("tool_choice",), "auto"),
    (CHAT, ("tool_choice",), {"type": "function", "function": {"name": "nope"}}),
    (ANTHROPIC, ("tool_choice",), {"type": "tool", "name": "nope"}),
    (ANTHROPIC, ("tool_choice",), {"type": "any", "disable_parallel_tool_use": True}),
    (ANTHROPIC, ("tool_choice",), "any"),
    (GEMINI, ("toolConfig", "functionCallingConfig"), {"mode": "ANY"}),
    (GEMINI, ("toolConfig", "functionCallingConfig"), {"mode": "ANY", "allowedFunctionNames": ["nope"]}),
    (GEMINI, ("tool_config", "function_calling_config"), {"mode": "NONE"}),
    (GEMINI, ("toolConfig", "functionCallingConfig"), "ANY"),
    (INTERACTIONS, ("generation_config", "tool_choice"), "any"),
    (INTERACTIONS, ("generation_config", "tool_choice"), {"allowed_tools": {"mode": "any", "tools": ["nope"]}}),
]  # fmt: skip


def _nest(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out: Any = value
    for key in reversed(path):
        out = {key: out}
    return out  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("api", "path", "choice"), SAYABLE, ids=[f"{a}-{i}" for i, (a, _, _) in enumerate(SAYABLE)]
)
def test_a_tool_choice_the_setting_can_say_is_refused_in_extra(
    api: str, path: tuple[str, ...], choice: Any
) -> None:
    with pytest.raises(cb.UsageError, match=r"use settings\['tool_choice'\]"):
        _runner(api, {"extra": _nest(path, choice)})


PROVIDER_FORMS = [
    (RESPONSES, ("tool_choice",), {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "get_order"}]}),
    (RESPONSES, ("tool_choice",), {"type": "web_search_preview"}),
    (CHAT, ("tool_choice",), {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}),
    (ANTHROPIC, ("tool_choice",), {"type": "some_future_choice"}),
    (GEMINI, ("toolConfig", "functionCallingConfig"), {"mode": "VALIDATED"}),
    (GEMINI, ("toolConfig", "functionCallingConfig"), {"mode": "ANY", "allowedFunctionNames": ["get_order", "other"]}),
    (INTERACTIONS, ("generation_config", "tool_choice"), "validated"),
    (INTERACTIONS, ("generation_config", "tool_choice"), {"allowed_tools": {"mode": "auto", "tools": ["get_order"]}}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("api", "path", "choice"), PROVIDER_FORMS, ids=[f"{a}-{i}" for i, (a, _, _) in enumerate(PROVIDER_FORMS)]
)
def test_a_provider_form_the_setting_cannot_say_still_goes_through_extra(
    api: str, path: tuple[str, ...], choice: Any
) -> None:
    runner, _ = _runner(api, {"extra": _nest(path, choice)})
    body = get(api).build_request(
        items=[], tools=runner.tools, settings=runner.settings, instructions=None, stream=False
    )
    sent: Any = body
    for key in path:
        sent = sent[key]
    assert sent == choice
    # ... but not beside settings["tool_choice"], which extra would replace
    with pytest.raises(cb.UsageError, match="set the same option; keep one"):
        _runner(api, {"tool_choice": "auto", "extra": _nest(path, choice)})


def test_extra_tool_choice_required_no_longer_forces_every_request() -> None:
    """The finding's run: extra "required" was sent on every request; the setting is lifted after a tool round."""
    with pytest.raises(cb.UsageError):
        _runner(RESPONSES, {"extra": {"tool_choice": "required"}})
    call = {
        "id": "r1",
        "status": "completed",
        "output": [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "c1",
                "name": "get_order",
                "arguments": '{"order_id": "A1"}',
            }
        ],
    }
    done = {"id": "r2", "status": "completed", "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}]}  # fmt: skip
    runner, model = _runner(RESPONSES, {"tool_choice": "required"}, [call, done])
    assert runner.run_sync("go", tenant="t", subject="s").state.value == "COMPLETED"
    assert [r.get("tool_choice") for r in model.requests] == ["required", None]


KEPT = [
    (RESPONSES, {"reasoning": {"effort": "low"}, "previous_response_id": "resp_seed", "include": ["x"]}),
    (CHAT, {"max_tokens": 50, "parallel_tool_calls": False, "store": True}),
    (ANTHROPIC, {"thinking": {"type": "enabled", "budget_tokens": 1024}}),
    (GEMINI, {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}, "toolConfig": {"retrievalConfig": {}}}),
    (INTERACTIONS, {"generation_config": {"thinking_level": "low"}, "previous_interaction_id": "v1_seed"}),
]  # fmt: skip


@pytest.mark.parametrize(("api", "extra"), KEPT, ids=[a for a, _ in KEPT])
def test_options_callbound_has_no_key_for_still_go_through_extra(api: str, extra: dict[str, Any]) -> None:
    runner, _ = _runner(api, {"temperature": 0.3, "tool_choice": "auto", "extra": extra})
    body = get(api).build_request(
        items=[], tools=runner.tools, settings=runner.settings, instructions=None, stream=False
    )
    for key, value in extra.items():
        assert body[key] == value or all(body[key][k] == v for k, v in value.items())


def test_chat_max_tokens_beside_max_output_tokens_is_refused() -> None:
    with pytest.raises(
        cb.UsageError, match=r"settings\['max_output_tokens'\] and settings\['extra'\]\['max_tokens'\]"
    ):
        _runner(CHAT, {"max_output_tokens": 99, "extra": {"max_tokens": 50}})


@pytest.mark.parametrize(
    ("options", "sent"),
    [
        ({"include_obfuscation": False}, {"include_obfuscation": False, "include_usage": True}),
        ({"include_usage": False}, {"include_usage": True}),
        ("junk", {"include_usage": True}),
    ],
)
def test_chat_stream_options_from_extra_keep_the_usage(options: Any, sent: dict[str, Any]) -> None:
    body = get(CHAT).build_request(
        items=[], tools=[], settings={"extra": {"stream_options": options}}, instructions=None, stream=True
    )
    assert body["stream_options"] == sent
