"""Gemini Interactions API adapter (``gemini-interactions``). Facts: WIRE.md section 5.

- Two schema generations are read (WIRE.md 5.0): the ``steps`` schema (``Api-Revision: 2026-05-20``,
  which the transports send; requests are built in it) and the legacy ``outputs`` schema of old
  recordings. Calls are ``function_call`` steps (legacy: outputs) ``{id, name, arguments}``; ``id``
  becomes the call id (a missing one gets ``response_id:index``, D7, and is never sent back: such a
  ``requires_action`` or ``completed`` turn → API_FAILURE(missing_call_id), as function_result needs
  ``call_id``). A call whose ``name`` is no non-empty string → API_FAILURE(malformed_response,
  ``call_without_name``). So is
  one whose ``steps`` (``outputs``) is no list or holds a step that is no object, or whose
  ``model_output`` step's ``content`` is no list of objects (``shapes.interaction``; missing or null is
  none), plain or streamed.
- Status (D1): ``requires_action`` → TOOL_PROPOSALS (with calls); ``completed`` → TOOL_PROPOSALS if
  calls else FINAL_TEXT; ``incomplete`` → TRUNCATED (``max_tokens`` when the details say so, else
  ``incomplete``); ``budget_exceeded`` and ``requires_continuation`` → TRUNCATED (reason the status);
  ``failed`` → API_FAILURE; ``cancelled`` → API_FAILURE fatal; anything else (``in_progress``,
  ``queued``, ``idle``: not terminal) → API_FAILURE(unknown_stop_reason). A ``model_output`` step
  carrying an ``error`` (a google.rpc.Status, google-genai ``ModelOutputStep.error``) makes a
  ``completed`` or ``requires_action`` interaction API_FAILURE too, and gives a ``failed`` one with no
  ``errors[]`` its details; its int code is a google.rpc.Code (14 UNAVAILABLE: retried, D26).
- A unary response may echo the input as its first step (Google's May-2026 migration guide): input-only
  steps (``user_input``, ``function_result``) in a response are not part of the turn, so nothing the
  request sent is replayed twice.
- Continuation (D8): stateless replay by default: the turn's steps go back unchanged (``thought`` steps
  with their ``signature``), then the results; a call's ``arguments`` that are no object (``null``
  included) or hold a number JSON cannot carry go back as ``{"INVALID_JSON": text}`` (``finite``),
  plain or streamed alike. Server-side state is
  opt-in with the runtime's generic
  ``settings["continuation"] = "previous_response_id"``: the runtime then passes the interaction id as
  ``previous_response_id``, which goes on the wire as ``previous_interaction_id`` with only the new
  items. With ``store: false`` (``settings["store"]``; the runner refuses it in ``extra``) nothing is
  stored to chain to (WIRE.md 5.5), and a synthetic id (``store: false`` interactions have none) is
  never chained either: in both cases the transcript is replayed instead, as openai-responses does. ``extra["previous_interaction_id"]``
  seeds the first request; the runner's chain replaces it from the second request on.
- Results: ``{"type": "function_result", "call_id", "name", "result": <canonical JSON text>, "is_error"}``.
  Placement: by default each result is a top-level ``function_result`` step, in stateless replay and
  with ``previous_interaction_id`` alike: the form of Google's own samples and of google-genai, whose
  ``UserInputStepParam.content`` admits only text, image, document, audio and video (WIRE.md 5.5
  prefers it). ``GeminiInteractionsAdapter(result_placement="user_input")`` puts all of a turn's
  results in one ``user_input`` step's ``content`` instead, the form vercel-ai sent in the recorded
  step-2 exchange (tool-call-step2 recordings). A legacy turn is answered with a legacy
  ``{"role": "user", "content": [...]}``, and the ``user_input`` steps of such a transcript go as
  legacy user turns too (one schema per request).
- Tools: ``{"type": "function", "name", "description", "parameters"}``; parameters are plain JSON
  Schema with ``$ref`` inlined (``schema.inline_refs``) and ``$schema`` dropped (D9).
- Settings: ``model``, ``temperature``/``max_output_tokens``/``tool_choice`` → ``generation_config``
  (``required`` → ``any``; ``{"name": X}`` → ``allowed_tools`` mode ``any`` with ``[X]``), ``store``,
  ``extra`` deep-merged last (its ``tools``, built-ins like ``{"type": "google_search"}``, are added
  after the registry's), ``stream: true`` in the body.
- Usage (D27): input = ``total_input_tokens`` (cached included) + ``total_tool_use_tokens``;
  output = ``total_output_tokens`` + ``total_thought_tokens`` (legacy ``total_reasoning_tokens``), or
  ``total_tokens`` less the input where that is more; a count that is no count (-1) is unknown (None).
- Streaming (WIRE.md 5.6): events carry ``event_type``; assembly is keyed by step index. Steps
  schema: ``step.start`` (snapshot), ``step.delta`` (``text``, ``thought_signature``,
  ``thought_summary``, ``arguments_delta`` string fragments), ``step.stop``; legacy: ``content.*``
  with whole ``function_call`` deltas. Terminal: ``interaction.completed`` (legacy
  ``interaction.complete``), which carries no steps. No terminal → stream cut; ``error`` → API_FAILURE.
  A call whose ``step.stop`` (``content.stop``) never came would otherwise run → TRUNCATED
  (``arguments_incomplete``): a call runs only after its done event (issue 3 §4).
- Errors: HTTP bodies may be ``google.rpc`` shaped (int ``code`` + ``status`` + ``details``) or carry a
  string ``code`` (WIRE.md 5.8); both are read. 429 follows the quota rule of ``gemini_schema``. Without
  an HTTP status (an SSE ``error`` event, a ``failed`` interaction) the string code decides:
  ``rate_limit_exceeded`` / ``too_many_requests`` / ``resource_exhausted`` are retried as a 429 is,
  ``quota_exceeded`` is not (Google's Interactions error codes, ai.google.dev/gemini-api/docs/api-errors).
- Usage is read from ``step.stop``, a delta's ``metadata.total_usage`` and ``interaction.status_update``
  (running totals), and from the terminal event, which wins when it has any.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
    StreamAssembler,
    StreamCaps,
    answered_chain,
    decode_body,
    failure_turn,
    make_call,
    rendered_tool_choice,
    result_text,
    set_once,
    synthetic_response_id,
    with_extra_tools,
)
from .echo import interaction_calls, interaction_results, interactions_echo
from .failures import (
    http_retryable,
    map_failure,
    retry_after_seconds,
    says_context_window_exceeded,
)
from .finite import check_object_arguments, invalid_json, unsendable_text
from .gemini_interactions_errors import (
    QUOTA_CODES,
    RATE_CODES,
    RETRYABLE_CODES,
    first_error,
    first_step_error,
    lower_code,
    status_failure,
)
from .gemini_schema import deep_merge, gemini_usage, google_error_details, token_sum
from .schema import inline_refs
from .shapes import interaction as shape_of_interaction
from .shapes import interaction_step

API = "gemini-interactions"
PROVIDER = "google"
REVISION = "gemini-interactions/1"

# Steps only a request carries: the model never answers with them. A unary response may echo the input
# back as its first step (Google's May-2026 Interactions migration guide); replayed, the user's input or
# a result would reach the model twice (D8 replays the model's output, not its echo of ours).
_INPUT_STEPS = frozenset({"user_input", "function_result"})


def _is_input_step(step: dict[str, Any]) -> bool:
    """An echoed input step, dropped from the turn; a ``type`` of another JSON type is kept for
    ``shapes.interaction`` to fail the turn (a list there is unhashable)."""
    kind = step.get("type")
    return isinstance(kind, str) and kind in _INPUT_STEPS


_TOOL_CHOICE = {"auto": "auto", "required": "any", "none": "none"}
_TERMINAL = ("interaction.completed", "interaction.complete")


def _provenance(model: Any) -> Provenance:
    return Provenance(PROVIDER, API, model if isinstance(model, str) else None, REVISION)


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    thoughts = "total_thought_tokens" if "total_thought_tokens" in raw else "total_reasoning_tokens"
    # total_tokens beyond the input is output (gemini_usage, the rule gemini-generate follows): the
    # Interactions quickstart reports total 197, input 8, output 12 and no thought count.
    return gemini_usage(
        token_sum(raw, "total_input_tokens", "total_tool_use_tokens"),
        token_sum(raw, "total_output_tokens", thoughts),
        token_sum(raw, "total_tokens"),
    )


def _real_id(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def turn_from_interaction(
    inter: dict[str, Any],
    raw_sha256: str,
    *,
    model: str | None = None,
    items: list[dict[str, Any]] | None = None,
    raw_arguments: dict[int, str] | None = None,
    unfinished: bool = False,
    malformed: str | None = None,
) -> ModelTurn:
    """Map an Interaction object (plain body, or a stream's terminal snapshot plus rebuilt ``items``).

    ``raw_arguments`` holds the argument text a stream sent for a call (by position in ``items``):
    that text, not the object rebuilt for the continuation, is what the strict parser reads (D5).
    ``unfinished`` says a streamed function_call step never got its ``step.stop``; ``malformed``: a
    step a stream sent of the wrong JSON type (``shapes.interaction_step``)."""
    prov = _provenance(model or inter.get("model"))
    rid = _real_id(inter.get("id")) or synthetic_response_id(raw_sha256)
    legacy = "steps" not in inter and isinstance(inter.get("outputs"), list)
    if items is None:
        # steps (outputs) of the wrong JSON type fail a requires_action or completed turn below
        malformed = malformed or shape_of_interaction(inter)
        found = inter.get("outputs" if legacy else "steps")
        items = (
            [s for s in found if isinstance(s, dict) and not _is_input_step(s)]
            if isinstance(found, list)
            else []
        )
    calls: list[ToolCall] = []
    text: list[str] = []
    items = list(items)  # the steps sent back: a copy, see non-finite arguments below
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind == "function_call":
            args = item.get("arguments")
            streamed = raw_arguments.get(index) if raw_arguments else None
            # null is no object either (FunctionCallStepParam.arguments is required): wrapped, as streamed
            sent = "null" if args is None and "arguments" in item else unsendable_text(args)
            sent = streamed if sent is not None and streamed is not None else sent
            raw_args = streamed if streamed is not None else (args if sent is None else sent)
            if sent is not None:
                # 1e400, NaN or Infinity read as inf/nan, or arguments that are no object ("{...}" as a
                # string): D5 refuses the call, but kept in the step the next request would be refused
                # (a bare Infinity is no JSON; arguments must be an object: a 400 after the turn's other
                # calls ran). It goes back as arguments that never parsed (finite.py), as in
                # gemini-generate and Anthropic; the call gets the text (a stream's, as it was sent).
                items[index] = {**item, "arguments": invalid_json(sent)}
            calls.append(
                make_call(PROVIDER, API, rid, _real_id(item.get("id")), item.get("name"), raw_args, index)
            )
        elif kind == "text" and isinstance(item.get("text"), str):  # legacy text output
            text.append(item["text"])
        elif kind == "model_output":
            content = item.get("content")
            for c in content if isinstance(content, list) else []:
                if isinstance(c, dict) and c.get("type") == "text" and isinstance(c.get("text"), str):
                    text.append(c["text"])
    continuation = ({"role": "model", "content": items},) if legacy else tuple(items)
    status = inter.get("status")

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
            text="".join(text),
            refusal=None,
            usage=_usage(inter.get("usage")),
            continuation=continuation if items else (),
            provenance=prov,
            raw_sha256=raw_sha256,
            failure=failure,
        )

    malformed = malformed or next((w for i in items if (w := interaction_step(i)) is not None), None)
    if status in ("requires_action", "completed") and malformed is not None:
        # D1: only an explicit completion is success, and a body whose steps (or a model_output's
        # content) have the wrong JSON type is none: read leniently it was an empty completion, or a
        # call lost beside the ones that ran. Not retried, as openai-responses' malformed output.
        failure = Failure("status", False, None, None, malformed)
        return turn(Finish.API_FAILURE, status, "malformed_response", failure)
    if status in ("requires_action", "completed") and calls and unfinished:
        # "Arguments are parsed only after the provider's done event for that call" (issue 3 §4): a
        # function_call step with no step.stop (legacy: content.stop) never finished, even when its
        # arguments parse and the terminal event came. None of the turn's calls runs; TRUNCATED, not
        # retried, as gemini-generate treats a call still open when its stream ends.
        return turn(Finish.TRUNCATED, status, "arguments_incomplete")
    step_error = None if legacy else first_step_error(items)
    if status in ("requires_action", "completed") and step_error is not None:
        # A model_output step that reports an error (a google.rpc.Status) is a fault, not an answer:
        # only an explicit completion is success (D1). Its code says whether a retry may help (D26).
        raw, reason, failure = status_failure(step_error, rpc=True)
        return turn(Finish.API_FAILURE, raw or status, reason, failure)
    if status in ("requires_action", "completed") and any(
        i.get("type") == "function_call" and not _real_id(i.get("name")) for i in items
    ):
        # An id-less call is answered by name, in order (check_request): one without a name can never
        # be, so none of the turn's calls runs, as in gemini-generate (issue 3 §3; review round 16).
        failure = Failure("status", False, None, None, "call_without_name")
        return turn(Finish.API_FAILURE, status, "malformed_response", failure)
    if status in ("requires_action", "completed") and any(call.synthetic_id for call in calls):
        # A function_result pairs with its call by call_id, which google-genai marks Required (steps and
        # legacy alike; issue 3 §3), and D7 never sends the made-up id: a call without an id can never be
        # answered, so none of the turn's calls runs, as a Responses function_call without call_id.
        return turn(Finish.API_FAILURE, status, "missing_call_id", Failure("status", False))
    if status == "requires_action" and calls:
        return turn(Finish.TOOL_PROPOSALS, status, None)
    if status == "completed":
        return turn(Finish.TOOL_PROPOSALS if calls else Finish.FINAL_TEXT, status, None)
    if status == "incomplete":
        details = inter.get("incomplete_details")
        why = lower_code(details.get("reason")) if isinstance(details, dict) else None
        if why is not None and "max" in why and "token" in why:
            why = "max_tokens"
        return turn(Finish.TRUNCATED, status, why or "incomplete")
    if status in ("budget_exceeded", "requires_continuation"):
        # Length stops (D1): the interaction's budget ran out, or the per-request decode token limit was
        # reached with the answer unfinished (google-genai _interactions_continuation.py). callbound does
        # not send the continuation_token back, so the turn is TRUNCATED, not CONTINUE.
        return turn(Finish.TRUNCATED, status, status)
    if status == "failed":
        # the details: errors[] / error (an int code there is an HTTP status), else a model_output
        # step's google.rpc.Status (WIRE.md 5.4)
        top = first_error(inter)
        raw, reason, failure = (
            status_failure(step_error, rpc=True)
            if not top and step_error is not None
            else status_failure(top, rpc=False)
        )
        return turn(Finish.API_FAILURE, raw or "failed", reason, failure)
    if status == "cancelled":
        return turn(Finish.API_FAILURE, status, "cancelled", Failure("status", False))
    raw_status = status if isinstance(status, str) else None
    return turn(Finish.API_FAILURE, raw_status, "unknown_stop_reason", Failure("status", False))


def error_turn(
    err: dict[str, Any],
    raw_sha256: str,
    status: int | None,
    headers: dict[str, str],
    kind: str,
    model: Any = None,
) -> ModelTurn:
    """API_FAILURE for an error body or event; ``code`` may be an HTTP int or a string (WIRE.md 5.8)."""
    code = err.get("code")
    int_code = code if isinstance(code, int) and not isinstance(code, bool) else None
    name = lower_code(code) if isinstance(code, str) else lower_code(err.get("status"))
    delay, detail, permanent = google_error_details(err)
    permanent = permanent or name in QUOTA_CODES
    effective = status if status is not None else int_code
    if effective is not None:
        retryable = http_retryable(effective, "http") and not permanent
    else:
        retryable = name in RETRYABLE_CODES and not permanent
    # D32: the HTTP status if there is one, else the provider's code or RPC status as sent.
    if status is not None:
        raw = str(status)
    elif isinstance(code, str) and code:
        raw = code
    elif isinstance(err.get("status"), str) and err["status"]:
        raw = err["status"]
    else:
        raw = str(int_code) if int_code is not None else "error"
    rate_limited = effective == 429 or (effective is None and name in RATE_CODES)
    reason = "quota_exceeded" if permanent else ("rate_limited" if rate_limited else "api_error")
    finish = Finish.API_FAILURE
    if not permanent and says_context_window_exceeded(effective, err.get("message")):
        # the input does not fit the model's window, as generateContent says it (D1: TRUNCATED)
        finish, reason, retryable = Finish.TRUNCATED, "context_window_exceeded", False
    header_delay = retry_after_seconds(headers)
    return failure_turn(
        API,
        _provenance(model),
        raw_sha256,
        response_id=None,
        raw_stop_reason=raw,
        reason=reason,
        failure=Failure(
            kind, retryable, status, name, detail, header_delay if header_delay is not None else delay
        ),
        finish=finish,
    )


def _tool_names(tool: dict[str, Any]) -> list[str]:
    return [tool["name"]] if isinstance(tool.get("name"), str) else []


def _is_legacy_turn(item: Any) -> bool:
    return isinstance(item, dict) and "role" in item and "type" not in item


def _one_schema(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The input in one schema generation (WIRE.md 5.0). A transcript answered in the legacy ``outputs``
    schema holds legacy turns (``{"role", "content"}``); the user inputs callbound made itself as
    ``user_input`` steps (``initial_items`` cannot know the schema yet) become user turns with the same
    content, or the legacy API gets a list mixing the two shapes. Provider output is not touched (D8)."""
    if not any(_is_legacy_turn(i) for i in items):
        return items
    return [
        {"role": "user", "content": i["content"]}
        if isinstance(i, dict) and i.get("type") == "user_input" and set(i) == {"type", "content"}
        else i
        for i in items
    ]


class GeminiInteractionsAdapter:
    api = API
    provider = PROVIDER
    revision = REVISION

    def __init__(self, result_placement: str = "step") -> None:
        if result_placement not in ("step", "user_input"):
            raise UsageError("result_placement must be 'step' or 'user_input'")
        self.result_placement = result_placement

    def render_tools(self, declarations: Sequence[ToolDeclaration]) -> list[dict[str, Any]]:
        tools = []
        for d in declarations:
            params = {k: v for k, v in inline_refs(d.parameters, d.name).items() if k != "$schema"}
            tools.append(
                {"type": "function", "name": d.name, "description": d.description, "parameters": params}
            )
        return tools

    def initial_items(
        self, user_input: str | None, messages: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        items = list(messages)
        if user_input is not None:
            items.append({"type": "user_input", "content": [{"type": "text", "text": user_input}]})
        return items

    def turn_items(self, turn: ModelTurn) -> list[dict[str, Any]]:
        return list(turn.continuation)

    def result_items(
        self, turn: ModelTurn, results: Sequence[tuple[ToolCall, dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        if not results:
            return []
        blocks = []
        for call, model_result in sorted(results, key=lambda r: r[0].output_index):
            block: dict[str, Any] = {"type": "function_result"}
            if not call.synthetic_id:  # D7: made-up ids are never sent
                block["call_id"] = call.call_id
            block["name"] = call.name
            block["result"] = result_text(model_result)
            block["is_error"] = not bool(model_result.get("ok"))
            blocks.append(block)
        if turn.continuation and "role" in turn.continuation[0]:
            return [{"role": "user", "content": blocks}]  # a legacy turn gets a legacy answer
        if self.result_placement == "step":
            return blocks
        return [{"type": "user_input", "content": blocks}]

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
        # store: false keeps nothing on the server, so previous_interaction_id would point at nothing
        # (WIRE.md 5.5): such requests replay the transcript, as do those after an interaction without an
        # id (a synthetic cb: id is never sent, D7).
        unstored = settings.get("store") is False or extra.get("store") is False
        if settings.get("model"):
            body["model"] = settings["model"]
        chain = previous_response_id
        if chain is not None and (unstored or chain.startswith("cb:")):
            chain = None
        if chain is not None:
            body["previous_interaction_id"] = chain
            body["input"] = new_items if new_items is not None else []
        else:  # stateless replay
            body["input"] = _one_schema(items)
        if instructions:
            body["system_instruction"] = instructions
        tools = with_extra_tools(API, tools, extra, _tool_names)  # extra tools are added (google_search)
        if tools:
            body["tools"] = tools
        generation: dict[str, Any] = {}
        if settings.get("temperature") is not None:
            generation["temperature"] = settings["temperature"]
        if settings.get("max_output_tokens") is not None:
            generation["max_output_tokens"] = settings["max_output_tokens"]
        set_once(
            API,
            settings,
            "tool_choice",
            ("generation_config", "tool_choice"),
            ("generationConfig", "tool_choice"),
        )
        choice = rendered_tool_choice(
            settings.get("tool_choice"),
            _TOOL_CHOICE,
            lambda name: {"allowed_tools": {"mode": "any", "tools": [name]}},
        )
        if choice is not None:
            generation["tool_choice"] = choice
        if generation:
            body["generation_config"] = generation
        if settings.get("store") is False:
            body["store"] = False
        deep_merge(body, {k: v for k, v in extra.items() if k != "tools"})
        if chain is not None:
            # extra["previous_interaction_id"] seeds the first request (a conversation begun elsewhere,
            # as openai-responses takes extra["previous_response_id"]); once the runner chains, its id
            # wins, or every later request would point back at the seed and its function_results would
            # answer calls that interaction never made (deep_merge above would put the seed back).
            body["previous_interaction_id"] = chain
        if stream:
            body["stream"] = True
        return body

    def parse_response(self, body: bytes | str | dict[str, Any], *, model: str | None = None) -> ModelTurn:
        data, digest = decode_body(body)
        if not isinstance(data, dict):
            raise ProtocolViolation("an Interactions body must be a JSON object")
        if isinstance(data.get("error"), dict) and "status" not in data:
            return error_turn(data["error"], digest, None, {}, "error_body", model)
        return turn_from_interaction(data, digest, model=model)

    def stream_assembler(
        self, caps: StreamCaps | None = None, *, model: str | None = None
    ) -> StreamAssembler:
        from .gemini_interactions_stream import _Assembler  # imported here: that module imports this one

        return _Assembler(caps or StreamCaps(), model)

    def map_error(self, failure: RawFailure, *, model: str | None = None) -> ModelTurn:
        return map_failure(
            API,
            _provenance(model),
            failure,
            lambda err, digest: error_turn(err or {}, digest, failure.status, failure.headers, "http", model),
        )

    def check_request(self, body: dict[str, Any], previous: ModelTurn | None = None) -> None:
        """Every function_call in the input (and, with previous_interaction_id, of the previous turn) is
        answered exactly once by call_id; in stateless replay the previous turn's steps are resent
        unchanged (thought signatures included). With previous_interaction_id, ``previous`` must be
        that interaction, unless its steps are all replayed (stateless replay over a seed)."""
        raw_input = body.get("input")
        items = [i for i in raw_input if isinstance(i, dict)] if isinstance(raw_input, list) else []
        if not isinstance(raw_input, list | str):
            raise ProtocolViolation("an Interactions request needs an input (a string or a list)")
        chained = answered_chain(body.get("previous_interaction_id"), previous, items)
        if chained and previous is not None and chained != previous.response_id:
            # The calls answered here were made by `previous`: chained to any other interaction, the
            # server is asked to answer calls it never saw in that chain (as openai-responses checks).
            raise ProtocolViolation(
                f"previous_interaction_id {chained!r} is not the interaction being answered "
                f"({previous.response_id!r})"
            )
        stateful = bool(chained)
        if any(_is_legacy_turn(i) for i in items) and any(i.get("type") == "user_input" for i in items):
            raise ProtocolViolation("the input mixes legacy turns and steps (user_input); use one schema")
        calls: set[str] = set()
        idless: list[Any] = []
        if stateful and previous is not None:
            calls.update(c.call_id for c in previous.calls if not c.synthetic_id)
            idless.extend(c.name for c in previous.calls if c.synthetic_id)
        for item in items:
            for call in interaction_calls(item):
                check_object_arguments(call.get("arguments"), "a function_call step's arguments")
                cid = _real_id(call.get("id"))
                if cid is None:
                    idless.append(call.get("name"))
                else:
                    calls.add(cid)
        answered: list[str] = []
        idless_answers: list[Any] = []
        for item in items:
            for result in interaction_results(item):
                if not isinstance(result.get("result"), str | dict | list):
                    raise ProtocolViolation("function_result.result must be a string, an object or a list")
                cid = _real_id(result.get("call_id"))
                if cid is None:
                    idless_answers.append(result.get("name"))
                elif cid not in calls:
                    raise ProtocolViolation(f"function_result for unknown call_id {cid!r}")
                else:
                    answered.append(cid)
        for cid in calls:
            n = answered.count(cid)
            if n != 1:
                raise ProtocolViolation(
                    f"call_id {cid!r} is answered {n} times; it must be answered exactly once"
                )
        interactions_echo(items, previous)
        if idless_answers != idless:
            raise ProtocolViolation(
                f"id-less calls {idless} must be answered by name in order, got {idless_answers}"
            )
        if previous is not None and not stateful:
            for step in previous.continuation:
                if step not in items:
                    raise ProtocolViolation(
                        f"the previous turn's {step.get('type') or 'model'} item was not resent unchanged (D8)"
                    )


ADAPTER = GeminiInteractionsAdapter()
