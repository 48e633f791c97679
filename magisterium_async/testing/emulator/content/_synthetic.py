"""A synthetic corpus of any size, computed on demand from a seed and a document's number.

Nothing is held in memory: document ``n`` is derived from ``M(S ^ n)``, and a search costs
a few hashes per result. Here ``H(x)`` is the 64-bit blake2b of the text ``"<seed>:<x>"``,
``M`` the splitmix64 finalizer (a cheap, well-mixing function of a 64-bit integer) and
``S = H("doc")``.

Search scheme: the query is tokenized as for the bundled corpus (lower case, stop words
dropped). Each token ``t`` has a posting list of ``df(t) = 1 + M(H(t)) % 16`` documents,
the ``j``-th being number ``M(H(t) + 1 + j) % search_space``. The results are those lists
merged round-robin in the order the tokens appear, duplicates dropped, cut at ``limit``.
Queries that share a word therefore share results, which makes dedupe visible; a smaller
``search_space`` makes overlap denser. A query with no token left finds nothing, and so
does a ``miss_rate`` fraction of queries (those with ``H("miss:" + the sorted tokens
joined by spaces) / 2**64 < miss_rate``). The results do not contain the query's words.
Changing the seed changes every document and every result list.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from magisterium_async.testing.emulator.content._corpus import (
    CorpusDocument,
    SearchHit,
    document_url,
    tokenize,
)

__all__ = ["SyntheticCorpus"]

_MAX_POSTINGS = 16

_AUTHORS = (
    ("Pope Leo XIII", 1878, 1903),
    ("Pope Pius X", 1903, 1914),
    ("Pope Benedict XV", 1914, 1922),
    ("Pope Pius XI", 1922, 1939),
    ("Pope Pius XII", 1939, 1958),
    ("Pope John XXIII", 1958, 1963),
    ("Pope Paul VI", 1963, 1978),
    ("Pope John Paul II", 1978, 2005),
    ("Pope Benedict XVI", 2005, 2013),
    ("Pope Francis", 2013, 2025),
    ("Dicastery for the Doctrine of the Faith", 1965, 2025),
    ("Pontifical Council for Justice and Peace", 1967, 2016),
)
_KINDS = (
    "Encyclical Letter",
    "Apostolic Exhortation",
    "Apostolic Letter",
    "Apostolic Constitution",
    "Motu Proprio",
    "Homily",
    "Address",
    "Message",
    "Instruction",
    "Declaration",
)
_FIRST = (
    "Lux", "Veritas", "Caritas", "Spes", "Fides", "Gratia", "Pax", "Verbum", "Gaudium",
    "Sapientia", "Misericordia", "Vita", "Sanctitas", "Iustitia", "Ecclesia", "Corona",
    "Fons", "Via", "Domus", "Semen", "Panis", "Cor", "Lumen", "Splendor", "Mysterium",
    "Donum", "Regnum", "Sacramentum", "Spiritus", "Providentia",
)  # fmt: skip
_SECOND = (
    "Dei", "Christi", "Gentium", "Mundi", "Hominis", "Veritatis", "Salutis", "Caritatis",
    "Pacis", "Fidei", "Spei", "Vitae", "Populi", "Domini", "Aeterna", "Nova", "Sancta",
    "Magna", "Perennis", "Viva", "Divina", "Fidelium", "Pastorum", "Familiae", "Laboris",
    "Creationis", "Libertatis", "Unitatis", "Misericordiae", "Temporum",
)  # fmt: skip
_TOPICS = (
    "the dignity of human work", "the sacrament of marriage", "the formation of priests",
    "the liturgy of the hours", "sacred music", "the missions", "religious freedom",
    "the family", "the poor", "the environment", "the Eucharist", "the Rosary",
    "the Holy Spirit", "the Sacred Heart", "Christian education", "social communication",
    "the lay apostolate", "ecumenism", "peace among nations", "the rights of workers",
    "Sacred Scripture", "the consecrated life", "the sick and suffering", "migrants",
    "the Blessed Virgin Mary", "penance", "the unity of the Church", "catechesis",
    "the common good", "the vocation of youth", "the dead", "holiness", "charity",
    "hope", "faith and reason", "the Jubilee", "the priesthood", "the Saints",
)  # fmt: skip
_SENTENCES = (
    "The Church has always held that {topic} belongs to the heart of her mission.",
    "In every age the faithful have been called to consider {topic} in the light of the Gospel.",
    "We exhort the bishops, priests and lay faithful to give renewed attention to {topic}.",
    "Tradition and the teaching of Our predecessors shed light on {topic}.",
    "It is fitting, therefore, that {topic} be treated with care in preaching and catechesis.",
    "Christ himself shows us the way in which {topic} is to be understood.",
    "No one can remain indifferent to {topic}, for it touches the good of every person.",
    "May the Blessed Virgin Mary intercede for all who labour for {topic}.",
)
_ROMAN = ("I", "II", "III", "IV", "V", "VI", "VII", "VIII")


_MASK = (1 << 64) - 1


def _hash(seed: int, text: str) -> int:
    data = f"{seed}:{text}".encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def _mix(value: int) -> int:
    value = (value + 0x9E3779B97F4A7C15) & _MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


class SyntheticCorpus:
    """``size`` deterministic documents, ids ``first_id`` … ``first_id + size - 1``.

    Document ``n`` and every search result are functions of ``seed`` alone (see the module
    docstring for the search scheme). ``search_space`` restricts search results to the first
    that many documents (default: all) and ``miss_rate`` is the fraction of queries that
    find nothing.
    """

    __slots__ = ("_documents_key", "first_id", "miss_rate", "search_space", "seed", "size")

    def __init__(
        self,
        size: int = 100_000,
        seed: int = 0,
        *,
        first_id: int = 100_000,
        search_space: int | None = None,
        miss_rate: float = 0.0,
    ) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        if first_id < 0:
            raise ValueError("first_id must be >= 0")
        if search_space is not None and not 1 <= search_space <= size:
            raise ValueError("search_space must be between 1 and size")
        if not 0.0 <= miss_rate <= 1.0:
            raise ValueError("miss_rate must be between 0 and 1")
        self.size = size
        self.seed = seed
        self.first_id = first_id
        self.search_space = search_space or size
        self.miss_rate = miss_rate
        self._documents_key = _hash(seed, "doc")

    def __repr__(self) -> str:
        return f"SyntheticCorpus(size={self.size}, seed={self.seed})"

    def __len__(self) -> int:
        return self.size

    def __contains__(self, document_id: object) -> bool:
        return self._number(document_id) is not None

    def id_at(self, number: int) -> str:
        """The id of document ``number`` (0-based)."""
        if not 0 <= number < self.size:
            raise IndexError(number)
        return str(self.first_id + number)

    def ids(self) -> Iterator[str]:
        """Every id, lazily, in order."""
        return (str(self.first_id + number) for number in range(self.size))

    def _number(self, document_id: object) -> int | None:
        if not isinstance(document_id, str) or not document_id.isdigit():
            return None
        number = int(document_id) - self.first_id
        return number if 0 <= number < self.size else None

    def get(self, document_id: str) -> CorpusDocument | None:
        """Document ``document_id``, computed from the seed; ``None`` outside the range."""
        number = self._number(document_id)
        return None if number is None else self._document(number)

    @staticmethod
    def _title(h: int) -> str:
        return f"{_FIRST[(h >> 20) % len(_FIRST)]} {_SECOND[(h >> 28) % len(_SECOND)]}"

    def _document(self, number: int) -> CorpusDocument:
        h = _mix(self._documents_key ^ number)
        author, first, last = _AUTHORS[h % len(_AUTHORS)]
        year = first + (h >> 8) % (last - first + 1)
        kind = _KINDS[(h >> 16) % len(_KINDS)]
        topic = _TOPICS[(h >> 36) % len(_TOPICS)]
        page = 1 + (h >> 44) % 900
        acta, volume = ("AAS", year - 1908) if year > 1908 else ("ASS", year - 1865)
        ref = f"{acta} {volume} ({year}) {page}-{page + 4 + (h >> 54) % 60}"
        picks = [_SENTENCES[(h >> shift) % len(_SENTENCES)] for shift in (3, 11, 19)]
        excerpt = " ".join(dict.fromkeys(picks)).format(topic=topic)
        document_id = str(self.first_id + number)
        return CorpusDocument(
            id=document_id,
            title=self._title(h),
            author=author,
            year=year,
            ref=ref,
            url=document_url(document_id),
            excerpt=excerpt,
            heading=f"Chapter {_ROMAN[(h >> 40) % len(_ROMAN)]}: On {topic}",
            kind=f"{kind} on {topic}",
        )

    def result_numbers(self, query: str, limit: int) -> list[int]:
        """The document numbers ``search`` returns for ``query``, computed without them."""
        tokens = list(dict.fromkeys(tokenize(query)))
        if not tokens or limit < 1:
            return []
        if (
            self.miss_rate
            and _hash(self.seed, "miss:" + " ".join(sorted(tokens))) / 2.0**64 < self.miss_rate
        ):
            return []
        keys = [_hash(self.seed, token) for token in tokens]
        postings = [1 + _mix(key) % _MAX_POSTINGS for key in keys]
        found: dict[int, None] = {}
        for depth in range(_MAX_POSTINGS):
            for key, length in zip(keys, postings, strict=True):
                if depth < length:
                    found[_mix((key + 1 + depth) & _MASK) % self.search_space] = None
                    if len(found) == limit:
                        return list(found)
        return list(found)

    def search(self, query: str, limit: int) -> list[SearchHit]:
        """At most ``limit`` results for ``query`` (see the module docstring); each costs one
        hash, the documents behind them are not built."""
        hits = []
        for number in self.result_numbers(query, limit):
            document_id = str(self.first_id + number)
            title = self._title(_mix(self._documents_key ^ number))
            hits.append(SearchHit(document_id, document_url(document_id), title))
        return hits
