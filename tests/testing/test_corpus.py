"""The bundled corpus and the synthetic one."""

from __future__ import annotations

import tracemalloc

import pytest

from magisterium_async.testing import (
    BundledCorpus,
    Corpus,
    CorpusDocument,
    SearchHit,
    SyntheticCorpus,
)
from magisterium_async.testing.emulator.content._corpus import tokenize


def test_bundled_corpus_holds_real_documents() -> None:
    corpus = BundledCorpus()
    assert isinstance(corpus, Corpus)
    documents = list(corpus)
    assert len(documents) >= 30
    assert len({document.id for document in documents}) == len(documents)
    for document in documents:
        assert document.id.isdigit()
        assert document.url == f"https://www.magisterium.com/library/{document.id}"
        assert document.title and document.author and document.ref and document.excerpt
        assert 1850 <= document.year <= 2025
        assert document.title in document.content
        assert document.excerpt in document.content
        assert corpus.get(document.id) is document
    titles = {document.title for document in documents}
    assert {"Lumen Gentium", "Rerum Novarum", "Laudato Si'", "Evangelii Gaudium"} <= titles
    assert corpus.get("0") is None


def test_bundled_search_ranks_titles_first_and_caps_results() -> None:
    corpus = BundledCorpus()
    assert corpus.search("Gaudium", 10)[0].title in {"Gaudium et Spes", "Evangelii Gaudium"}
    assert corpus.search("gaudium spes", 10)[0].title == "Gaudium et Spes"
    assert [d.title for d in corpus.search("faith reason", 1)] == ["Fides et Ratio"]
    assert len(corpus.search("the church", 5)) == 5
    assert corpus.search("", 10) == []
    assert corpus.search("of the and", 10) == []


def test_bundled_search_is_accent_and_case_blind() -> None:
    corpus = BundledCorpus()
    assert corpus.search("LAUDATO SÍ", 1)[0].title == "Laudato Si'"


def test_custom_documents() -> None:
    doc = CorpusDocument("1", "Alpha", "A", 2000, "R", "https://x/1", "beta gamma")
    corpus = BundledCorpus([doc])
    assert corpus.search("gamma", 10) == [doc]
    with pytest.raises(ValueError, match="unique"):
        BundledCorpus([doc, doc])


def test_tokenize() -> None:
    assert tokenize("What are the Apostles' teachings?") == ["apostle", "teaching"]
    assert tokenize("Jesus' grace") == ["jesus", "grace"]


def test_synthetic_documents_are_deterministic() -> None:
    one, two = SyntheticCorpus(size=100_000, seed=7), SyntheticCorpus(size=100_000, seed=7)
    other = SyntheticCorpus(size=100_000, seed=8)
    ids = [one.id_at(n) for n in (0, 1, 500, 99_999)]
    assert ids == ["100000", "100001", "100500", "199999"]
    for document_id in ids:
        document = one.get(document_id)
        assert document is not None
        assert document == two.get(document_id)
        assert document.id == document_id
        assert document.id.isdigit()
        assert document.url.endswith(document_id)
        assert document.title and document.author and document.ref and document.excerpt
    assert [one.get(i) for i in ids] != [other.get(i) for i in ids]


def test_synthetic_ids_outside_the_range_are_unknown() -> None:
    corpus = SyntheticCorpus(size=100, seed=0, first_id=500)
    assert corpus.get("499") is None
    assert corpus.get("600") is None
    assert corpus.get("abc") is None
    assert corpus.get("-1") is None
    assert corpus.get("599") is not None
    assert "550" in corpus
    assert len(corpus) == 100
    assert list(corpus.ids())[:2] == ["500", "501"]
    with pytest.raises(IndexError):
        corpus.id_at(100)


def test_huge_synthetic_corpus_is_not_materialised() -> None:
    # Memory, not time, shows it: a materialised corpus of 10**12 would need terabytes,
    # while a machine's speed says nothing about the code.
    tracemalloc.start()
    try:
        corpus = SyntheticCorpus(size=10**12, seed=1)
        last = corpus.get(corpus.id_at(10**12 - 1))
        results = corpus.search("grace", 10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert last is not None
    assert len(results) <= 10
    assert peak < 1_000_000


def test_synthetic_search_is_deterministic_and_bounded() -> None:
    corpus = SyntheticCorpus(size=100_000, seed=2)
    first = corpus.search("Grace and nature", 10)
    assert first == SyntheticCorpus(size=100_000, seed=2).search("grace NATURE", 10)
    assert 1 <= len(first) <= 10
    assert len({document.id for document in first}) == len(first)
    assert corpus.search("grace and nature", 3) == first[:3]
    assert corpus.result_numbers("grace nature", 10) == [int(d.id) - 100_000 for d in first]
    assert SyntheticCorpus(size=100_000, seed=3).search("grace nature", 10) != first


def test_synthetic_search_lists_what_fetch_returns() -> None:
    corpus = SyntheticCorpus(size=1000, seed=4)
    hits = corpus.search("mercy", 10)
    assert all(isinstance(hit, SearchHit) for hit in hits)
    for hit in hits:
        document = corpus.get(hit.id)
        assert document is not None
        assert (document.id, document.url, document.title) == tuple(hit)


def test_synthetic_queries_sharing_words_share_results() -> None:
    corpus = SyntheticCorpus(size=100_000, seed=0)
    grace = {d.id for d in corpus.search("grace", 10)}
    grace_and_law = {d.id for d in corpus.search("grace and law", 10)}
    law = {d.id for d in corpus.search("law", 10)}
    assert grace & grace_and_law
    assert law & grace_and_law
    long_query = corpus.search("faith hope charity justice mercy peace truth", 10)
    assert len(long_query) == 10


def test_synthetic_search_space_and_misses() -> None:
    dense = SyntheticCorpus(size=100_000, seed=0, search_space=50)
    found: set[str] = set()
    for word in ("grace", "law", "faith", "hope", "love", "peace", "truth", "mercy"):
        found.update(d.id for d in dense.search(word, 10))
    assert all(100_000 <= int(document_id) < 100_050 for document_id in found)
    assert SyntheticCorpus(size=1000, seed=0, miss_rate=1.0).search("grace", 10) == []
    assert SyntheticCorpus(size=1000).search("the of and", 10) == []
    some = SyntheticCorpus(size=1000, miss_rate=0.5)
    hits = [bool(some.search(f"word{n}", 10)) for n in range(200)]
    assert 60 < sum(hits) < 140


def test_synthetic_corpus_is_validated() -> None:
    with pytest.raises(ValueError):
        SyntheticCorpus(size=0)
    with pytest.raises(ValueError):
        SyntheticCorpus(size=10, search_space=11)
    with pytest.raises(ValueError):
        SyntheticCorpus(size=10, miss_rate=2.0)
