"""A model turn the store can hold: no number JSON cannot carry (D4, D8, D18).

The adapters read provider bodies leniently (``core.arguments.loads_body``), as Python's json module
does: ``NaN``, ``Infinity`` and a literal such as ``1e400`` (valid JSON, but no double holds it) become
float NaN or infinity. The turn keeps the provider's items as received (D8) to save them (C1, D18) and
to send them back; JSON has no form for those values, so every store refused the commit, and a
StoreError escaped ``run`` after the paid request as if the store were down, the operation left
MODEL_REQUESTED for each resume to pay for the same response again (review round 18, c F2). A logprob
of a message item, a citation's score or a Retry-After of ``inf`` was enough.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace

from ..adapters.finite import has_non_finite
from ..core.types import Failure, Finish, ModelTurn

# A turn whose items go back to the provider (D8): its continuation must be JSON.
_RESENT = (Finish.TOOL_PROPOSALS, Finish.CONTINUE)


def storable_turn(turn: ModelTurn) -> ModelTurn:
    """``turn``, or the same turn where what no JSON can carry is dealt with:

    - a turn whose continuation (or a call's object arguments) holds a non-finite number and would run
      calls or be resent fails: API_FAILURE(malformed_response), ``error_code`` ``non_finite_number``,
      not retried, its calls and continuation dropped, its text and usage kept (D27), as
      ``adapters.base.readable_turn`` does for a lone surrogate;
    - any other turn (an answer, a refusal, a cut, a failure) keeps what it is and drops only its
      continuation, which nothing sends back;
    - a Retry-After of infinity is kept as the longest finite wait (the retry never fits the deadline,
      D26), NaN or a negative infinity as none."""
    failure = turn.failure
    if failure is not None and failure.retry_after_s is not None and not math.isfinite(failure.retry_after_s):
        wait = sys.float_info.max if failure.retry_after_s == math.inf else None
        turn = replace(turn, failure=replace(failure, retry_after_s=wait))
    objects = [c.arguments_raw for c in turn.calls if not isinstance(c.arguments_raw, str)]
    if not has_non_finite(turn.continuation) and not has_non_finite(objects):
        return turn
    if turn.finish not in _RESENT:
        return replace(turn, continuation=())
    status = turn.failure.status if turn.failure is not None else None
    return replace(
        turn,
        finish=Finish.API_FAILURE,
        reason="malformed_response",
        calls=(),
        continuation=(),
        failure=Failure("status", False, status, None, "non_finite_number"),
    )
