"""Calendar helpers: month arithmetic and half-open date windows."""

from __future__ import annotations

import datetime as dt

from rap_benchmark.core.errors import InputError


def parse_date(value: str | dt.date) -> dt.date:
    """Parse ``YYYY-MM-DD`` (or pass a date through); raise InputError (a ValueError) naming the bad value."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value)[:10])
    except ValueError as exc:
        raise InputError(f"not a YYYY-MM-DD date: {value!r}") from exc


def add_months(day: dt.date, months: int) -> dt.date:
    """Shift a first-of-month (or any day <= 28) date by whole months."""
    if day.day > 28:
        raise ValueError(f"add_months needs a day <= 28, got {day}")
    total = day.year * 12 + (day.month - 1) + months
    return dt.date(total // 12, total % 12 + 1, day.day)


def window(origin: dt.date, months_before: int, months_after: int) -> tuple[dt.date, dt.date]:
    """The half-open window [origin - months_before, origin + months_after)."""
    return add_months(origin, -months_before), add_months(origin, months_after)


def to_days(day: dt.date) -> int:
    """Days since 1970-01-01 (the int32 encoding used in columnar artifacts)."""
    return (day - dt.date(1970, 1, 1)).days


def from_days(days: int) -> dt.date:
    return dt.date(1970, 1, 1) + dt.timedelta(days=int(days))
