"""D4: a caller's misuse of the Runner is a UsageError at the call, before anything is stored or any
request is made (review round 13): classes passed for instances, a client whose complete() is not
async or returns no ModelTurn, earlier messages that are not message dicts, an empty input, text with
a lone surrogate in who an operation acts for, request fields in settings['extra'] that callbound sets
itself or that are not JSON."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

import callbound as cb
from callbound.stores.memory import MemoryStore
from callbound.testing import FakeClock, ScriptedModel

from .test_every_api_loop import APIS, registry, scripted

API = "openai-responses"


def runner(**kw: Any) -> cb.Runner:
    kw.setdefault("model", ScriptedModel(API, scripted(API)))
    return cb.Runner(registry=registry(), clock=FakeClock(), **kw)


@pytest.mark.parametrize(
    ("name", "cls"), [("store", MemoryStore), ("clock", FakeClock), ("model", ScriptedModel)]
)
def test_a_class_where_an_instance_belongs_is_refused(name: str, cls: type) -> None:
    kw: dict[str, Any] = {"model": ScriptedModel(API, []), "clock": FakeClock(), name: cls}
    with pytest.raises(cb.UsageError, match=rf"Runner\({name}=\.\.\.\) takes an instance, not the class"):
        cb.Runner(registry=registry(), **kw)


class SyncClient:
    """complete() answers at once, but is no coroutine function: the runner awaits it."""

    def __init__(self) -> None:
        self.inner = ScriptedModel(API, scripted(API))
        self.adapter = self.inner.adapter
        self.calls = 0

    def complete(self, body: dict[str, Any], *, stream: bool, meta: Any, on_progress: Any = None) -> Any:
        self.calls += 1
        return self.adapter.parse_response(scripted(API)[-1])


def test_a_client_whose_complete_is_not_async_is_refused_when_the_runner_is_built() -> None:
    client = SyncClient()
    with pytest.raises(cb.UsageError, match=r"complete must be an async function"):
        cb.Runner(model=client, registry=registry())
    assert client.calls == 0  # before: each answer was taken for a failed request and paid for again


class DictClient(SyncClient):
    async def complete(  # type: ignore[override]
        self, body: dict[str, Any], *, stream: bool, meta: Any, on_progress: Any = None
    ) -> Any:
        self.calls += 1
        return scripted(API)[-1]  # the provider's body, not the ModelTurn the adapter builds of it


def test_a_client_that_returns_no_model_turn_is_a_usage_error_and_nothing_runs() -> None:
    client, store = DictClient(), MemoryStore()
    r = cb.Runner(model=client, registry=registry(), store=store, clock=FakeClock())
    with pytest.raises(cb.UsageError, match=r"returned a dict, not a ModelTurn"):
        r.run_sync("where is A1?", tenant="t", subject="s")
    assert client.calls == 1
    (head,) = store.list_operations()
    assert head["state"] == "MODEL_REQUESTED"  # resumable once the client is fixed


@pytest.mark.parametrize(
    "messages",
    [
        "You are a shop assistant",
        b"x",
        {"role": "user", "content": "hi"},
        [1, None],
        [{"n": float("nan")}],
        [{"role": "user", "content": "caf\udce9"}],
        None,
    ],
    ids=["str", "bytes", "dict", "not-dicts", "nan", "lone-surrogate", "none"],
)
def test_earlier_messages_must_be_a_list_of_json_message_dicts(messages: Any) -> None:
    model = ScriptedModel(API, scripted(API))
    with pytest.raises(cb.UsageError, match=r"Runner\(messages=\.\.\.\)"):
        cb.Runner(model=model, registry=registry(), messages=messages)
    assert model.requests == []


def test_earlier_messages_are_copied_when_the_runner_is_built() -> None:
    earlier = [{"role": "user", "content": "my order is A1"}]
    r = runner(messages=earlier)
    earlier[0]["content"] = "changed later"
    out = r.run_sync("where is it?", tenant="t", subject="s")
    assert out.state == cb.State.COMPLETED
    first = r.model.requests[0]  # type: ignore[attr-defined]
    assert first["input"][0] == {"role": "user", "content": "my order is A1"}


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_an_empty_input_is_refused_before_anything_is_stored(text: str) -> None:
    store = MemoryStore()
    r = runner(store=store)
    with pytest.raises(cb.UsageError, match=r"input is empty"):
        r.run_sync(text, tenant="t", subject="s")
    assert store.list_operations() == []
    assert r.model.requests == []  # type: ignore[attr-defined]


def test_no_input_at_all_is_still_allowed() -> None:
    r = runner(messages=[{"role": "user", "content": "where is A1?"}])
    assert r.run_sync(None, tenant="t", subject="s").state == cb.State.COMPLETED


@pytest.mark.parametrize("field", ["tenant", "subject", "operation_id"])
def test_a_lone_surrogate_in_who_the_operation_acts_for_is_refused(field: str) -> None:
    store = MemoryStore()
    r = runner(store=store)
    kw: dict[str, Any] = {"tenant": "t", "subject": "s", "operation_id": "op_1"}
    kw[field] = "caf\udce9"  # a Latin-1 byte read with surrogateescape (a CLI argument)
    with pytest.raises(cb.UsageError, match=rf"{field} holds a lone surrogate"):
        r.run_sync("where is A1?", **kw)
    assert store.list_operations() == []


@pytest.mark.parametrize("reason", [5, None, "", "caf\udce9"])
def test_cancel_takes_a_reason_as_text(reason: Any) -> None:
    store = MemoryStore()
    r = runner(store=store, model=ScriptedModel(API, []))
    with pytest.raises(cb.UsageError, match=r"cancel\(reason=\.\.\.\)"):
        r.cancel("op_missing", reason=reason)


def managed(api: str) -> list[str]:
    transcript = {
        "openai-responses": ["input", "instructions"],
        "openai-chat": ["messages"],
        "anthropic-messages": ["messages", "system"],
        "gemini-generate": ["contents", "systemInstruction", "system_instruction"],
        "gemini-interactions": ["input", "system_instruction"],
    }
    return ["model", "stream", *transcript[api]]


CASES = [(api, key) for api in APIS for key in managed(api)]


@pytest.mark.parametrize(("api", "key"), CASES, ids=[f"{a}-{k}" for a, k in CASES])
def test_extra_may_not_set_a_field_callbound_sets(api: str, key: str) -> None:
    """A model in extra was sent while max_cost counted settings['model']'s price; stream: true was
    sent to a runner reading a body; a transcript key replaced the transcript."""
    model = ScriptedModel(api, scripted(api))
    with pytest.raises(cb.UsageError, match=rf"settings\['extra'\]\[{key!r}\] is set by callbound; use "):
        cb.Runner(model=model, registry=registry(), settings={"extra": {key: "x"}})
    assert model.requests == []


@pytest.mark.parametrize("value", [float("nan"), float("inf"), Decimal("0.5"), {1, 2}, b"x"])
@pytest.mark.parametrize("api", APIS)
def test_extra_values_must_be_json(api: str, value: Any) -> None:
    """A NaN went on the wire as the bare token NaN; a Decimal failed every request as a connection error."""
    model = ScriptedModel(api, scripted(api))
    with pytest.raises(cb.UsageError, match=r"settings\['extra'\] must hold plain JSON values"):
        cb.Runner(model=model, registry=registry(), settings={"extra": {"top_p": value}})


def test_extra_fields_callbound_has_no_setting_for_still_go_out() -> None:
    r = runner(settings={"extra": {"reasoning": {"effort": "low"}, "metadata": {"k": "v"}}})
    assert r.run_sync("where is A1?", tenant="t", subject="s").state == cb.State.COMPLETED
    sent = r.model.requests[0]  # type: ignore[attr-defined]
    assert sent["reasoning"] == {"effort": "low"} and sent["metadata"] == {"k": "v"}


def test_gemini_generate_refuses_a_settings_model_other_than_the_clients() -> None:
    """D12: the client's model is in the URL, prices are looked up by settings['model']: a cheap name in
    the settings priced a dear model's turns, and max_cost let it run past its limit."""
    from callbound.transports.http import HttpModel

    client = HttpModel("gemini-generate", model="gemini-2.5-pro", api_key="k", base_url="http://127.0.0.1:9")
    with pytest.raises(cb.UsageError, match=r"client's model 'gemini-2.5-pro'.*'gemini-2.5-flash-lite'"):
        cb.Runner(model=client, registry=registry(), settings={"model": "gemini-2.5-flash-lite"})
    cb.Runner(model=client, registry=registry(), settings={"model": "gemini-2.5-pro"})  # the same: fine
    cb.Runner(model=client, registry=registry(), settings={"model": "models/gemini-2.5-pro"})


class FloatCostClient(SyncClient):
    async def complete(  # type: ignore[override]
        self, body: dict[str, Any], *, stream: bool, meta: Any, on_progress: Any = None
    ) -> Any:
        from dataclasses import replace

        self.calls += 1
        turn = self.adapter.parse_response(scripted(API)[-1])
        return replace(turn, usage=cb.Usage(10, 5, 0.0012))  # type: ignore[arg-type]  # OpenRouter's usage.cost


def test_a_custom_clients_usage_of_the_wrong_types_is_a_usage_error_nothing_recorded() -> None:
    client, store = FloatCostClient(), MemoryStore()
    r = cb.Runner(model=client, registry=registry(), store=store, clock=FakeClock())
    with pytest.raises(cb.UsageError, match=r"cost a decimal.Decimal"):
        r.run_sync("where is A1?", tenant="t", subject="s")
    (head,) = store.list_operations()
    assert head["state"] == "MODEL_REQUESTED"  # no TypeError out of run, and nothing of the turn recorded
