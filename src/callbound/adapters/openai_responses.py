"""OpenAI Responses API adapter (``openai-responses``). Facts: WIRE.md section 1.

- Calls are ``function_call`` output items; results are ``function_call_output`` items keyed by
  ``call_id`` (never the ``fc_`` item id).
- Continuation (D8): stateless replay by default: every output item of the turn (reasoning items with
  ``encrypted_content``, messages with ``phase``, function calls) is resent unchanged, then the
  outputs. ``previous_response_id`` is opt-in (``settings["continuation"] = "previous_response_id"``);
  with ``store: false`` there is nothing to chain to, and requests replay the transcript, as they do
  after a response without an id (D7: the synthetic id is never sent). ``extra["previous_response_id"]``
  seeds the first request; the runner's chain replaces it from the second request on.
  ``extra["conversation"]`` raises ``UsageError``: a conversation would receive the replayed transcript
  again on every request, and cannot be combined with ``previous_response_id``.
- Status mapping (D1): ``completed`` → TOOL_PROPOSALS if function_call items else FINAL_TEXT;
  a plain body whose ``output`` is missing, not a list or holds anything but objects → API_FAILURE
  (malformed_response, not retryable; raw_stop_reason ``completed``);
  a refusal content part → REFUSAL (D31); a function_call without ``call_id`` → API_FAILURE
  (missing_call_id, not retryable): its output could not be paired with it, and D7 forbids sending
  the synthetic id; an output item that asks the client for an action callbound cannot answer
  (``custom_tool_call``, ``shell_call``, ``mcp_approval_request``, ... with no answer in the same
  response), a function_call whose ``namespace`` differs from its ``name`` (a function of an app's
  namespace group) or whose ``caller`` is a program → API_FAILURE (unexpected_tool_call, not
  retryable), never FINAL_TEXT;
  ``incomplete`` + ``max_output_tokens`` or ``max_messages`` → TRUNCATED; an error with code
  ``context_length_exceeded`` (HTTP 400) → TRUNCATED (context_window_exceeded, D1), raw_stop_reason
  the status (D32); ``incomplete`` + ``content_filter`` → REFUSAL; ``failed``/``cancelled`` →
  API_FAILURE; anything else (``incomplete`` + ``steered``, ...) → API_FAILURE(unknown_stop_reason).
- Settings: ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"`` or ``{"name": ...}`` (anything
  else raises ``UsageError``; provider-specific forms go in ``extra``). ``extra["tools"]`` (hosted
  tools) is added after the registry's tools; a non-list, or a registry tool's name (also inside a
  ``namespace`` group), raises ``UsageError``.
- Tool schema (D9): ``$ref`` inlined, OpenAI strict transform where the schema allows it.
- Streaming: final items come from ``response.output_item.done`` keyed by ``output_index`` (the
  terminal snapshot may have an empty ``output``; a done call without arguments takes the snapshot's,
  and a done call and snapshot that disagree run no call); argument deltas are kept as a list and joined once.
  Argument deltas made of the members the API sends are read from the raw event text without the
  JSON parser (``feed_events``, the fast path of ``callbound.adapters.stream``). A call runs only
  after its done event (issue 3 §4): one with no ``output_item.done``, no
  ``function_call_arguments.done`` and no place in the terminal snapshot, or whose done or snapshot
  item says ``in_progress``/``incomplete`` (as a plain body's would), makes the turn
  TRUNCATED(call_incomplete). Refusal events win even when no item carries their text (D31).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.errors import ProtocolViolation, UsageError
from ..core.registry import ToolDeclaration
from ..core.types import (
    Failure,
    Finish,
    ModelTurn,
    Provenance,
    RawFailure,
    ToolCall,
    Usage,
)
from .base import (
    StreamCaps,
    answered_chain,
    decode_body,
    failure_turn,
    make_call,
    rendered_tool_choice,
    result_text,
    set_once,
    synthetic_response_id,
    text_or_none,
    with_extra_tools,
)
from .echo import responses_echo
from .failures import map_failure, read_openai_error
from .finite import has_non_finite, invalid_json, json_text
from .schema import openai_strict

if TYPE_CHECKING:
    from .openai_responses_stream import _Assembler

API = "openai-responses"
PROVIDER = "openai"
REVISION = "openai-responses/1"

# slow_down: OpenAI's "too many requests right now" for a busy model, which Codex retries as the overload it is
RETRYABLE_ERROR_CODES = frozenset(
    {"server_error", "rate_limit_exceeded", "server_is_overloaded", "slow_down", "timeout"}
)
# settings["tool_choice"] strings the API takes (openai-python ToolChoiceOptions: "none", "auto", "required").
TOOL_CHOICES = {"auto": "auto", "none": "none", "required": "required"}

# Output items that ask the client to act, each answered by its own input item type (custom_tool_call_output,
# shell_call_output, mcp_approval_response, ...), never by a function_call_output. callbound renders function
# tools only, so it can answer none of them (vercel-ai packages/openai/src/responses/__fixtures__/
# openai-custom-tool.1.json, openai-local-shell-tool.1.json, openai-apply-patch-tool.1.json,
# openai-mcp-tool-approval.1.chunks.txt, openai-client-tool-search.1.json).
# Output items that never wait for the client beyond what callbound answers (the common case).
_PLAIN_ITEMS = frozenset({"message", "reasoning", "function_call"})
CLIENT_ACTION_ITEMS = frozenset(
    {"custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call", "computer_call"}
)
# Every output item type of openai-python 3.57's ResponseOutputItem union. One not listed that carries a
# call_id the response does not answer is taken as a client action of a newer API (fail closed, D1).
KNOWN_ITEMS = CLIENT_ACTION_ITEMS | {
    *_PLAIN_ITEMS,
    *("file_search_call", "web_search_call", "image_generation_call", "code_interpreter_call"),
    *("program", "tool_search_call", "additional_tools", "compaction"),
    *("mcp_call", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response"),
}


def _provenance(model: Any) -> Provenance:
    return Provenance(PROVIDER, API, model if isinstance(model, str) else None, REVISION)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    # D27: input_tokens already includes cached tokens; output_tokens includes reasoning tokens.
    return Usage(_count(raw.get("input_tokens")), _count(raw.get("output_tokens")))


def _hosted_shell(item: dict[str, Any]) -> bool:
    """A shell_call OpenAI runs in its own container: the response may leave its output out (a
    real hosted-shell response held three calls, one with an output, and the answer; pydantic-ai
    cassette test_openai_responses_hosted_shell_with_uploaded_file), and it waits for no client."""
    environment = item.get("environment")
    return (
        item.get("type") == "shell_call"
        and isinstance(environment, dict)
        and environment.get("type") == "container_reference"
    )


def _pending_client_action(items: list[dict[str, Any]]) -> str | None:
    """The type of the first output item that waits for the client and that the same response did not
    answer itself: a hosted shell_call comes with its shell_call_output or runs in OpenAI's container
    (``environment: {"type": "container_reference"}``), an approved MCP request with the mcp_call that
    names it, a server-side tool_search_call with execution "server"."""
    # Types and ids are looked up as text only: a list or object there is unknown, never a TypeError.
    if all(text_or_none(i.get("type")) in _PLAIN_ITEMS for i in items):
        return None  # the usual turn: messages, reasoning and function calls only
    outputs = [i for i in items if isinstance(i.get("type"), str) and i["type"].endswith("_output")]
    answered = {c for i in outputs if isinstance(c := i.get("call_id"), str)}  # no text: answers nothing
    approved = {
        a for i in items if i.get("type") == "mcp_call" and isinstance(a := i.get("approval_request_id"), str)
    }
    for item in items:
        kind = text_or_none(item.get("type"))
        if kind == "mcp_approval_request":
            waiting = text_or_none(item.get("id")) not in approved
        else:
            client = (
                (kind in CLIENT_ACTION_ITEMS and not _hosted_shell(item))
                or (kind == "tool_search_call" and item.get("execution") == "client")
                or (  # an item type newer than callbound that waits for its answer like a call
                    kind not in KNOWN_ITEMS
                    and not (isinstance(kind, str) and kind.endswith("_output"))
                    # a call_id to answer: xAI's hosted x_search_call carries "" and is answered in
                    # the same response (vercel/ai xai-x-search-tool.1.json)
                    and isinstance(item.get("call_id"), str)
                    and item["call_id"] != ""
                )
            )
            waiting = client and text_or_none(item.get("call_id")) not in answered
        if waiting:
            return str(kind)
    return None


def _unanswerable_call(items: list[dict[str, Any]]) -> str | None:
    """What makes the first function_call of the turn one callbound cannot answer, or None.

    - A ``namespace`` that differs from the call's ``name``: the model called a function of a namespace
      group the app declared in ``extra["tools"]`` (``sandbox.transfer``), never a registry tool, which
      is rendered at top level; dispatched by its bare name it would run the registry tool of that name.
      ``namespace == name`` is how the API names a deferred top-level function that tool_search loaded
      (vercel/ai packages/openai/src/responses/__fixtures__/openai-tool-search.1.json), and an empty one
      names no namespace (openai-agents-python get_function_tool_lookup_key reads both so): those run.
    - A ``caller`` of type ``program``: a call made by the code of a programmatic_tool_calling program,
      which only an app's ``allowed_callers: ["programmatic"]`` tool accepts; the program waits for it
      (status ``in_progress`` in a completed response, vercel/ai programmatic-tool-calling.1.json), and
      callbound renders no such tool, so it is an unexpected call rather than a cut-off one."""
    for item in items:
        if item.get("type") != "function_call":
            continue
        namespace = item.get("namespace")
        if namespace not in (None, "") and namespace != item.get("name"):
            return "namespaced_function_call"
        caller = item.get("caller")
        if isinstance(caller, dict) and caller.get("type") == "program":
            return "programmatic_function_call"
    return None


def says_unfinished(item: dict[str, Any]) -> bool:
    """A function_call item whose own status says it never finished (issue 2 §2)."""
    return item.get("type") == "function_call" and item.get("status") in ("in_progress", "incomplete")


def turn_from_response(
    resp: dict[str, Any],
    raw_sha256: str,
    output: list[dict[str, Any]] | None = None,
    *,
    unfinished: bool = False,
    refusals: Sequence[str] = (),
) -> ModelTurn:
    """Map a complete Response object (plain body or terminal stream snapshot) to a ModelTurn.

    A stream passes the items it assembled as ``output``, ``unfinished`` when one of its calls never
    finished (judged by its events, see ``openai_responses_stream``), and ``refusals``: refusal text
    that only refusal events carried (no item holds it), which wins all the same (D31)."""
    prov = _provenance(resp.get("model"))
    given_id = resp.get("id")
    rid = given_id if isinstance(given_id, str) and given_id else synthetic_response_id(raw_sha256)
    raw_items = output if output is not None else resp.get("output")
    items = [i for i in raw_items if isinstance(i, dict)] if isinstance(raw_items, list) else []
    # A plain body's ``output`` is a required list of output items (openai-python Response.output); one
    # that is missing, not a list, or holds anything else cannot be read whole (a stream passes its own).
    malformed: str | None = None
    if output is None and not isinstance(raw_items, list):
        malformed = "output_missing" if raw_items is None else "output_not_a_list"
    elif output is None and isinstance(raw_items, list) and len(items) != len(raw_items):
        malformed = "output_item_not_an_object"
    usage = _usage(resp.get("usage"))
    status = resp.get("status")

    text_parts: list[str] = []
    refusal_parts: list[str] = []
    calls: list[ToolCall] = []
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind == "message":
            content = item.get("content")
            for part in content if isinstance(content, list) else []:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    text_parts.append(part["text"])
                elif part.get("type") == "refusal":
                    refusal = part.get("refusal")
                    refusal_parts.append(refusal if isinstance(refusal, str) else "")
        elif kind == "function_call":
            call_id = item.get("call_id")
            arguments = item.get("arguments")
            if isinstance(arguments, dict) and has_non_finite(arguments):
                # an object (a compatible server's) holding 1e400 or NaN: D5 refuses the call, which
                # gets the text; it goes back as {"INVALID_JSON": text} (finite.py), or the turn could
                # not be stored and the next request would not be JSON
                arguments = json_text(arguments)
                items[index] = {**item, "arguments": invalid_json(arguments)}
            calls.append(
                make_call(
                    PROVIDER,
                    API,
                    rid,
                    call_id if isinstance(call_id, str) else None,
                    item.get("name"),
                    arguments,
                    index,
                )
            )
        # reasoning, hosted tool calls (web_search_call, ...) travel in the continuation only (D31)
    refusal_parts.extend(refusals)

    def turn(
        finish: Finish, raw: str | None, reason: str | None, failure: Failure | None = None
    ) -> ModelTurn:
        return ModelTurn(
            api=API,
            response_id=rid,
            finish=finish,
            raw_stop_reason=raw,
            reason=reason,
            calls=tuple(calls),  # kept for display; only TOOL_PROPOSALS turns execute
            text="".join(text_parts),
            refusal="".join(refusal_parts) if refusal_parts else None,
            usage=usage,
            continuation=tuple(items),
            provenance=prov,
            raw_sha256=raw_sha256,
            failure=failure,
        )

    if status == "completed":
        if malformed is not None:
            # D1: only an explicit completion is success, and a body that does not hold the output it
            # says it completed is none: no text, no call of it may count. Not retried, like a 2xx body
            # that is not JSON (the transports classify that as an error body).
            return turn(
                Finish.API_FAILURE,
                "completed",
                "malformed_response",
                Failure("status", False, None, None, malformed),
            )
        if refusal_parts:
            return turn(Finish.REFUSAL, "completed", "refusal")
        if any(call.synthetic_id for call in calls):
            # The API pairs function_call_output with its call by call_id alone, and D7 forbids sending
            # the synthetic id back: such a call can never be answered, so none of the turn's calls
            # may run (and the function_call could not even be replayed without its call_id).
            return turn(Finish.API_FAILURE, "completed", "missing_call_id", Failure("status", False))
        unanswerable = _unanswerable_call(items)
        if unanswerable is not None:
            # A call meant for a tool callbound does not hold (see _unanswerable_call): none of the
            # turn's calls runs, as for a custom_tool_call below (API_FAILURE, not retryable). Judged
            # before an unfinished call: a program's call waits in_progress for its output by design.
            failure = Failure("status", False, None, None, unanswerable)
            return turn(Finish.API_FAILURE, "completed", "unexpected_tool_call", failure)
        if unfinished or (output is None and any(says_unfinished(i) for i in items)):
            # A call item that says it is unfinished, in a plain response that says it completed: the
            # body contradicts itself, and an unfinished call never runs even when its arguments parse
            # (issue 2 §2). TRUNCATED, not retried: INCOMPLETE(CALL_INCOMPLETE). A stream judges its
            # items by their events instead (``unfinished``): an item kept from output_item.added still
            # says in_progress there, while a done item or a snapshot item is judged as here.
            return turn(Finish.TRUNCATED, "completed", "call_incomplete")
        pending = _pending_client_action(items)
        if pending is not None:
            # The model waits for a client action callbound cannot perform: the turn is no final answer,
            # and answering only its function calls would leave that item unanswered (400 on the next
            # request), so none of them runs (fail closed, as D7 does for an unanswerable call; like
            # Gemini's UNEXPECTED_TOOL_CALL, D1: API_FAILURE, not retryable).
            failure = Failure("status", False, None, None, pending)
            return turn(Finish.API_FAILURE, "completed", "unexpected_tool_call", failure)
        if calls:
            return turn(Finish.TOOL_PROPOSALS, "completed", None)
        return turn(Finish.FINAL_TEXT, "completed", None)
    if status == "incomplete":
        details = resp.get("incomplete_details")
        why = details.get("reason") if isinstance(details, dict) else None
        why = why if isinstance(why, str) else None
        if refusal_parts or why == "content_filter":
            reason = "content_filter" if why == "content_filter" else "refusal"
            return turn(Finish.REFUSAL, why or "incomplete", reason)
        if why == "max_output_tokens":
            return turn(Finish.TRUNCATED, why, "max_tokens")
        if why == "max_messages":  # a limit on the response's messages: a length stop (D1)
            return turn(Finish.TRUNCATED, why, "max_messages")
        return turn(Finish.API_FAILURE, why or "incomplete", "unknown_stop_reason", Failure("status", False))
    if status == "failed":
        # read as the same error in an HTTP error body or an error event is (the same failure, streamed or not)
        r = read_openai_error(resp.get("error"), None, {}, RETRYABLE_ERROR_CODES)
        failure = Failure("status", r.retryable, None, r.error_type, r.error_code, r.retry_after_s)
        return turn(r.finish, r.error_code or r.error_type or "failed", r.reason, failure)
    if status == "cancelled":
        return turn(Finish.API_FAILURE, "cancelled", "cancelled", Failure("status", False))
    raw = status if isinstance(status, str) else None
    return turn(Finish.API_FAILURE, raw, "unknown_stop_reason", Failure("status", False))


def _error_body_turn(
    err: dict[str, Any],
    raw_sha256: str,
    status: int | None,
    headers: dict[str, str],
    model: str | None = None,
) -> ModelTurn:
    r = read_openai_error(err, status, headers, RETRYABLE_ERROR_CODES)
    return failure_turn(
        API,
        _provenance(model),
        raw_sha256,
        response_id=None,
        raw_stop_reason=r.raw_stop_reason,
        reason=r.reason,
        finish=r.finish,
        failure=Failure(
            "http" if status is not None else "error_body",
            r.retryable,
            status,
            r.error_type,
            r.error_code,
            r.retry_after_s,
        ),
    )


def _tool_name(tool: dict[str, Any]) -> list[str]:
    """The names a tool declares: a function or custom tool's own (hosted tools have none), and for a
    namespace group (openai-python types/responses/namespace_tool.py) its name and every name in its
    ``tools``: the clash check of ``with_extra_tools`` must see a registry tool's name inside a group
    too, or a ``sandbox.transfer`` the app declared would be set up beside the registry's ``transfer``."""
    names = [tool.get("name")]
    nested = tool.get("tools")
    if tool.get("type") == "namespace" and isinstance(nested, list):
        names.extend(t.get("name") for t in nested if isinstance(t, dict))
    return [name for name in names if isinstance(name, str)]


class OpenAIResponsesAdapter:
    api = API
    provider = PROVIDER
    revision = REVISION

    def render_tools(self, declarations: Sequence[ToolDeclaration]) -> list[dict[str, Any]]:
        tools = []
        for decl in declarations:
            schema, strict = openai_strict(decl.parameters, decl.name)
            tools.append(
                {
                    "type": "function",
                    "name": decl.name,
                    "description": decl.description,
                    "parameters": schema,
                    "strict": strict,
                }
            )
        return tools

    def initial_items(
        self, user_input: str | None, messages: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        items = list(messages)
        if user_input is not None:
            items.append({"role": "user", "content": user_input})
        return items

    def turn_items(self, turn: ModelTurn) -> list[dict[str, Any]]:
        return list(turn.continuation)

    def result_items(
        self, turn: ModelTurn, results: Sequence[tuple[ToolCall, dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        return [
            {"type": "function_call_output", "call_id": call.call_id, "output": result_text(mr)}
            for call, mr in results
        ]

    def build_request(
        self,
        *,
        items: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        settings: dict[str, Any],
        instructions: str | None,
        stream: bool,
        previous_response_id: str | None = None,
        new_items: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {}
        extra: dict[str, Any] = settings.get("extra") or {}
        if isinstance(extra, dict) and extra.get("conversation") is not None:
            # A conversation holds the items server-side and prepends them to every request: replayed,
            # each request would add the whole transcript to it again (the model then sees every call
            # twice), and it cannot be combined with previous_response_id (WIRE 1.5: 400).
            raise UsageError(
                "openai-responses: extra['conversation'] is not supported: callbound keeps the "
                "transcript itself; leave it out, or set settings['continuation'] = "
                "'previous_response_id' to use the provider's stored state"
            )
        # store: false (the setting; the runner refuses it in extra) keeps nothing to chain to, so such
        # requests replay the whole transcript (as gemini-interactions does); previous_response_id would
        # be refused. A synthetic response id (cb:..., a body without "id") is never sent (D7) either.
        unstored = settings.get("store") is False or extra.get("store") is False
        chain = previous_response_id
        if chain is not None and (unstored or chain.startswith("cb:")):
            chain = None
        if settings.get("model"):
            body["model"] = settings["model"]
        if instructions:
            body["instructions"] = instructions
        if chain is not None:
            body["previous_response_id"] = chain
            body["input"] = new_items if new_items is not None else []
        else:
            body["input"] = items
        tools = with_extra_tools(API, tools, extra, _tool_name)  # hosted tools are added
        if tools:
            body["tools"] = tools
        # The API takes only these (openai-python ToolChoiceOptions, or a named function); anything
        # else would be a 400 on the first request.
        set_once(API, settings, "tool_choice", ("tool_choice",))
        choice = rendered_tool_choice(
            settings.get("tool_choice"), TOOL_CHOICES, lambda name: {"type": "function", "name": name}
        )
        if choice is not None:
            body["tool_choice"] = choice
        if settings.get("temperature") is not None:
            body["temperature"] = settings["temperature"]
        if settings.get("max_output_tokens") is not None:
            body["max_output_tokens"] = settings["max_output_tokens"]
        body.update({key: value for key, value in extra.items() if key != "tools"})  # tools: added above
        if unstored:
            # stateless replay of reasoning items needs their encrypted_content (WIRE 1.5)
            include = body.get("include")
            include = list(include) if isinstance(include, list) else []
            if "reasoning.encrypted_content" not in include:
                include.append("reasoning.encrypted_content")
            body["store"] = False
            body["include"] = include
        if chain is not None:
            # extra["previous_response_id"] seeds the first request (a conversation begun elsewhere:
            # pydantic/pydantic-ai tests/models/cassettes/test_openai_responses/
            # test_openai_previous_response_id_seed_auto_chains_through_retries.yaml); once the runner
            # chains, its id wins, or every later request would point back at the seed and its outputs
            # would answer calls the server never saw in that chain.
            body["previous_response_id"] = chain
        if stream:
            body["stream"] = True
        return body

    def parse_response(self, body: bytes | str | dict[str, Any], *, model: str | None = None) -> ModelTurn:
        data, digest = decode_body(body)
        if not isinstance(data, dict):
            raise ProtocolViolation("a Responses body must be a JSON object")
        if isinstance(data.get("error"), dict) and "status" not in data:
            return _error_body_turn(data["error"], digest, None, {}, model)
        if model is not None and not data.get("model"):
            data = {**data, "model": model}
        return turn_from_response(data, digest)

    def stream_assembler(self, caps: StreamCaps | None = None, *, model: str | None = None) -> _Assembler:
        from .openai_responses_stream import _Assembler  # imported here: that module imports this one

        return _Assembler(caps or StreamCaps(), model)

    def map_error(self, failure: RawFailure, *, model: str | None = None) -> ModelTurn:
        return map_failure(
            API,
            _provenance(model),
            failure,
            lambda err, digest: _error_body_turn(err or {}, digest, failure.status, failure.headers, model),
        )

    def check_request(self, body: dict[str, Any], previous: ModelTurn | None = None) -> None:
        """Every function_call in the input answered exactly once, later in the input, by its
        ``call_id`` (never the ``fc_`` item id); no output for an unknown call. With
        ``previous_response_id`` the previous turn's calls are the ones to answer, and ``previous``
        must be that response. Its calls are replayed unchanged, name and arguments (``echo``)."""
        items = body.get("input")
        if isinstance(items, str):
            items = []  # a plain text input carries no calls and no outputs
        if not isinstance(items, list):
            raise ProtocolViolation("Responses request needs an input list")
        answered: dict[str, int] = {}
        order: dict[str, None] = {}  # call ids, in the order their calls appear
        item_ids: dict[str, str] = {}  # fc_ item id -> call_id
        chained = answered_chain(body.get("previous_response_id"), previous, items)
        replayed = {  # text ids only: an object or list is no call id (and unhashable)
            text_or_none(item.get("call_id"))
            for item in items
            if isinstance(item, dict) and item.get("type") == "function_call"
        }
        if chained and previous is not None:
            if chained != previous.response_id:
                raise ProtocolViolation(
                    f"previous_response_id {chained!r} is not the response being answered "
                    f"({previous.response_id!r})"
                )
            order.update(dict.fromkeys(c.call_id for c in previous.calls))
            for item in previous.continuation:
                if item.get("type") == "function_call" and isinstance(item.get("id"), str):
                    item_ids[item["id"]] = str(item.get("call_id"))
        later_calls = replayed
        for item in items:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "function_call":
                cid = item.get("call_id")
                if not isinstance(cid, str) or not cid:
                    raise ProtocolViolation("a function_call input item needs its call_id")
                order[cid] = None
                if isinstance(item.get("id"), str):
                    item_ids[item["id"]] = cid
            elif kind == "function_call_output":
                cid = item.get("call_id")
                if not isinstance(cid, str) or cid not in order:
                    if isinstance(cid, str) and cid in item_ids and item_ids[cid] != cid:
                        raise ProtocolViolation(
                            f"function_call_output is keyed by the item id {cid!r}; "
                            f"use the call_id {item_ids[cid]!r}"
                        )
                    if isinstance(cid, str) and cid in later_calls:
                        raise ProtocolViolation(f"function_call_output for {cid!r} comes before its call")
                    hint = "" if previous is not None or not chained else " (previous turn not given)"
                    raise ProtocolViolation(f"function_call_output for unknown call_id {cid!r}{hint}")
                if not isinstance(item.get("output"), str | list):
                    raise ProtocolViolation("function_call_output.output must be a string or a list of parts")
                answered[cid] = answered.get(cid, 0) + 1
        responses_echo(items, previous, order)
        for cid in order:
            n = answered.get(cid, 0)
            if n != 1:
                raise ProtocolViolation(
                    f"call_id {cid!r} is answered {n} times; it must be answered exactly once"
                )


ADAPTER = OpenAIResponsesAdapter()
