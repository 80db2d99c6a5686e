"""ScriptedModel: a response may be a function of the request body, so a script can answer from the
results it was sent (the demo's last turn says whether the refund was submitted, denied or expired)."""

from __future__ import annotations

import json
from typing import Any

import callbound as cb

from .helpers import calls, fc, final, get_order_tool, make


async def test_a_callable_response_reads_the_request_it_answers() -> None:
    seen: list[dict[str, Any]] = []

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        (output,) = [i for i in body["input"] if i.get("type") == "function_call_output"]
        status = json.loads(output["output"])["data"]["status"]
        return final("resp_2", f"The order is {status}.")

    h = make([calls("resp_1", fc("call_1", "get_order", {"order_id": "A1"})), answer], [get_order_tool()])
    out = await h.run()
    assert (out.state, out.text) == (cb.State.COMPLETED, "The order is shipped.")
    assert seen == [h.model.requests[-1]]
    seen[0]["input"].clear()  # its own copy: the function cannot edit the recorded requests
    assert h.model.requests[-1]["input"]
