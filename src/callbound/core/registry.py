"""ToolSpec and Registry: the fixed allowlist of tools a model may call.

No tool name from a model is ever looked up anywhere but a ``Registry``. Parameter models are
tightened to strict validation with ``extra="forbid"`` (D5) so nothing the model did not send is
invented by coercion.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from pydantic import BaseModel, ValidationError

from .canonical import canonical_json, canonical_sha256, sha256_hex
from .errors import USER_CODE_FAILURES, CanonicalizationError, UsageError
from .types import Risk


def is_async_callable(fn: Any) -> bool:
    """True for an ``async def`` function or method, a ``functools.partial`` of one, and an object whose
    ``__call__`` is ``async def`` (which ``inspect.iscoroutinefunction`` alone misses: run in a thread,
    its coroutine would never be awaited)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - inspected, not called
    return call is not None and not inspect.isroutine(fn) and inspect.iscoroutinefunction(call)


# How each callable of a ToolSpec is called (reference.md, "Tool handlers"), checked when the tool is
# declared: a handler written handler(args) (ctx forgotten) raised TypeError at every call, before a
# line of it ran, which for a write stopped the operation OUTCOME_UNKNOWN and left a ledger entry to
# settle by hand although nothing could have happened (review round 16, F4).
_HOOK_PARAMETERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("handler", ("args", "ctx")),
    ("requires_approval", ("args", "ctx")),
    ("authorize", ("args", "ctx")),
    ("intent_key", ("args", "ctx")),
    ("reconcile", ("key", "ctx")),
    ("redact", ("arguments",)),
)
_HOOK_MEANING = {
    "handler": "args the validated params instance and ctx a CallContext",
    "requires_approval": "args the validated params instance and ctx a CallContext, returning a bool",
    "authorize": "args the validated params instance and ctx a CallContext, returning a bool",
    "intent_key": "args the validated params instance and ctx a CallContext, returning the intent's text",
    "reconcile": "key the idempotency key (str) and ctx a CallContext",
    "redact": "arguments the validated arguments as a plain JSON dict, returning what is stored in clear",
}


def _uncallable_as(fn: Any, positional: int) -> str | None:
    """Why ``fn`` cannot be called with ``positional`` positional arguments, or None when it can (or
    when its signature cannot be read: a builtin or an extension callable is given the benefit of the
    doubt). A class is refused: calling it builds an instance, never the tool's answer. A decorated
    function (``functools.wraps``) is accepted when either the wrapper's or the wrapped function's
    signature takes the arguments: a decorator may supply some of the wrapped function's parameters."""
    if isinstance(fn, type):
        return f"{fn.__name__} is a class, not a function"
    refused: list[str] = []
    for follow in (True, False):
        try:
            sig = inspect.signature(fn, follow_wrapped=follow)
        except (TypeError, ValueError):  # no readable signature
            continue
        try:
            sig.bind(*range(positional))
        except TypeError as exc:
            name = getattr(fn, "__qualname__", None) or type(fn).__name__
            refused.append(f"{name}{sig} cannot take them ({exc})")
            continue
        return None
    return refused[0] if refused else None


def discard_awaitable(value: Any) -> bool:
    """True, after closing it (no "never awaited" warning), when a sync hook handed back an awaitable:
    planning does not await, so its answer is unusable."""
    if not inspect.isawaitable(value):
        return False
    close = getattr(value, "close", None)
    if close is not None:
        close()
    return True


_VALID_RISKS = ("read", "write", "irreversible")
_MAX_FLOAT_INT = int(sys.float_info.max)  # the largest int a float holds (exactly)
# A name every provider accepts, as a ToolSpec may be offered through any adapter: OpenAI and Anthropic
# take ^[a-zA-Z0-9_-]{1,64}$, Gemini the same but starting with a letter or an underscore. Refused here,
# a bad name is a UsageError at startup rather than a provider's 400 on the first request.
TOOL_NAME_PATTERN = "^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
_TOOL_NAME = re.compile(TOOL_NAME_PATTERN[1:-1])
# Fix: ``extra="forbid"`` on the top-level model does not reach nested models, whose unknown fields
# pydantic silently dropped. Recent pydantic takes ``extra`` per validation call and applies it at
# every depth; versions without that parameter keep the top-level-only behaviour.
_PER_CALL_EXTRA = "extra" in inspect.signature(BaseModel.model_validate_json).parameters


@dataclass(frozen=True, slots=True)
class CallContext:
    """What a handler may know about the call it serves. Never a provider shape."""

    operation_id: str
    tenant: str
    subject: str
    call_id: str
    tool: str
    idempotency_key: str | None
    deadline: datetime | None
    attempt: int = 1
    # The fencing token of the lease this call runs under (D21), None when the store keeps no leases.
    # A driver frozen (not dead) past its lease can wake inside a handler after another driver took the
    # operation over; only the downstream system can refuse it then: send this token with the
    # idempotency key, and refuse a call whose token is lower than one already seen for that key.
    fence: int | None = None


Handler = Callable[[Any, CallContext], Any]


@dataclass(frozen=True, slots=True)
class ToolDeclaration:
    """A vendor-neutral tool declaration; each adapter renders it for its provider (D9)."""

    name: str
    description: str
    parameters: dict[str, Any]


def _strict_model(params: type[BaseModel]) -> type[BaseModel]:
    config = dict(params.model_config)
    if config.get("extra") == "forbid" and config.get("strict") is True:
        return params
    config["extra"] = "forbid"
    config["strict"] = True
    # A subclass keeps isinstance(args, params) true for handlers while validation gets stricter.
    return cast(
        type[BaseModel],
        type(params.__name__, (params,), {"model_config": config, "__module__": params.__module__}),
    )


@dataclass(frozen=True)
class ToolSpec:
    """One allowed tool. ``handler(args, ctx)`` may be sync or async.

    ``requires_approval`` defaults to ``risk == "irreversible"`` (D17); ``authorize(args, ctx)`` returns
    True to allow. Both hooks fail closed: only a real bool is an answer, so ``authorize`` denies on
    anything but ``True`` (a truthy string included) and a ``requires_approval`` rule asks a human on
    anything but ``False``; a hook that raises does the same. ``intent_key(args, ctx)`` names the business intent for write tools (D13);
    ``reconcile(key, ctx)`` finds out what happened after an unknown outcome (D16): it returns the
    effect's result (applied), raises ``NotApplied`` (definitely not applied, so the call may run
    again), or returns ``None`` (what a lookup that found nothing returns) or raises anything else
    (cannot tell: the operation stops OUTCOME_UNKNOWN).
    """

    name: str
    description: str
    params: type[BaseModel]
    handler: Handler
    schema_version: str
    risk: Risk = "read"
    timeout_ms: int = 10_000
    requires_approval: bool | Callable[[Any, CallContext], bool] | None = None
    authorize: Callable[[Any, CallContext], bool] | None = None
    intent_key: Callable[[Any, CallContext], str] | None = None
    reconcile: Callable[[str, CallContext], Any] | None = None
    max_result_bytes: int | None = None
    redact: Callable[[Any], Any] | None = None
    strict_params: type[BaseModel] = field(init=False, repr=False, compare=False)
    json_schema: dict[str, Any] = field(init=False, repr=False, compare=False)
    handler_ref: str = field(init=False, repr=False, compare=False)
    # whether validation can fold distinct JSON values into one (sets, maps with non-string keys)
    can_fold: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise UsageError("ToolSpec.name must be a non-empty string")
        if _TOOL_NAME.fullmatch(self.name) is None:
            raise UsageError(
                f"ToolSpec name {self.name!r} must match {TOOL_NAME_PATTERN} (letters, digits, _ and -, "
                "at most 64, not starting with a digit or -): the tool names every provider accepts"
            )
        if self.risk not in _VALID_RISKS:
            raise UsageError(f"ToolSpec {self.name!r}: risk must be one of {_VALID_RISKS}, not {self.risk!r}")
        if not (isinstance(self.params, type) and issubclass(self.params, BaseModel)):
            raise UsageError(f"ToolSpec {self.name!r}: params must be a pydantic BaseModel subclass")
        if getattr(self.params, "__pydantic_root_model__", False):
            # a tool's arguments are a JSON object of named fields (every provider declares them so);
            # a RootModel has none, and pydantic refuses the strict config it would need
            raise UsageError(
                f"ToolSpec {self.name!r}: params must be a BaseModel with fields, not a RootModel "
                f"({self.params.__name__}); use a model whose fields are the tool's arguments"
            )
        for name, value, optional in (
            ("timeout_ms", self.timeout_ms, False),
            ("max_result_bytes", self.max_result_bytes, True),
        ):
            # An int >= 1: a float or bool used to pass, a string to raise TypeError, and 0 or less
            # made every call time out or every result RESULT_TOO_LARGE (D11).
            if optional and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                also = ", or None" if optional else ""
                raise UsageError(
                    f"ToolSpec {self.name!r}: {name} must be an integer >= 1{also}, not {value!r}"
                )
            if name == "timeout_ms" and value > _MAX_FLOAT_INT:
                # the handler's timeout is the float timeout_ms / 1000: 10**400 raised OverflowError
                # out of run() at the first call (D4)
                raise UsageError(
                    f"ToolSpec {self.name!r}: timeout_ms must be a number of milliseconds a float can "
                    f"hold (at most about 1.8e308), not an integer of {len(str(value))} digits"
                )
        if not isinstance(self.schema_version, str) or not self.schema_version.strip():
            # hashed into bindings and approval digests, and compared as text on resume
            raise UsageError(
                f"ToolSpec {self.name!r}: schema_version must be a non-empty string such as "
                f"'{self.name}-v1', not {self.schema_version!r}"
            )
        try:
            self.schema_version.encode("utf-8")
        except UnicodeEncodeError as exc:
            # no canonical form (D6): every call's binding raised CanonicalizationError out of run()
            raise UsageError(
                f"ToolSpec {self.name!r}: schema_version holds a lone surrogate "
                f"({self.schema_version[exc.start]!r} at {exc.start}), which cannot be hashed into a "
                "binding: half of a character outside the BMP, or a byte that was not UTF-8"
            ) from None
        self._check_callables()
        for hook in ("requires_approval", "authorize", "intent_key", "redact"):
            # These decide during planning, which does not await: an async one would return a
            # coroutine, always truthy (authorize would allow everything) and never the same key.
            if is_async_callable(getattr(self, hook)):
                raise UsageError(
                    f"ToolSpec {self.name!r}: {hook} must be a plain (sync) function; only handler and "
                    "reconcile may be async"
                )
        strict = _strict_model(self.params)
        object.__setattr__(self, "strict_params", strict)
        object.__setattr__(self, "json_schema", strict.model_json_schema())
        try:
            json.dumps(self.json_schema, allow_nan=False)
        except ValueError:
            raise UsageError(
                f"ToolSpec {self.name!r}: the JSON Schema of {self.params.__name__} holds NaN or Infinity "
                "(a field's default, bound or example), which no request can carry as JSON"
            ) from None
        where = _lone_surrogate(self.json_schema)
        if where is not None:
            # sent to the provider with every request and hashed into each approval's tool digest:
            # an irreversible tool's first call raised CanonicalizationError out of run() (D4, D6)
            raise UsageError(
                f"ToolSpec {self.name!r}: the JSON Schema of {self.params.__name__} holds a lone surrogate "
                f"({where}), which no request can carry: half of a character outside the BMP, or a byte "
                "that was not UTF-8, in a field's description, title, default or examples"
            )
        object.__setattr__(self, "can_fold", _can_fold(strict.__pydantic_core_schema__))
        module = getattr(self.handler, "__module__", "?")
        qualname = getattr(self.handler, "__qualname__", type(self.handler).__name__)
        object.__setattr__(self, "handler_ref", f"{module}:{qualname}")

    def _check_callables(self) -> None:
        # A wrong type here was found only after a paid model turn: a handler given by name ("submit")
        # failed every call, for a write as an unknown outcome (STOPPED(OUTCOME_UNKNOWN), D16); an
        # authorize=True raised inside the check and so denied every call; a description that is not
        # text went to the provider as is. Refused when the tool is declared instead.
        if not isinstance(self.description, str):
            raise UsageError(
                f"ToolSpec {self.name!r}: description must be a string (what the tool does, sent to "
                f"the model), not {type(self.description).__name__}"
            )
        if not callable(self.handler):
            raise UsageError(
                f"ToolSpec {self.name!r}: handler must be the function to call, handler(args, ctx), "
                f"not {type(self.handler).__name__} {self.handler!r}"
            )
        rule = self.requires_approval
        if not (rule is None or rule is True or rule is False or callable(rule)):
            raise UsageError(
                f"ToolSpec {self.name!r}: requires_approval must be True, False, None (the default: "
                f"irreversible tools ask) or a function (args, ctx) -> bool, not {rule!r}"
            )
        for hook in ("authorize", "intent_key", "reconcile", "redact"):
            value = getattr(self, hook)
            if value is not None and not callable(value):
                raise UsageError(
                    f"ToolSpec {self.name!r}: {hook} must be a function or None, not "
                    f"{type(value).__name__} {value!r}"
                )
        for hook, takes in _HOOK_PARAMETERS:
            value = getattr(self, hook)
            if callable(value):
                why = _uncallable_as(value, len(takes))
                if why is not None:
                    raise UsageError(
                        f"ToolSpec {self.name!r}: {hook} must be a function called as {hook}({', '.join(takes)}), "
                        f"{_HOOK_MEANING[hook]}; {why}"
                    )

    @property
    def is_async(self) -> bool:
        return is_async_callable(self.handler)

    @property
    def is_write(self) -> bool:
        return self.risk != "read"

    def declaration(self) -> ToolDeclaration:
        return ToolDeclaration(self.name, self.description, self.json_schema)

    def validate_json(self, arguments_json: str) -> BaseModel:
        """Pydantic's strict JSON mode (D5): a value passes only if its JSON type is one the schema
        allows. Raises pydantic's ValidationError with field paths."""
        if _PER_CALL_EXTRA:
            return self.strict_params.model_validate_json(arguments_json, strict=True, extra="forbid")
        return self.strict_params.model_validate_json(arguments_json, strict=True)

    def folded(self, args: BaseModel, sent: dict[str, Any]) -> str | None:
        """Where validating ``sent`` (the parsed arguments) into ``args`` merged distinct JSON values,
        or None. Strict mode does not stop it: a set drops a repeated item the schema's
        ``uniqueItems`` forbids, and a map with int (or other non-string) keys reads "01", " 1" and
        "1" as one key, keeping the last value. D5 accepts nothing repaired, so such arguments are
        rejected. Same field paths as ``format_validation_error``, no values."""
        return _folded(args, sent, "") if self.can_fold else None

    def redacted(self, arguments: Any) -> Any:
        """The arguments as stored in clear (audit, approvals): through the ``redact`` hook when there
        is one (D20). A failing hook must not store the clear text it was meant to hide, nor stop the
        loop (D4): it gives ``"[redaction failed]"``."""
        if self.redact is None:
            return arguments
        try:
            # its own copy: a hook that masks fields in place and returns the same dict edited the
            # call's arguments themselves (the stored turn then differed from the audited plan, and
            # the approved call failed INTEGRITY)
            value = self.redact(copy.deepcopy(arguments))
            if discard_awaitable(value):  # a sync hook that handed back a coroutine: nothing to store
                return "[redaction failed]"
            # Stored as is (audit record, approval) and digested into the audit chain: a value with no
            # exact JSON form (a Decimal, NaN, a set, a lone surrogate) failed the commit after the
            # handler ran, leaving a paid write without its result (STOPPED(OUTCOME_UNKNOWN)). Checked
            # like a handler result, and kept as plain JSON data (a tuple or Mapping becomes what the
            # store reads back), so the stored value is exactly what was checked.
            return json.loads(canonical_json(value))
        except USER_CODE_FAILURES:
            return "[redaction failed]"

    def needs_approval(self, args: Any, ctx: CallContext) -> bool:
        rule = self.requires_approval
        if rule is None:
            return self.risk == "irreversible"
        if callable(rule):
            answer = rule(args, ctx)
            if answer is True or answer is False:
                return answer
            # Fail closed: an answer that is not a bool (None from a missing return, an array, a
            # coroutine) is never taken for "no human needed"; its truth value is not even asked.
            discard_awaitable(answer)
            return True
        return bool(rule)

    def definition_digest(self) -> str:
        """Changes whenever the schema, version or risk changes; part of stale-approval checks."""
        definition = {
            "name": self.name,
            "schema_version": self.schema_version,
            "risk": self.risk,
            "schema": self.json_schema,
        }
        try:
            return canonical_sha256(definition)
        except CanonicalizationError:
            # A bound beyond ±(2^53-1) (Field(le=2**63 - 1)) has no canonical form (D6), and every
            # approval of the tool raised out of run(): its exact text instead, keys sorted (the
            # schema holds no NaN and no lone surrogate: refused when the tool is declared).
            text = json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return sha256_hex(text)


def _lone_surrogate(schema: Any) -> str | None:
    """Where a JSON Schema (keys included) holds text with a lone surrogate, shown as an escape."""
    stack = [schema]
    while stack:
        node = stack.pop()
        texts: Iterable[Any] = ()
        if isinstance(node, str):
            texts = (node,)
        elif isinstance(node, dict):
            texts = node.keys()
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
        for text in texts:
            if isinstance(text, str):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as exc:
                    return f"{text[exc.start]!r} in {text[:40]!r}"
    return None


def _can_fold(schema: Any) -> bool:
    """True when a pydantic core schema holds a set, a frozenset or a map with keys other than
    strings anywhere (definitions included): only then can ``_folded`` find anything, so the walk is
    skipped for the usual flat models."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            kind = node.get("type")
            if kind in ("set", "frozenset"):
                return True
            keys = node.get("keys_schema") if kind == "dict" else None
            if isinstance(keys, dict) and keys.get("type") not in ("str", "any"):
                return True
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return False


def _key_text(key: int) -> str:
    """How pydantic writes an int (or bool) key as a JSON object key."""
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _folded(value: Any, sent: Any, path: str) -> str | None:
    """Walk a validated value beside the JSON it came from (see ``ToolSpec.folded``). The validated
    value's own type picks the branch of a union, so no schema walk is needed."""
    if isinstance(value, BaseModel):
        if type(value).__pydantic_root_model__:  # a RootModel (importing it pulls in sockets)
            return _folded(getattr(value, "root", None), sent, path)
        if not isinstance(sent, dict):
            return None
        for name, info in type(value).model_fields.items():
            alias = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
            key = alias if alias is not None and alias in sent else name
            if key in sent:
                why = _folded(getattr(value, name), sent[key], f"{path}.{key}" if path else key)
                if why is not None:
                    return why
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if not isinstance(sent, dict):
            return None
        for f in dataclasses.fields(value):
            if f.name in sent:
                why = _folded(getattr(value, f.name), sent[f.name], f"{path}.{f.name}" if path else f.name)
                if why is not None:
                    return why
        return None
    here = path or "$"
    if isinstance(value, set | frozenset):
        if isinstance(sent, list) and len(sent) != len(value):
            return f"{here}: items must be unique (uniqueItems): {len(sent)} sent, {len(value)} distinct"
        return None
    if isinstance(value, dict):
        if not isinstance(sent, dict):
            return None
        if len(sent) != len(value):
            return f"{here}: {len(sent)} keys were sent but name only {len(value)} (one key spelled twice)"
        # Same length, so no two keys merged and both dicts keep the order the keys were sent in.
        for (sent_key, sent_item), (key, item) in zip(sent.items(), value.items(), strict=True):
            where = f"{here}.{sent_key}"
            # "01", "+1", " 1" or "1_0" for an int (bool too): pydantic coerces them to one number, so
            # another spelling of the same key could merge (D5: nothing coerced). Other key types
            # (datetimes, UUIDs, floats) have several standard spellings of one value; only keys that
            # actually merged (the length check above) are refused for them.
            if isinstance(key, int) and _key_text(key) != sent_key:
                kind = type(key).__name__
                return f"{where}.[key]: not the canonical spelling of a {kind} key (two could merge)"
            why = _folded(item, sent_item, where)
            if why is not None:
                return why
        return None
    if isinstance(value, list | tuple) and isinstance(sent, list) and len(sent) == len(value):
        for i, (item, sent_item) in enumerate(zip(value, sent, strict=True)):
            why = _folded(item, sent_item, f"{path}.{i}" if path else str(i))
            if why is not None:
                return why
    return None


def format_validation_error(exc: ValidationError) -> str:
    """Field paths and messages, no input values (they may be sensitive)."""
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "$"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


class Registry:
    """A fixed allowlist of ToolSpecs with unique names."""

    __slots__ = ("_specs",)

    def __init__(self, specs: Iterable[ToolSpec]) -> None:
        # A single ToolSpec or None raised TypeError ("not iterable"): a usage error like the rest.
        try:
            items = iter(specs)
        except TypeError:
            hint = "Registry([spec])" if isinstance(specs, ToolSpec) else "Registry([spec, ...])"
            raise UsageError(
                f"Registry takes a list of ToolSpec objects ({hint}), not {type(specs).__name__}"
            ) from None
        table: dict[str, ToolSpec] = {}
        for spec in items:
            if not isinstance(spec, ToolSpec):
                raise UsageError(f"Registry takes ToolSpec objects, got {type(spec).__name__}")
            if spec.name in table:
                raise UsageError(f"tool name {spec.name!r} is registered twice")
            table[spec.name] = spec
        self._specs = table

    def get(self, name: object) -> ToolSpec | None:
        """Exact lookup. Anything that is not a registered name (including non-strings) is unknown."""
        if not isinstance(name, str):
            return None
        return self._specs.get(name)

    def subset(self, names: Iterable[str]) -> Registry:
        """A smaller allowlist for one user or task. Naming an unregistered tool is a usage error.

        ``names`` is a list of tool names. A single name (``subset("get_order")``) was read as its
        characters and refused as unregistered tools ``['g', 'e', ...]`` (or, for a one-letter tool,
        taken); None or a non-str item raised TypeError (review round 19, c F4)."""
        hint = "pass a list of tool names, e.g. subset(['get_order'])"
        if isinstance(names, str | bytes):
            raise UsageError(
                f"Registry.subset takes a list of tool names, not one {type(names).__name__}: {hint}"
            )
        try:
            wanted = list(names)
        except TypeError:
            raise UsageError(
                f"Registry.subset takes a list of tool names, not {type(names).__name__}: {hint}"
            ) from None
        odd = [n for n in wanted if not isinstance(n, str)]
        if odd:
            raise UsageError(
                f"Registry.subset names tools by str, not {type(odd[0]).__name__} {odd[0]!r}: {hint}"
            )
        twice = sorted({n for n in wanted if wanted.count(n) > 1})
        if twice:
            raise UsageError(
                f"Registry.subset names {', '.join(map(repr, twice))} twice; name each tool once"
            )
        missing = [n for n in wanted if n not in self._specs]
        if missing:
            raise UsageError(f"subset names unregistered tools: {missing}")
        return Registry(self._specs[n] for n in wanted)

    def names(self) -> list[str]:
        return list(self._specs)

    def declarations(self) -> list[ToolDeclaration]:
        return [spec.declaration() for spec in self._specs.values()]

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._specs
