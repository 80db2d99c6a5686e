"""The Adapter protocol every provider module implements, and helpers they share.

An adapter is pure: it turns provider JSON (plain bodies or stream events) into a ``ModelTurn`` and
core results back into exactly the provider's shape. It never does I/O.

Transcript model: the runner keeps a list of provider-native items (``input`` items, ``messages``,
``contents`` or ``input`` steps, depending on the API). The adapter makes the first items from the
user input, the items that carry a model turn's output back (unchanged, D8), and the items that carry
results; ``build_request`` wraps the list without copying it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, Protocol

from ..core.arguments import loads_body, parse_arguments
from ..core.canonical import canonical_json
from ..core.errors import ProtocolViolation, UsageError
from ..core.registry import ToolDeclaration
from ..core.types import Failure, Finish, ModelTurn, Progress, Provenance, RawFailure, ToolCall, Usage

DEFAULT_MAX_CALL_BYTES = 1 << 20  # 1 MiB of argument text per call
DEFAULT_MAX_RESPONSE_BYTES = 8 << 20  # 8 MiB of argument text per response
# 64 MiB: a plain body, or one stream event. A final event (Responses' response.completed) repeats the
# whole response, arguments included, escaped: this leaves room for 8 MiB of arguments several times.
DEFAULT_MAX_BODY_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class StreamCaps:
    """Byte caps on one model response, streamed or plain.

    - ``max_call_bytes`` / ``max_response_bytes``: argument text of one call / of all calls together;
      over either → TRUNCATED(arguments_too_large), no call runs.
    - ``max_body_bytes``: what callbound holds of one response at once: a plain body, or one stream
      event not yet complete (its data lines and an unfinished line, counted in characters, each at
      least a byte), and what a stream has sent in all besides arguments: its text (answer, refusal,
      reasoning; UTF-8 bytes) and, on Anthropic and Gemini, every other piece it holds (``held_len``;
      docs/stop-reasons.md), on openai-responses every done item other than a call or message, and
      on openai-chat every content part other than text and a ``reasoning_details`` entry's
      encrypted data or signature. Over it the transport stops reading → TRUNCATED(response_too_large), no
      call runs, not retried: a server that sends one endless line or event, or endless text deltas,
      cannot make callbound buffer it all.

    The turn of a trip says which setting to raise: its ``failure`` (kind ``byte_cap``) has the field's
    name as ``error_code`` (``cap_tripped``), which a run copies into the operation's history.
    """

    max_call_bytes: int = DEFAULT_MAX_CALL_BYTES
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    def __post_init__(self) -> None:
        for name in ("max_call_bytes", "max_response_bytes", "max_body_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageError(f"StreamCaps.{name} must be a whole number of bytes >= 0, not {value!r}")


class StreamAssembler(Protocol):
    """Assembles one streamed response. ``feed`` takes one decoded event payload (a dict, or the
    string ``"[DONE]"``); ``finish`` is called when the stream ends, however it ended."""

    @property
    def aborted(self) -> bool:
        """True once a byte cap tripped: the caller may stop reading; finish() says TRUNCATED."""
        ...

    def feed(self, event: dict[str, Any] | str) -> list[Progress]: ...

    def finish(self, raw_sha256: str) -> ModelTurn: ...


class Adapter(Protocol):
    api: str
    provider: str
    revision: str

    def render_tools(self, declarations: Sequence[ToolDeclaration]) -> list[dict[str, Any]]:
        """Provider tool declarations (D9). Raises ``UnsupportedSchema`` for what it cannot express."""
        ...

    def initial_items(
        self, user_input: str | None, messages: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Prior messages (provider-native, D25) followed by the user's input."""
        ...

    def turn_items(self, turn: ModelTurn) -> list[dict[str, Any]]:
        """The items that carry a turn's output back unchanged (D8)."""
        ...

    def result_items(
        self, turn: ModelTurn, results: Sequence[tuple[ToolCall, dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """Items carrying ``model_result`` for each call of ``turn``, in the order given (D8)."""
        ...

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
        """The request body. ``previous_response_id`` with ``new_items`` continues server-side where
        the API supports it; otherwise the whole transcript ``items`` is replayed."""
        ...

    def parse_response(
        self, body: bytes | str | dict[str, Any], *, model: str | None = None
    ) -> ModelTurn: ...

    def stream_assembler(
        self, caps: StreamCaps | None = None, *, model: str | None = None
    ) -> StreamAssembler: ...

    def map_error(self, failure: RawFailure, *, model: str | None = None) -> ModelTurn:
        """Classify a transport failure (D26, D30, D32) into an API_FAILURE or TRUNCATED turn."""
        ...

    def check_request(self, body: dict[str, Any], previous: ModelTurn | None = None) -> None:
        """Raise ``ProtocolViolation`` if the body breaks the provider's rules (D24). ``previous`` is
        the turn this request answers (needed where the API continues server-side)."""
        ...


# ---- helpers shared by adapters -------------------------------------------------------------------


def _not_serializable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The text of ``json.dumps(body, ensure_ascii=False, separators=(",", ":"))``, from a C encoder built
# once (``json.dumps`` builds one per call, which cost more than encoding a small body; a body handed
# over as a dict is digested on every model turn). No circular-reference markers: the C encoder leaves
# them behind after an error, so a reused one would misreport later bodies; a cycle ends in
# RecursionError instead, turned into json.dumps's ValueError below.
_wire_encode = (
    c_make_encoder(None, _not_serializable, encode_basestring, None, ":", ",", False, False, True)
    if c_make_encoder is not None
    else None
)


def body_bytes(body: bytes | str | dict[str, Any]) -> bytes:
    """The bytes a body is digested as: as received, or a dict's compact JSON (key order kept)."""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        text = body
    elif _wire_encode is None:  # pragma: no cover - an interpreter without the _json accelerator
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    else:
        try:
            text = "".join(_wire_encode(body, 0))
        except RecursionError:
            raise ValueError("Circular reference detected (or a body nested too deep)") from None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # a lone surrogate (a "\ud800" escape decoded by whoever built the dict or str) has no UTF-8
        # form: written as the escape it came as, which JSON reads back as the same string
        return text.encode("utf-8", "backslashreplace")


def decode_body(body: bytes | str | dict[str, Any]) -> tuple[Any, str]:
    """(parsed JSON, sha256 of the bytes as received). Duplicate keys are marked, not merged."""
    raw = body_bytes(body)
    digest = hashlib.sha256(raw).hexdigest()
    if isinstance(body, dict):
        return body, digest
    try:
        return loads_body(raw), digest
    except (ValueError, RecursionError) as exc:
        raise ProtocolViolation(f"response body is not JSON: {exc}") from exc


def text_or_none(value: Any) -> str | None:
    """``value`` if it is a string, else None: a provider field read as a name (a type, an id) before a
    set or dict lookup, where a list or object where the name goes would raise TypeError (unhashable)."""
    return value if isinstance(value, str) else None


def synthetic_response_id(raw_sha256: str) -> str:
    """D7: a missing response id becomes ``cb:`` + 16 hex digits of the raw bytes' SHA-256."""
    return "cb:" + raw_sha256[:16]


def make_call(
    provider: str,
    api: str,
    response_id: str,
    call_id: str | None,
    name: Any,
    arguments_raw: str | dict[str, Any] | None,
    output_index: int,
) -> ToolCall:
    """Build a ToolCall with D5 parsing and D7 synthetic ids."""
    synthetic = not call_id
    cid = call_id if call_id else f"{response_id}:{output_index}"
    arguments, error = parse_arguments(arguments_raw)
    return ToolCall(
        provider=provider,
        api=api,
        response_id=response_id,
        call_id=cid,
        name=name if isinstance(name, str) else json.dumps(name),
        arguments_raw=arguments_raw,
        arguments=arguments,
        arguments_error=error,
        output_index=output_index,
        synthetic_id=synthetic,
    )


_SURROGATE = re.compile("[\ud800-\udfff]")


def rendered_tool_choice(choice: Any, plain: dict[str, Any], named: Callable[[str], Any]) -> Any | None:
    """The runtime's ``tool_choice`` setting in one API's shape: None when unset, ``plain[choice]`` for
    "auto" / "required" / "none" (the keys the API takes), ``named(name)`` for ``{"name": tool}``.
    Anything else is a ``UsageError`` raised when the runner is built (D4, D9); provider-specific forms
    go through ``settings["extra"]``."""
    if choice is None:
        return None
    if (
        isinstance(choice, dict)
        and set(choice) == {"name"}
        and isinstance(choice["name"], str)
        and choice["name"]
    ):
        return named(choice["name"])
    if isinstance(choice, str) and choice in plain:
        return plain[choice]
    raise UsageError(f"tool_choice {choice!r} is not one of 'auto', 'required', 'none' or {{'name': ...}}")


def set_once(api: str, settings: dict[str, Any], setting: str, *paths: tuple[str, ...]) -> None:
    """``settings[setting]`` and the same option in ``settings["extra"]`` (at any of ``paths``) may not
    both be set: extra is merged last and would replace the checked setting (a provider's own
    ``tool_choice`` form over ``settings["tool_choice"]``; review round 16). A ``UsageError``, raised
    when the runner is built (its throwaway request), before anything is stored (D4, D25)."""
    extra = settings.get("extra")
    if settings.get(setting) is None or not isinstance(extra, dict):
        return
    for path in paths:
        found: Any = extra
        for key in path:
            found = found.get(key) if isinstance(found, dict) else None
        if found is not None:
            where = "".join(f"[{key!r}]" for key in path)
            raise UsageError(
                f"{api}: settings[{setting!r}] and settings['extra']{where} set the same option; keep one"
            )


def utf8_len(text: str) -> int:
    """UTF-8 bytes of streamed argument text, for the byte caps. Never raises: a lone surrogate (one
    half of a character outside the BMP whose escaped halves arrived in two deltas) counts 2 bytes,
    half of the character's 4."""
    if text.isascii():
        return len(text)
    size = len(text.encode("utf-8", "surrogatepass"))
    return size - len(_SURROGATE.findall(text)) if size != len(text) else size


def join_fragments(fragments: list[str]) -> str:
    """Join argument deltas once (linear). A character outside the BMP whose escaped surrogate halves
    arrived in two deltas is put back together; a surrogate with no partner stays, and the arguments'
    parser rejects it (INVALID_ARGUMENTS), as for any text that is not Unicode."""
    text = "".join(fragments)
    if not text.isascii() and _SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def result_text(model_result: dict[str, Any]) -> str:
    """Results go on the wire as canonical JSON text of model_result (D8)."""
    return canonical_json(model_result)


def failure_turn(
    api: str,
    provenance: Provenance,
    raw_sha256: str,
    *,
    response_id: str | None,
    raw_stop_reason: str | None,
    reason: str,
    failure: Failure,
    finish: Finish = Finish.API_FAILURE,
    text: str = "",
    usage: Usage | None = None,
) -> ModelTurn:
    return ModelTurn(
        api=api,
        response_id=response_id or synthetic_response_id(raw_sha256),
        finish=finish,
        raw_stop_reason=raw_stop_reason,
        reason=reason,
        calls=(),
        text=text,
        refusal=None,
        usage=usage or Usage(),
        continuation=(),
        provenance=provenance,
        raw_sha256=raw_sha256,
        failure=failure,
    )


def _not_unicode(value: Any) -> bool:
    """A string holding a surrogate code point: what a lone ``\\ud800`` escape in provider JSON decodes
    to. It has no UTF-8 form, so RFC 8785 cannot hash it (``canonical._check_string``)."""
    return isinstance(value, str) and not value.isascii() and _SURROGATE.search(value) is not None


def readable_turn(turn: ModelTurn) -> ModelTurn:
    """``turn``, or, when a string that names it is not Unicode, the same turn with that string escaped,
    or API_FAILURE(malformed_response) (``error_code`` ``lone_surrogate``, not retried) when it would have
    run calls or been resent (issue 3 §5, D1, D4).

    The strings that name a turn are the ones the audit chain hashes (D20: the ``model_turn`` entry, the
    transitions, approvals and results name the turn by them): the response id, the raw stop reason and
    reason, the failure's error type and code, and every call's id and name. A lone surrogate in one made
    RFC 8785 refuse the entry: CanonicalizationError out of run/resume after the paid request, the
    operation left MODEL_REQUESTED, and every resume paid for the same response again. A turn whose
    calls run or that pauses is resent (D8): its continuation must hold none either, for JSON encoders
    that write UTF-8 (the SDKs' httpx) cannot send one, and the loop would stop after the handlers paid.
    Text, refusal and arguments are not otherwise checked: text is kept as sent (stores write it
    escaped), arguments are refused per call (INVALID_ARGUMENTS), and deltas may split a surrogate pair
    (``join_fragments``), so a single event proves nothing; only the finished turn is judged.

    A failure, truncation or refusal stays what it was (a 429 is still retried, D26), its naming strings
    escaped (``\\ud800``) and its calls dropped; any other turn fails: it keeps its text, refusal and usage
    (D27), loses its calls and continuation (no handler runs, nothing is resent). A response id that is
    not Unicode becomes the D7 synthetic id."""
    failure = turn.failure
    names = (turn.response_id, turn.raw_stop_reason, turn.reason)
    errors = (failure.error_type, failure.error_code) if failure is not None else ()
    resent = turn.finish in (Finish.TOOL_PROPOSALS, Finish.CONTINUE) and _holds_surrogate(turn.continuation)
    if (
        not resent
        and not any(_not_unicode(v) for v in (*names, *errors))
        and not any(
            _not_unicode(c.call_id) or _not_unicode(c.name) or _not_unicode(c.response_id) for c in turn.calls
        )
    ):
        return turn
    rid = synthetic_response_id(turn.raw_sha256) if _not_unicode(turn.response_id) else turn.response_id
    if turn.finish in (Finish.API_FAILURE, Finish.TRUNCATED, Finish.REFUSAL):
        return replace(
            turn,
            response_id=rid,
            raw_stop_reason=_escaped(turn.raw_stop_reason),
            reason=_escaped(turn.reason),
            calls=(),
            failure=None
            if failure is None
            else replace(
                failure, error_type=_escaped(failure.error_type), error_code=_escaped(failure.error_code)
            ),
        )
    return replace(
        turn,
        response_id=rid,
        finish=Finish.API_FAILURE,
        raw_stop_reason=_escaped(turn.raw_stop_reason),
        reason="malformed_response",
        calls=(),
        continuation=(),
        failure=Failure(
            "status",
            False,
            failure.status if failure is not None else None,
            _escaped(failure.error_type) if failure is not None else None,
            "lone_surrogate",
        ),
    )


def _holds_surrogate(value: Any) -> bool:
    """Any string in ``value`` (nested dicts and lists, keys too) that is not Unicode. A walk with its
    own stack, not recursion: JSON nested a few hundred levels deep is valid provider output, and a
    RecursionError here escaped ``run`` after the paid request (D4)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _not_unicode(item):
                return True
        elif isinstance(item, dict):
            if any(_not_unicode(k) for k in item):
                return True
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def _escaped(value: str | None) -> str | None:
    """``value`` with each surrogate code point written as its JSON escape (``\\ud800``)."""
    if not _not_unicode(value):
        return value
    assert value is not None
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def stream_cut_turn(api: str, provenance: Provenance, raw_sha256: str, response_id: str | None) -> ModelTurn:
    """A stream that ended or broke before its terminal event (D1, D26): TRUNCATED, retryable, no calls."""
    return failure_turn(
        api,
        provenance,
        raw_sha256,
        response_id=response_id,
        raw_stop_reason=None,
        reason="stream_interrupted",
        failure=Failure(kind="stream_cut", retryable=True),
        finish=Finish.TRUNCATED,
    )


def cap_tripped(call_bytes: int, total_bytes: int, caps: StreamCaps) -> str:
    """The ``StreamCaps`` field an argument count over the caps tripped: ``max_call_bytes`` when the
    call's ``call_bytes`` are over it (also when the total is over ``max_response_bytes`` at the same
    time), else ``max_response_bytes``. Called once a cap check failed, never on the hot path."""
    return "max_call_bytes" if call_bytes > caps.max_call_bytes else "max_response_bytes"


def _cap_failure(cap: str | None) -> Failure:
    """A byte cap's failure: not retried (D1); ``error_code`` names the ``StreamCaps`` field."""
    return Failure(kind="byte_cap", retryable=False, error_code=cap)


def too_large_turn(
    api: str,
    provenance: Provenance,
    raw_sha256: str,
    response_id: str | None,
    reason: str | None = None,
    *,
    cap: str | None = None,
) -> ModelTurn:
    """A byte cap tripped (D1): TRUNCATED(``reason``), no calls, not retried. ``cap``: the
    ``StreamCaps`` field that tripped (``cap_tripped``, or ``max_body_bytes``), kept as the failure's
    ``error_code`` so the user knows which setting to raise. Without a ``reason``, the cap says it:
    ``response_too_large`` for ``max_body_bytes`` (what a response holds besides arguments, D1),
    ``arguments_too_large`` for the argument caps."""
    if reason is None:
        reason = "response_too_large" if cap == "max_body_bytes" else "arguments_too_large"
    return failure_turn(
        api,
        provenance,
        raw_sha256,
        response_id=response_id,
        raw_stop_reason=None,
        reason=reason,
        failure=_cap_failure(cap),
        finish=Finish.TRUNCATED,
    )


def over_byte_cap(turn: ModelTurn, reason: str, cap: str) -> ModelTurn:
    """``turn`` as TRUNCATED(``reason``) for a byte cap of ``StreamCaps``: no call survives, nothing is
    retried (D1); the raw stop reason, response id, text read so far and usage stay. ``cap``: the
    ``StreamCaps`` field that tripped, kept as the failure's ``error_code``."""
    return replace(
        turn,
        finish=Finish.TRUNCATED,
        reason=reason,
        calls=(),
        continuation=(),
        failure=_cap_failure(cap),
    )


def response_too_large(turn: ModelTurn) -> ModelTurn:
    """A body or stream event went over ``StreamCaps.max_body_bytes``."""
    return over_byte_cap(turn, "response_too_large", "max_body_bytes")


def compact_json_len(value: Any) -> int:
    """UTF-8 bytes of ``value`` as compact JSON text (``separators=(",", ":")``, ``ensure_ascii=False``,
    key order kept): what the streams count for the same arguments. A lone surrogate in a string
    counts as ``utf8_len`` counts it, never raises."""
    if _wire_encode is None:  # pragma: no cover - an interpreter without the _json accelerator
        return utf8_len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    return utf8_len("".join(_wire_encode(value, 0)))


def held_len(item: dict[str, Any]) -> int:
    """UTF-8 bytes a stream holds for a piece given whole (a block or step at its start, a part's members
    besides its text), counted as the deltas that fill such a piece are: a string member by its UTF-8
    bytes, any other value as compact JSON; ``type`` and empty members count nothing. So the usual
    start of a text block (``{"type": "text", "text": ""}``) holds nothing yet, and a stream whose text
    alone fits ``max_body_bytes`` still fits it (review round 19, e F2 follow-up)."""
    size = 0
    for key, value in item.items():
        if key == "type" or value is None or value == "" or value == [] or value == {}:
            continue
        size += utf8_len(value) if isinstance(value, str) else compact_json_len(value)
    return size


def capped(turn: ModelTurn, caps: StreamCaps | None, body_bytes: int | None = None) -> ModelTurn:
    """A plain (not streamed) response gets the byte caps the same response would get as a stream: a
    call over ``max_call_bytes``, or calls over ``max_response_bytes`` together, make the turn
    TRUNCATED(arguments_too_large) with no calls, so none of them runs (D1). The raw stop reason,
    text and usage stay; the failure's ``error_code`` names the cap that tripped (``cap_tripped``).
    ``body_bytes``: the body's size, which bounds every argument in it.

    What is measured: argument text (Chat, Responses) as received; a parsed argument object
    (Anthropic ``input``, Gemini ``args``, Interactions ``arguments``) as compact JSON
    (``compact_json_len``), which is what the streams count for the same arguments, so a response
    passes or trips at the same boundary streamed or plain. Two differences stay where a stream sends
    argument text (Anthropic's ``partial_json``, Interactions ``arguments_delta``): it counts the text as
    its deltas carry it, escapes and whitespace included, so ``\\u00e9`` written by the provider counts
    6 bytes there and ``é`` 2 here, and ``{"location": "Paris"}`` 21 there and 20 here. That running
    count is what bounds what a stream buffers before its call is complete, and whitespace is buffered
    like any byte (left out, a stream of spaces could grow without bound; stripped, ``tru e`` would
    read as ``true``), so it counts. Vertex ``partialArgs`` carry decoded values, so a ``"`` in one
    counts 1 byte there and 2 (its escape) here. The streams with parsed arguments also apply this
    check to their finished turn: the larger count decides, so a stream never passes a call that the
    same response plain would trip on; it may trip a few bytes earlier.

    Only a turn whose calls would run (TOOL_PROPOSALS) is checked: a refusal, a failure or a length stop
    keeps its own finish and reason (D31: a refusal wins over everything else in the turn; a failed
    response stays retryable where its status says so), and none of its calls runs anyway."""
    if turn.finish is not Finish.TOOL_PROPOSALS or not turn.calls:
        return turn
    caps = caps or StreamCaps()
    if body_bytes is not None and body_bytes <= min(caps.max_call_bytes, caps.max_response_bytes):
        return turn
    total = 0
    for call in turn.calls:
        raw = call.arguments_raw
        size = utf8_len(raw) if isinstance(raw, str) else compact_json_len(raw)
        total += size
        if size > caps.max_call_bytes or total > caps.max_response_bytes:
            return over_byte_cap(turn, "arguments_too_large", cap_tripped(size, total, caps))
    return turn


def with_extra_tools(
    api: str, tools: list[dict[str, Any]], extra: dict[str, Any], names: Callable[[dict[str, Any]], list[str]]
) -> list[dict[str, Any]]:
    """The request's tools: the registry's rendered ``tools``, then ``settings["extra"]["tools"]`` (hosted,
    server or built-in tools: web_search, code_execution, ``{"googleSearch": {}}``), added after them,
    never in their place (a merged ``extra`` used to drop every registry tool). They must be a list of
    objects, and none may take a registry tool's name (``names`` reads a tool's names in the API's shape):
    a call to it would be ambiguous. Checked when the Runner is built (``runtime.checks``)."""
    if "tools" not in extra:
        return tools
    added = extra["tools"]
    if not isinstance(added, list) or not all(isinstance(t, dict) for t in added):
        raise UsageError(f"{api}: settings['extra']['tools'] must be a list of tool objects, not {added!r}")
    clash = sorted({n for t in added for n in names(t)} & {n for t in tools for n in names(t)})
    if clash:
        raise UsageError(f"{api}: settings['extra']['tools'] declares {clash}, a registry tool's name")
    return [*tools, *added]


def answered_chain(chained: Any, previous: ModelTurn | None, items: list[Any]) -> Any:
    """The chain id (``previous_response_id``, ``previous_interaction_id``) a request's answers are
    checked against in ``check_request``: None when it chains to an older response (a seed) while the
    turn being answered is replayed in full, which is stateless replay on top of the seed's context:
    the server knows every call from the input itself, so the checks read the input alone."""
    if (
        chained
        and previous is not None
        and chained != previous.response_id
        and all(item in items for item in previous.continuation)
    ):
        return None
    return chained
