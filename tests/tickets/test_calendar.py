"""The end-date calendar: business days after weekends, public holidays and extras."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from isp_gateway.tickets.calendar import BusinessCalendar, add_business_days

BOGOTA = ZoneInfo("America/Bogota")


def at(y: int, m: int, d: int, hh: int = 10, mm: int = 30) -> datetime:
    return datetime(y, m, d, hh, mm, tzinfo=BOGOTA)


@pytest.mark.parametrize(
    ("created", "expected"),
    [
        (at(2026, 2, 1), at(2026, 2, 4)),  # Sunday -> Wednesday
        (at(2026, 2, 6), at(2026, 2, 11)),  # Friday -> Wednesday
        (at(2026, 2, 7), at(2026, 2, 11)),  # Saturday -> Wednesday
        (at(2026, 2, 9), at(2026, 2, 12)),  # Monday -> Thursday
        (at(2026, 2, 4), at(2026, 2, 9)),  # Wednesday -> Monday (weekend skipped)
    ],
)
def test_weekends_are_skipped_and_the_clock_time_is_kept(
    created: datetime, expected: datetime
) -> None:
    assert add_business_days(created, 3, "CO") == expected


def test_friday_before_a_monday_holiday() -> None:
    # Colombia moves Saint Joseph to Monday 23 March 2026 (Ley Emiliani).
    assert add_business_days(at(2026, 3, 20), 3, "CO") == at(2026, 3, 26)


def test_holy_week_thursday_and_friday_are_holidays() -> None:
    # Holy Thursday 2 April and Good Friday 3 April 2026.
    assert add_business_days(at(2026, 3, 31), 3, "CO") == at(2026, 4, 7)
    assert add_business_days(at(2026, 3, 27), 3, "CO") == at(2026, 4, 1)


def test_year_boundary() -> None:
    # 25 Dec, weekends, 1 Jan and the Epiphany moved to Monday 12 Jan 2026 all skipped.
    assert add_business_days(at(2025, 12, 24, 17, 5), 3, "CO") == at(2025, 12, 30, 17, 5)
    assert add_business_days(at(2025, 12, 31), 3, "CO") == at(2026, 1, 6)
    assert add_business_days(at(2026, 1, 8), 3, "CO") == at(2026, 1, 14)


def test_another_country_has_other_holidays() -> None:
    # 23 March 2026 is a holiday in Colombia but not in the United States...
    assert add_business_days(at(2026, 3, 20), 3, "US") == at(2026, 3, 25)
    # ...and 4 July is one there: Friday 3 July 2026 is its observed day.
    assert add_business_days(at(2026, 7, 2), 1, "US") == at(2026, 7, 6)
    assert add_business_days(at(2026, 7, 2), 1, "CO") == at(2026, 7, 3)


def test_extra_holidays_are_skipped() -> None:
    calendar = BusinessCalendar("CO", ["2026-02-10", "2026-02-11"])
    assert calendar.add_business_days(at(2026, 2, 6), 3) == at(2026, 2, 13)


def test_zero_days_is_the_creation_time_and_negative_is_refused() -> None:
    assert add_business_days(at(2026, 2, 7), 0, "CO") == at(2026, 2, 7)
    with pytest.raises(ValueError):
        add_business_days(at(2026, 2, 7), -1, "CO")
