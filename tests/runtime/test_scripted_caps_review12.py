"""ScriptedModel holds every documented response shape to ``StreamCaps.max_body_bytes`` (reference.md,
"Live clients": a response over a cap ends INCOMPLETE(RESPONSE_TOO_LARGE) naming ``max_body_bytes``).

Found by a reviewer: only str/bytes bodies and ``Stream(...)`` were checked; a dict body and a list of
stream events, the shapes the docs' examples use, completed, so a test of the too-large path written
that way passed wrongly.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import callbound as cb
from callbound.adapters.base import StreamCaps
from callbound.testing import FakeClock, ScriptedModel, Stream

from .helpers import final, stream_events


def _shapes() -> dict[str, Any]:
    body = final("r1", "x" * 5000)
    events = stream_events(body)
    return {
        "dict": body,
        "str": json.dumps(body),
        "bytes": json.dumps(body).encode(),
        "event list": events,
        "Stream": Stream("".join(f"data: {json.dumps(e)}\n\n" for e in events)),
    }


@pytest.mark.parametrize("shape", list(_shapes()))
def test_every_shape_is_held_to_max_body_bytes(shape: str) -> None:
    model = ScriptedModel("openai-responses", [_shapes()[shape]], caps=StreamCaps(max_body_bytes=1000))
    out = cb.Runner(model=model, registry=cb.Registry([]), clock=FakeClock()).run_sync(
        "hi", tenant="t", subject="s"
    )
    assert (out.state, out.reason) == (cb.State.INCOMPLETE, "RESPONSE_TOO_LARGE")
    assert out.history[-1].details["error_code"] == "max_body_bytes"


@pytest.mark.parametrize("shape", list(_shapes()))
def test_under_the_cap_every_shape_completes(shape: str) -> None:
    model = ScriptedModel("openai-responses", [_shapes()[shape]], caps=StreamCaps(max_body_bytes=1 << 20))
    out = cb.Runner(model=model, registry=cb.Registry([]), clock=FakeClock()).run_sync(
        "hi", tenant="t", subject="s"
    )
    assert out.state == cb.State.COMPLETED and out.text == "x" * 5000
