"""Each skill's happy path and its "nothing found" answer, over HTTP."""

from __future__ import annotations

import asyncio
import datetime

import pytest

from magisterium_async.testing import SyntheticCorpus

from .conftest import StartWire
from .helpers import Wire, data, text

THURSDAY = datetime.date(2026, 3, 19)


@pytest.fixture
async def dated(start_wire: StartWire) -> Wire:
    """An emulator whose "today" is Thursday 19 March 2026."""
    return await start_wire(today=lambda: THURSDAY)


async def test_document_search_ranks_by_relevance(wire: Wire) -> None:
    [part] = (await wire.send("document_search", text("Lumen Gentium"))).artifact_parts()
    assert part["kind"] == "data"
    results = part["data"]["results"]
    assert results[0] == {
        "id": "10234",
        "url": "https://www.magisterium.com/library/10234",
        "title": "Lumen Gentium",
    }
    for result in results:
        assert set(result) == {"id", "url", "title"}
        assert result["id"].isdigit()


async def test_document_search_finds_by_text(wire: Wire) -> None:
    parts = (await wire.send("document_search", text("subsidiarity injustice"))).artifact_parts()
    titles = [result["title"] for result in parts[0]["data"]["results"]]
    assert titles[0] == "Quadragesimo Anno"


async def test_document_search_with_no_match_is_an_empty_list(wire: Wire) -> None:
    parts = (await wire.send("document_search", text("xylophone quokka"))).artifact_parts()
    assert parts == [{"kind": "data", "data": {"results": []}}]


async def test_document_search_caps_results(start_wire: StartWire) -> None:
    wire = await start_wire(max_results=3)
    parts = (await wire.send("document_search", text("the church and the world"))).artifact_parts()
    assert len(parts[0]["data"]["results"]) == 3


async def test_document_fetch_by_data_part(wire: Wire) -> None:
    answer = await wire.send("document_fetch", data({"id": "10328"}))
    assert answer.result["artifacts"][0]["name"] == "document"
    body, meta = answer.artifact_parts()
    assert body["kind"] == "text"
    assert "our common home" in body["text"]
    assert meta["kind"] == "data"
    assert meta["data"] == {
        "id": "10328",
        "title": "Laudato Si'",
        "author": "Pope Francis",
        "ref": "AAS 107 (2015) 847-945",
        "year": 2015,
        "url": "https://www.magisterium.com/library/10328",
    }


async def test_document_fetch_takes_a_text_part_as_the_id(wire: Wire) -> None:
    parts = (await wire.send("document_fetch", text(" 20003 "))).artifact_parts()
    assert parts[1]["data"]["ref"] == "CCC 1324"


async def test_document_fetch_not_found(wire: Wire) -> None:
    for part in (data({"id": "99999999"}), text("not-an-id")):
        answer = await wire.send("document_fetch", part)
        assert answer.result["status"]["state"] == "completed"
        assert answer.artifact_parts() == [{"kind": "text", "text": "Document not found."}]


async def test_catholic_qa_answers_with_citations(wire: Wire) -> None:
    answer = await wire.send("catholic_qa", text("What does the Church teach about the Eucharist?"))
    assert answer.result["artifacts"][0]["name"] == "catholic_qa_response"
    answer_part, citations_part, related_part = answer.artifact_parts()
    assert answer_part["kind"] == "text"
    assert "Eucharist" in answer_part["text"]
    citations = citations_part["data"]["citations"]
    assert citations
    for index, citation in enumerate(citations):
        assert set(citation) == {
            "cited_text",
            "cited_text_heading",
            "document_title",
            "document_index",
            "document_author",
            "document_year",
            "document_reference",
            "source_url",
        }
        assert citation["document_index"] == index
        assert isinstance(citation["document_year"], int)
        assert citation["source_url"].startswith("https://www.magisterium.com/")
    assert any("Eucharist" in citation["document_title"] for citation in citations)
    related = related_part["data"]["related_questions"]
    assert related and all(isinstance(question, str) for question in related)


async def test_catholic_qa_without_sources_answers_plainly(wire: Wire) -> None:
    parts = (await wire.send("catholic_qa", text("xylophone quokka?"))).artifact_parts()
    assert len(parts) == 1
    assert parts[0]["kind"] == "text"
    assert parts[0]["text"]


async def test_catholic_qa_latency_is_configurable(start_wire: StartWire) -> None:
    wire = await start_wire(qa_latency=0.05)
    loop_time = asyncio.get_running_loop().time
    started = loop_time()
    await wire.send("catholic_qa", text("grace"))
    assert loop_time() - started >= 0.045


async def test_liturgical_readings_for_a_named_feast(dated: Wire) -> None:
    answer = await dated.send("liturgical_readings", text("Easter Sunday 2026"))
    assert answer.result["artifacts"][0]["name"] == "mass_readings"
    [part] = answer.artifact_parts()
    assert part["kind"] == "text"
    assert part["text"].startswith("Sunday, April 5, 2026\nEaster Sunday")
    assert "Gospel: John 20:1-9" in part["text"]


@pytest.mark.parametrize(
    ("query", "heading"),
    [
        ("today", "Thursday, March 19, 2026"),
        ("tomorrow", "Friday, March 20, 2026"),
        ("yesterday", "Wednesday, March 18, 2026"),
        ("next Sunday", "Sunday, March 22, 2026"),
        ("2026-12-25", "Friday, December 25, 2026"),
    ],
)
async def test_liturgical_readings_relative_to_today(dated: Wire, query: str, heading: str) -> None:
    [part] = (await dated.send("liturgical_readings", text(query))).artifact_parts()
    assert part["text"].splitlines()[0] == heading


async def test_liturgical_readings_today_is_st_joseph(dated: Wire) -> None:
    [part] = (await dated.send("liturgical_readings", text("today"))).artifact_parts()
    assert "Saint Joseph" in part["text"]
    assert "Matthew 1:16, 18-21, 24a" in part["text"]


@pytest.mark.parametrize("query", ["sometime soon", "1850-01-01", "Christmas 2200", ""])
async def test_liturgical_readings_not_found(dated: Wire, query: str) -> None:
    parts = (await dated.send("liturgical_readings", text(query))).artifact_parts()
    assert parts == [{"kind": "text", "text": "No mass readings found."}]


async def test_saints_of_the_day_by_data_part(dated: Wire) -> None:
    answer = await dated.send("saints_of_the_day", data({"date": "2026-06-29"}))
    assert answer.result["artifacts"][0]["name"] == "martyrology"
    [part] = answer.artifact_parts()
    assert part["kind"] == "text"
    assert "Saints Peter and Paul" in part["text"]
    assert "June 29, 2026" in part["text"]


async def test_saints_of_the_day_by_text_query(dated: Wire) -> None:
    [part] = (await dated.send("saints_of_the_day", text("today"))).artifact_parts()
    assert "Saint Joseph" in part["text"]
    [part] = (await dated.send("saints_of_the_day", text("All Saints 2030"))).artifact_parts()
    assert "All Saints" in part["text"]


@pytest.mark.parametrize(
    "part",
    [
        data({"date": "2026-02-30"}),
        data({"date": "19/03/2026"}),
        data({"date": "1899-12-31"}),
        data({"date": 20260319}),
        text("the day the music died"),
    ],
)
async def test_saints_of_the_day_not_found(dated: Wire, part: dict[str, object]) -> None:
    parts = (await dated.send("saints_of_the_day", part)).artifact_parts()
    assert parts == [{"kind": "text", "text": "No martyrology data found."}]


async def test_synthetic_corpus_serves_the_document_skills(start_wire: StartWire) -> None:
    corpus = SyntheticCorpus(size=100_000, seed=3)
    wire = await start_wire(corpus=corpus)
    results = (await wire.send("document_search", text("grace and truth"))).artifact_parts()
    listed = results[0]["data"]["results"]
    assert len(listed) == 10
    first = listed[0]
    parts = (await wire.send("document_fetch", data({"id": first["id"]}))).artifact_parts()
    assert parts[1]["data"]["title"] == first["title"]
    assert parts[1]["data"]["url"] == first["url"]
    qa = (await wire.send("catholic_qa", text("grace"))).artifact_parts()
    assert len(qa[1]["data"]["citations"]) == 3
