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


# The five lookup skills: listed by the service, answered with invented artifacts --------

LOOKUPS = [
    ("saint_lookup", "Thérèse of Lisieux", "saint", "therese-of-lisieux"),
    ("person_lookup", "Cardinal Basil Hume", "person", "basil-hume"),
    ("pope_lookup", "Pius X", "pope", "pius-x"),
    ("diocese_lookup", "Archdiocese of Milan", "diocese", "milan"),
    ("diocese_statistics_lookup", "Westminster", "diocese_statistics", "westminster"),
]


@pytest.mark.parametrize(("skill", "query", "artifact", "canonical"), LOOKUPS)
async def test_lookup_skills_answer_by_name_and_by_canonical_id(
    wire: Wire, skill: str, query: str, artifact: str, canonical: str
) -> None:
    by_name = await wire.send(skill, text(query))
    assert by_name.result["status"]["state"] == "completed"
    [answer] = by_name.result["artifacts"]
    assert answer["name"] == artifact
    record, summary = answer["parts"]
    assert record["kind"] == "data" and summary["kind"] == "text" and summary["text"]
    assert record["data"]["id"] == canonical and record["data"]["name"]
    by_id = await wire.send(skill, text(canonical))
    assert by_id.artifact_parts() == answer["parts"]  # deterministic, the same record
    assert wire.emu.stats.count(skill=skill, outcome="ok") == 2


@pytest.mark.parametrize(
    ("skill", "reply"),
    [
        ("saint_lookup", "No saint found."),
        ("person_lookup", "No person found."),
        ("pope_lookup", "No pope found."),
        ("diocese_lookup", "No diocese found."),
        ("diocese_statistics_lookup", "No diocese found."),
    ],
)
async def test_lookup_skills_not_found(wire: Wire, skill: str, reply: str) -> None:
    answer = await wire.send(skill, text("xylophone quokka"))
    assert answer.result["status"]["state"] == "completed"
    assert answer.artifact_parts() == [{"kind": "text", "text": reply}]


async def test_lookup_shapes(wire: Wire) -> None:
    pope = (await wire.send("pope_lookup", text("Pope Leo XIV"))).artifact_parts()[0]["data"]
    assert pope == {
        "id": "leo-xiv",
        "name": "Leo XIV",
        "birth_name": "Robert Francis Prevost",
        "reign_start": 2025,
        "reign_end": None,
    }
    diocese = (await wire.send("diocese_lookup", text("rome"))).artifact_parts()[0]["data"]
    assert diocese["kind"] == "diocese" and diocese["country"] == "Italy"
    assert set(diocese["statistics"]) == {
        "year",
        "population",
        "catholics",
        "parishes",
        "total_priests",
    }
    assert diocese["financials"]["currency"] == "EUR"
    series = (await wire.send("diocese_statistics_lookup", text("rome"))).artifact_parts()
    table = series[0]["data"]
    assert len(table["metrics"]) == 19
    years = [row["year"] for row in table["rows"]]
    assert years == sorted(years) and len(years) == len(set(years)) > 1
    assert all(set(row) == {"year", *table["metrics"]} for row in table["rows"])
    assert table["rows"][-1]["year"] == diocese["statistics"]["year"]
    assert table["rows"][-1]["catholics"] == diocese["statistics"]["catholics"]


async def test_a_lookup_without_text_fails(wire: Wire) -> None:
    answer = await wire.send("saint_lookup", data({"id": "pius-x"}))
    assert answer.result["status"]["state"] == "failed"
    reason = answer.result["status"]["message"]["parts"][0]["text"]
    assert "saint_lookup" in reason


async def test_lookup_skills_draw_on_the_default_pool_unless_configured(
    start_wire: StartWire,
) -> None:
    from magisterium_async.testing import RateLimitConfig

    limits = RateLimitConfig(default=1, expensive=1)
    wire = await start_wire(rate_limits=limits)
    assert (await wire.send("pope_lookup", text("Pius X"))).result
    assert (await wire.send("document_search", text("grace"))).error["code"] == -32003
    wire = await start_wire(rate_limits=limits, skill_pools={"pope_lookup": "expensive"})
    assert (await wire.send("pope_lookup", text("Pius X"))).result
    assert (await wire.send("document_search", text("grace"))).result
    assert (await wire.send("catholic_qa", text("grace"))).error["code"] == -32003


def test_skill_pools_are_checked() -> None:
    from magisterium_async.testing import EmulatorConfig

    with pytest.raises(ValueError, match="skill_pools"):
        EmulatorConfig(skill_pools={"pope_lookup": "cheap"})  # type: ignore[dict-item]


async def test_the_client_reaches_every_lookup_skill_and_unknown_ones_are_named(
    wire: Wire,
) -> None:
    from magisterium_async import AsyncMagisterium, SkillNotFoundError

    emu = wire.emu
    async with AsyncMagisterium(token=emu.token, base_url=emu.base_url) as client:
        task = await client.send_message("Pius X", skill_id="pope_lookup")
        assert task.status.state == "completed"
        assert [a.name for a in task.artifacts] == ["pope"]
        with pytest.raises(SkillNotFoundError) as info:
            await client.send_message("Pius X", skill_id="pope_lookupp")
    assert info.value.skill_id == "pope_lookupp"
    assert "'pope_lookupp'" in str(info.value)
