"""Checks of the Runner's public arguments. D4: only ``UsageError`` and ``StoreError`` escape ``run`` and
``resume``; a caller's misuse is a ``UsageError`` at the call, before anything is stored or any request
is made, not a ``TypeError`` or ``AttributeError`` later (after a paid model turn, or from another
process reading what was stored)."""

from __future__ import annotations

import copy
import inspect
import math
import os
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

from ..core.approvals import Decision
from ..core.canonical import canonical_json
from ..core.errors import CallboundError, UnknownApproval, UsageError
from ..core.guards import Budgets
from ..core.registry import Registry
from .outcome import Policy, Price
from .tools import ToolExecutor

SETTINGS_KEYS = frozenset(
    {
        "model",
        "tool_choice",
        "reset_tool_choice",
        "temperature",
        "max_output_tokens",
        "stream",
        "continuation",
        "store",
        "extra",
    }
)

# "replay" (the default) sends the whole transcript; "previous_response_id" chains on the provider's
# stored response where the API has one (openai-responses, gemini-interactions) and replays elsewhere.
CONTINUATIONS = frozenset({"replay", "previous_response_id"})

_STORE_METHODS = ("commit", "load_operation", "audit_events", "get_approval")
_APP_SHAPE = "{'ref': 'module:factory', 'args': {...}} or a 'module:factory' string"


# The longest lease a drive or a worker takes (and the longest worker poll): one day. The heartbeat renews it every third of its length, so its
# length matters only when a worker dies (how long its operation waits to be taken over) or is frozen
# (D21: keep it above the longest pause). A day holds comfortably in a PostgreSQL interval (limit about
# 178 million years) and timestamp (year 294276), and in SQLite's seconds since the epoch. 1e308 was
# accepted: every PostgreSQL claim then failed with "interval out of range" while the worker polled on,
# and on SQLite the lease never expired (review round 14, h5 r7).
MAX_LEASE_S = 86_400.0


def _kind(value: Any) -> str:
    return type(value).__name__


def check_runner_args(
    *,
    model: Any,
    registry: Any,
    budgets: Any,
    store: Any,
    clock: Any,
    policy: Any,
    prices: Any,
    instructions: Any,
    lease_s: Any,
    audit_key: Any,
    hooks: dict[str, Any],
    ids: Any = None,
    executor: Any = None,
    rng: Any = None,
) -> None:
    """The Runner's arguments, each of the kind it must be."""
    for name, value in (("model", model), ("store", store), ("clock", clock)):
        if isinstance(value, type):
            # the class itself has every method the checks below look for, as plain functions
            raise UsageError(f"Runner({name}=...) takes an instance, not the class: {value.__name__}(...)")
    adapter = getattr(model, "adapter", None)
    if adapter is None or not callable(getattr(model, "complete", None)):
        raise UsageError(
            f"Runner(model=...) needs a model client (callbound.testing.ScriptedModel or a client from "
            f"callbound.transports), not {_kind(model)}"
        )
    if not (
        isinstance(getattr(adapter, "api", None), str) and callable(getattr(adapter, "render_tools", None))
    ):
        # the runner builds every request with it: a name or a dict failed only inside run()
        raise UsageError(
            f"Runner(model=...): {_kind(model)}.adapter must be a callbound adapter "
            f"(callbound.adapters.get(api)), not {_kind(adapter)}"
        )
    if ids is not None and not callable(getattr(ids, "new_id", None)):
        raise UsageError(
            f"Runner(ids=...) needs new_id(prefix) -> str (callbound.core.ids.IdSource), not {_kind(ids)}"
        )
    if rng is not None and not callable(getattr(rng, "uniform", None)):
        # the retry backoff draws from it: a seed passed here failed at the first retry, out of run
        raise UsageError(
            f"Runner(rng=...) takes a random.Random (random.Random(seed) for a seed), not {_kind(rng)}"
        )
    if executor is not None and not isinstance(executor, ToolExecutor):
        raise UsageError(
            f"Runner(executor=...) takes a callbound.runtime.tools.ToolExecutor(...), not {_kind(executor)}"
        )
    if not _is_async(model.complete):
        # awaited by the runner: a plain function's answer was taken for a failed request and asked
        # again (each answer paid for, then thrown away)
        raise UsageError(
            f"Runner(model=...): {_kind(model)}.complete must be an async function "
            "(async def complete(self, body, *, stream, meta, on_progress=None) -> ModelTurn)"
        )
    if not isinstance(registry, Registry):
        raise UsageError(
            f"Runner(registry=...) takes a callbound.Registry([ToolSpec, ...]), not {_kind(registry)}"
        )
    if store is not None and isinstance(store, str | bytes | os.PathLike):
        raise UsageError(
            f"Runner(store=...) takes a Store object, not a URL or path ({store!r}): build one with "
            "callbound.stores.open(url), e.g. callbound.stores.open('sqlite:///callbound.db')"
        )
    if store is not None and not all(callable(getattr(store, m, None)) for m in _STORE_METHODS):
        raise UsageError(
            f"Runner(store=...) takes a Store (MemoryStore, or callbound.stores.open(url)), not {_kind(store)}"
        )
    if budgets is not None and not isinstance(budgets, Budgets):
        raise UsageError(f"Runner(budgets=...) takes a callbound.Budgets(...), not {_kind(budgets)}")
    if policy is not None and not isinstance(policy, Policy):
        raise UsageError(f"Runner(policy=...) takes a callbound.Policy(...), not {_kind(policy)}")
    if clock is not None and not all(
        callable(getattr(clock, m, None)) for m in ("now", "monotonic", "sleep")
    ):
        raise UsageError(f"Runner(clock=...) needs now(), monotonic() and sleep(), not {_kind(clock)}")
    if clock is not None:
        _check_clock_now(clock)
    if prices is not None and not (
        isinstance(prices, dict)
        and all(isinstance(k, str) and isinstance(v, Price) for k, v in prices.items())
    ):
        raise UsageError(
            "Runner(prices=...) takes {model name: callbound.Price(input_per_mtok, output_per_mtok)}"
        )
    if instructions is not None and not isinstance(instructions, str):
        raise UsageError(f"Runner(instructions=...) takes a str or None, not {_kind(instructions)}")
    if isinstance(lease_s, bool) or not isinstance(lease_s, int | float) or not 0 < lease_s < math.inf:
        raise UsageError(f"lease_s must be a positive number of seconds, not {lease_s!r}")
    if lease_s > MAX_LEASE_S:  # as a worker's: PostgreSQL's claims failed ("interval out of range")
        raise UsageError(f"lease_s must be at most {MAX_LEASE_S:g} seconds (one day), not {lease_s!r}")
    if audit_key is not None and not isinstance(audit_key, bytes):
        raise UsageError(f"Runner(audit_key=...) takes bytes or None, not {_kind(audit_key)}")
    for name, hook in hooks.items():
        if hook is not None and not callable(hook):
            raise UsageError(f"Runner({name}=...) takes a function or None, not {_kind(hook)}")


def _check_clock_now(clock: Any) -> None:
    """D23: ``now()`` is timezone-aware. A clock returning ``datetime.now()`` (naive) ran until an
    approval's expiry, stamped naive, met an aware time from the store: resume raised TypeError."""
    now = clock.now()
    if not isinstance(now, datetime) or now.utcoffset() is None:
        raise UsageError(
            f"Runner(clock=...): now() must return a timezone-aware datetime, such as "
            f"datetime.now(timezone.utc), not {now!r} (D23)"
        )


def _is_async(function: Any) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - an object whose __call__ is async
    )


def check_model_name(model: Any, settings: dict[str, Any]) -> None:
    """gemini-generate puts the client's ``model=`` in the URL and never sends ``settings['model']``, while
    ``Runner(prices=...)`` is looked up by ``settings['model']``: two different names priced one model's
    turns at the other's rate, and ``max_cost`` let the dearer one run past its limit (D12)."""
    client_model = getattr(model, "model", None)
    named = settings.get("model")
    if (
        getattr(model.adapter, "api", None) == "gemini-generate"
        and isinstance(client_model, str)
        and client_model
        and isinstance(named, str)
        and named.removeprefix("models/") != client_model.removeprefix("models/")
    ):
        raise UsageError(
            f"gemini-generate calls the client's model {client_model!r} (it is in the URL), but "
            f"settings['model'] is {named!r}, by which prices are looked up: make them the same"
        )


_COUNT = (int, type(None))


def check_turn_usage(model: Any, usage: Any) -> None:
    """A custom client's turn: its usage counts are ints >= 0 or None and its cost a Decimal or None, as
    the adapters build them; a float cost or a str count raised TypeError out of run after the model
    was paid (D4), and a resume asked, and paid, again."""
    counts = (usage.input_tokens, usage.output_tokens)
    if any(type(c) not in _COUNT or (c is not None and c < 0) for c in counts) or not (
        usage.cost is None or isinstance(usage.cost, Decimal)
    ):
        raise UsageError(
            f"{type(model).__name__}.complete() returned usage {usage!r}: token counts must be ints >= 0 "
            "or None and cost a decimal.Decimal or None (build the turn with the adapter)"
        )


def check_messages(messages: Any) -> list[dict[str, Any]]:
    """``Runner(messages=...)``: earlier provider-native messages, sent first on every request of every
    operation: a list of JSON objects with encodable text. A str was split into characters and sent."""
    if isinstance(messages, str | bytes | dict) or not isinstance(messages, list | tuple):
        raise UsageError(
            f"Runner(messages=...) takes a list of provider-native message dicts, not {_kind(messages)}; "
            "pass the user's text to run(input=...)"
        )
    for i, item in enumerate(messages):
        if not isinstance(item, dict):
            raise UsageError(f"Runner(messages=...) item {i} is a {_kind(item)}, not a message dict")
        try:
            canonical_json(item)
        except (CallboundError, TypeError, ValueError) as exc:
            raise UsageError(f"Runner(messages=...) item {i} is not plain JSON: {exc}") from exc
    return copy.deepcopy(list(messages))


def check_extra(api: str, extra: dict[str, Any]) -> None:
    """``settings['extra']`` adds request fields callbound has no setting for (D25). A field callbound
    itself sets from a setting or the transcript would be overwritten by it: another model than the
    one priced (``max_cost`` counted at the wrong price), a stream the runner did not ask for, the
    transcript replaced, or a setting's checks bypassed (``max_output_tokens: "1024"`` sent as is, a
    ``temperature`` of ``"hot"``, ``store: true`` over ``settings['store'] = False``; review round 16).
    ``tool_choice`` is refused in the forms ``settings['tool_choice']`` takes (every plain string, a
    choice of one named function, Anthropic's own objects), which the setting checks against the
    registry and lifts after the first tool round (a forced ``"required"`` sent through ``extra`` stayed
    on every request, so the model could never answer); a form the setting has no spelling for (OpenAI's
    ``allowed_tools`` or a hosted tool's choice, a Gemini choice among several functions or ``VALIDATED``
    mode) still goes through ``extra``, as given, on every request. Its values go on the wire as JSON:
    NaN or a Decimal failed every request."""
    for key, instead in (*_MANAGED_EVERYWHERE.items(), *_MANAGED_BY_API.get(api, {}).items()):
        if key in extra:
            raise UsageError(f"settings['extra'][{key!r}] is set by callbound; use {instead}")
    for path, instead in _MANAGED_NESTED.get(api, ()):
        found: Any = extra
        for key in path:
            found = found.get(key, _ABSENT) if isinstance(found, dict) else _ABSENT
        if found is not _ABSENT:
            where = "".join(f"[{key!r}]" for key in path)
            raise UsageError(f"settings['extra']{where} is set by callbound; use {instead}")

    def sayable(choice: Any) -> bool:
        """A tool choice settings['tool_choice'] can say (or no choice of the API at all)."""
        if not isinstance(choice, dict):
            return not (api == "gemini-interactions" and choice == "validated")
        kind = choice.get("type")
        if api in ("openai-responses", "openai-chat"):
            return not isinstance(kind, str) or kind == "function"
        if api == "anthropic-messages":
            return not isinstance(kind, str) or kind in ("auto", "any", "none", "tool")
        if api == "gemini-interactions":  # {"allowed_tools": {"mode", "tools"}}
            allowed = choice.get("allowed_tools")
            if not isinstance(allowed, dict):
                return True
            tools = allowed.get("tools")
            return allowed.get("mode") == "any" and isinstance(tools, list) and len(tools) == 1
        # gemini-generate: functionCallingConfig {"mode", "allowedFunctionNames"}
        mode = choice.get("mode")
        names = choice.get("allowedFunctionNames", choice.get("allowed_function_names"))
        count = len(names) if isinstance(names, list) else 0
        return isinstance(mode, str) and (
            (mode.upper() in ("AUTO", "ANY", "NONE") and count == 0) or (mode.upper() == "ANY" and count == 1)
        )

    for path in _TOOL_CHOICE_AT.get(api, ()):
        choice: Any = extra
        for key in path:
            choice = choice.get(key, _ABSENT) if isinstance(choice, dict) else _ABSENT
        if choice is not _ABSENT and sayable(choice):
            where = "".join(f"[{key!r}]" for key in path)
            raise UsageError(
                f"settings['extra']{where} = {choice!r} is a tool choice callbound sets; use "
                "settings['tool_choice'] ('auto', 'required', 'none' or {'name': tool}), which is checked "
                "against the registry and lifted after the first tool round; extra takes only the API's "
                "own forms the setting has no spelling for"
            )
    try:
        canonical_json(extra)
    except (CallboundError, TypeError, ValueError) as exc:
        raise UsageError(f"settings['extra'] must hold plain JSON values: {exc}") from exc


_ABSENT = object()
_MANAGED_EVERYWHERE = {"model": "settings['model']", "stream": "settings['stream']"}
_TRANSCRIPT = "run(input=...) and Runner(messages=...)"
_TEMPERATURE = "settings['temperature']"
_TOKENS = "settings['max_output_tokens']"
_STORE = "settings['store']"
_MANAGED_BY_API: dict[str, dict[str, str]] = {
    "openai-responses": {
        "input": _TRANSCRIPT,
        "instructions": "Runner(instructions=...)",
        "temperature": _TEMPERATURE,
        "max_output_tokens": _TOKENS,
        "store": _STORE,
    },
    "openai-chat": {"messages": _TRANSCRIPT, "temperature": _TEMPERATURE, "max_completion_tokens": _TOKENS},
    "anthropic-messages": {
        "messages": _TRANSCRIPT,
        "system": "Runner(instructions=...)",
        "temperature": _TEMPERATURE,
        "max_tokens": _TOKENS,
    },
    "gemini-generate": {
        "contents": _TRANSCRIPT,
        "systemInstruction": "Runner(instructions=...)",
        "system_instruction": "Runner(instructions=...)",
    },
    "gemini-interactions": {
        "input": _TRANSCRIPT,
        "system_instruction": "Runner(instructions=...)",
        "store": _STORE,
    },
}
# Fields inside an object callbound fills key by key (Gemini's generation config, deep-merged with extra:
# its other keys, thinkingConfig or thinking_level, still go through extra). Both spellings: the JSON
# API reads either.
_MANAGED_NESTED: dict[str, list[tuple[tuple[str, ...], str]]] = {
    "gemini-generate": [
        ((config, key), instead)
        for config in ("generationConfig", "generation_config")
        for key, instead in (
            ("temperature", _TEMPERATURE),
            ("maxOutputTokens", _TOKENS),
            ("max_output_tokens", _TOKENS),
        )
    ],
    "gemini-interactions": [
        ((config, key), instead)
        for config in ("generation_config", "generationConfig")
        for key, instead in (
            ("temperature", _TEMPERATURE),
            ("max_output_tokens", _TOKENS),
            ("maxOutputTokens", _TOKENS),
        )
    ],
}
# Where each API's tool choice goes in the body (judged by check_extra's ``sayable``).
_TOOL_CHOICE_AT: dict[str, list[tuple[str, ...]]] = {
    "openai-responses": [("tool_choice",)],
    "openai-chat": [("tool_choice",)],
    "anthropic-messages": [("tool_choice",)],
    "gemini-generate": [
        (config, calling)
        for config in ("toolConfig", "tool_config")
        for calling in ("functionCallingConfig", "function_calling_config")
    ],
    "gemini-interactions": [(config, "tool_choice") for config in ("generation_config", "generationConfig")],
}


def checked_settings(settings: Any) -> dict[str, Any]:
    """The model settings (D25): a dict of known keys, copied."""
    if settings is not None and not isinstance(settings, dict):
        raise UsageError(f"Runner(settings=...) takes a dict, not {_kind(settings)}")
    out = dict(settings or {})
    unknown = set(out) - SETTINGS_KEYS
    if unknown:
        raise UsageError(f"unknown model settings {sorted(unknown)}; allowed: {sorted(SETTINGS_KEYS)}")
    if not isinstance(out.get("reset_tool_choice", True), bool):
        raise UsageError("settings['reset_tool_choice'] must be True or False")
    for flag in ("stream", "store"):
        # a flag of another type was sent as is or read by its truth ("false" streamed, 0 dropped store)
        if out.get(flag) is not None and not isinstance(out[flag], bool):
            raise UsageError(f"settings[{flag!r}] must be True or False, not {out[flag]!r}")
    tokens = out.get("max_output_tokens")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0):
        raise UsageError(f"settings['max_output_tokens'] must be a positive int, not {tokens!r}")
    temperature = out.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not math.isfinite(temperature)
        or temperature < 0
    ):
        raise UsageError(f"settings['temperature'] must be a number >= 0, not {temperature!r}")
    model = out.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise UsageError(f"settings['model'] must be the model's name, not {model!r}")
    check_text("settings['model']", model)
    continuation = out.get("continuation")
    if continuation is not None and (not isinstance(continuation, str) or continuation not in CONTINUATIONS):
        # a misspelt "previous_response_id" replayed the whole transcript on every request, silently
        # paying for the history each turn; a value is one of the two modes or absent (D8)
        raise UsageError(
            f"settings['continuation'] must be one of {sorted(CONTINUATIONS)} (or absent: replay), "
            f"not {continuation!r}"
        )
    if out.get("extra") is not None and not isinstance(out["extra"], dict):
        raise UsageError(f"settings['extra'] takes a dict of request fields, not {_kind(out['extra'])}")
    return out


def check_text(what: str, text: Any) -> None:
    """Text callbound hashes and sends must be encodable: a lone surrogate (half of an emoji's UTF-16
    pair, from a bad slice or a JSON ``\ud83d`` escape) has no UTF-8 form, so it raised
    UnicodeEncodeError out of ``run`` or failed every request as a "connection error" (D4)."""
    if isinstance(text, str):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise UsageError(
                f"{what} holds a lone surrogate ({text[exc.start]!r} at {exc.start}), which no request can "
                "carry: it is half of a character outside the BMP; fix the text where it was cut"
            ) from exc


def check_tool_choice(choice: Any, offered: frozenset[str]) -> None:
    """A forced ``tool_choice`` must name a tool the request offers: ``{"name": X}`` with X not in the
    registry, or "required"/"any" with no tool at all, asks the model for a call it cannot make (the
    provider refuses the request, or a Gemini ``allowedFunctionNames`` names nothing it was given)."""
    name = choice.get("name") if isinstance(choice, dict) else None
    if isinstance(name, str) and name and name not in offered:
        raise UsageError(f"tool_choice names {name!r}, which is not in the registry: {sorted(offered)}")
    forced = choice in ("required", "any") or (
        isinstance(choice, dict) and choice.get("type") in ("any", "tool")
    )
    if forced and not offered:
        raise UsageError(f"tool_choice {choice!r} forces a tool call, but the registry offers no tool")


def check_settings_for(
    adapter: Any, tools: list[dict[str, Any]], settings: dict[str, Any], instructions: Any
) -> None:
    """Settings the runner's adapter refuses (a ``tool_choice`` the API does not take, Chat ``n`` other
    than 1, an ``extra`` that is no dict) are refused now, as D9 refuses a schema when the registry is
    bound: not at the first model request, after the operation was stored (D4, D25). One throwaway
    request is built with no items: no I/O, and the adapter's own rules are the ones applied."""
    if settings.get("extra"):
        check_extra(getattr(adapter, "api", ""), settings["extra"])
    try:
        adapter.build_request(
            items=[],
            tools=tools,
            settings=settings,
            instructions=instructions,
            stream=bool(settings.get("stream")),
        )
    except UsageError:
        raise
    except Exception as exc:  # settings it cannot even merge are misuse too, not a crash later
        raise UsageError(
            f"Runner(settings=...) cannot be sent to {getattr(adapter, 'api', 'the API')}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def app_reference(app: Any) -> dict[str, Any] | None:
    """The application saved with each operation (D21) in the shape ``callbound resume``, ``approvals
    approve``, ``ops cancel`` and workers read: ``{"ref": "module:factory", "args": {...}}``. A plain
    ``"module:factory"`` string (the ``--app`` form) is taken as that with no arguments."""
    if app is None:
        return None
    if isinstance(app, str):
        app = {"ref": app, "args": {}}
    if not isinstance(app, dict) or set(app) - {"ref", "args"}:
        raise UsageError(f"Runner(app=...) must be {_APP_SHAPE}, not {app!r}")
    ref, args = app.get("ref"), app.get("args")
    args = {} if args is None else args
    module, sep, attr = ref.partition(":") if isinstance(ref, str) else ("", "", "")
    if not (sep and module and attr):
        raise UsageError(f"Runner(app=...) needs 'ref' as 'module:factory' ({_APP_SHAPE}), not {ref!r}")
    if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
        raise UsageError(f"Runner(app=...) needs 'args' as a dict of keyword arguments, not {args!r}")
    try:
        canonical_json(args)  # saved with the operation; workers key runners by its canonical text
    except (CallboundError, TypeError, ValueError) as exc:
        raise UsageError(f"Runner(app=...) 'args' must be plain JSON values: {exc}") from exc
    return {"ref": ref, "args": copy.deepcopy(args)}


def check_new_operation(
    input: Any, tenant: Any, subject: Any, operation_id: Any, has_messages: bool = False
) -> None:
    """``run``/``submit``: tenant and subject name who the operation acts for (D10, D17) and are stored,
    compared and shown as text; so are the operation id and the input. ``has_messages``: the runner
    holds earlier messages or instructions (``Runner(messages=..., instructions=...)``), so
    ``input=None`` still sends something (whether the provider takes instructions alone is its call)."""
    for name, value in (("tenant", tenant), ("subject", subject)):
        if not isinstance(value, str) or not value:
            raise UsageError(f"run() needs a tenant and a subject as non-empty str; {name} is {value!r}")
        _check_not_blank(name, value)
    if operation_id is not None and not isinstance(operation_id, str):
        raise UsageError(f"operation_id must be a str or None, not {_kind(operation_id)}")
    if operation_id == "":
        # resume("") is refused: a run under "" got a random id the caller never learnt to ask for
        raise UsageError("operation_id is empty; pass an id, or None for a new random one")
    if operation_id is not None:
        _check_not_blank("operation_id", operation_id)
    if input is not None and not isinstance(input, str):
        raise UsageError(
            f"input must be a str or None, not {_kind(input)}; pass earlier provider-native messages as "
            "Runner(messages=[...])"
        )
    check_text("input", input)
    if input is not None and not input.strip():
        # an empty user message: Anthropic refuses it ("all messages must have non-empty content"),
        # and for any model it asks nothing
        raise UsageError("input is empty; pass the user's text, or None to send no new user message")
    if input is None and not has_messages:
        # an empty request: every provider refuses it (Anthropic "messages: at least one message is
        # required", Gemini "contents is not specified"), so it would end FAILED after it was stored
        raise UsageError(
            "nothing to ask: input is None and the runner has no earlier messages or instructions; pass "
            "input='...' or Runner(messages=[...])"
        )
    for name, value in (("tenant", tenant), ("subject", subject), ("operation_id", operation_id)):
        check_text(name, value)
    check_key_text("tenant", tenant)
    check_key_text("operation_id", operation_id)
    for name, value in (("tenant", tenant), ("operation_id", operation_id)):
        _check_key_size(name, value)


# PostgreSQL keeps an index row in at most 2704 bytes: the ledger's (tenant, key), with an intent key
# of up to 1024 bytes (core.dispatch.MAX_INTENT_KEY_BYTES), and the journal's (operation_id, pos).
# A longer tenant or operation id failed the first commit with a StoreError there, while SQLite and
# memory took it: one id, one outcome on every store. Checked when an operation is made, never when
# one is resumed or decided, so an operation an earlier version stored stays reachable.
MAX_KEY_BYTES = 1024


def _check_key_size(what: str, text: Any) -> None:
    if isinstance(text, str) and len(text.encode("utf-8")) > MAX_KEY_BYTES:
        raise UsageError(
            f"{what} is {len(text.encode('utf-8'))} bytes of UTF-8, over the {MAX_KEY_BYTES} every store "
            "can key by; pass a shorter id (a hash of a long one, say)"
        )


def check_operation_id(operation_id: Any) -> None:
    if not isinstance(operation_id, str) or not operation_id:
        raise UsageError(f"operation_id must be a non-empty str, not {operation_id!r}")
    check_key_text("operation_id", operation_id)


def check_tenant(tenant: Any) -> None:
    if not isinstance(tenant, str) or not tenant:
        raise UsageError(f"tenant must be a non-empty str, not {tenant!r}")
    _check_not_blank("tenant", tenant)
    check_text("tenant", tenant)
    check_key_text("tenant", tenant)


def _check_not_blank(what: str, text: str) -> None:
    """A tenant, subject or operation id of only whitespace (``"  "``) names nobody, as an empty one
    does: the empty one was refused, the blank one stored and acted for (a blank tenant keyed the
    ledger, a blank subject is the empty name once approvals compare names stripped, D17). Refused
    alike, before anything is stored (review round 19, c F1)."""
    if not text.strip():
        raise UsageError(f"{what} is only whitespace ({text!r}); pass {_BLANK_HINT[what]}")


_BLANK_HINT = {
    "tenant": "the tenant the operation acts for, e.g. tenant='acme'",
    "subject": "the user or service it acts for, e.g. subject='user-1'",
    "operation_id": "an id, or operation_id=None for a new random one",
}


def check_key_text(what: str, text: Any) -> None:
    """An operation id or tenant keys the stores' rows. A NUL character, which PostgreSQL cannot hold in
    a key, made it refuse the commit: a StoreError, as if the store were down. Refused on every store
    alike, before anything is stored (D4; review round 18, c F3)."""
    if isinstance(text, str) and "\x00" in text:
        raise UsageError(
            f"{what} holds a NUL character (\\x00 at {text.index(chr(0))}), which PostgreSQL cannot store in "
            "a key; pass an id without control characters"
        )


def checked_decisions(decisions: Any) -> list[Decision]:
    """``resume(op, decisions)`` (D17): a list of ``Decision``; a single ``Decision`` is a list of one.
    Checked whole before any is recorded."""
    hint = "pass [callbound.Decision.approve(approval_id, approver=...)] or Decision.deny(...)"
    if isinstance(decisions, Decision):
        return [decisions]
    if isinstance(decisions, str | bytes | dict) or not isinstance(decisions, Iterable):
        raise UsageError(f"resume(decisions=...) takes a list of Decision, not {_kind(decisions)}: {hint}")
    out = list(decisions)
    for d in out:
        if not isinstance(d, Decision):
            raise UsageError(f"resume(decisions=...) holds a {_kind(d)}, not a Decision: {hint}")
        if not isinstance(d.approval_id, str) or not d.approval_id:
            raise UsageError(f"Decision.approval_id must be an approval id (str), not {d.approval_id!r}")
        if "\x00" in d.approval_id:  # no approval has one; PostgreSQL refused the lookup (StoreError)
            raise UnknownApproval(f"no approval {d.approval_id!r}: approval ids hold no NUL character")
    return out
