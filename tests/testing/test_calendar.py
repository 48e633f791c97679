"""Dates in natural language, the computus, and the calendar's content."""

from __future__ import annotations

import datetime

import pytest

from magisterium_async.testing.emulator.content._calendar import martyrology, mass_readings
from magisterium_async.testing.emulator.content._dates import easter, parse_when

D = datetime.date
WEDNESDAY = D(2026, 3, 18)
SUNDAY = D(2026, 3, 22)


@pytest.mark.parametrize(
    ("year", "expected"),
    [
        (1900, D(1900, 4, 15)),
        (1943, D(1943, 4, 25)),
        (2000, D(2000, 4, 23)),
        (2008, D(2008, 3, 23)),
        (2024, D(2024, 3, 31)),
        (2025, D(2025, 4, 20)),
        (2026, D(2026, 4, 5)),
        (2027, D(2027, 3, 28)),
        (2038, D(2038, 4, 25)),
        (2100, D(2100, 3, 28)),
    ],
)
def test_computus(year: int, expected: datetime.date) -> None:
    assert easter(year) == expected


@pytest.mark.parametrize(
    ("text", "today", "expected"),
    [
        ("today", WEDNESDAY, WEDNESDAY),
        ("Today", WEDNESDAY, WEDNESDAY),
        ("tomorrow", WEDNESDAY, D(2026, 3, 19)),
        ("yesterday", WEDNESDAY, D(2026, 3, 17)),
        ("the day after tomorrow", WEDNESDAY, D(2026, 3, 20)),
        ("in 10 days", WEDNESDAY, D(2026, 3, 28)),
        ("3 days ago", WEDNESDAY, D(2026, 3, 15)),
        ("next Sunday", WEDNESDAY, SUNDAY),
        ("next sunday", SUNDAY, D(2026, 3, 29)),
        ("Sunday", SUNDAY, SUNDAY),
        ("this Friday", WEDNESDAY, D(2026, 3, 20)),
        ("next Wednesday", WEDNESDAY, D(2026, 3, 25)),
        ("last Friday", WEDNESDAY, D(2026, 3, 13)),
        ("last Wednesday", WEDNESDAY, D(2026, 3, 11)),
        ("2026-03-19", WEDNESDAY, D(2026, 3, 19)),
        ("2030/1/2", WEDNESDAY, D(2030, 1, 2)),
        ("March 19, 2026", WEDNESDAY, D(2026, 3, 19)),
        ("march 19th", WEDNESDAY, D(2026, 3, 19)),
        ("19 March 2027", WEDNESDAY, D(2027, 3, 19)),
        ("1st of May", WEDNESDAY, D(2026, 5, 1)),
        ("Dec 8", WEDNESDAY, D(2026, 12, 8)),
        ("Easter Sunday 2026", WEDNESDAY, D(2026, 4, 5)),
        ("easter", WEDNESDAY, D(2026, 4, 5)),
        ("Pentecost 2026", WEDNESDAY, D(2026, 5, 24)),
        ("Ash Wednesday 2026", WEDNESDAY, D(2026, 2, 18)),
        ("Good Friday, 2025", WEDNESDAY, D(2025, 4, 18)),
        ("Christmas", WEDNESDAY, D(2026, 12, 25)),
        ("Christmas Day 1999", WEDNESDAY, D(1999, 12, 25)),
        ("St. Joseph", WEDNESDAY, D(2026, 3, 19)),
        ("Sts Peter and Paul 2031", WEDNESDAY, D(2031, 6, 29)),
        ("the feast of All Saints", WEDNESDAY, D(2026, 11, 1)),
        ("on New Year's Day", WEDNESDAY, D(2026, 1, 1)),
        ("2100-12-31", WEDNESDAY, D(2100, 12, 31)),
        ("1900-01-01", WEDNESDAY, D(1900, 1, 1)),
    ],
)
def test_parse_when(text: str, today: datetime.date, expected: datetime.date) -> None:
    assert parse_when(text, today) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "someday",
        "next week",
        "2026-02-30",
        "February 30",
        "1899-12-31",
        "2101-01-01",
        "Easter 2101",
        "in 99999 days",
        "Smarch 3",
    ],
)
def test_parse_when_refuses(text: str) -> None:
    assert parse_when(text, WEDNESDAY) is None


def test_today_out_of_range_is_refused() -> None:
    assert parse_when("today", D(1850, 1, 1)) is None


@pytest.mark.parametrize(
    ("day", "title", "gospel"),
    [
        (D(2026, 12, 25), "The Nativity of the Lord", "John 1:1-18"),
        (D(2026, 3, 19), "Saint Joseph", "Matthew 1:16, 18-21, 24a"),
        (D(2026, 6, 29), "Saints Peter and Paul", "Matthew 16:13-19"),
        (D(2026, 11, 1), "All Saints", "Matthew 5:1-12a"),
        (D(2026, 4, 5), "Easter Sunday", "John 20:1-9"),
        (D(2026, 2, 18), "Ash Wednesday", "Matthew 6:1-6, 16-18"),
        (D(2026, 5, 24), "Pentecost", "John 20:19-23"),
    ],
)
def test_feasts_have_their_real_readings(day: datetime.date, title: str, gospel: str) -> None:
    readings = mass_readings(day)
    assert readings is not None
    assert title in readings.splitlines()[1]
    assert f"Gospel: {gospel}" in readings


def test_other_days_have_generated_readings() -> None:
    sunday = mass_readings(D(2026, 7, 12))
    weekday = mass_readings(D(2026, 7, 14))
    assert sunday is not None and weekday is not None
    assert "Sunday in Ordinary Time" in sunday
    assert "Second Reading" in sunday
    assert "Second Reading" not in weekday
    assert mass_readings(D(2026, 7, 14)) == weekday
    assert "Lent" in (mass_readings(D(2026, 3, 10)) or "")
    assert "Advent" in (mass_readings(D(2026, 12, 1)) or "")
    assert "Christmas Time" in (mass_readings(D(2027, 1, 2)) or "")
    assert "Easter Time" in (mass_readings(D(2026, 4, 21)) or "")


def test_martyrology() -> None:
    christmas = martyrology(D(2026, 12, 25))
    assert christmas is not None
    assert christmas.startswith("Roman Martyrology, Friday, December 25, 2026")
    assert "1. The Nativity of our Lord Jesus Christ according to the flesh." in christmas
    easter_day = martyrology(D(2027, 3, 28))
    assert easter_day is not None
    assert "Resurrection" in easter_day
    ordinary = martyrology(D(2026, 9, 9))
    assert ordinary is not None
    assert ordinary == martyrology(D(2026, 9, 9))
    assert len(ordinary.splitlines()) >= 4


def test_outside_the_range_there_is_nothing() -> None:
    assert mass_readings(D(1899, 12, 31)) is None
    assert martyrology(D(2101, 1, 1)) is None
