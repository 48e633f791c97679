"""The directory behind the five lookup skills: saints, clergy, popes and dioceses.

**Invented, plainly.** The service lists ``saint_lookup``, ``person_lookup``,
``pope_lookup``, ``diocese_lookup`` and ``diocese_statistics_lookup`` but states neither
their artifact names nor their shapes, so everything here is this emulator's own: the
canonical ids (slugs such as ``"pius-x"``), the field names, the artifact names, the
"not found" texts. The names, years and feasts are a handful of well-known public facts,
kept short, for code to exercise its parsing on, not a reference; every statistic and
financial figure is generated from the diocese's id (deterministic, not real).

A record is found by its canonical id or by name: the query's words, titles such as
"Pope" or "Saint" left out, must all appear in the record's name or aliases.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DIOCESES",
    "PERSONS",
    "POPES",
    "SAINTS",
    "STATISTICS_METRICS",
    "Record",
    "diocese_statistics",
    "find",
    "headline",
]

_TITLES = frozenset(
    (
        "pope",
        "saint",
        "st",
        "blessed",
        "bl",
        "venerable",
        "servant",
        "of",
        "god",
        "the",
        "cardinal",
        "archbishop",
        "bishop",
        "diocese",
        "archdiocese",
        "eparchy",
        "archeparchy",
    )
)
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    folded = text.lower().replace("é", "e").replace("è", "e").replace("ł", "l")
    return _WORD.findall(folded)


@dataclass(frozen=True)
class Record:
    """One entry: its canonical id, its name, other names it is known by, and its fields."""

    id: str
    name: str
    aliases: tuple[str, ...]
    fields: dict[str, Any]

    def data(self) -> dict[str, Any]:
        """The record as the artifact's data part carries it."""
        return {"id": self.id, "name": self.name, **self.fields}

    def _words(self) -> set[str]:
        words: set[str] = set()
        for name in (self.name, *self.aliases):
            words.update(_words(name))
        return words


def find(records: Sequence[Record], query: str) -> Record | None:
    """The record whose id is ``query``, else the first whose names hold all its words."""
    wanted = query.strip().lower()
    for record in records:
        if record.id == wanted:
            return record
    words = [w for w in _words(query) if w not in _TITLES] or _words(query)
    if not words:
        return None
    for record in records:
        if set(words) <= record._words():
            return record
    return None


def _saint(
    id: str, name: str, status: str, feast: str | None, died: int | None, *aliases: str
) -> Record:
    return Record(id, name, aliases, {"status": status, "feast_day": feast, "died": died})


SAINTS: tuple[Record, ...] = (
    _saint("joseph", "Saint Joseph", "saint", "03-19", None, "Joseph of Nazareth"),
    _saint("francis-of-assisi", "Saint Francis of Assisi", "saint", "10-04", 1226),
    _saint("catherine-of-siena", "Saint Catherine of Siena", "saint", "04-29", 1380),
    _saint("therese-of-lisieux", "Saint Thérèse of Lisieux", "saint", "10-01", 1897),
    _saint("pius-x", "Saint Pius X", "saint", "08-21", 1914, "Giuseppe Sarto"),
    _saint("john-paul-ii", "Saint John Paul II", "saint", "10-22", 2005, "Karol Wojtyła"),
    _saint("teresa-of-calcutta", "Saint Teresa of Calcutta", "saint", "09-05", 1997),
    _saint("solanus-casey", "Blessed Solanus Casey", "blessed", "07-30", 1957),
    _saint("fulton-sheen", "Venerable Fulton J. Sheen", "venerable", None, 1979),
    _saint("dorothy-day", "Servant of God Dorothy Day", "servant_of_god", None, 1980),
)


def _person(id: str, name: str, rank: str, see: str, born: int, died: int | None) -> Record:
    return Record(id, name, (), {"rank": rank, "see": see, "born": born, "died": died})


PERSONS: tuple[Record, ...] = (
    _person("basil-hume", "Basil Hume", "cardinal", "Westminster", 1923, 1999),
    _person("carlo-maria-martini", "Carlo Maria Martini", "cardinal", "Milan", 1927, 2012),
    _person("jean-marie-lustiger", "Jean-Marie Lustiger", "cardinal", "Paris", 1926, 2007),
    _person("joseph-bernardin", "Joseph Bernardin", "cardinal", "Chicago", 1928, 1996),
    _person("fulton-sheen", "Fulton J. Sheen", "archbishop", "Rochester", 1895, 1979),
)


def _pope(id: str, name: str, birth_name: str, start: int, end: int | None) -> Record:
    fields = {"birth_name": birth_name, "reign_start": start, "reign_end": end}
    return Record(id, name, (birth_name,), fields)


POPES: tuple[Record, ...] = (
    _pope("leo-xiii", "Leo XIII", "Vincenzo Gioacchino Pecci", 1878, 1903),
    _pope("pius-x", "Pius X", "Giuseppe Melchiorre Sarto", 1903, 1914),
    _pope("benedict-xv", "Benedict XV", "Giacomo della Chiesa", 1914, 1922),
    _pope("pius-xi", "Pius XI", "Achille Ratti", 1922, 1939),
    _pope("pius-xii", "Pius XII", "Eugenio Pacelli", 1939, 1958),
    _pope("john-xxiii", "John XXIII", "Angelo Giuseppe Roncalli", 1958, 1963),
    _pope("paul-vi", "Paul VI", "Giovanni Battista Montini", 1963, 1978),
    _pope("john-paul-i", "John Paul I", "Albino Luciani", 1978, 1978),
    _pope("john-paul-ii", "John Paul II", "Karol Józef Wojtyła", 1978, 2005),
    _pope("benedict-xvi", "Benedict XVI", "Joseph Aloisius Ratzinger", 2005, 2013),
    _pope("francis", "Francis", "Jorge Mario Bergoglio", 2013, 2025),
    _pope("leo-xiv", "Leo XIV", "Robert Francis Prevost", 2025, None),
)


def _diocese(id: str, name: str, kind: str, country: str, rite: str) -> Record:
    return Record(id, name, (), {"kind": kind, "country": country, "rite": rite})


DIOCESES: tuple[Record, ...] = (
    _diocese("rome", "Diocese of Rome", "diocese", "Italy", "Latin"),
    _diocese("milan", "Archdiocese of Milan", "archdiocese", "Italy", "Latin"),
    _diocese("paris", "Archdiocese of Paris", "archdiocese", "France", "Latin"),
    _diocese("westminster", "Archdiocese of Westminster", "archdiocese", "England", "Latin"),
    _diocese("chicago", "Archdiocese of Chicago", "archdiocese", "United States", "Latin"),
    _diocese(
        "philadelphia-ukrainian",
        "Ukrainian Catholic Archeparchy of Philadelphia",
        "archeparchy",
        "United States",
        "Byzantine",
    ),
)

STATISTICS_METRICS: tuple[str, ...] = (
    "population",
    "catholics",
    "percent_catholic",
    "parishes",
    "diocesan_priests",
    "religious_priests",
    "total_priests",
    "catholics_per_priest",
    "permanent_deacons",
    "male_religious",
    "female_religious",
    "seminarians",
    "infant_baptisms",
    "adult_baptisms",
    "first_communions",
    "confirmations",
    "marriages",
    "schools",
    "students",
)
"""The 19 yearly metrics of ``diocese_statistics_lookup`` (names invented here)."""

_FIRST_YEAR, _LAST_YEAR = 2000, 2023
_CURRENCY = {"Italy": "EUR", "France": "EUR", "England": "GBP"}


def diocese_statistics(record: Record) -> list[dict[str, Any]]:
    """One row per year, ``_FIRST_YEAR`` to ``_LAST_YEAR``: generated from the id, not real."""
    seed = int.from_bytes(hashlib.sha256(record.id.encode()).digest()[:8], "big")
    rng = random.Random(seed)
    population = rng.randrange(500_000, 6_000_000)
    share = rng.uniform(0.2, 0.9)
    rows = []
    for year in range(_FIRST_YEAR, _LAST_YEAR + 1):
        population = int(population * rng.uniform(0.995, 1.01))
        share = min(0.95, max(0.05, share * rng.uniform(0.985, 1.005)))
        catholics = int(population * share)
        diocesan, religious = rng.randrange(150, 900), rng.randrange(50, 600)
        rows.append(
            {
                "year": year,
                "population": population,
                "catholics": catholics,
                "percent_catholic": round(100 * share, 1),
                "parishes": rng.randrange(80, 400),
                "diocesan_priests": diocesan,
                "religious_priests": religious,
                "total_priests": diocesan + religious,
                "catholics_per_priest": catholics // (diocesan + religious),
                "permanent_deacons": rng.randrange(0, 300),
                "male_religious": rng.randrange(100, 900),
                "female_religious": rng.randrange(300, 3000),
                "seminarians": rng.randrange(5, 120),
                "infant_baptisms": catholics // rng.randrange(60, 120),
                "adult_baptisms": rng.randrange(50, 900),
                "first_communions": catholics // rng.randrange(70, 130),
                "confirmations": catholics // rng.randrange(80, 150),
                "marriages": catholics // rng.randrange(200, 400),
                "schools": rng.randrange(20, 300),
                "students": rng.randrange(5_000, 90_000),
            }
        )
    return rows


def headline(record: Record) -> dict[str, Any]:
    """The latest year's headline figures and (generated) financials of a diocese."""
    latest = diocese_statistics(record)[-1]
    rng = random.Random(record.id)
    revenue = rng.randrange(20_000_000, 400_000_000)
    return {
        "statistics": {
            key: latest[key]
            for key in ("year", "population", "catholics", "parishes", "total_priests")
        },
        "financials": {
            "year": latest["year"],
            "currency": _CURRENCY.get(record.fields["country"], "USD"),
            "revenue": revenue,
            "expenses": int(revenue * rng.uniform(0.85, 1.05)),
        },
    }
