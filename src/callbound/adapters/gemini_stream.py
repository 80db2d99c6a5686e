"""Streaming assembly for Gemini generateContent (``gemini-generate``): whole-call chunks, Vertex
``partialArgs`` fragments, text runs and thought signatures kept on the part they came on (D34).
Split from gemini_generate.py, which imports it lazily."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from ..core.model import ProgressCallback
from ..core.types import (
    ArgumentsProgress,
    CallReady,
    CallStarted,
    Failure,
    ModelTurn,
    Progress,
)
from .base import (
    StreamCaps,
    cap_tripped,
    capped,
    compact_json_len,
    failure_turn,
    held_len,
    join_fragments,
    stream_cut_turn,
    too_large_turn,
    utf8_len,
)
from .gemini_generate import (
    API,
    REFUSAL_REASONS,
    _provenance,
    _usage,
    error_turn,
    finish_reason_text,
    turn_from_body,
)
from .gemini_schema import PartialArgs
from .shapes import gemini_candidate
from .sse import JSON_STRING, RawEvent, simple_event, string_value
from .stream import feed_one

_MISSING = object()

# Fast path (see callbound.adapters.stream): a Vertex chunk that carries one string piece of an open
# partialArgs call, in the exact compact shape recorded from the API (WIRE.md 4.7), followed only by
# top-level members feed() either ignores or reads as plain values: usageMetadata holding only
# trafficType (no token counts, so feed() keeps no usage), createTime (unread), modelVersion and
# responseId. Values are JSON_STRING (valid JSON only), so the payload it stands for is known without
# parsing. Groups: 1 jsonPath, 2 stringValue, 3 modelVersion, 4 responseId (each repeated member's
# last value, as the parser keeps the last of duplicate keys). feed() never reads the event name.
_PIECE = (
    r'\{"candidates":\[\{"content":\{"role":"model","parts":\[\{"functionCall":\{"partialArgs":\['
    rf'\{{"jsonPath":"({JSON_STRING})","stringValue":"({JSON_STRING})","willContinue":true\}}'
    r'\],"willContinue":true\}\}\]\}\}\]'
    r"(?:,(?:"
    rf'"usageMetadata":\{{"trafficType":"{JSON_STRING}"\}}'
    rf'|"createTime":"{JSON_STRING}"'
    rf'|"modelVersion":"({JSON_STRING})"'
    rf'|"responseId":"({JSON_STRING})"'
    r"))*\}"
)
_PIECE_DATA = re.compile(_PIECE)
_PIECE_EVENT = simple_event(_PIECE)


class _PartialCall:
    """A call streamed as Vertex ``partialArgs`` (WIRE.md 4.7): the opening part's other keys
    (``thoughtSignature``) stay with it; the values go into a ``PartialArgs`` tree. ``slot`` is its
    place in the assembler's list, ``index`` its position among the parts ``finish()`` emits (what
    errors, byte counts and synthetic ids are keyed by)."""

    def __init__(self, slot: int, index: int, part: dict[str, Any], fc: dict[str, Any]) -> None:
        self.slot = slot
        self.index = index
        self.extra = {k: v for k, v in part.items() if k != "functionCall"}
        self.name = fc.get("name")
        self.id = fc.get("id") if isinstance(fc.get("id"), str) and fc.get("id") else None
        self.args = PartialArgs()

    def finalise(self) -> tuple[dict[str, Any], str | None]:
        args, error = self.args.finalise()
        fc: dict[str, Any] = {"name": self.name}
        if self.id:
            fc["id"] = self.id
        fc["args"] = args
        return {"functionCall": fc, **self.extra}, error


class _TextRun:
    __slots__ = ("fragments", "thought")

    def __init__(self, thought: Any) -> None:
        self.fragments: list[str] = []
        self.thought = thought


def _empty_run(part: object) -> bool:
    """A text run ``finish()`` drops (closing chunks carry ``{"text": ""}``)."""
    return isinstance(part, _TextRun) and not any(part.fragments)


def _candidate_zero(event: dict[str, Any]) -> dict[str, Any] | None:
    """The chunk's candidate 0. With ``candidateCount`` > 1 a stream may carry each candidate in chunks
    of its own, told apart by ``index`` (omitted for 0 in proto JSON, as Vertex chunks do:
    ai__google-stream-tool-call-arguments.chunks.txt); a plain body's turn is its first candidate only
    (turn_from_body), so a candidate whose index is present and not 0 is no part of the streamed turn
    either: its calls must not merge into candidate 0's (review 14)."""
    cands = event.get("candidates")
    for cand in cands if isinstance(cands, list) else ():
        if isinstance(cand, dict):
            index = cand.get("index")
            if index is None or (type(index) is int and index == 0):
                return cand
    return None


def _awaits_result(part: object) -> bool:
    """Code the server runs (``executableCode``): its ``codeExecutionResult`` always follows."""
    return isinstance(part, dict) and "executableCode" in part


# Part fields that carry no content of their own: a part of only these (and an empty text or an empty
# functionCall) after the last finishReason does not make the stream one cut before its end.
_NOT_CONTENT = frozenset({"thoughtSignature", "thought", "partMetadata", "videoMetadata"})


class _Assembler:
    """Streaming assembly for streamGenerateContent chunks (WIRE.md 4.7)."""

    fast_events = _PIECE_EVENT  # see feed_events

    def __init__(self, caps: StreamCaps, model: str | None) -> None:
        self._caps = caps
        self._model = model
        self._rid: str | None = None
        self._model_version: str | None = None
        self._role: Any = "model"
        self._parts: list[dict[str, Any] | _TextRun | _PartialCall] = []
        self._dropped = 0  # empty text runs followed by another part: finish() leaves them out
        self._open: _PartialCall | None = None
        self._call_bytes: dict[int, int] = {}
        self._total = 0
        self._held = 0  # UTF-8 bytes of text parts held: against max_body_bytes
        self._arg_errors: dict[int, str] = {}  # by position in finish()'s part list
        self._truncated: str | None = None
        self._finish: str | None = None
        self._finish_message: Any = None
        # A content part (see _part) came after the last finishReason: that finishReason was not the
        # stream's terminal one (code execution streams carry a STOP mid-stream, see _pending()).
        self._after_finish = False
        self._feedback: dict[str, Any] | None = None
        self._usage: dict[str, Any] | None = None
        self._error: dict[str, Any] | None = None
        self._malformed: str | None = None
        self._wrong_type: str | None = None  # the first content member of the wrong JSON type (shapes.py)
        self._aborted = False
        self._tripped: str | None = None  # the StreamCaps field that tripped (cap_tripped)

    @property
    def aborted(self) -> bool:
        return self._aborted

    def _cid(self, index: int, real: Any) -> str:
        if isinstance(real, str) and real:
            return real
        return f"{self._rid}:{index}" if self._rid else f"#{index}"

    def _position(self) -> int:
        """Position in ``finish()``'s part list of the next part appended. Every text run before it
        is final by then (text after it starts a new run), so the position is its slot minus the
        empty runs before it, which ``finish()`` drops."""
        last = self._parts[-1] if self._parts else None
        return len(self._parts) - self._dropped - _empty_run(last)

    def _append(self, part: dict[str, Any] | _TextRun | _PartialCall) -> None:
        if self._parts and _empty_run(self._parts[-1]):
            self._dropped += 1
        self._parts.append(part)

    def _count(self, index: int, size: int) -> bool:
        self._call_bytes[index] = self._call_bytes.get(index, 0) + size
        self._total += size
        if self._call_bytes[index] > self._caps.max_call_bytes or self._total > self._caps.max_response_bytes:
            return self._abort(cap_tripped(self._call_bytes[index], self._total, self._caps))
        return True

    def _hold(self, text: str) -> bool:
        """Count text held (answer and thoughts) against ``max_body_bytes``: a streamed answer is
        bounded as a plain body is (review round 17, r4 F2). False once over it (aborted)."""
        return self._hold_size(utf8_len(text))

    def _hold_size(self, size: int) -> bool:
        """Count ``size`` bytes held besides call arguments against ``max_body_bytes`` (``_hold``)."""
        self._held += size
        return self._held <= self._caps.max_body_bytes or self._abort("max_body_bytes")

    def _abort(self, cap: str) -> bool:
        """A byte cap tripped: finish() reports TRUNCATED (``_tripped`` says why). Always False."""
        self._aborted = True
        self._tripped = cap
        self._parts.clear()  # stop buffering: nothing of this stream will be used
        self._open = None
        return False

    def feed(self, event: dict[str, Any] | str) -> list[Progress]:
        if not isinstance(event, dict) or self._aborted:
            return []
        if isinstance(event.get("error"), dict):
            self._error = event["error"]
            return []
        if isinstance(event.get("responseId"), str) and not self._rid:
            self._rid = event["responseId"]
        if isinstance(event.get("modelVersion"), str):
            self._model_version = event["modelVersion"]
        if isinstance(event.get("promptFeedback"), dict) and event["promptFeedback"].get("blockReason"):
            self._feedback = event["promptFeedback"]
        meta = event.get("usageMetadata")
        if isinstance(meta, dict) and (
            meta.get("promptTokenCount") is not None or meta.get("candidatesTokenCount") is not None
        ):
            # running totals; Vertex middle chunks carry only trafficType. Counts that are no counts
            # (-1) are kept too, so the turn's usage is unknown, not an earlier chunk's lower total.
            self._usage = meta
        cand = _candidate_zero(event)
        if cand is None:
            return []
        out: list[Progress] = []
        content = cand.get("content")
        # A content, parts list, part or functionCall of the wrong JSON type fails a STOP turn, as in a
        # plain body (shapes.gemini_candidate): anything but a list holds no part.
        self._wrong_type = self._wrong_type or gemini_candidate(cand)
        if isinstance(content, dict):
            self._role = content.get("role", self._role)
            parts = content.get("parts")
            for part in parts if isinstance(parts, list) else ():
                if isinstance(part, dict):
                    out.extend(self._part(part))
                if self._aborted:
                    return []
        finish = finish_reason_text(cand.get("finishReason"))
        if finish is not None:
            self._after_finish = False
            # D31: a refusal wins over everything else in the turn, a later STOP included. Any other
            # reason but STOP is sticky too, fail closed: a stream can carry several finishReasons (a
            # STOP mid-stream in pydantic-ai test_google_model_builtin_code_execution_stream.yaml), and
            # a later STOP must not turn MALFORMED_FUNCTION_CALL or MAX_TOKENS into calls that run
            # (WIRE.md 4.3: do not execute any functionCall present with such a reason). Only a refusal
            # replaces such a reason.
            if self._finish not in REFUSAL_REASONS and (
                self._finish in (None, "STOP") or finish in REFUSAL_REASONS
            ):
                self._finish = finish
                self._finish_message = cand.get("finishMessage")
            if self._open is not None:  # D34: finalised at the finish chunk; it must parse
                out.extend(self._close(at_finish=True))
        return out

    def feed_events(self, events: Sequence[RawEvent], on_progress: ProgressCallback | None) -> None:
        """``feed`` for raw events (see ``callbound.adapters.stream``). A chunk carrying one string
        piece of the open partialArgs call (``_PIECE_EVENT``, or ``_PIECE_DATA`` on a frame's data)
        is read from its match as ``feed`` would read its payload; every other event, and a piece
        with no open call, is decoded and fed whole. Runs once per event, hence inlined."""
        for event in events:
            found = _PIECE_DATA.fullmatch(event[1]) if isinstance(event, tuple) else event
            call = self._open  # None once a byte cap tripped (_count closes it): feed() then ignores all
            if found is None or call is None:
                feed_one(self, event, on_progress)  # decoded and fed whole: the reference path
                continue
            path, piece, model_version, response_id = found.groups()
            # feed()'s order: top-level members first (the call's label uses the response id), then
            # the candidate's role and its one part.
            if response_id is not None and not self._rid:
                self._rid = string_value(found, 4)
            if model_version is not None:
                self._model_version = string_value(found, 3)
            self._role = "model"
            entry = {
                "jsonPath": string_value(found, 1) if "\\" in path else path,
                "stringValue": string_value(found, 2) if "\\" in piece else piece,
                "willContinue": True,
            }
            size = call.args.apply(entry)
            if size and self._count(call.index, size) and on_progress is not None:
                on_progress(ArgumentsProgress(self._cid(call.index, call.id), self._call_bytes[call.index]))

    def _part(self, part: dict[str, Any]) -> list[Progress]:
        # Every part is content but an empty text one (a closing chunk's, signed or not) and the empty
        # functionCall that closes a partialArgs call. feed_events' fast path need not set this: it
        # only extends a call whose opening part came through here after the last finishReason (a
        # finishReason closes the open call).
        # A part holding only metadata (a lone thoughtSignature) is no content either (regression review).
        if any(k not in _NOT_CONTENT and part[k] not in ("", {}) for k in part):
            self._after_finish = True
        if set(part) <= {"text", "thought"} and isinstance(part.get("text"), str):
            if not self._hold(part["text"]):
                return []
            thought = part.get("thought", _MISSING)
            last = self._parts[-1] if self._parts else None
            if not (isinstance(last, _TextRun) and last.thought == thought):
                last = _TextRun(thought)
                self._append(last)
            last.fragments.append(part["text"])
            return []
        fc = part.get("functionCall")
        # Everything a part holds besides a call's arguments counts against max_body_bytes: its text,
        # and its other members as held_len counts them (a thoughtSignature, inlineData, executableCode, a
        # codeExecutionResult): each chunk is under the cap, but not all of them together.
        rest = {k: v for k, v in part.items() if k not in ("text", "functionCall")}
        if rest and not self._hold_size(held_len(rest)):
            return []
        if not isinstance(fc, dict):
            # A text part with other members (a thoughtSignature: WIRE.md 4.6) is kept whole, on its
            # own; its text is answer or thought text all the same (review round 18, b F3).
            if isinstance(part.get("text"), str) and not self._hold(part["text"]):
                return []
            self._append(part)
            return []
        out: list[Progress] = []
        if not fc:  # the empty terminator of a partialArgs call
            return self._close() if self._open is not None else []
        if "name" in fc and self._open is not None:
            out.extend(self._close())  # a new call begins: the previous one ended without a terminator
        index = self._position()  # as turn_from_body() will number it, for ids and errors alike
        if "name" in fc and "partialArgs" not in fc and fc.get("willContinue") is not True:
            cid = self._cid(index, fc.get("id"))
            size = compact_json_len(fc.get("args", {}))  # as base.capped measures the same call
            if not self._count(index, size):
                return []
            self._append(part)
            return [*out, CallStarted(cid, str(fc.get("name"))), ArgumentsProgress(cid, size), CallReady(cid)]
        if "name" in fc:
            self._open = _PartialCall(len(self._parts), index, part, fc)
            self._append(self._open)
            out.append(CallStarted(self._cid(index, self._open.id), str(fc.get("name"))))
        elif self._open is None and "partialArgs" not in fc and fc.get("willContinue") is not True:
            # A whole call without a name (the Gemini API streams each call whole): kept as a plain body
            # keeps it, so the turn fails as call_without_name, not retried, plain or streamed alike
            if self._count(index, compact_json_len(fc.get("args", {}))):
                self._append(part)
            return out
        elif self._open is None:
            self._malformed = "partialArgs arrived without an open call"
            return out
        else:
            self._open.extra.update({k: v for k, v in part.items() if k != "functionCall"})
        call = self._open
        size = call.args.apply_all(fc.get("partialArgs") or [])
        if size:
            if not self._count(call.index, size):
                return []
            out.append(ArgumentsProgress(self._cid(call.index, call.id), self._call_bytes[call.index]))
        if fc.get("willContinue") is not True:
            out.extend(self._close())
        return out

    def _close(self, at_finish: bool = False) -> list[Progress]:
        call = self._open
        assert call is not None
        self._open = None
        part, error = call.finalise()
        self._parts[call.slot] = part
        if error is not None:
            self._arg_errors[call.index] = error
            if at_finish:
                self._truncated = "arguments_incomplete"
        if at_finish and (error is not None or self._finish != "STOP"):
            # No terminator came: the finish chunk ends the call (D34). Its arguments are complete only
            # when they parse and the model stopped itself; a cut string or a MAX_TOKENS (or
            # MALFORMED_FUNCTION_CALL) finish says they are not, and the turn runs no call: no
            # CallReady, which says the provider completed them (docs/reference.md).
            return []
        return [CallReady(self._cid(call.index, call.id))]

    def _pending(self) -> bool:
        """A STOP that was not the stream's end: a code execution stream carries a STOP on a middle chunk,
        the one with the model's second executableCode part, then the codeExecutionResult, the answer and
        a second STOP (pydantic-ai test_google_model_builtin_code_execution_stream.yaml, chunk 8 of 13).
        Cut after that chunk, or after any later one but the last, the stream holds half an answer: it
        ended before its terminal event, so it is cut (issue 3 §4, D26: retried), not a final answer.
        Only a STOP is looked at: every other reason is sticky (feed) and ends the turn anyway."""
        if self._after_finish:
            return True
        kept = [p for p in self._parts if not _empty_run(p)]
        return bool(kept) and _awaits_result(kept[-1])

    def finish(self, raw_sha256: str) -> ModelTurn:
        model = self._model or self._model_version
        prov = _provenance(model)
        # The running usage read so far counts however the stream ended (D27): a cut or failed request
        # that is retried has still been paid for, and token budgets add up every request (D12).
        usage = _usage(self._usage)
        if self._aborted:
            turn = too_large_turn(API, prov, raw_sha256, self._rid, cap=self._tripped)
            return dataclasses.replace(turn, usage=usage)
        if self._error is not None:
            turn = error_turn(self._error, raw_sha256, None, {}, "error_event", model)
            return dataclasses.replace(turn, response_id=self._rid or turn.response_id, usage=usage)
        if self._malformed is not None:
            return failure_turn(
                API, prov, raw_sha256, response_id=self._rid, raw_stop_reason=self._finish,
                reason="malformed_stream", failure=Failure("error_event", True, None, None, self._malformed),
                usage=usage,
            )  # fmt: skip
        if self._feedback is None and (self._finish is None or (self._finish == "STOP" and self._pending())):
            return dataclasses.replace(stream_cut_turn(API, prov, raw_sha256, self._rid), usage=usage)
        parts: list[dict[str, Any]] = []
        for p in self._parts:
            if isinstance(p, _TextRun):
                # a character split into escaped surrogate halves across chunks is put back together
                joined = join_fragments(p.fragments)
                if joined:  # an empty unsigned text part (a closing chunk's) carries nothing
                    parts.append(
                        {"text": joined} if p.thought is _MISSING else {"text": joined, "thought": p.thought}
                    )
            elif isinstance(p, _PartialCall):  # opened after the finish chunk and never closed
                part, error = p.finalise()
                parts.append(part)
                self._arg_errors[p.index] = error or "the call was still open when the stream ended"
                self._truncated = "arguments_incomplete"
            else:
                parts.append(p)
        resp: dict[str, Any] = {"responseId": self._rid, "modelVersion": self._model_version}
        if self._finish is not None or parts:
            cand: dict[str, Any] = {
                "content": {"role": self._role, "parts": parts},
                "finishReason": self._finish,
            }
            if self._finish_message is not None:
                cand["finishMessage"] = self._finish_message
            resp["candidates"] = [cand]
        if self._feedback is not None:
            resp["promptFeedback"] = self._feedback
        if self._usage is not None:
            resp["usageMetadata"] = self._usage
        turn = turn_from_body(
            resp,
            raw_sha256,
            model=model,
            arg_errors=self._arg_errors,
            truncated_reason=self._truncated,
            malformed=self._wrong_type,
        )
        # The counts above trip a cap as the bytes arrive, but take partialArgs strings decoded (a '"'
        # is 1 byte). The plain body's check on the assembled turn counts escapes too, so a response
        # passes the caps streamed only if it would pass them as a plain body (issue 3 §4).
        return capped(turn, self._caps)


# ---- the adapter ----------------------------------------------------------------------------------
