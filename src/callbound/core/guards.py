"""Loop guards: budgets with finite defaults (D12) and the pure checks that enforce them.

Every check returns ``Continue`` or ``Stop(reason)``; the runner turns a Stop into STOPPED with
that reason and an escalation record.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from decimal import Decimal
from typing import Any

from .errors import UsageError
from .types import Usage


def money_amount(value: Any, refused: UsageError) -> Decimal:
    """A finite Decimal >= 0 from a Decimal, int, float or numeric string (a float through its str, so
    3.0 is exactly 3.0); a bool or anything else raises ``refused``. Budgets and prices share it."""
    if isinstance(value, bool) or not isinstance(value, Decimal | int | float | str):
        raise refused
    try:
        amount = value if isinstance(value, Decimal) else Decimal(str(value))
    except ArithmeticError:  # decimal.InvalidOperation: not a number at all
        raise refused from None
    if not amount.is_finite() or amount < 0:
        raise refused
    return amount


def _checked_cost(value: Any, saved: bool) -> Decimal:
    # A cost of 0 stops every priced run after its first turn; operations saved with it still load.
    refused = UsageError(f"Budgets.max_cost must be a finite amount > 0 (a Decimal), or None, not {value!r}")
    cost = money_amount(value, refused)
    if cost == 0 and not saved:
        raise refused
    return cost


def _seconds(value: float) -> float:
    """``value`` as the float the deadline arithmetic uses; NaN for an int no float can hold."""
    try:
        return float(value)
    except OverflowError:
        return math.nan


# The least value of each integer field. 0 means something only for max_retries (no retries, D26):
# as any other limit it ends or refuses everything at once (max_model_turns=0 stops every run before
# its first request, max_tool_calls=0 refuses every call, max_result_bytes=0 makes every result
# RESULT_TOO_LARGE, a token limit of 0 stops every run after its first turn), so it is refused.
_LEAST = {"max_retries": 0}
# What callbound took before: 0 for every field but these. Budgets saved with an operation keep
# loading under it (audit verify, resume): the operation was created, and may have run, under them.
_LEAST_SAVED = {"max_parallel": 1, "max_identical_calls": 1, "max_no_progress_turns": 1}
_OPTIONAL = frozenset({"max_input_tokens", "max_output_tokens"})


@dataclass(frozen=True, slots=True)
class Budgets:
    """Limits for one operation. Defaults are finite (D12); tokens and cost are unlimited unless set.

    ``max_parallel`` bounds how many of one turn's read handlers run at once (issue 2 §6, D15: "reads
    of one turn run concurrently, at most max_parallel at a time"; writes run one at a time). It is a
    limit on concurrency, not a count: it never trips, and calls beyond it wait for a slot within
    their own timeouts. It holds per turn because an operation runs one turn at a time; a handler
    that timed out keeps its slot until its thread really ends. Concurrency across operations is the
    executor's (``ToolExecutor(max_threads=...)``) or the worker pool's."""

    max_model_turns: int = 16
    max_tool_calls: int = 64
    deadline_s: float = 300.0  # active time, outside WAITING_APPROVAL (D14)
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_cost: Decimal | None = None
    max_parallel: int = 4
    max_identical_calls: int = 2
    max_no_progress_turns: int = 3
    max_result_bytes: int = 64 * 1024
    max_retries: int = 3
    not_after: datetime | None = None  # absolute end, regardless of activity (D14)

    def __post_init__(self) -> None:
        self._check(saved=False)

    def _check(self, saved: bool) -> None:
        # Fix: values used to be only compared with 0, so a NaN or infinite deadline (which never trips),
        # strings (a TypeError, not a UsageError), a naive ``not_after`` (a TypeError later, inside
        # check_running, against the clock's aware UTC time) and limits of 0 (every run stopped at
        # once) were accepted. Each field is now checked for its type and range.
        for f in fields(self):
            name, value = f.name, getattr(self, f.name)
            if name == "not_after":
                if value is not None and not (isinstance(value, datetime) and value.utcoffset() is not None):
                    raise UsageError("Budgets.not_after must be a timezone-aware datetime or None")
                continue
            if name == "max_cost":
                if value is not None:
                    object.__setattr__(self, "max_cost", _checked_cost(value, saved))
                continue
            if value is None and name in _OPTIONAL:
                continue
            real = isinstance(value, int | float) and not isinstance(value, bool)
            if name == "deadline_s":
                # also rejects NaN; 0 s of active time stops every run before its first request. An
                # int is compared with inf exactly, so 10**400 passed and then raised OverflowError out
                # of run() where the time left is a float (remaining_s, D4): it must be one.
                if not real or not (
                    0 <= _seconds(value) < math.inf if saved else 0 < _seconds(value) < math.inf
                ):
                    raise UsageError(
                        f"Budgets.deadline_s must be a finite number of seconds > 0, not {value!r}"
                    )
                continue
            least = _LEAST_SAVED.get(name, 0) if saved else _LEAST.get(name, 1)
            if not (real and isinstance(value, int)) or value < least:
                also = ", or None" if name in _OPTIONAL else ""
                raise UsageError(f"Budgets.{name} must be an integer >= {least}{also}, not {value!r}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Decimal):
                value = str(value)
            elif isinstance(value, datetime):
                value = value.isoformat()
            out[f.name] = value
        return out

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Budgets:
        """The budgets ``to_dict`` wrote, as saved with an operation: limits saved under the earlier,
        looser rule (a 0 limit) still load, so build new budgets with ``Budgets(...)``. Anything that is
        not such a mapping is a ``UsageError`` naming what to pass: a list (``[]``) or None read as
        no limits at all, the defaults; an unknown key (a misspelt ``max_turns``) raised TypeError
        and a ``not_after`` that is not ISO 8601 text ValueError; ``max_cost`` went through
        ``Decimal(float)``, so 0.1 became 0.1000000000000000055..., not the 0.1 ``Budgets(max_cost=0.1)``
        keeps (review round 19, c F3)."""
        if not isinstance(data, Mapping) or not all(isinstance(k, str) for k in data):
            raise UsageError(
                f"Budgets.from_dict takes a mapping of field names to values (what Budgets.to_dict "
                f"returns), not {type(data).__name__}"
            )
        unknown = sorted(set(data) - {f.name for f in fields(Budgets)})
        if unknown:
            raise UsageError(
                f"Budgets.from_dict: no budget named {', '.join(map(repr, unknown))}; the fields are "
                f"{', '.join(f.name for f in fields(Budgets))}"
            )
        data = dict(data)  # max_cost is checked (and made a Decimal through its text) by Budgets
        when = data.get("not_after")
        if isinstance(when, str):
            try:
                data["not_after"] = datetime.fromisoformat(when)
            except ValueError:
                raise UsageError(
                    f"Budgets.not_after must be an ISO 8601 time with its offset, such as "
                    f"'2030-01-01T00:00:00+00:00', not {when!r}"
                ) from None
        try:
            return Budgets(**data)
        except UsageError:
            # Saved under the earlier, looser rule (a 0 limit): load it as saved, checked by that rule.
            budgets = object.__new__(Budgets)
            for f in fields(Budgets):
                object.__setattr__(budgets, f.name, data.get(f.name, f.default))
            budgets._check(saved=True)
            return budgets


@dataclass(slots=True)
class Spent:
    """What an operation has used so far. Saved with the operation, summed across processes."""

    model_turns: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)
    active_s: float = 0.0
    no_progress_turns: int = 0
    no_progress_warned: bool = False
    # D13 (3): the (tool, schema version, arguments) keys the model was told NO_PROGRESS for; proposing
    # one of them again stops the operation, a first refusal of another call is only a warning.
    no_progress_keys: set[str] = field(default_factory=set)
    identical: dict[str, int] = field(default_factory=dict)
    seen_results: set[str] = field(default_factory=set)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_turns": self.model_turns,
            "tool_calls": self.tool_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": str(self.cost),
            "active_s": self.active_s,
            "no_progress_turns": self.no_progress_turns,
            "no_progress_warned": self.no_progress_warned,
            "no_progress_warned_keys": sorted(self.no_progress_keys) if self.no_progress_keys else [],
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Spent:
        return Spent(
            model_turns=data["model_turns"],
            tool_calls=data["tool_calls"],
            input_tokens=data["input_tokens"],
            output_tokens=data["output_tokens"],
            cost=Decimal(data["cost"]),
            active_s=data["active_s"],
            no_progress_turns=data["no_progress_turns"],
            no_progress_warned=data["no_progress_warned"],
            # absent from heads saved before the keys were kept (see record_turn_results)
            no_progress_keys=set(data.get("no_progress_warned_keys") or ()),
        )


@dataclass(frozen=True, slots=True)
class Continue:
    pass


@dataclass(frozen=True, slots=True)
class Stop:
    reason: str
    detail: str


CONTINUE = Continue()
Verdict = Continue | Stop


def check_before_model_request(b: Budgets, s: Spent, now: datetime | None = None) -> Verdict:
    """Checked before every model request (retries excluded: they are not turns, D26)."""
    if s.model_turns >= b.max_model_turns:
        return Stop("MAX_TURNS", f"{s.model_turns} model turns used of {b.max_model_turns}")
    return check_running(b, s, now)


def check_running(b: Budgets, s: Spent, now: datetime | None = None) -> Verdict:
    late = check_time(b, s, now)
    return late if isinstance(late, Stop) else check_spend(b, s)


def check_time(b: Budgets, s: Spent, now: datetime | None = None) -> Verdict:
    """The active deadline and the absolute ``not_after`` (D14)."""
    if s.active_s >= b.deadline_s:
        return Stop("DEADLINE", f"{s.active_s:.3f}s of active time used of {b.deadline_s}s")
    if b.not_after is not None and now is not None and now >= b.not_after:
        return Stop("DEADLINE", f"not_after {b.not_after.isoformat()} has passed")
    return CONTINUE


def remaining_s(b: Budgets, s: Spent, now: datetime) -> float:
    """Seconds left before the operation must end (D14): the smaller of the active time left and the
    time to ``not_after``, never below 0. Bounds retry backoff (D26), handler timeouts, the handler's
    ``CallContext.deadline`` and each model request's timeout."""
    left = b.deadline_s - s.active_s
    if b.not_after is not None:
        left = min(left, (b.not_after - now).total_seconds())
    return max(0.0, left)


def check_usage_known(b: Budgets, usage: Usage) -> Verdict:
    """D12 fails closed on a budget it cannot enforce, and D27 says missing usage is null, never 0: a
    turn whose usage lacks a count that a set budget needs stops the operation (USAGE_UNKNOWN), before
    any of its calls runs. Counts no budget needs may be missing. A cost needs the provider's own cost
    or both token counts (a price applied to half the usage is no cost)."""
    missing = []
    if b.max_input_tokens is not None and usage.input_tokens is None:
        missing.append("input token count (max_input_tokens)")
    if b.max_output_tokens is not None and usage.output_tokens is None:
        missing.append("output token count (max_output_tokens)")
    if (
        b.max_cost is not None
        and usage.cost is None
        and (usage.input_tokens is None or usage.output_tokens is None)
    ):
        missing.append("cost nor both token counts (max_cost)")
    if not missing:
        return CONTINUE
    return Stop(
        "USAGE_UNKNOWN",
        f"the provider reported no {', no '.join(missing)} for this turn, so the budget cannot be "
        "enforced; none of the turn's calls ran. Use a provider, model or proxy that reports usage "
        "(some proxies strip it), or run without that budget.",
    )


def check_after_turn(b: Budgets, s: Spent, usage: Usage, now: datetime) -> Verdict:
    """After a model turn that goes on (tool proposals, continue) or answers: time first (D14; an
    answer that came after the deadline is stopped like a tool turn), then whether its usage can be
    counted, then tokens and cost with the turn's own usage counted (issue 2 §5)."""
    for verdict in (check_time(b, s, now), check_usage_known(b, usage)):
        if isinstance(verdict, Stop):
            return verdict
    return check_spend(b, s)


def check_spend(b: Budgets, s: Spent) -> Verdict:
    """Tokens and cost: what each model turn adds to, a final answer's turn too. Every trip ends
    STOPPED with a reason code (issue 2 §5), so an answer that went over a budget is not a success."""
    if b.max_input_tokens is not None and s.input_tokens > b.max_input_tokens:
        return Stop("MAX_INPUT_TOKENS", f"{s.input_tokens} input tokens used of {b.max_input_tokens}")
    if b.max_output_tokens is not None and s.output_tokens > b.max_output_tokens:
        return Stop("MAX_OUTPUT_TOKENS", f"{s.output_tokens} output tokens used of {b.max_output_tokens}")
    if b.max_cost is not None and s.cost > b.max_cost:
        return Stop("MAX_COST", f"cost {s.cost} exceeds {b.max_cost}")
    return CONTINUE


def check_tool_calls(b: Budgets, s: Spent, proposed: int) -> Verdict:
    """A turn that would exceed ``max_tool_calls`` runs none of its calls (D15)."""
    if s.tool_calls + proposed > b.max_tool_calls:
        return Stop(
            "MAX_TOOL_CALLS",
            f"turn proposes {proposed} calls; {s.tool_calls} of {b.max_tool_calls} already used",
        )
    return CONTINUE


def identical_key(tool: str, schema_version: str, arguments_json: str) -> str:
    return f"{tool}\x00{schema_version}\x00{arguments_json}"


def identical_allowed(b: Budgets, s: Spent, key: str) -> bool:
    """Run number ``max_identical_calls + 1`` of the same tool and canonical arguments is refused (D13)."""
    return s.identical.get(key, 0) < b.max_identical_calls


def record_turn_results(
    b: Budgets, s: Spent, result_hashes: list[str], refused_keys: Collection[str] = ()
) -> Verdict:
    """After a turn's results are ready: D13 step 3. ``refused_keys`` are the identical-call keys this
    turn refused with NO_PROGRESS. Proposing again a call the model was already told makes no progress
    stops the operation (a first refusal of another call is a warning); so do ``max_no_progress_turns``
    turns in a row whose results are all hashes seen before."""
    if refused_keys and (
        any(k in s.no_progress_keys for k in refused_keys)
        # a head saved before the keys were kept: only the flag says a warning was given
        or (s.no_progress_warned and not s.no_progress_keys)
    ):
        return Stop("NO_PROGRESS", "the model repeated a call after being told it makes no progress")
    all_seen = bool(result_hashes) and all(h in s.seen_results for h in result_hashes)
    s.seen_results.update(result_hashes)
    if refused_keys:
        s.no_progress_warned = True
        s.no_progress_keys.update(refused_keys)
    if all_seen:
        s.no_progress_turns += 1
    else:
        s.no_progress_turns = 0
    if s.no_progress_turns >= b.max_no_progress_turns:
        return Stop("NO_PROGRESS", f"{s.no_progress_turns} turns in a row returned only results seen before")
    return CONTINUE


def result_cap(b: Budgets, spec_cap: int | None) -> int:
    """The smaller of the tool's and the budget's cap (D11)."""
    return b.max_result_bytes if spec_cap is None else min(spec_cap, b.max_result_bytes)


# tool_choice values that make the model call a tool (every API's spelling: "required" for OpenAI,
# "any" for Anthropic and Gemini, or one named tool).
_FORCING = frozenset({"required", "any"})


def forces_a_tool(choice: Any) -> bool:
    if isinstance(choice, str):
        return choice in _FORCING
    if isinstance(choice, dict):  # {"name": ...}, or Anthropic's own {"type": "any" | "tool", ...}
        return "name" in choice or choice.get("type") in ("any", "tool")
    return False


def settings_for_request(settings: dict[str, Any], tool_calls_so_far: int) -> dict[str, Any]:
    """The model settings of the next request. A forced ``tool_choice`` applies until the first tool
    round: resent on every turn it would forbid the final answer, and the loop could only end on a
    guard. Afterwards the API's default (auto) applies, unless ``reset_tool_choice`` is False."""
    if (
        tool_calls_so_far
        and settings.get("reset_tool_choice", True)
        and forces_a_tool(settings.get("tool_choice"))
    ):
        return {k: v for k, v in settings.items() if k != "tool_choice"}
    return settings
