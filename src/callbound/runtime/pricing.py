"""Pricing model turns for the cost budget (D12, D27).

A turn is priced with the price of the model the *operation* asks for (its saved settings), from the
price table of the runner driving it now. The operation's saved budgets are the ones that bind: an
operation created with ``Budgets(max_cost=...)`` and then resumed by another runner (a worker,
``callbound resume``, the approver's service) whose table has no price for that model would otherwise
spend without its cost ever being counted, so its limit could never trip. Such a drive is refused with
``UsageError`` before any request is sent; the operation stays as it was saved, and resumes once a
runner with the price (``prices=``, or ``App.runner_options["prices"]``) drives it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.errors import UsageError
from ..core.guards import Budgets
from .outcome import Price


def price_for(prices: Mapping[str, Price], settings: Mapping[str, Any]) -> Price | None:
    """The price of the model named in ``settings``, or None (no name, or not in the table)."""
    model = settings.get("model")
    return prices.get(model) if isinstance(model, str) else None


def required_price(
    prices: Mapping[str, Price],
    budgets: Budgets,
    settings: Mapping[str, Any],
    operation_id: str | None = None,
) -> Price | None:
    """``price_for``, raising ``UsageError`` when ``budgets`` set ``max_cost`` and there is no price:
    an unpriced turn adds nothing to the cost, so the limit would never trip (D12)."""
    price = price_for(prices, settings)
    if price is None and budgets.max_cost is not None:
        model = settings.get("model")
        whose = "Budgets.max_cost is set"
        if operation_id is not None:
            whose = f"operation {operation_id} was created with Budgets(max_cost={budgets.max_cost})"
        if not isinstance(model, str):
            raise UsageError(f"{whose} but settings['model'] names no model, so no price applies (D12)")
        raise UsageError(
            f"{whose} but this runner has no price for model {model!r}; pass "
            f"prices={{{model!r}: Price(...)}} to the Runner (App.runner_options for workers and "
            "`callbound resume`) so every model turn is priced (D12)"
        )
    return price
