"""OpenAI Chat Completions adapter (``openai-chat``). Facts: WIRE.md section 2.

- Calls are ``choices[0].message.tool_calls[]`` with arguments as a JSON string; the legacy
  ``message.function_call`` counts as one call with a synthetic id (D7). Results are one
  ``{"role": "tool", "tool_call_id", "content"}`` message per call (``role: "function"`` for the
  legacy call, which has no id to echo).
- Continuation (D8): the assistant message exactly as received (but call arguments sent as an
  object holding 1e400 or NaN go back as ``{"INVALID_JSON": text}``, ``finite``); for a stream, the
  message rebuilt from the deltas (``role``, ``content``, ``tool_calls``, and ``refusal``/``function_call``/
  ``reasoning_content``/``reasoning_details`` when sent; Groq's ``reasoning`` is left out, as Groq
  rejects it on a request).
- Finish mapping (D1, D31): a non-empty ``message.refusal`` → REFUSAL whatever the finish_reason;
  ``tool_calls`` → TOOL_PROPOSALS; ``stop``/``function_call`` → TOOL_PROPOSALS when complete calls are
  present (forced tool_choice ends with ``stop``), else FINAL_TEXT; ``length`` → TRUNCATED;
  Mistral's ``model_length`` → TRUNCATED(context_window_exceeded); ``content_filter`` → REFUSAL;
  anything else, ``""`` included, or none → API_FAILURE(unknown_stop_reason). Calls in a message whose
  ``role`` is another than ``assistant`` → API_FAILURE(malformed_response): they could not be answered
  (a missing or null role is filled in as ``assistant``, as in a stream). So is a ``stop``,
  ``tool_calls`` or ``function_call`` turn whose message, content or call container (or an entry of
  one) has the wrong JSON type (``shapes.chat_message``; null is absent), plain or streamed. An error
  with code ``context_length_exceeded`` (HTTP 400) → TRUNCATED (context_window_exceeded), raw_stop_reason
  the status (D32), as in openai-responses.
- Tool schema (D9): ``$ref`` inlined, OpenAI strict transform where the schema allows it.
- Settings: ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"`` or ``{"name": ...}``, and
  ``extra["n"]`` only 1: one choice is read, so anything else raises ``UsageError``. ``extra["tools"]``
  is added after the registry's tools (a non-list, or a registry tool's name, raises ``UsageError``).
- ``finish_reason: "error"`` with an error object (OpenRouter's HTTP-200 error, in ``choices[0].error``
  or beside the choices) is read from that error, as the same error streamed is (D26, D32).
- Streaming: one chunk per ``data:`` line; tool-call fragments keyed by ``index`` (id and name only
  on the first fragment; one bringing another id and a name at an index a call holds opens a new call,
  as Ollama reuses index 0, and so does a whole call after a whole one where neither has an id,
  ``openai_chat_ids``); a call streamed without an id key is rebuilt without one, as the plain body
  holds it; object arguments are kept and echoed as a plain body's; the usage chunk has
  ``choices: []``; the stream is complete only when a finish_reason was seen (``""`` and ``"null"``
  on middle chunks are none) and ``[DONE]`` arrived. Fragments (arguments, content, refusal) are kept as
  lists and joined once, re-pairing a character split over two chunks as surrogate halves. Chunks
  that carry only one argument fragment are read from the raw event text without the JSON parser
  (``feed_events``, the fast path of ``callbound.adapters.stream``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
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
    decode_body,
    failure_turn,
    make_call,
    rendered_tool_choice,
    result_text,
    set_once,
    synthetic_response_id,
    with_extra_tools,
)
from .echo import chat_echo
from .failures import map_failure, read_openai_error
from .finite import has_non_finite, invalid_json, json_text
from .schema import openai_strict
from .shapes import chat_message

if TYPE_CHECKING:
    from .openai_chat_stream import _Assembler

API = "openai-chat"
PROVIDER = "openai"
REVISION = "openai-chat/1"

RETRYABLE_ERROR_CODES = frozenset({"server_error", "rate_limit_exceeded", "server_is_overloaded", "timeout"})
# DeepSeek stops a response "interrupted due to insufficient resource of the inference system": a server
# fault, retried as a 5xx is (D26), not an unknown stop reason.
SERVER_FAULT_FINISHES = frozenset({"insufficient_system_resource"})
# settings["tool_choice"] strings the API takes (openai-python ToolChoiceOptions: "none", "auto", "required").
TOOL_CHOICES = {"auto": "auto", "none": "none", "required": "required"}


def _provenance(model: Any) -> Provenance:
    return Provenance(PROVIDER, API, model if isinstance(model, str) else None, REVISION)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    # A token count is an int >= 0: a negative one (a compatible server's -1 for "unknown") taken as a
    # count would lower the spend and let a token budget pass (D27: unknown is None).
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    # D27: prompt_tokens already counts cached tokens, completion_tokens reasoning tokens; missing → None.
    prompt, completion = _int(raw.get("prompt_tokens")), _int(raw.get("completion_tokens"))
    total = _int(raw.get("total_tokens"))
    if prompt is not None and completion is not None and total is not None and total > prompt + completion:
        # Some servers leave generated tokens out of completion_tokens and count them only in the
        # total: xAI's reasoning_tokens (vercel/ai packages/xai __fixtures__ xai-tool-call: 291 + 26
        # + 189 reasoning = 506), Gemini's thinking tokens on its OpenAI-compatible endpoint (no
        # details at all: 35 + 12 of 109). D27 counts every generated token as output, so whatever
        # the total holds beyond the prompt is output: a budget never undercounts it.
        completion = total - prompt
    return Usage(prompt, completion)


def is_first_choice(choice: Any) -> bool:
    """We never ask for n > 1 (``build_request`` refuses it): choice index 0 is the turn. Some compatible servers send
    ``"index": null`` or no index at all for their only choice (vercel/ai moonshotai tests)."""
    if not isinstance(choice, dict):
        return False
    index = choice.get("index")
    return index is None or (type(index) is int and index == 0)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some compatible servers answer with text parts
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _argument_text(raw: Any) -> str | dict[str, Any] | None:
    """A call's arguments for the strict parser (D5): text as sent, an object (compatible servers) as
    is, except one holding 1e400, NaN or Infinity, which is given as its text (``finite``): the store
    can hold that, as it could not hold the float."""
    if isinstance(raw, dict) and has_non_finite(raw):
        return json_text(raw)
    return raw if isinstance(raw, str | dict) else None


def _sendable(message: dict[str, Any]) -> dict[str, Any]:
    """The message as it goes back (D8): unchanged, except call arguments sent as an object holding a
    number JSON cannot carry, which go back as ``{"INVALID_JSON": text}`` (``finite``; the call is
    refused either way): kept, the turn could not be stored and the next request would not be JSON."""

    def wrapped(function: Any) -> Any:
        raw = function.get("arguments") if isinstance(function, dict) else None
        if not (isinstance(raw, dict) and has_non_finite(raw)):
            return function
        return {**function, "arguments": invalid_json(json_text(raw))}

    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list):
        sent = []
        for tc in tool_calls:
            function = tc.get("function") if isinstance(tc, dict) else None
            new = wrapped(function)
            sent.append(tc if new is function else {**tc, "function": new})
        if any(new is not old for new, old in zip(sent, tool_calls, strict=True)):
            message = {**message, "tool_calls": sent}
    legacy = message.get("function_call")
    if (new_legacy := wrapped(legacy)) is not legacy:
        message = {**message, "function_call": new_legacy}
    return message


def _calls(message: dict[str, Any], rid: str) -> tuple[list[ToolCall], bool, bool]:
    """(calls, whether any is complete, whether any is of another type than ``function``). Index =
    position in ``tool_calls``; the legacy call comes last."""
    calls: list[ToolCall] = []
    complete = foreign = False
    tool_calls = message.get("tool_calls")
    listed = tool_calls if isinstance(tool_calls, list) else []
    for index, tc in enumerate(listed):
        if not isinstance(tc, dict):
            continue
        function: Any = tc.get("function")
        raw, name = (
            (function.get("arguments"), function.get("name")) if isinstance(function, dict) else (None, None)
        )
        kind = tc.get("type")
        if _str(kind) and kind != "function" and not _str(name):
            # A call of another type (``custom``: ``{"custom": {"name", "input"}}``, free-form text
            # input) waits for an answer callbound cannot give: it renders function tools only. It is
            # kept, under its own name, so the record shows what the model asked for. (A server that
            # labels a call with a usable ``function`` otherwise is read as the function call it is.)
            foreign = True
            own = tc.get(kind)
            if isinstance(own, dict) and _str(own.get("name")):
                name = own["name"]
            raw = None
        complete = complete or bool(_str(name))
        args = _argument_text(raw)
        calls.append(make_call(PROVIDER, API, rid, _str(tc.get("id")), name, args, index))
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        raw = legacy.get("arguments")
        complete = complete or bool(_str(legacy.get("name")))
        args = _argument_text(raw)
        calls.append(make_call(PROVIDER, API, rid, None, legacy.get("name"), args, len(listed)))
    return calls, complete, foreign


def turn_from_completion(
    resp: dict[str, Any], raw_sha256: str, error_kind: str = "error_body", malformed: str | None = None
) -> ModelTurn:
    """Map a complete chat.completion object (plain body or rebuilt from a stream) to a ModelTurn.
    ``error_kind``: the Failure kind of an error object read with finish_reason ``error``; ``malformed``:
    what a stream found of the wrong JSON type (``shapes.chat_message``), as a plain body's message."""
    prov = _provenance(resp.get("model"))
    rid = _str(resp.get("id")) or synthetic_response_id(raw_sha256)
    choices = resp.get("choices")
    choice: dict[str, Any] = {}
    if isinstance(choices, list):
        choice = next((c for c in choices if is_first_choice(c)), {})
    raw_message = choice.get("message")
    malformed = malformed or chat_message(raw_message)
    message: dict[str, Any] = raw_message if isinstance(raw_message, dict) else {}
    if message and message.get("role") is None:
        # Some compatible servers leave the role out; the stream assembler reads it as "assistant" too,
        # and a multi-turn request needs it (as Gemini's missing role is filled in as "model").
        message = {"role": "assistant", **{k: v for k, v in message.items() if k != "role"}}
    finish_reason = choice.get("finish_reason")
    raw_reason = finish_reason if isinstance(finish_reason, str) else None
    error = choice.get("error") if isinstance(choice.get("error"), dict) else resp.get("error")
    calls, complete, foreign = _calls(message, rid)
    # An empty refusal is no refusal: streams open with ``"refusal": ""`` even when the turn then ends
    # on ``length`` (openai/openai-python .inline-snapshot 7ae6c1a2631b, max_tokens=1).
    refusal = _str(message.get("refusal"))

    def turn(finish: Finish, reason: str | None, failure: Failure | None = None) -> ModelTurn:
        return ModelTurn(
            api=API,
            response_id=rid,
            finish=finish,
            raw_stop_reason=raw_reason,
            reason=reason,
            calls=tuple(calls),  # kept for display; only TOOL_PROPOSALS turns execute
            text=_text(message.get("content")),
            refusal=refusal,
            usage=_usage(resp.get("usage")),
            continuation=(_sendable(message),) if message else (),
            provenance=prov,
            raw_sha256=raw_sha256,
            failure=failure,
        )

    if refusal is not None:  # D31: a refusal wins over a normal stop and over complete calls
        return turn(Finish.REFUSAL, "refusal")
    if raw_reason == "error" and isinstance(error, dict):
        # OpenRouter's error after some tokens, sent with HTTP 200 (openrouter.ai/docs errors, "Mid-Stream
        # Errors"): finish_reason "error" and the error object in choices[0].error or beside the choices.
        # Read as the same error streamed is (an error chunk, ``_error_turn``): D26/D32 decide from the
        # error's code (502: api_error, retried), not unknown_stop_reason. The usage still counts (D27).
        failed = _error_turn(error, raw_sha256, None, {}, error_kind, rid, prov.model)
        return replace(failed, usage=_usage(resp.get("usage")))
    if raw_reason == "content_filter":
        return turn(Finish.REFUSAL, "content_filter")
    if raw_reason == "length":
        return turn(Finish.TRUNCATED, "max_tokens")
    if raw_reason == "model_length":
        # Mistral's own stop (its enum: stop, length, model_length, error, tool_calls): the context
        # window filled mid-answer. D1 lists "context window exceeded" under TRUNCATED, read as
        # Anthropic's model_context_window_exceeded is; not retried (the same request fills it again).
        return turn(Finish.TRUNCATED, "context_window_exceeded")
    if raw_reason in ("tool_calls", "function_call", "stop") and malformed is not None:
        # A message, content or call container of the wrong JSON type (shapes.py): read leniently, the
        # turn became an empty completion or lost a call while its siblings ran (D1). Not retried.
        return turn(Finish.API_FAILURE, "malformed_response", Failure("status", False, None, None, malformed))
    if raw_reason in ("tool_calls", "function_call", "stop") and foreign:
        # As a Responses custom_tool_call is (docs/stop-reasons.md, completed+clientcall): no final
        # answer, and none of the turn's calls runs, since the turn cannot be answered whole.
        return turn(Finish.API_FAILURE, "unexpected_tool_call", Failure("status", False))
    if raw_reason in ("tool_calls", "function_call", "stop") and complete:
        if message.get("role") != "assistant":
            # The message goes back as received (D8), and only an assistant message's calls can be
            # answered (check_request: a tool message for any other role answers an unknown id). So the
            # turn fails now, before any handler runs, not on the next request (issue 3 §3).
            failure = Failure("status", False, None, None, "message_role_not_assistant")
            return turn(Finish.API_FAILURE, "malformed_response", failure)
        return turn(Finish.TOOL_PROPOSALS, None)
    if raw_reason == "stop":
        return turn(Finish.FINAL_TEXT, None)
    if raw_reason in SERVER_FAULT_FINISHES:
        return turn(Finish.API_FAILURE, "api_error", Failure("status", True))
    if raw_reason in ("tool_calls", "function_call"):
        # The model said "run tools" but sent nothing runnable: never read that as a final answer.
        return turn(Finish.API_FAILURE, "missing_tool_calls", Failure("status", False))
    return turn(Finish.API_FAILURE, "unknown_stop_reason", Failure("status", False))


def _error_turn(
    err: Any,
    raw_sha256: str,
    status: int | None,
    headers: dict[str, str],
    kind: str,
    response_id: str | None = None,
    model: str | None = None,
) -> ModelTurn:
    """D26/D32: HTTP errors carry the status as raw_stop_reason; bodies and events without one the code
    (``failures.read_openai_error``, as openai-responses reads the same errors)."""
    r = read_openai_error(err, status, headers, RETRYABLE_ERROR_CODES)
    return failure_turn(
        API, _provenance(model), raw_sha256, response_id=response_id, raw_stop_reason=r.raw_stop_reason,
        reason=r.reason, finish=r.finish,
        failure=Failure(kind, r.retryable, status, r.error_type, r.error_code, r.retry_after_s),
    )  # fmt: skip


def _tool_name(tool: dict[str, Any]) -> list[str]:
    kind = tool.get("type")
    spec = tool.get(kind) if isinstance(kind, str) else None
    name = spec.get("name") if isinstance(spec, dict) else None  # function.name, custom.name
    return [name] if isinstance(name, str) else []


class OpenAIChatAdapter:
    api = API
    provider = PROVIDER
    revision = REVISION

    def render_tools(self, declarations: Sequence[ToolDeclaration]) -> list[dict[str, Any]]:
        tools = []
        for decl in declarations:
            schema, strict = openai_strict(decl.parameters, decl.name)
            function = {
                "name": decl.name,
                "description": decl.description,
                "parameters": schema,
                "strict": strict,
            }
            tools.append({"type": "function", "function": function})
        return tools

    def initial_items(
        self, user_input: str | None, messages: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        items = list(messages)
        if user_input is not None:
            items.append({"role": "user", "content": user_input})
        return items

    def turn_items(self, turn: ModelTurn) -> list[dict[str, Any]]:
        # The assistant message goes back as received (D8), but for Groq's "reasoning" (its parsed
        # chain of thought), which Groq itself rejects on a request ("property 'reasoning' is
        # unsupported", 400) and the stream assembler never keeps: plain and streamed turns send
        # the same message. What other servers need back travels in reasoning_content (DeepSeek,
        # Kimi) and reasoning_details (OpenRouter), kept whole.
        return [
            {k: v for k, v in item.items() if k != "reasoning"} if "reasoning" in item else item
            for item in turn.continuation
        ]

    def result_items(
        self, turn: ModelTurn, results: Sequence[tuple[ToolCall, dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        message = turn.continuation[0] if turn.continuation else {}
        listed = message.get("tool_calls") if isinstance(message.get("tool_calls"), list) else []
        assert isinstance(listed, list)
        items: list[dict[str, Any]] = []
        for call, model_result in results:
            content = result_text(model_result)
            if call.output_index >= len(listed) and isinstance(message.get("function_call"), dict):
                items.append({"role": "function", "name": call.name, "content": content})
                continue
            call_id = call.call_id
            if call.synthetic_id:
                # D7: never send a made-up id; echo what the provider sent (compatible servers send "").
                raw = listed[call.output_index] if call.output_index < len(listed) else None
                sent = raw.get("id") if isinstance(raw, dict) else None
                call_id = sent if isinstance(sent, str) else ""
            items.append({"role": "tool", "tool_call_id": call_id, "content": content})
        return items

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
        # Chat Completions has no server-side state: previous_response_id is ignored and items replayed.
        extra: dict[str, Any] = settings.get("extra") or {}
        n = extra.get("n")
        if n is not None and not (type(n) is int and n == 1):
            # Only choice 0 is read (``is_first_choice``): a second choice's content_filter or tool calls
            # would vanish unread, so more than one is never asked for (D1).
            raise UsageError(f"openai-chat reads one choice: extra['n'] must be 1 or absent, not {n!r}")
        body: dict[str, Any] = {}
        if settings.get("model"):
            body["model"] = settings["model"]
        body["messages"] = [{"role": "system", "content": instructions}, *items] if instructions else items
        tools = with_extra_tools(API, tools, extra, _tool_name)
        if tools:
            body["tools"] = tools
        # The API takes only these (openai-python ToolChoiceOptions, or a named function); anything
        # else would be a 400 on the first request.
        set_once(API, settings, "tool_choice", ("tool_choice",))
        # max_tokens, the older name (Mistral and other compatible servers take only it), goes through
        # extra; beside settings['max_output_tokens'] (sent as max_completion_tokens) it is a second limit
        set_once(API, settings, "max_output_tokens", ("max_tokens",))
        choice = rendered_tool_choice(
            settings.get("tool_choice"),
            TOOL_CHOICES,
            lambda name: {"type": "function", "function": {"name": name}},
        )
        if choice is not None:
            body["tool_choice"] = choice
        if settings.get("temperature") is not None:
            body["temperature"] = settings["temperature"]
        if settings.get("max_output_tokens") is not None:
            body["max_completion_tokens"] = settings["max_output_tokens"]
        if stream:
            body["stream"] = True
            # Without include_usage a stream reports no tokens at all (WIRE.md 2.4).
            body["stream_options"] = {"include_usage": True}
        body.update({key: value for key, value in extra.items() if key != "tools"})  # tools: added above
        if stream:
            body["stream"] = True  # the transport reads a stream; extra cannot turn that off
            # extra's stream options (include_obfuscation) are kept, but never without the usage (D27)
            options = extra.get("stream_options")
            body["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
        return body

    def parse_response(self, body: bytes | str | dict[str, Any], *, model: str | None = None) -> ModelTurn:
        data, digest = decode_body(body)
        if not isinstance(data, dict):
            raise ProtocolViolation("a chat completion body must be a JSON object")
        if isinstance(data.get("error"), dict) and "choices" not in data:
            return _error_turn(data["error"], digest, None, {}, "error_body", None, model)
        if model is not None and not data.get("model"):
            data = {**data, "model": model}
        return turn_from_completion(data, digest)

    def stream_assembler(self, caps: StreamCaps | None = None, *, model: str | None = None) -> _Assembler:
        from .openai_chat_stream import _Assembler  # imported here: that module imports this one

        return _Assembler(caps or StreamCaps(), model)

    def map_error(self, failure: RawFailure, *, model: str | None = None) -> ModelTurn:
        return map_failure(
            API,
            _provenance(model),
            failure,
            lambda err, digest: _error_turn(
                err, digest, failure.status, failure.headers, "http", None, model
            ),
        )

    def check_request(self, body: dict[str, Any], previous: ModelTurn | None = None) -> None:
        """Every tool_call id of an assistant message is answered by exactly one ``role: tool`` message
        among those that follow it directly; no tool message answers an unknown id. A call sent without
        an id (``"id": ""`` or none: Gemini's OpenAI-compatible endpoint, WIRE.md 2.6) is answered with
        ``tool_call_id: ""`` (D7: never a made-up id; ``result_items``), one such message per call.
        The answered turn's calls are replayed with their names and arguments (``echo``)."""
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise ProtocolViolation("a chat request needs a messages list")
        pending: set[str] = set()
        answered: set[str] = set()
        idless = 0  # calls without an id not yet answered: their answers can only be told apart by order
        legacy_pending = False
        for position, msg in enumerate([*messages, None]):
            role = msg.get("role") if isinstance(msg, dict) else None
            if role == "tool" and isinstance(msg, dict):
                cid = msg.get("tool_call_id")
                if cid == "" and idless:
                    idless -= 1
                elif isinstance(cid, str) and cid in answered:  # "": more answers than id-less calls
                    raise ProtocolViolation(f"messages[{position}]: tool_call_id {cid!r} is answered twice")
                elif not isinstance(cid, str) or cid not in pending:
                    raise ProtocolViolation(
                        f"messages[{position}]: tool message for unknown tool_call_id {cid!r}"
                    )
                if not isinstance(msg.get("content"), str | list):
                    raise ProtocolViolation(
                        f"messages[{position}]: tool content must be a string or a list of parts"
                    )
                answered.add(cid)
                continue
            if role == "function" and legacy_pending:
                legacy_pending = False
                continue
            missing = sorted(pending - answered) + (["a call without an id"] if idless else [])
            if missing or legacy_pending:
                what = ", ".join(missing) or "the function_call"
                raise ProtocolViolation(f"messages[{position}]: no tool message answers {what}")
            pending, answered, idless = set(), set(), 0
            if role == "assistant" and isinstance(msg, dict):
                for tc in msg.get("tool_calls") or []:
                    if isinstance(tc, dict) and isinstance(tc.get("id"), str) and tc["id"]:
                        pending.add(tc["id"])  # a repeated id is answered once (D7)
                    elif isinstance(tc, dict):
                        idless += 1
                legacy_pending = isinstance(msg.get("function_call"), dict)
        chat_echo(messages, previous)


ADAPTER = OpenAIChatAdapter()
