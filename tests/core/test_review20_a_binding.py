"""Correlation and binding refuse a result record of any shape as an integrity failure, never another
exception (D4, D7, D10); review round 20 (a)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbound.core.binding import (
    CorrelationTable,
    TrustedCall,
    compute_binding,
    make_envelope,
    verify_binding,
    verify_results,
)
from callbound.core.errors import BindingMismatch, CorrelationError
from callbound.core.types import ResultEnvelope, ToolCall, ok_result

TRUSTED = TrustedCall(
    provider="openai",
    api="openai-responses",
    adapter_revision="rev-1",
    response_id="resp_1",
    call_id="call_A",
    tool="refund",
    arguments_json='{"amount":40,"order_id":"A1"}',
    operation_id="op-1",
    tenant="acme",
    subject="user-1",
    handler="shop.tools:refund",
    schema_version="refund-v1",
    policy_revision="policy-7",
    idempotency_key="ik_abc",
    effect="applied",
    producer="handler",
)
CALL = ToolCall("openai", "openai-responses", "resp_1", "call_A", "refund", "{}", {}, None, 0)
ENVELOPE = make_envelope(TRUSTED, ok_result({"refund_id": "rf_1"}))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)


@pytest.mark.parametrize("audit", [None, [], ["call_binding_sha256"], "call_binding_sha256", 7, True])
def test_an_audit_record_that_is_not_an_object_is_a_binding_mismatch(audit: Any) -> None:
    # It raised AttributeError ('list' object has no attribute 'get'), which the runner does not end
    # FAILED(INTEGRITY) for.
    env = dataclasses.replace(ENVELOPE, protected_audit=audit)
    with pytest.raises(BindingMismatch):
        verify_binding(env, TRUSTED)
    with pytest.raises(BindingMismatch):
        verify_results(CorrelationTable([CALL]), [env], {("resp_1", "call_A"): TRUSTED})


@given(json_values.filter(lambda v: not isinstance(v, dict)))
def test_any_non_object_audit_record_is_a_binding_mismatch(audit: Any) -> None:
    with pytest.raises(BindingMismatch):
        verify_binding(dataclasses.replace(ENVELOPE, protected_audit=audit), TRUSTED)


@pytest.mark.parametrize(
    "ids",
    [
        {"call_id": ["call_A"]},
        {"call_id": {"id": "call_A"}},
        {"response_id": ["resp_1"]},
        {"response_id": {"id": "resp_1"}},
        {"call_id": None},
        {"response_id": 1},
    ],
)
def test_a_result_whose_ids_are_not_text_is_a_correlation_error(ids: dict[str, Any]) -> None:
    # A list or an object raised TypeError (unhashable) out of the lookup.
    env = dataclasses.replace(ENVELOPE, **ids)
    with pytest.raises(CorrelationError):
        CorrelationTable([CALL]).match([env])
    with pytest.raises(CorrelationError):
        verify_results(CorrelationTable([CALL]), [ENVELOPE, env], {("resp_1", "call_A"): TRUSTED})


def test_the_untampered_envelope_still_verifies() -> None:
    assert verify_results(CorrelationTable([CALL]), [ENVELOPE], {("resp_1", "call_A"): TRUSTED}) == [ENVELOPE]


BOUND = [f.name for f in dataclasses.fields(TrustedCall)]


@given(field=st.sampled_from(BOUND), value=st.none() | st.text(max_size=8))
def test_the_binding_changes_with_every_bound_field(field: str, value: str | None) -> None:
    if getattr(TRUSTED, field) == value or (field == "arguments_json" and value == "null"):
        return  # the same value (a missing arguments text is bound as the text null)
    try:
        other = dataclasses.replace(TRUSTED, **{field: value})
        changed = compute_binding(other, ENVELOPE.model_result)
    except ValueError:  # a lone surrogate: no canonical form, so nothing is bound to it
        return
    assert changed != compute_binding(TRUSTED, ENVELOPE.model_result)
    with pytest.raises(BindingMismatch):
        verify_binding(ENVELOPE, other)


@given(a=json_values, b=json_values)
def test_results_bind_alike_only_when_they_are_the_same_json(a: Any, b: Any) -> None:
    same = compute_binding(TRUSTED, ok_result(a)) == compute_binding(TRUSTED, ok_result(b))
    assert same == (_tagged(a) == _tagged(b))


def _tagged(value: Any) -> Any:
    """JSON equality: true is not 1, key order does not matter."""
    if isinstance(value, bool) or value is None:
        return ("lit", value)
    if isinstance(value, int | float):
        return ("num", float(value))
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("arr", tuple(_tagged(v) for v in value))
    return ("obj", frozenset((k, _tagged(v)) for k, v in value.items()))


def test_a_result_moved_to_the_same_call_id_of_another_response_is_refused() -> None:
    # D7: results are keyed by (response_id, call_id); providers reuse call ids across responses.
    other = dataclasses.replace(TRUSTED, response_id="resp_2")
    moved = ResultEnvelope("resp_2", "call_A", ENVELOPE.model_result, ENVELOPE.protected_audit)
    table = CorrelationTable([dataclasses.replace(CALL, response_id="resp_2")])
    with pytest.raises(BindingMismatch):
        verify_results(table, [moved], {("resp_2", "call_A"): other})
