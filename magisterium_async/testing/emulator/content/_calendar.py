"""Mass readings and Roman Martyrology entries by date, for years 1900-2100.

The great feasts (Christmas, Epiphany, Ash Wednesday, St Joseph, Easter and the days
around it, Pentecost, Sts Peter and Paul, the Assumption, All Saints, the Immaculate
Conception and some memorials) have their real readings or martyrology text; Easter comes
from the computus. Every other day gets a plausible entry generated from the date, the
same every time. Transfers of feasts (St Joseph in Holy Week, for instance) are ignored.
"""

from __future__ import annotations

import datetime
import hashlib

from magisterium_async.testing.emulator.content._dates import easter, in_range

__all__ = ["martyrology", "mass_readings"]

# (title, first reading, psalm, response, second reading or "", gospel)
Readings = tuple[str, str, str, str, str, str]

_FIXED_READINGS: dict[tuple[int, int], Readings] = {
    (1, 6): (
        "The Epiphany of the Lord",
        "Isaiah 60:1-6",
        "Psalm 72:1-2, 7-8, 10-11, 12-13",
        "Lord, every nation on earth will adore you.",
        "Ephesians 3:2-3a, 5-6",
        "Matthew 2:1-12",
    ),
    (3, 19): (
        "Solemnity of Saint Joseph, Spouse of the Blessed Virgin Mary",
        "2 Samuel 7:4-5a, 12-14a, 16",
        "Psalm 89:2-3, 4-5, 27 and 29",
        "The son of David will live for ever.",
        "Romans 4:13, 16-18, 22",
        "Matthew 1:16, 18-21, 24a",
    ),
    (6, 29): (
        "Solemnity of Saints Peter and Paul, Apostles",
        "Acts 12:1-11",
        "Psalm 34:2-3, 4-5, 6-7, 8-9",
        "The angel of the Lord will rescue those who fear him.",
        "2 Timothy 4:6-8, 17-18",
        "Matthew 16:13-19",
    ),
    (8, 15): (
        "Solemnity of the Assumption of the Blessed Virgin Mary",
        "Revelation 11:19a; 12:1-6a, 10ab",
        "Psalm 45:10, 11, 12, 16",
        "The queen stands at your right hand, arrayed in gold.",
        "1 Corinthians 15:20-27",
        "Luke 1:39-56",
    ),
    (11, 1): (
        "Solemnity of All Saints",
        "Revelation 7:2-4, 9-14",
        "Psalm 24:1bc-2, 3-4ab, 5-6",
        "Lord, this is the people that longs to see your face.",
        "1 John 3:1-3",
        "Matthew 5:1-12a",
    ),
    (12, 8): (
        "Solemnity of the Immaculate Conception of the Blessed Virgin Mary",
        "Genesis 3:9-15, 20",
        "Psalm 98:1, 2-3ab, 3cd-4",
        "Sing to the Lord a new song, for he has done marvelous deeds.",
        "Ephesians 1:3-6, 11-12",
        "Luke 1:26-38",
    ),
    (12, 25): (
        "The Nativity of the Lord (Christmas), Mass during the Day",
        "Isaiah 52:7-10",
        "Psalm 98:1, 2-3, 3-4, 5-6",
        "All the ends of the earth have seen the saving power of God.",
        "Hebrews 1:1-6",
        "John 1:1-18",
    ),
}

_EASTER_READINGS: dict[int, Readings] = {
    -46: (
        "Ash Wednesday",
        "Joel 2:12-18",
        "Psalm 51:3-4, 5-6ab, 12-13, 14 and 17",
        "Be merciful, O Lord, for we have sinned.",
        "2 Corinthians 5:20-6:2",
        "Matthew 6:1-6, 16-18",
    ),
    -2: (
        "Friday of the Passion of the Lord (Good Friday)",
        "Isaiah 52:13-53:12",
        "Psalm 31:2, 6, 12-13, 15-16, 17, 25",
        "Father, into your hands I commend my spirit.",
        "Hebrews 4:14-16; 5:7-9",
        "John 18:1-19:42",
    ),
    0: (
        "Easter Sunday of the Resurrection of the Lord",
        "Acts 10:34a, 37-43",
        "Psalm 118:1-2, 16-17, 22-23",
        "This is the day the Lord has made; let us rejoice and be glad.",
        "Colossians 3:1-4",
        "John 20:1-9",
    ),
    49: (
        "Pentecost Sunday, Mass during the Day",
        "Acts 2:1-11",
        "Psalm 104:1, 24, 29-30, 31, 34",
        "Lord, send out your Spirit, and renew the face of the earth.",
        "1 Corinthians 12:3b-7, 12-13",
        "John 20:19-23",
    ),
}

_FIRST_READINGS = (
    "Genesis 12:1-4a", "Exodus 3:1-8a, 13-15", "Deuteronomy 30:15-20", "1 Samuel 3:1-10",
    "1 Kings 19:9a, 11-13a", "Isaiah 55:10-11", "Jeremiah 31:31-34", "Ezekiel 36:24-28",
    "Hosea 6:1-6", "Micah 6:6-8", "Wisdom 7:7-11", "Sirach 27:4-7", "Acts 2:42-47",
    "Acts 4:32-35", "Romans 8:26-30", "Hebrews 11:1-2, 8-19", "James 2:14-18",
)  # fmt: skip
_SECOND_READINGS = (
    "Romans 5:1-5", "1 Corinthians 13:4-13", "2 Corinthians 4:6-11", "Galatians 5:1, 13-18",
    "Ephesians 4:1-6", "Philippians 4:4-7", "Colossians 3:12-17", "1 Thessalonians 5:16-24",
    "1 Peter 3:15-18", "1 John 4:7-10",
)  # fmt: skip
_PSALMS = (
    ("Psalm 23:1-3a, 3b-4, 5, 6", "The Lord is my shepherd; there is nothing I shall want."),
    ("Psalm 27:1, 4, 13-14", "The Lord is my light and my salvation."),
    ("Psalm 34:2-3, 4-5, 6-7", "Taste and see the goodness of the Lord."),
    ("Psalm 95:1-2, 6-7, 8-9", "If today you hear his voice, harden not your hearts."),
    ("Psalm 103:1-2, 3-4, 8, 10", "The Lord is kind and merciful."),
    ("Psalm 119:1-2, 4-5, 17-18", "Blessed are they who follow the law of the Lord!"),
    ("Psalm 145:8-9, 10-11, 13-14", "I will praise your name for ever, my king and my God."),
)
_GOSPELS = (
    "Matthew 5:13-16", "Matthew 7:21-27", "Matthew 11:25-30", "Matthew 13:1-23",
    "Mark 1:29-39", "Mark 4:26-34", "Mark 10:17-30", "Luke 6:27-38", "Luke 10:25-37",
    "Luke 15:1-3, 11-32", "Luke 18:9-14", "John 6:35-40", "John 10:1-10", "John 15:1-8",
)  # fmt: skip

_FIXED_SAINTS: dict[tuple[int, int], tuple[str, ...]] = {
    (1, 1): ("Solemnity of Mary, the Holy Mother of God, on the octave day of the Nativity.",),
    (1, 6): ("Solemnity of the Epiphany of the Lord, manifested to the Magi.",),
    (1, 28): (
        "Memorial of Saint Thomas Aquinas, priest of the Order of Preachers and Doctor of the "
        "Church, who died at the monastery of Fossanova on 7 March 1274.",
    ),
    (3, 17): ("Saint Patrick, bishop, who preached the Gospel in Ireland.",),
    (3, 19): (
        "Solemnity of Saint Joseph, Spouse of the Blessed Virgin Mary, a just man of the "
        "house of David, who was a father to the Son of God, Jesus Christ.",
    ),
    (3, 25): ("Solemnity of the Annunciation of the Lord.",),
    (4, 29): ("Memorial of Saint Catherine of Siena, virgin and Doctor of the Church.",),
    (6, 13): ("Memorial of Saint Anthony of Padua, priest and Doctor of the Church.",),
    (6, 29): (
        "Solemnity of Saints Peter and Paul, Apostles.",
        "Simon, son of John, called Peter, whom Jesus chose as the foundation of his Church; "
        "and Paul, Apostle of the Gentiles, who preached Christ crucified to Jews and Greeks; "
        "both suffered martyrdom at Rome.",
    ),
    (7, 22): ("Memorial of Saint Mary Magdalene, first witness of the Resurrection.",),
    (7, 31): ("Memorial of Saint Ignatius of Loyola, priest, founder of the Society of Jesus.",),
    (8, 10): ("Feast of Saint Lawrence, deacon and martyr, at Rome.",),
    (8, 15): ("Solemnity of the Assumption of the Blessed Virgin Mary into heaven.",),
    (8, 28): ("Memorial of Saint Augustine, bishop of Hippo and Doctor of the Church.",),
    (10, 1): ("Memorial of Saint Therese of the Child Jesus, virgin and Doctor of the Church.",),
    (10, 4): ("Memorial of Saint Francis of Assisi, who founded the Friars Minor.",),
    (10, 15): ("Memorial of Saint Teresa of Jesus, virgin and Doctor of the Church.",),
    (11, 1): ("Solemnity of All Saints, who reign with Christ.",),
    (11, 2): ("The Commemoration of All the Faithful Departed.",),
    (11, 30): ("Feast of Saint Andrew, Apostle, brother of Saint Peter.",),
    (12, 8): ("Solemnity of the Immaculate Conception of the Blessed Virgin Mary.",),
    (12, 25): ("The Nativity of our Lord Jesus Christ according to the flesh.",),
    (12, 26): ("Feast of Saint Stephen, the first martyr.",),
}
_EASTER_SAINTS: dict[int, str] = {
    -2: "The Passion of our Lord Jesus Christ.",
    0: "The Solemnity of Solemnities, the Resurrection of our Lord Jesus Christ according to "
    "the flesh.",
    49: "Solemnity of Pentecost, the fiftieth day of Easter.",
}
_NAMES = (
    "Felix", "Marcellus", "Justina", "Eusebius", "Agapitus", "Theodora", "Anastasius",
    "Cyriacus", "Severinus", "Hilarion", "Lucilla", "Benedicta", "Romanus", "Domitilla",
    "Gregory", "Honoratus", "Euphemia", "Valerian", "Maximus", "Colette",
)  # fmt: skip
_ROLES = (
    "bishop", "martyr", "virgin and martyr", "priest", "abbot", "hermit", "deacon and martyr",
    "religious", "bishop and martyr", "widow",
)  # fmt: skip
_PLACES = (
    "At Rome", "At Antioch", "At Alexandria", "At Carthage", "In Gaul", "At Milan",
    "At Toledo", "In Cappadocia", "At Ravenna", "In Ireland", "At Lyons", "At Naples",
)  # fmt: skip


def _hash(day: datetime.date, salt: str) -> int:
    digest = hashlib.blake2b(f"{day.isoformat()}:{salt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _heading(day: datetime.date) -> str:
    return f"{day:%A}, {day:%B} {day.day}, {day.year}"


def _season(day: datetime.date) -> str:
    easter_day = easter(day.year)
    christmas = datetime.date(day.year, 12, 25)
    advent = christmas - datetime.timedelta(days=(christmas.isoweekday() % 7 or 7) + 21)
    epiphany = datetime.date(day.year, 1, 6)
    baptism = epiphany + datetime.timedelta(days=7 - epiphany.isoweekday() % 7)
    if day >= christmas or day <= baptism:
        return "Christmas Time"
    if advent <= day < christmas:
        return "Advent"
    if easter_day - datetime.timedelta(days=46) <= day < easter_day - datetime.timedelta(days=7):
        return "Lent"
    if easter_day - datetime.timedelta(days=7) <= day < easter_day:
        return "Holy Week"
    if easter_day < day <= easter_day + datetime.timedelta(days=49):
        return "Easter Time"
    return "Ordinary Time"


def _ordinary_day(day: datetime.date) -> Readings:
    h = _hash(day, "readings")
    psalm, response = _PSALMS[(h >> 8) % len(_PSALMS)]
    season = _season(day)
    sunday = day.weekday() == 6
    title = f"{'Sunday' if sunday else day.strftime('%A')} in {season}"
    second = _SECOND_READINGS[(h >> 16) % len(_SECOND_READINGS)] if sunday else ""
    gospel = _GOSPELS[(h >> 24) % len(_GOSPELS)]
    return (title, _FIRST_READINGS[h % len(_FIRST_READINGS)], psalm, response, second, gospel)


def mass_readings(day: datetime.date) -> str | None:
    """The formatted readings of ``day``; ``None`` outside the calendar's range."""
    if not in_range(day):
        return None
    offset = (day - easter(day.year)).days
    readings = (
        _EASTER_READINGS.get(offset)
        or _FIXED_READINGS.get((day.month, day.day))
        or _ordinary_day(day)
    )
    title, first, psalm, response, second, gospel = readings
    lines = [_heading(day), title, "", f"First Reading: {first}"]
    lines += [f"Responsorial Psalm: {psalm}", f"R. {response}"]
    if second:
        lines.append(f"Second Reading: {second}")
    lines.append(f"Gospel: {gospel}")
    return "\n".join(lines)


def _generated_saints(day: datetime.date) -> list[str]:
    h = _hash(day, "saints")
    entries = []
    for index in range(2 + h % 2):
        bits = h >> (8 + 12 * index)
        name = _NAMES[bits % len(_NAMES)]
        role = _ROLES[(bits >> 4) % len(_ROLES)]
        place = _PLACES[(bits >> 8) % len(_PLACES)]
        entries.append(f"{place}, Saint {name}, {role}.")
    return entries


def martyrology(day: datetime.date) -> str | None:
    """The formatted Roman Martyrology entry for ``day``; ``None`` outside the range."""
    if not in_range(day):
        return None
    entries: list[str] = []
    moveable = _EASTER_SAINTS.get((day - easter(day.year)).days)
    if moveable:
        entries.append(moveable)
    entries += _FIXED_SAINTS.get((day.month, day.day), ())
    entries += _generated_saints(day)
    numbered = [f"{number}. {entry}" for number, entry in enumerate(entries, start=1)]
    return "\n".join([f"Roman Martyrology, {_heading(day)}", "", *numbered])
