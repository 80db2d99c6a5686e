"""Review 9b (f6b): model settings an adapter refuses are refused when the Runner is built.

D4: caller misuse is a ``UsageError`` at the call, before anything is stored or any request is made;
D9's rule (a schema a provider cannot express fails when the registry is bound, never on the first live
call) applies to settings too (D25). A ``tool_choice`` the API does not take, or Chat ``extra={"n": 2}``,
raised only inside ``build_request`` at the first model request, after the operation was committed in
MODEL_REQUESTED: a stored operation that could never run. ``Runner(...)`` now builds one throwaway
request (no items, the registry's tools, the runner's settings, no I/O) and lets its ``UsageError`` out.
"""

from __future__ import annotations

from typing import Any

import pytest

import callbound as cb
from callbound.stores.memory import MemoryStore
from callbound.testing import FakeClock, ScriptedModel

from .test_every_api_loop import APIS, registry, scripted

ANTHROPIC = "anthropic-messages"
BAD_EVERYWHERE: list[Any] = ["bogus", "AUTO", "", 3, True, {"name": 5}, ["auto"]]


def bad_settings(api: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"tool_choice": c} for c in BAD_EVERYWHERE]
    if api != ANTHROPIC:
        out.append({"tool_choice": "any"})  # Anthropic's word; the others refuse it
    if api == "openai-chat":
        out += [{"extra": {"n": 2}}, {"extra": {"n": 0}}]
    if api == "openai-responses":
        # WIRE 1.5: a conversation cannot be chained with previous_response_id, and replaying into it
        # would add the whole transcript to it again on every request
        out += [
            {"extra": {"conversation": "conv_1"}},
            {"extra": {"conversation": {"id": "conv_1"}}, "continuation": "previous_response_id"},
        ]
    out.append({"extra": "not a dict"})  # no adapter can merge it
    return out


CASES = [(api, s) for api in APIS for s in bad_settings(api)]


@pytest.mark.parametrize(("api", "settings"), CASES, ids=[f"{a}-{s!r}" for a, s in CASES])
def test_settings_the_adapter_refuses_raise_when_the_runner_is_built(
    api: str, settings: dict[str, Any]
) -> None:
    store = MemoryStore()
    model = ScriptedModel(api, scripted(api))
    with pytest.raises(cb.UsageError):
        cb.Runner(model=model, registry=registry(), store=store, clock=FakeClock(), settings=settings)
    assert store.list_operations() == []
    assert model.requests == []


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("choice", ["auto", "none", "required", {"name": "get_order"}])
def test_settings_every_api_takes_still_build_and_run(api: str, choice: Any) -> None:
    model = ScriptedModel(api, scripted(api))
    settings = {"model": "m-1", "tool_choice": choice, "temperature": 0, "max_output_tokens": 99}
    runner = cb.Runner(model=model, registry=registry(), clock=FakeClock(), settings=settings)
    assert model.requests == []  # the check sends nothing
    assert runner.run_sync("where is A1?", tenant="t", subject="s").state.value in ("COMPLETED", "STOPPED")


def test_the_message_names_the_setting_and_the_allowed_values() -> None:
    model = ScriptedModel("gemini-generate", [])
    with pytest.raises(cb.UsageError, match=r"tool_choice 'any' is not one of 'auto', 'required'"):
        cb.Runner(model=model, registry=registry(), settings={"tool_choice": "any"})
    with pytest.raises(cb.UsageError, match=r"settings\['extra'\]|extra"):
        cb.Runner(model=ScriptedModel("openai-chat", []), registry=registry(), settings={"extra": {"n": 2}})


def test_a_responses_conversation_is_refused_with_what_to_do_instead() -> None:
    model = ScriptedModel("openai-responses", [])
    with pytest.raises(cb.UsageError, match=r"conversation.*continuation.*previous_response_id"):
        cb.Runner(model=model, registry=registry(), settings={"extra": {"conversation": "conv_1"}})
