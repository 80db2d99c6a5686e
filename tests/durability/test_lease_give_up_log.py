"""lease.give_up's log says what it does (D16, D21, docs/durability.md "Workers").

When a handler of the operation outlives its cancelled run in this process, give_up does not hold the
lease idly: a background thread renews it every third of the lease until the handlers end, then releases
it. The warning said "its lease is held until they end" "after the drive ended" (give_up also ends a
worker's run), and the release left no record. Now the warning names the renewal and the release, and
the release is logged when it happens.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

from callbound.runtime import lease, tools
from callbound.stores.memory import MemoryStore

from ..stores.conftest import create


def _wait(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_give_up_says_it_renews_the_lease_until_the_handlers_end_then_releases_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    create(store, "op1")
    fence = store.hold("op1", "drive:me", 1.2)
    done = threading.Event()
    monkeypatch.setattr(tools, "lingering", lambda operation_id: [done] if operation_id == "op1" else [])
    caplog.set_level(logging.INFO, logger="callbound.lease")

    lease.give_up(store, "op1", "drive:me", fence, 1.2)

    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "1 handler(s) of it still running in this process" in warning
    assert "after its run ended" in warning
    assert "renewing its lease every 0.4 s until they end, then releasing it" in warning
    time.sleep(1.6)  # longer than the lease: renewed, so still held
    assert store.lease_holder("op1") == "drive:me"
    done.set()
    assert _wait(lambda: store.lease_holder("op1") is None)
    assert _wait(lambda: any("ended; lease released" in m for m in caplog.messages))


def test_give_up_says_when_it_stops_renewing_a_lease_it_lost(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    create(store, "op1")
    fence = store.hold("op1", "drive:me", 0.3)
    done = threading.Event()
    monkeypatch.setattr(tools, "lingering", lambda operation_id: [done])
    caplog.set_level(logging.INFO, logger="callbound.lease")

    lease.give_up(store, "op1", "drive:me", fence, 0.3)
    assert store.hold("op1", "drive:other", 10, replacing="drive:me") == fence + 1  # taken over
    assert _wait(lambda: any("no longer renewing it" in m for m in caplog.messages))
    done.set()
    time.sleep(0.2)
    assert store.lease_holder("op1") == "drive:other"  # the new holder's lease is left alone
    assert not any("lease released" in m for m in caplog.messages)
