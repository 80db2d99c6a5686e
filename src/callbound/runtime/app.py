"""Applications as factories (D21): ``module:factory`` returns an ``App``, which builds a Runner on
any store. The reference is saved with each operation, so ``callbound resume`` and workers in other
processes rebuild the same registry, policy and model."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import UsageError
from ..core.guards import Budgets
from ..core.model import ModelClient
from ..core.registry import Registry
from ..stores.base import Store
from .clock import Clock
from .runner import Policy, Runner


@dataclass
class App:
    registry: Registry
    model: ModelClient
    policy: Policy | None = None
    budgets: Budgets | None = None
    settings: dict[str, Any] | None = None
    instructions: str | None = None
    messages: Sequence[dict[str, Any]] = ()
    clock: Clock | None = None
    runner_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_runner_options(self.runner_options)

    def runner(self, store: Store, ref: dict[str, Any] | str | None = None) -> Runner:
        """A Runner on ``store``. ``ref`` is saved with each operation so other processes rebuild this
        application (D21): ``{"ref": "module:factory", "args": {...}}``, or a plain ``"module:factory"``
        string (no arguments); anything else is a ``UsageError`` now, not a broken resume later."""
        _check_runner_options(self.runner_options)  # again: the dataclass may have been changed since
        return Runner(
            model=self.model,
            registry=self.registry,
            budgets=self.budgets,
            store=store,
            clock=self.clock,
            policy=self.policy,
            instructions=self.instructions,
            settings=self.settings,
            messages=self.messages,
            app=ref,
            **self.runner_options,
        )


# What App passes to Runner itself; runner_options takes the Runner's other keyword arguments.
_APP_FIELDS = frozenset(
    {
        "model",
        "registry",
        "budgets",
        "store",
        "clock",
        "policy",
        "instructions",
        "settings",
        "messages",
        "app",
    }
)


# What App.runner(store, ref) takes, per runner: not App fields.
_RUNNER_ARGUMENTS = {
    "store": "App.runner(store, ref) when the runner is built: app.runner(callbound.stores.open(url))",
    "app": "App.runner(store, ref) as ref, the saved reference {'ref': 'module:factory', 'args': {...}}",
}


def _check_runner_options(options: object) -> None:
    """A misspelt option (``price`` for ``prices``), or one App sets itself, raised TypeError when the
    runner was built: ``callbound run/worker --app`` then exited 1 with a traceback, not 2 (D28)."""
    if not isinstance(options, dict):
        raise UsageError(f"App(runner_options=...) takes a dict of Runner keyword arguments, not {options!r}")
    accepted = [
        name
        for name, p in inspect.signature(Runner.__init__).parameters.items()
        if name != "self" and name not in _APP_FIELDS and p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    for name in options:
        if name in _RUNNER_ARGUMENTS:
            # store and app are no App fields: App.runner(store, ref) takes them, so the advice to
            # pass App(store=...) ended in a TypeError (review round 16, F7)
            raise UsageError(
                f"App(runner_options={{{name!r}: ...}}): {name} is not a runner option; pass it to "
                f"{_RUNNER_ARGUMENTS[name]}"
            )
        if name in _APP_FIELDS:
            raise UsageError(
                f"App(runner_options={{{name!r}: ...}}): {name} is App's own field; pass it as App({name}=...)"
            )
        if name not in accepted:
            raise UsageError(
                f"App(runner_options=...) names {name!r}, which Runner does not take; "
                f"it takes {', '.join(accepted)}"
            )


def load_app(ref: str, args: dict[str, Any] | None = None) -> App:
    """Import ``module:factory`` and call it with ``args`` as keyword arguments.

    The current working directory is put on ``sys.path`` (first) when it is not there yet, as uvicorn
    does, so ``--app myapp:make_app`` run from the folder holding ``myapp.py`` finds it; console scripts
    start with their own bin folder there instead. It stays on ``sys.path``: the factory's module may
    import its neighbours later. Elsewhere, the module must be importable (installed, or PYTHONPATH)."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"--app must look like module:factory, got {ref!r}")
    _cwd_on_path()
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import {module_name!r} for --app: {exc}") from exc
    except Exception as exc:  # the module's own code failed while importing
        raise UsageError(f"importing {module_name!r} for --app failed: {type(exc).__name__}: {exc}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise UsageError(f"{ref!r} does not name a callable factory")
    try:
        app = factory(**(args or {}))
    except Exception as exc:
        # A factory that raises (wrong arguments, missing configuration) is a usage error, not a
        # crash: exit code 1 is reserved for audit tampering (D28).
        raise UsageError(f"{ref!r} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(app, App):
        raise UsageError(f"{ref!r} returned {type(app).__name__}, expected callbound.runtime.app.App")
    return app


def _cwd_on_path() -> None:
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory was removed: nothing to add
        return
    # "" and "." already mean the working directory at import time
    if not any(p in ("", ".") or os.path.abspath(p) == cwd for p in sys.path):
        sys.path.insert(0, cwd)
