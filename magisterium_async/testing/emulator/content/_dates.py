"""Dates in natural language, as the calendar skills understand them, and the computus.

Understood (case-insensitive): ``today``, ``tomorrow``, ``yesterday``, ``day after
tomorrow``, ``day before yesterday``, ``in N days``, ``N days ago``; ISO dates
(``2026-03-19``, also with ``/``); weekday names, alone or after ``this``/``coming``
(the next one on or after today), ``next`` (strictly after today) or ``last`` (strictly
before); ``March 19``, ``March 19th, 2026``, ``19 March 2026``; and feasts with an
optional year: ``Easter Sunday 2026``, ``Christmas``, ``Pentecost``, ``Ash Wednesday``,
``Good Friday``, ``All Saints``, ``St Joseph`` and a few more (without a year: this year's).
Years outside 1900-2100 are not understood.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable

__all__ = ["MAX_YEAR", "MIN_YEAR", "easter", "in_range", "parse_when"]

MIN_YEAR = 1900
MAX_YEAR = 2100

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_MONTH_DAY = re.compile(rf"^({_MONTH}) (\d{{1,2}})(?:st|nd|rd|th)?(?: (\d{{4}}))?$")
_DAY_MONTH = re.compile(rf"^(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({_MONTH})(?: (\d{{4}}))?$")
_ISO = re.compile(r"^(\d{4})[-/](\d{1,2})[-/](\d{1,2})$")
_WEEKDAY = re.compile(rf"^(?:(this|coming|next|last) )?({'|'.join(_WEEKDAYS)})$")
_IN_DAYS = re.compile(r"^in (\d{1,5}) days?$")
_DAYS_AGO = re.compile(r"^(\d{1,5}) days? ago$")
_FEAST = re.compile(r"^(.+?)(?: (\d{4}))?$")


def easter(year: int) -> datetime.date:
    """Easter Sunday in the Gregorian calendar (the anonymous Gregorian computus)."""
    a = year % 19
    b, c = divmod(year, 100)
    d, e = divmod(b, 4)
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    week = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * week) // 451
    month, day = divmod(h + week - 7 * m + 114, 31)
    return datetime.date(year, month, day + 1)


def _from_easter(offset: int) -> Callable[[int], datetime.date]:
    return lambda year: easter(year) + datetime.timedelta(days=offset)


def _fixed(month: int, day: int) -> Callable[[int], datetime.date]:
    return lambda year: datetime.date(year, month, day)


_FEASTS: dict[str, Callable[[int], datetime.date]] = {
    "easter": _from_easter(0),
    "easter sunday": _from_easter(0),
    "easter day": _from_easter(0),
    "palm sunday": _from_easter(-7),
    "holy thursday": _from_easter(-3),
    "maundy thursday": _from_easter(-3),
    "good friday": _from_easter(-2),
    "holy saturday": _from_easter(-1),
    "ash wednesday": _from_easter(-46),
    "divine mercy sunday": _from_easter(7),
    "ascension": _from_easter(39),
    "ascension thursday": _from_easter(39),
    "pentecost": _from_easter(49),
    "pentecost sunday": _from_easter(49),
    "trinity sunday": _from_easter(56),
    "corpus christi": _from_easter(60),
    "christmas": _fixed(12, 25),
    "christmas day": _fixed(12, 25),
    "christmas eve": _fixed(12, 24),
    "mary mother of god": _fixed(1, 1),
    "new years day": _fixed(1, 1),
    "epiphany": _fixed(1, 6),
    "saint joseph": _fixed(3, 19),
    "annunciation": _fixed(3, 25),
    "saints peter and paul": _fixed(6, 29),
    "peter and paul": _fixed(6, 29),
    "assumption": _fixed(8, 15),
    "all saints": _fixed(11, 1),
    "all saints day": _fixed(11, 1),
    "all souls": _fixed(11, 2),
    "all souls day": _fixed(11, 2),
    "immaculate conception": _fixed(12, 8),
}


def in_range(day: datetime.date) -> bool:
    """Whether the calendar skills know ``day`` (years 1900-2100)."""
    return MIN_YEAR <= day.year <= MAX_YEAR


def _normalize(text: str) -> str:
    text = text.lower().replace("\u2019", "'").replace("'s", "s").replace("'", "")
    text = re.sub(r"[,.;!?]", " ", text)
    text = re.sub(r"\bsts\b", "saints", re.sub(r"\bst\b", "saint", text))
    text = re.sub(r"^(?:on|for) ", "", " ".join(text.split()))
    return re.sub(r"^(?:the )?(?:feast|solemnity|memorial) of (?:the )?", "", text)


def _date(year: int, month: int, day: int) -> datetime.date | None:
    try:
        return datetime.date(year, month, day)
    except ValueError:
        return None


def _relative(text: str, today: datetime.date) -> datetime.date | None:
    offsets = {
        "today": 0,
        "now": 0,
        "tonight": 0,
        "tomorrow": 1,
        "yesterday": -1,
        "day after tomorrow": 2,
        "the day after tomorrow": 2,
        "day before yesterday": -2,
        "the day before yesterday": -2,
    }
    if text in offsets:
        return today + datetime.timedelta(days=offsets[text])
    if match := _IN_DAYS.match(text):
        return today + datetime.timedelta(days=int(match[1]))
    if match := _DAYS_AGO.match(text):
        return today - datetime.timedelta(days=int(match[1]))
    if match := _WEEKDAY.match(text):
        target = _WEEKDAYS.index(match[2])
        if match[1] == "last":
            return today - datetime.timedelta(days=(today.weekday() - target) % 7 or 7)
        ahead = (target - today.weekday()) % 7
        if match[1] == "next" and ahead == 0:
            ahead = 7
        return today + datetime.timedelta(days=ahead)
    return None


def _absolute(text: str, today: datetime.date) -> datetime.date | None:
    if match := _ISO.match(text):
        return _date(int(match[1]), int(match[2]), int(match[3]))
    if match := _MONTH_DAY.match(text):
        year = int(match[3]) if match[3] else today.year
        return _date(year, _MONTHS[match[1]], int(match[2]))
    if match := _DAY_MONTH.match(text):
        year = int(match[3]) if match[3] else today.year
        return _date(year, _MONTHS[match[2]], int(match[1]))
    if (match := _FEAST.match(text)) and match[1] in _FEASTS:
        year = int(match[2]) if match[2] else today.year
        if not MIN_YEAR <= year <= MAX_YEAR:
            return None
        return _FEASTS[match[1]](year)
    return None


def parse_when(text: str, today: datetime.date) -> datetime.date | None:
    """The date ``text`` names, seen from ``today``; ``None`` when not understood."""
    normalized = _normalize(text)
    try:
        day = _relative(normalized, today) or _absolute(normalized, today)
    except OverflowError:
        return None
    return day if day is not None and in_range(day) else None
