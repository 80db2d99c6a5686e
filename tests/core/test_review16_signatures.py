"""ToolSpec refuses a handler or hook that cannot be called the way callbound calls it (reference.md,
"Tool handlers": ``handler(args, ctx)``, ``requires_approval`` / ``authorize`` / ``intent_key(args,
ctx)``, ``reconcile(key, ctx)``, ``redact(arguments)``): a ``UsageError`` naming the expected call when
the tool is declared, not a TypeError at every call, which for a write stopped the operation
OUTCOME_UNKNOWN with a ledger entry to settle although nothing had run (review round 16, F4).

Callables that can be called so keep working: async defs, ``functools.partial``, bound methods,
objects with ``__call__``, ``*args`` functions, decorated functions (``functools.wraps``) and callables
whose signature cannot be read.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb


class Args(BaseModel):
    order_id: str


def _spec(**kw: Any) -> cb.ToolSpec:
    kw.setdefault("handler", lambda args, ctx: {})
    kw.setdefault("risk", "write")
    return cb.ToolSpec(name="pay", description="Pay", params=Args, schema_version="pay-v1", **kw)


def _three(args: Any, ctx: Any, extra: Any) -> dict[str, Any]:
    return {}


class _Tool:
    def handle(self, args: Any, ctx: Any) -> dict[str, Any]:
        return {}

    def __call__(self, args: Any, ctx: Any) -> dict[str, Any]:
        return {}


class _OneArg:
    def __call__(self, args: Any) -> dict[str, Any]:
        return {}


def _with_extra(fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(args: Any, ctx: Any) -> Any:
        return fn(args, ctx, "injected")

    return wrapper


async def _async_handler(args: Any, ctx: Any) -> dict[str, Any]:
    return {}


def _star(*items: Any) -> dict[str, Any]:
    return {}


def _defaults(args: Any, ctx: Any = None, more: int = 1) -> dict[str, Any]:
    return {}


@pytest.mark.parametrize(
    "handler",
    [
        _async_handler,
        _star,
        _defaults,
        functools.partial(_three, extra=1),
        functools.partial(lambda first, args, ctx: {}, "bound first"),
        _Tool().handle,
        _Tool(),
        _with_extra(_three),
        print,  # a builtin: its signature is not checked against anything it cannot read
    ],
    ids=[
        "async",
        "star-args",
        "defaults",
        "partial-kw",
        "partial-pos",
        "bound-method",
        "call-object",
        "wrapped",
        "builtin",
    ],
)
def test_handlers_callable_as_handler_args_ctx_are_accepted(handler: Any) -> None:
    assert _spec(handler=handler).handler is handler


@pytest.mark.parametrize(
    ("handler", "why"),
    [
        (lambda args: {}, "too many positional arguments"),
        (lambda args, *, ctx: {}, "too many positional arguments"),
        (_three, "missing a required argument: 'extra'"),
        (_OneArg(), "too many positional arguments"),
        (Args, "Args is a class, not a function"),
    ],
    ids=["forgot-ctx", "ctx-keyword-only", "three-args", "call-object-one-arg", "class"],
)
def test_a_handler_that_cannot_be_called_as_handler_args_ctx_is_a_usage_error(handler: Any, why: str) -> None:
    with pytest.raises(cb.UsageError) as info:
        _spec(handler=handler)
    text = str(info.value)
    assert "handler must be a function called as handler(args, ctx)" in text
    assert why in text and "'pay'" in text


@pytest.mark.parametrize(
    ("hook", "value", "call"),
    [
        ("requires_approval", lambda args: True, "requires_approval(args, ctx)"),
        ("authorize", lambda args: True, "authorize(args, ctx)"),
        ("authorize", lambda spec, args, ctx: True, "authorize(args, ctx)"),  # Policy.authorize's shape
        ("intent_key", lambda args: "k", "intent_key(args, ctx)"),
        ("reconcile", lambda key: {}, "reconcile(key, ctx)"),
        ("reconcile", Args, "reconcile(key, ctx)"),
        ("redact", lambda arguments, ctx: arguments, "redact(arguments)"),
        ("redact", lambda: {}, "redact(arguments)"),
    ],
)
def test_a_hook_with_the_wrong_signature_is_a_usage_error(hook: str, value: Any, call: str) -> None:
    with pytest.raises(cb.UsageError) as info:
        _spec(**{hook: value})
    assert f"{hook} must be a function called as {call}" in str(info.value)


def test_hooks_with_the_documented_signatures_are_accepted() -> None:
    async def reconcile(key: str, ctx: Any) -> dict[str, Any]:
        return {}

    spec = _spec(
        requires_approval=lambda args, ctx: False,
        authorize=functools.partial(lambda allowed, args, ctx: allowed, True),
        intent_key=lambda args, ctx: f"pay:{args.order_id}",
        reconcile=reconcile,
        redact=lambda arguments: {"order_id": "***"},
    )
    assert spec.reconcile is reconcile
