"""``HttpModel(headers=...)`` is checked when the model is made (review round 21, c).

A value that is not a string raised TypeError, a non-ASCII one UnicodeEncodeError, out of every request;
a name or value no HTTP header can carry (a space in the name, a newline or whitespace at an end of the
value) failed every request as a connection error. Each was retried (``Budgets.max_retries``) until
FAILED after the operation was stored, as a wrong ``timeout_s`` or ``base_url`` was before
``check_client_args``. Now a ``UsageError`` naming the header, never its value (it may be a key).
"""

from __future__ import annotations

from typing import Any

import pytest

from callbound.core.errors import UsageError
from callbound.transports.http import HttpModel

SECRET = "sk-secret-value"


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({"x-token": SECRET + "é"}, "the value of x-token holds a non-ASCII character"),
        ({"x-token": SECRET + "\n"}, "the value of x-token ends with a newline"),
        ({"x-token": " " + SECRET}, "the value of x-token starts or ends with whitespace"),
        ({"x-token": SECRET + "\r\nx-injected: 1"}, "the value of x-token holds a control character"),
        ({"x-token": 5}, "x-token takes a string or bytes value, not int"),
        ({"x token": "v"}, "header name 'x token' that is no HTTP field name"),
        ({"": "v"}, "header name '' that is no HTTP field name"),
        ({"x-tökén": "v"}, "no HTTP field name"),
        ("x-a: v", "takes a dict of header names to values, not str"),
    ],
)
def test_a_header_no_request_can_carry_is_a_usage_error_when_the_model_is_made(
    headers: Any, says: str
) -> None:
    with pytest.raises(UsageError, match=r"HttpModel\(headers=\.\.\.\)") as caught:
        HttpModel("openai-chat", base_url="http://127.0.0.1:9", api_key="k", headers=headers)
    assert says in str(caught.value)
    assert SECRET not in str(caught.value)


def test_good_headers_are_sent_as_given() -> None:
    model = HttpModel(
        "anthropic-messages",
        base_url="http://127.0.0.1:9",
        api_key="k",
        headers={"anthropic-beta": "tools-2024-04-04", "X-Trace_Id.1": "a b c"},
    )
    sent = model.request_headers(stream=False)
    assert sent["anthropic-beta"] == "tools-2024-04-04" and sent["X-Trace_Id.1"] == "a b c"
    pairs = HttpModel("openai-chat", base_url="http://127.0.0.1:9", api_key="k", headers=[("x-a", "v")])  # type: ignore[arg-type]
    assert pairs.request_headers(stream=False)["x-a"] == "v"  # pairs were accepted before, and still are
