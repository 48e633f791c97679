"""Documents the skills serve: the interface, and the bundled corpus with TF-IDF search."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

from magisterium_async.testing.emulator.content._library import ENTRIES

__all__ = [
    "BundledCorpus",
    "Corpus",
    "CorpusDocument",
    "Listing",
    "SearchHit",
    "document_url",
    "tokenize",
]

_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "did", "do", "does", "for", "from",
    "has", "have", "how", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our",
    "should", "that", "the", "their", "this", "to", "was", "we", "what", "when", "where", "which",
    "who", "why", "will", "with", "you", "your", "about",
))  # fmt: skip


def tokenize(text: str) -> list[str]:
    """Lower-cased ASCII words, stop words dropped, a plural ``s`` stripped."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    tokens = []
    for word in _WORD.findall(folded):
        if word in _STOPWORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
        tokens.append(word)
    return tokens


def document_url(document_id: str) -> str:
    """Where the service's site shows a document."""
    return f"https://www.magisterium.com/library/{document_id}"


@dataclass(frozen=True, slots=True)
class CorpusDocument:
    """One document of the emulator's corpus: what ``document_fetch`` returns and
    ``document_search`` lists, with the metadata the service keeps (``year``, ``url``, ...).

    Not :class:`magisterium_async.Document`, the client's view of a fetched document."""

    id: str
    title: str
    author: str
    year: int
    ref: str
    url: str
    excerpt: str
    heading: str = ""
    kind: str = ""

    @property
    def content(self) -> str:
        """The text ``document_fetch`` sends: a header and the excerpt under its heading."""
        lines = [self.title]
        if self.kind:
            lines.append(self.kind)
        lines.append(f"{self.author}, {self.year} ({self.ref})")
        lines.append("")
        if self.heading:
            lines += [self.heading, ""]
        lines.append(self.excerpt)
        return "\n".join(lines)


class Listing(Protocol):
    """What a search result shows; a :class:`CorpusDocument` is one, so is a :class:`SearchHit`."""

    @property
    def id(self) -> str:
        """The document's id."""
        ...

    @property
    def url(self) -> str:
        """Where the service's site shows it."""
        ...

    @property
    def title(self) -> str:
        """Its title."""
        ...


class SearchHit(NamedTuple):
    """A search result without the document behind it."""

    id: str
    url: str
    title: str


@runtime_checkable
class Corpus(Protocol):
    """What the document skills need from a corpus."""

    def get(self, document_id: str) -> CorpusDocument | None:
        """The document with this id, or ``None``."""
        ...

    def search(self, query: str, limit: int) -> Sequence[Listing]:
        """At most ``limit`` results for ``query``, best first; empty when none match.

        ``catholic_qa`` cites the documents that ``get`` returns for the results' ids.
        """
        ...

    def __len__(self) -> int:
        """How many documents the corpus holds."""
        ...


def _bundled_documents() -> list[CorpusDocument]:
    return [
        CorpusDocument(id_, title, author, year, ref, document_url(id_), excerpt, heading, kind)
        for id_, title, kind, author, year, ref, heading, excerpt in ENTRIES
    ]


class BundledCorpus:
    """A small in-memory corpus ranked by TF-IDF over titles (weighted 3 times) and text.

    With no argument it holds the bundled real documents (encyclicals, council documents,
    exhortations, catechism sections).
    """

    _TITLE_WEIGHT = 3.0

    def __init__(self, documents: Iterable[CorpusDocument] | None = None) -> None:
        self._documents: Sequence[CorpusDocument] = (
            list(documents) if documents is not None else _bundled_documents()
        )
        self._by_id = {document.id: document for document in self._documents}
        if len(self._by_id) != len(self._documents):
            raise ValueError("document ids must be unique")
        self._postings = self._index(self._documents)

    def _index(self, documents: Sequence[CorpusDocument]) -> dict[str, list[tuple[int, float]]]:
        counts: list[dict[str, float]] = []
        for document in documents:
            weights: dict[str, float] = {}
            for token in tokenize(f"{document.title} {document.kind}"):
                weights[token] = weights.get(token, 0.0) + self._TITLE_WEIGHT
            for token in tokenize(f"{document.excerpt} {document.heading} {document.author}"):
                weights[token] = weights.get(token, 0.0) + 1.0
            counts.append(weights)
        frequency: dict[str, int] = {}
        for weights in counts:
            for token in weights:
                frequency[token] = frequency.get(token, 0) + 1
        total = len(documents)
        postings: dict[str, list[tuple[int, float]]] = {}
        for index, weights in enumerate(counts):
            for token, weight in weights.items():
                idf = math.log(1.0 + total / frequency[token])
                postings.setdefault(token, []).append((index, (1.0 + math.log(weight)) * idf))
        return postings

    def __len__(self) -> int:
        return len(self._documents)

    def __iter__(self) -> Iterator[CorpusDocument]:
        return iter(self._documents)

    def get(self, document_id: str) -> CorpusDocument | None:
        """The document with this id, or ``None``."""
        return self._by_id.get(document_id)

    def search(self, query: str, limit: int) -> list[CorpusDocument]:
        """Documents sharing words with ``query``, by summed TF-IDF weight, best first."""
        scores: dict[int, float] = {}
        for token in set(tokenize(query)):
            for index, weight in self._postings.get(token, ()):
                scores[index] = scores.get(index, 0.0) + weight
        ranked = sorted(scores, key=lambda index: (-scores[index], index))
        return [self._documents[index] for index in ranked[:limit]]
