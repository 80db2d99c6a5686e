"""Gemini generateContent / streamGenerateContent adapter (``gemini-generate``). Facts: WIRE.md section 4.

- Calls are ``functionCall`` parts of the first candidate. ``functionCall.id`` is optional (older models
  send none): an id-less call gets ``response_id:part_index`` (D7), flagged synthetic and never sent
  back; its ``functionResponse`` goes without ``id`` and pairs with the call by name and position.
- Finish (D1, D31, D34): ``promptFeedback.blockReason`` and the policy reasons (``SAFETY``,
  ``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII``, ``MODEL_ARMOR``, ``ESCALATION``,
  ``PUP_LIMITED_DISABLED``, ``IMAGE_SAFETY``/``IMAGE_PROHIBITED_CONTENT``/``IMAGE_RECITATION``) → REFUSAL;
  ``STOP`` → TOOL_PROPOSALS with functionCall parts, else FINAL_TEXT; ``MAX_TOKENS``, ``CONTINUATION`` →
  TRUNCATED;
  ``MALFORMED_FUNCTION_CALL`` → API_FAILURE retryable; ``UNEXPECTED_TOOL_CALL``, ``TOO_MANY_TOOL_CALLS``,
  ``LANGUAGE``, ``OTHER`` → API_FAILURE fatal; anything else → API_FAILURE(unknown_stop_reason).
  ``reason`` is the raw value lower-cased.
- Continuation (D8): the candidate's ``content`` exactly as received (part order, ``thoughtSignature`` on
  the part it came on). Only a missing ``role`` is filled in (``model``): a multi-turn request needs it,
  and ``args`` that are no object or hold a number JSON cannot carry go back as ``{"INVALID_JSON": text}``
  (``finite``), as Anthropic's tool_use input does: the call is refused (D5) either way.
  Calls in a content whose role is another → API_FAILURE(malformed_response): they could not be answered.
  So is a ``STOP`` turn whose candidate ``content`` is no object, ``parts`` no list, or a part or its
  ``functionCall`` no object (``shapes.gemini_candidate``; missing or null is none), plain or streamed.
- Results: one ``user`` content holding one ``functionResponse`` part per functionCall part, in call
  order, whose ``response`` is the ``model_result`` object itself (D8). Gemini refuses fewer response
  parts than call parts, so each part of a repeated call id gets that id's one result (D7).
- Tool schema (D9): ``gemini_schema`` (documented there).
- Settings: ``model`` is not part of the body (it is in the URL; transports read it, provenance keeps
  it); ``temperature``/``max_output_tokens`` → ``generationConfig``; ``tool_choice`` → ``toolConfig``;
  ``extra`` is deep-merged last, but its ``tools`` (``{"googleSearch": {}}``, ``{"codeExecution": {}}``)
  are added after the registry's (``base.with_extra_tools``). ``stream`` changes the endpoint, not the body. There is no
  server-side continuation: the whole transcript is replayed.
- Usage (D27): input = ``promptTokenCount`` (cached tokens included) + ``toolUsePromptTokenCount``;
  output = ``candidatesTokenCount`` + ``thoughtsTokenCount``, or ``totalTokenCount`` less the input
  where that is more (``gemini_schema.gemini_usage``); absent, or a count that is no count (-1) → None.
- Streaming: every chunk is a whole GenerateContentResponse holding only new parts. Parts of all chunks
  are concatenated; consecutive plain text parts are merged (a part with a signature never is, and an
  empty unsigned text part, as closing chunks carry, is dropped). Vertex
  ``partialArgs`` calls are assembled linearly (``gemini_schema.PartialArgs``). Terminal: end of stream after a
  chunk with ``finishReason`` (or a blocked prompt); otherwise the stream was cut.
- Errors (D26, D30, D32): ``{"error": {code, message, status, details}}``. 429 is retryable unless the
  details show a quota that waiting cannot fix: a per-day quota (``quotaId`` containing ``PerDay``), a
  quota of zero, or an ``ErrorInfo`` reason about billing. Per-minute quotas are transient and retried.
  ``Retry-After`` wins over ``RetryInfo.retryDelay``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..core.errors import ProtocolViolation
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
    decode_body,
    failure_turn,
    make_call,
    rendered_tool_choice,
    set_once,
    synthetic_response_id,
    with_extra_tools,
)
from .echo import same_call
from .failures import (
    http_retryable,
    map_failure,
    retry_after_seconds,
    says_context_window_exceeded,
)
from .finite import check_object_arguments, invalid_json, unsendable_text
from .gemini_schema import deep_merge, gemini_schema, gemini_usage, google_error_details, token_sum
from .shapes import gemini_candidate

API = "gemini-generate"
PROVIDER = "google"
REVISION = "gemini-generate/1"

_IMAGE_REASONS = ("IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION")
# ESCALATION ("filtered by an escalation rule") and PUP_LIMITED_DISABLED (an account limited for Prohibited
# Use Policy violations) are policy stops too (D1; google-genai types.py FinishReason).
REFUSAL_REASONS = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "MODEL_ARMOR",
        "ESCALATION",
        "PUP_LIMITED_DISABLED",
    }
)
REFUSAL_REASONS |= frozenset(_IMAGE_REASONS)
FATAL_REASONS = frozenset({"UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS", "LANGUAGE", "OTHER"})
RETRYABLE_RPC = frozenset({"UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED", "ABORTED", "RESOURCE_EXHAUSTED"})
_TOOL_CHOICE = {"auto": "AUTO", "required": "ANY", "none": "NONE"}


def _provenance(model: Any) -> Provenance:
    return Provenance(PROVIDER, API, model if isinstance(model, str) else None, REVISION)


def _usage(meta: Any) -> Usage:
    if not isinstance(meta, dict):
        return Usage()
    # D27: promptTokenCount already includes cachedContentTokenCount; thoughts are generated tokens.
    # totalTokenCount beyond the input is output (gemini_usage): also where the counts leave zeros out,
    # so a turn that generated nothing is 0, not unknown, and a budget does not stop for USAGE_UNKNOWN.
    return gemini_usage(
        token_sum(meta, "promptTokenCount", "toolUsePromptTokenCount"),
        token_sum(meta, "candidatesTokenCount", "thoughtsTokenCount"),
        token_sum(meta, "totalTokenCount"),
    )


def _first_candidate(resp: dict[str, Any]) -> dict[str, Any] | None:
    cands = resp.get("candidates")
    if isinstance(cands, list) and cands and isinstance(cands[0], dict):
        return cands[0]
    return None


def finish_reason_text(value: Any) -> str | None:
    """The raw finishReason as text. Vertex answers ``enum-encoding=int`` requests with the enum's number
    (``"finishReason": 1``; opentelemetry-python-contrib and openinference cassettes, recorded): kept
    as its digits, unchanged in meaning (D1), so it reads as the unknown stop reason it is to callbound,
    plain or streamed alike, rather than as no finishReason at all (which a stream takes for a cut)."""
    if isinstance(value, str):
        return value
    return str(value) if type(value) is int else None


def _nameless(parts: list[Any]) -> bool:
    """A functionCall part whose name is no non-empty string."""
    for part in parts:
        fc = part.get("functionCall") if isinstance(part, dict) else None
        if isinstance(fc, dict) and not (isinstance(fc.get("name"), str) and fc["name"]):
            return True
    return False


def turn_from_body(
    resp: dict[str, Any],
    raw_sha256: str,
    *,
    model: str | None = None,
    arg_errors: dict[int, str] | None = None,
    truncated_reason: str | None = None,
    malformed: str | None = None,
) -> ModelTurn:
    """Map a complete GenerateContentResponse (plain body or rebuilt stream) to a ModelTurn.

    ``arg_errors`` overrides the argument error of calls assembled from a stream (by part index);
    ``truncated_reason`` marks a STOP turn whose last streamed call could not be completed (D34);
    ``malformed``: what a stream found of the wrong JSON type (``shapes.gemini_candidate``)."""
    prov = _provenance(model or resp.get("modelVersion"))
    rid = resp.get("responseId")
    rid = rid if isinstance(rid, str) and rid else synthetic_response_id(raw_sha256)
    usage = _usage(resp.get("usageMetadata"))
    cand = _first_candidate(resp)
    content = cand.get("content") if cand else None
    parts = content.get("parts") if isinstance(content, dict) else None
    parts = parts if isinstance(parts, list) else []

    calls: list[ToolCall] = []
    text: list[str] = []
    sent = list(parts)  # the parts sent back: a copy, see non-finite args below
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str) and not part.get("thought"):
            text.append(part["text"])
        fc = part.get("functionCall")
        if not isinstance(fc, dict):
            continue
        cid = fc.get("id") if isinstance(fc.get("id"), str) and fc.get("id") else None
        args = fc.get("args")
        # args is an optional Struct: missing and null (proto3 JSON: not set; google-genai reads both as
        # None and runs the call with {}) are no args. Another non-object value is passed on as text so
        # that it surfaces as an arguments error.
        args = {} if args is None else args
        sent_args = unsendable_text(args)
        if sent_args is not None:
            # 1e400, NaN or Infinity read as inf/nan, or args that are no object: D5 refuses the call,
            # but kept in the content the next request would be refused (a bare Infinity is no JSON;
            # args must be a Struct: a 400 after the turn's other calls ran), and the store could not
            # hold a non-finite turn at all. It goes back as args that never parsed (finite.py), as
            # Anthropic's tool_use input does, and the call gets the text.
            sent[index] = {**part, "functionCall": {**fc, "args": invalid_json(sent_args)}}
        call = make_call(
            PROVIDER, API, rid, cid, fc.get("name"), args if sent_args is None else sent_args, index
        )
        if arg_errors and index in arg_errors:
            call = dataclasses.replace(call, arguments=None, arguments_error=arg_errors[index])
        calls.append(call)

    continuation: tuple[dict[str, Any], ...] = ()
    if isinstance(content, dict) and parts:
        if any(new is not old for new, old in zip(sent, parts, strict=True)):
            content = {**content, "parts": sent}
        continuation = (content if "role" in content else {"role": "model", **content},)

    def turn(
        finish: Finish,
        raw: str | None,
        reason: str | None,
        failure: Failure | None = None,
        refusal: Any = None,
    ) -> ModelTurn:
        return ModelTurn(
            api=API,
            response_id=rid,
            finish=finish,
            raw_stop_reason=raw,
            reason=reason,
            calls=tuple(calls),  # kept for display; only TOOL_PROPOSALS turns execute
            text="".join(text),
            refusal=refusal if isinstance(refusal, str) else None,
            usage=usage,
            continuation=continuation,
            provenance=prov,
            raw_sha256=raw_sha256,
            failure=failure,
        )

    feedback = resp.get("promptFeedback")
    if (
        isinstance(feedback, dict)
        and isinstance(feedback.get("blockReason"), str)
        and feedback["blockReason"]
    ):
        # D31: a blocked prompt wins over anything else in the response.
        block = feedback["blockReason"]
        return turn(Finish.REFUSAL, block, block.lower(), refusal=feedback.get("blockReasonMessage") or block)
    if cand is None:
        return turn(Finish.API_FAILURE, None, "unknown_stop_reason", Failure("status", False))
    raw = finish_reason_text(cand.get("finishReason"))
    if raw in REFUSAL_REASONS:
        return turn(Finish.REFUSAL, raw, raw.lower(), refusal=cand.get("finishMessage") or raw)
    if raw == "STOP":
        malformed = malformed or gemini_candidate(cand)
        if malformed is not None:
            # a content, parts list, part or functionCall of the wrong JSON type (shapes.py): read
            # leniently it was an empty completion or a call lost beside the ones that ran (D1)
            return turn(
                Finish.API_FAILURE, raw, "malformed_response", Failure("status", False, None, None, malformed)
            )
        if truncated_reason:
            return turn(Finish.TRUNCATED, raw, truncated_reason)
        if calls and _nameless(parts):
            # An id-less call is answered by name and position (functionResponse.name): one without a
            # name can never be, so none of the turn's calls runs (issue 3 §3; review round 15, r9).
            failure = Failure("status", False, None, None, "call_without_name")
            return turn(Finish.API_FAILURE, raw, "malformed_response", failure)
        if calls and continuation and continuation[0].get("role") != "model":
            # The content goes back as received (D8), and Gemini takes functionCall parts in a
            # model-role content only (check_request): the calls could never be answered, so the turn
            # fails now, before any handler runs, not on the next request (issue 3 §3; review round 15).
            failure = Failure("status", False, None, None, "content_role_not_model")
            return turn(Finish.API_FAILURE, raw, "malformed_response", failure)
        return turn(Finish.TOOL_PROPOSALS if calls else Finish.FINAL_TEXT, raw, None)
    if raw == "MAX_TOKENS":
        return turn(Finish.TRUNCATED, raw, "max_tokens")
    if raw == "CONTINUATION":
        # "the response reached the per-request token limit, but generation is not yet complete": a
        # length stop (D1). callbound does not send the continuation_token back, so it is not CONTINUE.
        return turn(Finish.TRUNCATED, raw, "continuation")
    if raw == "MALFORMED_FUNCTION_CALL":
        return turn(Finish.API_FAILURE, raw, raw.lower(), Failure("status", True, None, None, raw))
    if raw in FATAL_REASONS:
        return turn(Finish.API_FAILURE, raw, raw.lower(), Failure("status", False, None, None, raw))
    return turn(Finish.API_FAILURE, raw, "unknown_stop_reason", Failure("status", False, None, None, raw))


# ---- errors ---------------------------------------------------------------------------------------


def error_turn(
    err: dict[str, Any],
    raw_sha256: str,
    status: int | None,
    headers: dict[str, str],
    kind: str,
    model: Any = None,
) -> ModelTurn:
    """An API_FAILURE turn for an error body or stream error (D32: raw is the HTTP status if any)."""
    rpc = err.get("status") if isinstance(err.get("status"), str) else None
    code = err.get("code") if isinstance(err.get("code"), int) else None
    delay, detail, permanent = google_error_details(err)
    effective = status if status is not None else code
    if effective is not None:
        retryable = http_retryable(effective, "http") and not permanent
    else:
        retryable = rpc in RETRYABLE_RPC and not permanent
    raw = str(status) if status is not None else (rpc or (str(code) if code is not None else "error"))
    reason = "quota_exceeded" if permanent else ("rate_limited" if effective == 429 else "api_error")
    finish = Finish.API_FAILURE
    if not permanent and says_context_window_exceeded(effective, err.get("message")):
        # INVALID_ARGUMENT "The input token count (1100010) exceeds the maximum number of tokens
        # allowed (1048575).": D1's context window exceeded, TRUNCATED and not retried
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
            kind, retryable, status, rpc, detail, header_delay if header_delay is not None else delay
        ),
        finish=finish,
    )


# Where a tool choice sits in extra, in both spellings the JSON API reads.
_CALLING_CONFIG = [
    (a, b)
    for a in ("toolConfig", "tool_config")
    for b in ("functionCallingConfig", "function_calling_config")
]


def _tool_config(choice: Any) -> dict[str, Any] | None:
    config: dict[str, Any] | None = rendered_tool_choice(
        choice,
        {k: {"functionCallingConfig": {"mode": mode}} for k, mode in _TOOL_CHOICE.items()},
        lambda name: {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}},
    )
    return config


def _parts_of(content: Any, key: str) -> list[dict[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p[key] for p in parts or [] if isinstance(p, dict) and isinstance(p.get(key), dict)]


def _declared_names(tool: dict[str, Any]) -> list[str]:
    decls = tool.get("functionDeclarations", tool.get("function_declarations"))
    return [d["name"] for d in decls or [] if isinstance(d, dict) and isinstance(d.get("name"), str)]


def _real_id(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _check_answers(where: int, calls: list[dict[str, Any]], responses: list[dict[str, Any]]) -> None:
    """One functionResponse part per functionCall part: Gemini refuses fewer (400 INVALID_ARGUMENT "Please
    ensure that the number of function response parts is equal to the number of function call parts of
    the function call turn", google-gemini/gemini-cli issues 5443, 4217, 16984), a repeated id included.
    Calls with ids are answered by id, with their names; id-less calls by name and position."""
    names: dict[str, list[Any]] = {}
    for c in calls:
        cid = _real_id(c.get("id"))
        if cid is not None:
            names.setdefault(cid, []).append(c.get("name"))
    idless = [c.get("name") for c in calls if not _real_id(c.get("id"))]
    answered: dict[str, list[Any]] = {}
    idless_answers: list[Any] = []
    for r in responses:
        if not isinstance(r.get("response"), dict):
            raise ProtocolViolation(f"contents[{where + 1}]: functionResponse.response must be a JSON object")
        rid = _real_id(r.get("id"))
        if rid is None:
            idless_answers.append(r.get("name"))
            continue
        if rid not in names:
            raise ProtocolViolation(f"contents[{where + 1}]: functionResponse for unknown call id {rid!r}")
        if r.get("name") not in names[rid]:
            raise ProtocolViolation(
                f"contents[{where + 1}]: functionResponse {rid!r} names {r.get('name')!r}"
            )
        answered.setdefault(rid, []).append(r.get("name"))
    for cid, want in names.items():
        got = answered.get(cid, [])
        if sorted(map(str, got)) != sorted(map(str, want)):
            raise ProtocolViolation(
                f"call id {cid!r}: its functionCall parts {want} need one functionResponse each, "
                f"got {got} (answered {len(got)} times)"
            )
    if idless_answers != idless:
        raise ProtocolViolation(
            f"contents[{where}]: id-less calls {idless} must be answered by name and position, got {idless_answers}"
        )


class GeminiGenerateAdapter:
    api = API
    provider = PROVIDER
    revision = REVISION

    def render_tools(self, declarations: Sequence[ToolDeclaration]) -> list[dict[str, Any]]:
        if not declarations:
            return []
        decls = [
            {"name": d.name, "description": d.description, "parameters": gemini_schema(d.parameters, d.name)}
            for d in declarations
        ]
        return [{"functionDeclarations": decls}]

    def initial_items(
        self, user_input: str | None, messages: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        items = list(messages)
        if user_input is not None:
            items.append({"role": "user", "parts": [{"text": user_input}]})
        return items

    def turn_items(self, turn: ModelTurn) -> list[dict[str, Any]]:
        return list(turn.continuation)

    def result_items(
        self, turn: ModelTurn, results: Sequence[tuple[ToolCall, dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        if not results:
            return []
        # One functionResponse per functionCall part, in call order: Gemini refuses a request with fewer
        # (_check_answers). Calls sharing an id get one result (D7: the DUPLICATE_CALL_ID error), so
        # each of those parts is answered with it, under its own name.
        by_id = {call.call_id: model_result for call, model_result in reversed(results)}
        own = {call.call_id for call in turn.calls}
        answers = [(c, by_id[c.call_id]) for c in turn.calls if c.call_id in by_id]
        answers += [(c, r) for c, r in results if c.call_id not in own]  # a call the turn does not list
        parts = []
        for call, model_result in sorted(answers, key=lambda r: r[0].output_index):
            response: dict[str, Any] = {"name": call.name}
            if not call.synthetic_id:  # D7: a made-up id is never sent; Gemini pairs by name and position
                response["id"] = call.call_id
            response["response"] = model_result  # the object itself (D8), not its text
            parts.append({"functionResponse": response})
        return [{"role": "user", "parts": parts}]

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
        # generateContent keeps no server-side state: previous_response_id is ignored and the whole
        # transcript is replayed. ``stream`` selects streamGenerateContent?alt=sse, not a body field.
        body: dict[str, Any] = {"contents": items}
        extra: dict[str, Any] = settings.get("extra") or {}
        if instructions:
            body["systemInstruction"] = {"parts": [{"text": instructions}]}
        tools = with_extra_tools(API, tools, extra, _declared_names)  # extra tools are added
        if tools:
            body["tools"] = tools
        set_once(API, settings, "tool_choice", *_CALLING_CONFIG)
        config = _tool_config(settings.get("tool_choice"))
        if config is not None:
            body["toolConfig"] = config
        generation: dict[str, Any] = {}
        if settings.get("temperature") is not None:
            generation["temperature"] = settings["temperature"]
        if settings.get("max_output_tokens") is not None:
            generation["maxOutputTokens"] = settings["max_output_tokens"]
        if generation:
            body["generationConfig"] = generation
        # Deep merge, so that extra={"generationConfig": {"thinkingConfig": ...}} keeps the temperature.
        deep_merge(body, {k: v for k, v in extra.items() if k != "tools"})
        return body

    def parse_response(self, body: bytes | str | dict[str, Any], *, model: str | None = None) -> ModelTurn:
        data, digest = decode_body(body)
        if isinstance(data, list):
            # streamGenerateContent without alt=sse answers with a JSON array of chunks.
            assembler = self.stream_assembler(model=model)
            for chunk in data:
                assembler.feed(chunk if isinstance(chunk, dict) else {})
            return assembler.finish(digest)
        if not isinstance(data, dict):
            raise ProtocolViolation("a generateContent body must be a JSON object")
        if isinstance(data.get("error"), dict) and "candidates" not in data:
            return error_turn(data["error"], digest, None, {}, "error_body", model)
        return turn_from_body(data, digest, model=model)

    def stream_assembler(
        self, caps: StreamCaps | None = None, *, model: str | None = None
    ) -> StreamAssembler:
        from .gemini_stream import _Assembler  # imported here: gemini_stream imports this module

        return _Assembler(caps or StreamCaps(), model)

    def map_error(self, failure: RawFailure, *, model: str | None = None) -> ModelTurn:
        return map_failure(
            API,
            _provenance(model),
            failure,
            lambda err, digest: error_turn(err or {}, digest, failure.status, failure.headers, "http", model),
        )

    def check_request(self, body: dict[str, Any], previous: ModelTurn | None = None) -> None:
        """Every call of a model content is answered exactly once in the user content right after it;
        the answered turn's model content is echoed unchanged (signatures on the same parts)."""
        contents = body.get("contents")
        if not isinstance(contents, list) or not all(isinstance(c, dict) for c in contents):
            raise ProtocolViolation("a generateContent request needs a contents list of objects")
        for i, content in enumerate(contents):
            calls = _parts_of(content, "functionCall")
            for call in calls:  # a Struct (python-genai FunctionCall.args); a 400 otherwise
                check_object_arguments(call.get("args"), f"contents[{i}]: functionCall.args")
            responses = _parts_of(content, "functionResponse")
            if responses:
                if content.get("role") != "user":
                    raise ProtocolViolation(
                        f"contents[{i}]: functionResponse parts belong in a user-role content"
                    )
                if i == 0 or not _parts_of(contents[i - 1], "functionCall"):
                    raise ProtocolViolation(
                        f"contents[{i}]: functionResponse without the model's calls before it"
                    )
            if calls:
                if content.get("role") != "model":
                    raise ProtocolViolation(
                        f"contents[{i}]: functionCall parts belong in a model-role content"
                    )
                following = contents[i + 1] if i + 1 < len(contents) else None
                if following is None or following.get("role") != "user":
                    raise ProtocolViolation(f"contents[{i}]: its calls are not answered in the next content")
                _check_answers(i, calls, _parts_of(following, "functionResponse"))
        if previous is not None and previous.continuation:
            self._check_echo(contents, previous)

    @staticmethod
    def _check_echo(contents: list[dict[str, Any]], previous: ModelTurn) -> None:
        expected = previous.continuation[0]
        sent = next((c for c in reversed(contents) if c.get("role") == "model"), None)
        want = expected.get("parts") or []
        got = sent.get("parts") if sent is not None else None
        if not isinstance(got, list) or len(got) != len(want):
            raise ProtocolViolation(
                "the answered model content is missing or has a different number of parts"
            )
        for k, (w, g) in enumerate(zip(want, got, strict=True)):
            if (
                isinstance(w, dict)
                and "thoughtSignature" in w
                and (not isinstance(g, dict) or g.get("thoughtSignature") != w["thoughtSignature"])
            ):
                raise ProtocolViolation(f"thoughtSignature of part {k} was not echoed unchanged (D8)")
            if g != w:
                fw, fg = (p.get("functionCall") if isinstance(p, dict) else None for p in (w, g))
                if isinstance(fw, dict) and isinstance(fg, dict):  # name the call and what differs (echo)
                    called = (fg.get("name"), fg.get("args")), (fw.get("name"), fw.get("args"))
                    same_call(
                        f"part {k} of the answered model content", fw.get("id"), "functionCall", *called
                    )
                raise ProtocolViolation(
                    f"part {k} of the answered model content differs from the model's output"
                )
        synthetic = {c.call_id for c in previous.calls if c.synthetic_id}
        for content in contents:
            for r in _parts_of(content, "functionResponse"):
                if _real_id(r.get("id")) in synthetic:  # text only: an object id is unhashable
                    raise ProtocolViolation(f"synthetic call id {r.get('id')!r} was sent to Gemini (D7)")


ADAPTER = GeminiGenerateAdapter()
