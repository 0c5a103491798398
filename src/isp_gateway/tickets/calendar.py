"""Business days for ticket end dates: weekends, public holidays and operator extras skipped."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timedelta
from typing import Any

import holidays


class BusinessCalendar:
    """Working days of one country plus extra closed dates (e.g. a company holiday)."""

    def __init__(self, country: str, extra_holidays: Iterable[date | str] = ()) -> None:
        self.country = country.upper()
        self.extra = {d if isinstance(d, date) else date.fromisoformat(d) for d in extra_holidays}
        # expand=True (the default): each year is computed the first time a date reaches it.
        self._holidays: Any = holidays.country_holidays(self.country, years=[])

    def is_business_day(self, day: date) -> bool:
        if day.weekday() >= 5 or day in self.extra:
            return False
        return day not in self._holidays

    def add_business_days(self, start: datetime, days: int) -> datetime:
        """Step forward one calendar day at a time, count each business day, stop at the
        Nth; the clock time (and time zone) of `start` is kept. N = 0 is `start` itself."""
        if days < 0:
            raise ValueError("days must be >= 0")
        current, counted = start.date(), 0
        while counted < days:
            current += timedelta(days=1)
            if self.is_business_day(current):
                counted += 1
        return datetime.combine(current, start.timetz())


def add_business_days(
    start: datetime, days: int, country: str, extra_holidays: Iterable[date | str] = ()
) -> datetime:
    """One-shot form of `BusinessCalendar.add_business_days`."""
    return BusinessCalendar(country, extra_holidays).add_business_days(start, days)
