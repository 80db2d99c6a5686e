"""Wrong objects handed to the public API are a ``UsageError`` whose advice names what exists (review
round 16, F7, F10, F12):

- ``App(runner_options={"store": ...})`` / ``{"app": ...}`` told the user to pass ``App(store=...)`` /
  ``App(app=...)``, which App does not take (TypeError); ``App.runner(store, ref)`` does (reference.md,
  "Applications").
- ``Worker(factory, store)`` (the factory, not its App), ``Worker(None, store)`` or a store URL raised
  AttributeError; reference.md documents ``Worker(app, store, app_ref=...)``.
- ``settle_intent("sqlite:///callbound.db", ...)`` (a URL, as the CLI takes it) raised AttributeError.
- ``make_client(api, api_key="")`` was accepted and the "needs an API key" ``UsageError`` came at the
  first request, after the operation was stored (reference.md, "Live clients": "without one it raises
  ``UsageError``").
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import callbound as cb
from callbound.runtime.app import App
from callbound.runtime.settle import settle_intent
from callbound.runtime.worker import Worker
from callbound.stores.memory import MemoryStore
from callbound.transports import make_client

from .helpers import final, get_order_tool, make


def _factory() -> App:
    return App(cb.Registry([get_order_tool()]), make([final("r1")], [get_order_tool()]).model)


def test_runner_options_store_and_app_point_to_app_runner_and_that_advice_works() -> None:
    store = MemoryStore()
    with pytest.raises(
        cb.UsageError, match=r"store is not a runner option; pass it to App\.runner\(store, ref\)"
    ):
        App(cb.Registry([]), _factory().model, runner_options={"store": store})
    with pytest.raises(
        cb.UsageError, match=r"app is not a runner option; pass it to App\.runner\(store, ref\) as ref"
    ):
        App(cb.Registry([]), _factory().model, runner_options={"app": "m:f"})
    runner = _factory().runner(
        store, ref="tests.runtime.test_review16_usage:_factory"
    )  # the advice, followed
    assert runner.store is store and runner.app == {
        "ref": "tests.runtime.test_review16_usage:_factory",
        "args": {},
    }


@pytest.mark.parametrize(
    ("app", "advice"),
    [
        (_factory, r"not function: call the factory, Worker\(_factory\(\), store\)"),
        (None, "not NoneType"),
        (
            "mod:make_app",
            r"not str: load it, Worker\(load_app\('mod:make_app'\), store, app_ref='mod:make_app'\)",
        ),
    ],
    ids=["factory", "none", "reference"],
)
def test_worker_given_something_else_than_an_app_is_a_usage_error(app: Any, advice: str) -> None:
    with pytest.raises(
        cb.UsageError, match=r"Worker\(app, store\) takes the callbound\.runtime\.app\.App"
    ) as info:
        Worker(app, MemoryStore())
    assert info.match(advice)


def test_worker_given_a_store_url_is_told_to_open_it() -> None:
    with pytest.raises(
        cb.UsageError, match=r"not a URL or path \('sqlite:///x\.db'\): open one with callbound\.stores\.open"
    ):
        Worker(_factory(), "sqlite:///x.db")  # type: ignore[arg-type]


def test_worker_given_an_app_still_builds() -> None:
    assert isinstance(Worker(_factory(), MemoryStore()).runner, cb.Runner)


@pytest.mark.parametrize(
    ("store", "match"),
    [
        (
            "sqlite:///callbound.db",
            r"not a URL or path \('sqlite:///callbound\.db'\): open one with callbound\.stores\.open\(url, create=False\)",
        ),
        (b"callbound.db", "not a URL or path"),
        (None, r"takes a Store \(MemoryStore, or callbound\.stores\.open\(url\)\), not NoneType"),
        (object(), "not object"),
    ],
    ids=["url", "bytes-path", "none", "object"],
)
def test_settle_intent_given_something_else_than_a_store_is_a_usage_error(store: Any, match: str) -> None:
    with pytest.raises(cb.UsageError, match=match):
        settle_intent(store, "acme", "ik_x", applied=True, by="ops", now=datetime.now(UTC))


def test_settle_intent_on_a_store_still_reads_the_ledger() -> None:
    with pytest.raises(cb.UnknownLedgerEntry):
        settle_intent(MemoryStore(), "acme", "ik_x", applied=True, by="ops", now=datetime.now(UTC))


@pytest.mark.parametrize("transport", ["http", "sdk"])
@pytest.mark.parametrize("require_key", [True, False])
def test_make_client_with_an_empty_api_key_is_a_usage_error_at_once(
    transport: str, require_key: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")  # even when a variable would serve
    with pytest.raises(
        cb.UsageError, match=r"api_key=''\) is empty: pass the key, or None to read it from OPENAI_API_KEY"
    ):
        make_client("openai-responses", transport=transport, api_key="", require_key=require_key)
