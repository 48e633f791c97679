"""ask, search, fetch, readings, saints and the lookups against ``--emulator``."""

from __future__ import annotations

import json

from .helpers import cli


def test_search_prints_a_table_and_json() -> None:
    human = cli("search", "--emulator", "grace")
    assert human.code == 0, human.err
    assert "Ineffabilis Deus" in human.out and "10301" in human.out
    machine = cli("--json", "search", "--emulator", "grace")
    assert machine.code == 0, machine.err
    results = json.loads(machine.out)
    assert results and {"id", "url", "title"} <= results[0].keys()
    assert "Ineffabilis Deus" in [r["title"] for r in results]
    none = cli("search", "--emulator", "zzqqxx")
    assert (none.code, none.out.strip()) == (0, "No documents found for 'zzqqxx'.")


def test_ask_prints_the_answer_sources_and_related_questions() -> None:
    run = cli("ask", "--emulator", "What", "is", "grace?")
    assert run.code == 0, run.err
    assert "Sources" in run.out and "[1] Ineffabilis Deus — Pope Pius IX, 1854" in run.out
    assert "https://www.magisterium.com/library/10301" in run.out
    assert "Related questions" in run.out


def test_ask_json_is_the_answer_with_its_task() -> None:
    run = cli("ask", "--emulator", "--json", "What is grace?")
    assert run.code == 0, run.err
    answer = json.loads(run.out)
    assert {"text", "citations", "related_questions", "context_id", "task"} <= answer.keys()
    assert answer["citations"][0]["document_title"] == "Ineffabilis Deus"
    assert answer["task"]["status"]["state"] == "completed"


def test_fetch_prints_a_document_and_json() -> None:
    human = cli("fetch", "--emulator", "10301")
    assert human.code == 0, human.err
    assert "Ineffabilis Deus" in human.out and "Pope Pius IX" in human.out
    machine = cli("fetch", "--emulator", "--json", "10301")
    document = json.loads(machine.out)
    assert document["id"] == "10301" and document["author"] == "Pope Pius IX"
    assert "Immaculate Conception" in document["text"]


def test_fetch_of_a_missing_document_exits_6() -> None:
    run = cli("fetch", "--emulator", "424242")
    assert run.code == 6
    assert run.out == ""
    assert run.err.strip() == (
        "magisterium-async: error: nothing found for '424242': the service answered "
        "'Document not found.'"
    )


def test_readings_and_saints() -> None:
    readings = cli("readings", "--emulator", "next", "Sunday")
    assert readings.code == 0, readings.err
    assert "Gospel:" in readings.out
    saints = cli("saints", "--emulator", "--json", "2026-03-19")
    assert saints.code == 0, saints.err
    body = json.loads(saints.out)
    assert body["when"] == "2026-03-19" and "Saint Joseph" in body["text"]


def test_a_blank_day_is_refused_as_the_library_refuses_it_never_taken_for_today() -> None:
    for command in ("readings", "saints"):
        for blank in ("", "   "):
            run = cli(command, "--emulator", blank)
            assert run.code == 2, (command, blank, run.err)
            assert "when must not be empty or blank" in run.err and run.out == ""


def test_readings_not_found_exits_6() -> None:
    run = cli("readings", "--emulator", "no", "such", "day")
    assert run.code == 6
    assert "the service answered 'No mass readings found.'" in run.err


def test_a_lookup_prints_the_text_and_the_data_it_got() -> None:
    human = cli("pope-lookup", "--emulator", "Pius", "X")
    assert human.code == 0, human.err
    assert "Pope Pius X (Giuseppe Melchiorre Sarto), 1903-1914" in human.out
    assert '"birth_name": "Giuseppe Melchiorre Sarto"' in human.out
    machine = cli("--json", "saint-lookup", "--emulator", "Thérèse of Lisieux")
    assert machine.code == 0, machine.err
    found = json.loads(machine.out)
    assert found["data"][0]["feast_day"] == "10-01" and found["text"]
    assert found["task"]["status"]["state"] == "completed"


def test_every_lookup_of_the_skill_table_is_a_command() -> None:
    from magisterium_async._cli import build_parser
    from magisterium_async._skills import LOOKUPS

    for skill in LOOKUPS:
        args = build_parser().parse_args([skill.id.replace("_", "-"), "Westminster"])
        assert args.words == ["Westminster"]
    run = cli("diocese-statistics-lookup", "--emulator", "--json", "Westminster")
    assert run.code == 0, run.err
    assert len(json.loads(run.out)["data"][0]["metrics"]) == 19
