"""Calendar helpers: month arithmetic and half-open date windows."""

from __future__ import annotations

import datetime as dt
import re
from functools import lru_cache

from rap_benchmark.core.errors import InputError

_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_date(value: str | dt.date) -> dt.date:
    """Parse ``YYYY-MM-DD`` exactly (or pass a date through); raise InputError (a ValueError) naming the
    bad value. One format: ``2025-1-1``, ``20250101`` and ``2025-06-01T00:00:00`` are all refused."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if type(value).__name__ == "datetime64":  # numpy dates from columnar tables
        value = str(value)[:10]
    if isinstance(value, str) and (day := _iso_day(value)) is not None:
        return day
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    raise InputError(f"not a YYYY-MM-DD date: {shown}")


@lru_cache(maxsize=1 << 14)
def _iso_day(text: str) -> dt.date | None:
    """The date ``text`` spells as ``YYYY-MM-DD``, or None. Remembered: a corpus has far fewer
    distinct dates than papers, and its readers ask once per paper."""
    if not _ISO_DAY.fullmatch(text):
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return None


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
