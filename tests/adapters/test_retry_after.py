"""Retry-After in every form RFC 9110 allows (D26): seconds, and HTTP dates with or without a zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from callbound.adapters.failures import (
    retry_after_seconds,
)


def test_seconds_and_milliseconds() -> None:
    assert retry_after_seconds({"Retry-After": "7"}) == 7.0
    assert retry_after_seconds({"retry-after-ms": "1500"}) == 1.5
    assert retry_after_seconds({"Retry-After": "-3"}) == 0.0
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"Retry-After": "soon"}) is None


def _in(seconds: int) -> datetime:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).replace(microsecond=0)


@pytest.mark.parametrize(
    "render",
    [
        lambda d: format_datetime(d, usegmt=True),  # IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
        lambda d: d.strftime("%A, %d-%b-%y %H:%M:%S GMT"),  # RFC 850
        lambda d: d.strftime("%a %b %d %H:%M:%S %Y"),  # asctime: no zone at all
        lambda d: d.strftime("%a, %d %b %Y %H:%M:%S -0000"),  # "-0000": UTC, zone unknown
    ],
)
def test_http_dates_in_every_accepted_format(render: object) -> None:
    when = _in(120)
    got = retry_after_seconds({"Retry-After": render(when)})  # type: ignore[operator]
    assert got is not None and 100 <= got <= 121


def test_a_date_in_the_past_means_now() -> None:
    assert retry_after_seconds({"Retry-After": format_datetime(_in(-600), usegmt=True)}) == 0.0
