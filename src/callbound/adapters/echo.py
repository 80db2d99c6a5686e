"""Request checks (D24) shared by the adapters' ``check_request``: the history a request replays holds
the model's own calls as the model sent them (D8), and an answer names the function it answers.

A call replayed with another name or other arguments than the turn being answered (``previous``)
holds is refused: the provider rejects such a history or reads it as a call the model never made,
and a ScriptedModel test must fail on it as loudly as the provider would. Arguments are compared as
the wire echoes them: a string (Chat's ``function.arguments``, Responses' ``arguments``) byte for
byte, an object (Anthropic's ``input``, Interactions' ``arguments``) by value. Each call of the
previous turn is matched by its id with its last replay in the request (ids are unique within a turn;
an older turn may have reused one); a Chat call sent without an id, by its position in the last
assistant message that carries calls."""

from __future__ import annotations

from typing import Any

from ..core.errors import ProtocolViolation
from ..core.types import Finish, ModelTurn

_ANTHROPIC_CALLS = ("tool_use", "server_tool_use", "mcp_tool_use")
_RESPONSES_CALLS = {"function_call": "arguments", "custom_tool_call": "input"}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def same_call(where: str, cid: Any, kind: str, sent: tuple[Any, Any], model: tuple[Any, Any]) -> None:
    """Raise unless the replayed (name, arguments) are the model's own."""
    if sent[0] != model[0]:
        raise ProtocolViolation(
            f"{where}: {kind} {cid!r} is replayed with name {_short(sent[0])}, but the model called "
            f"{_short(model[0])}; send the model's call back unchanged (D8)"
        )
    if sent[1] != model[1]:
        raise ProtocolViolation(
            f"{where}: {kind} {cid!r} is replayed with arguments {_short(sent[1])}, but the model sent "
            f"{_short(model[1])}; send the model's call back unchanged (D8)"
        )


def _text_id(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


Call = tuple[str, Any, Any, Any, str]  # where, id, name, arguments, what the call is


def _same_calls(model: list[Call], sent: list[Call]) -> None:
    """Each model call with an id against its replay: the last n calls in the request with that id, in
    order, for the n calls the model made with it (D7: a response may use an id twice). An id replayed
    fewer times than the model used it is left to the answer checks."""
    mine: dict[str, list[Call]] = {}
    for call in model:
        if call[1] is not None:
            mine.setdefault(call[1], []).append(call)
    for cid, calls in mine.items():
        replays = [c for c in sent if c[1] == cid]
        if len(replays) >= len(calls):
            for got, want in zip(replays[len(replays) - len(calls) :], calls, strict=True):
                same_call(got[0], cid, got[4], (got[2], got[3]), (want[2], want[3]))


def chat_echo(messages: list[Any], previous: ModelTurn | None) -> None:
    """The previous assistant message's tool_calls (and legacy function_call) as the request replays them."""
    if previous is None or not previous.continuation:
        return

    def calls(i: int, message: Any) -> list[Call]:
        listed = message.get("tool_calls") if isinstance(message, dict) else None
        out: list[Call] = []
        for call in listed if isinstance(listed, list) else []:
            f = call.get("function") if isinstance(call, dict) else None
            name, args = (f.get("name"), f.get("arguments")) if isinstance(f, dict) else (None, None)
            cid = _text_id(call.get("id")) if isinstance(call, dict) else None
            out.append((f"messages[{i}]", cid, name, args, "tool call"))
        legacy = message.get("function_call") if isinstance(message, dict) else None
        if isinstance(legacy, dict):  # the deprecated single call: no id, answered by name
            out.append((f"messages[{i}]", "", legacy.get("name"), legacy.get("arguments"), "function_call"))
        return out

    assistants = [
        (i, m) for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"
    ]
    model = calls(-1, previous.continuation[0])
    _same_calls(model, [c for i, m in assistants for c in calls(i, m)])
    last = next((calls(i, m) for i, m in reversed(assistants) if calls(i, m)), [])
    for k, want in enumerate(model):  # a call sent without an id: by its position in the last message
        if want[1] is None and k < len(last) and last[k][1] is None:
            same_call(last[k][0], "", want[4], (last[k][2], last[k][3]), (want[2], want[3]))


def anthropic_echo(messages: list[Any], previous: ModelTurn | None) -> None:
    """The previous turn's tool_use (server_tool_use, mcp_tool_use) blocks as the request replays them."""
    if previous is None or not previous.continuation:
        return

    def calls(i: int, message: Any) -> list[Call]:
        assistant = isinstance(message, dict) and message.get("role") == "assistant"
        content = message.get("content") if assistant else None
        return [
            (f"messages[{i}]", b["id"], b.get("name"), b.get("input"), f"{b['type']} block")
            for b in (content if isinstance(content, list) else [])
            if isinstance(b, dict) and b.get("type") in _ANTHROPIC_CALLS and _text_id(b.get("id"))
        ]

    _same_calls(calls(-1, previous.continuation[0]), [c for i, m in enumerate(messages) for c in calls(i, m)])


def responses_echo(items: list[Any], previous: ModelTurn | None, order: dict[str, None]) -> None:
    """Every call of the answered turn is in the request (replayed, or known through
    previous_response_id: ``order``), and each replayed function_call / custom_tool_call item carries
    the name and the arguments (input) text the model sent."""
    if previous is None:
        return
    if previous.finish is Finish.TOOL_PROPOSALS:
        for call in previous.calls:
            if not call.synthetic_id and call.call_id not in order:
                raise ProtocolViolation(
                    f"call_id {call.call_id!r} of the turn being answered is not in the request "
                    "(its function_call must be replayed unchanged, D8)"
                )

    def calls(listed: Any) -> list[Call]:
        return [
            (f"input[{i}]", x["call_id"], x.get("name"), x.get(_RESPONSES_CALLS[x["type"]]), x["type"])
            for i, x in enumerate(listed)
            if isinstance(x, dict) and x.get("type") in _RESPONSES_CALLS and _text_id(x.get("call_id"))
        ]

    _same_calls(calls(previous.continuation), calls(items))


def interaction_results(item: dict[str, Any]) -> list[dict[str, Any]]:
    """function_result objects carried by one Interactions input item: a top-level step, a user_input
    step's content, or a legacy user turn's content."""
    if item.get("type") == "function_result":
        return [item]
    if item.get("type") == "user_input" or item.get("role") == "user":
        return [
            c for c in item.get("content") or [] if isinstance(c, dict) and c.get("type") == "function_result"
        ]
    return []


def interaction_calls(item: dict[str, Any]) -> list[dict[str, Any]]:
    """function_call objects carried by one Interactions item: a step, or a legacy model turn's content."""
    if item.get("type") == "function_call":
        return [item]
    if item.get("role") == "model":
        return [
            c for c in item.get("content") or [] if isinstance(c, dict) and c.get("type") == "function_call"
        ]
    return []


def interactions_echo(items: list[dict[str, Any]], previous: ModelTurn | None) -> None:
    """Each function_call of the answered turn replayed with its name and arguments; each
    function_result that names a function names the one its call_id called."""

    def calls(listed: Any) -> list[Call]:
        return [
            (f"input[{i}]", _text_id(c.get("id")), c.get("name"), c.get("arguments"), "function_call")
            for i, x in enumerate(listed)
            if isinstance(x, dict)
            for c in interaction_calls(x)
        ]

    model = calls(previous.continuation if previous is not None else ())
    sent = calls(items)
    _same_calls(model, sent)
    names: dict[str, list[Any]] = {}
    for call in [*model, *sent]:
        if call[1] is not None:
            names.setdefault(call[1], []).append(call[2])
    for i, item in enumerate(items):
        for result in interaction_results(item):
            cid = _text_id(result.get("call_id"))
            if cid in names and "name" in result and result["name"] not in names[cid]:
                raise ProtocolViolation(
                    f"input[{i}]: function_result {cid!r} names {_short(result['name'])}, but its "
                    f"function_call called {_short(names[cid][-1])}; answer a call under the name it "
                    "was made with"
                )
