"""What the commands print: rich rendering for people, JSON for programs."""

from __future__ import annotations

import json

import pytest

from magisterium_async import Answer, Citation, SearchResult, Task, TaskStatus
from magisterium_async._cli._output import Output, print_json, show_answer, show_results


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def _answer() -> Answer:
    return Answer(
        text="Grace is a participation in the life of God. [1]",
        citations=[
            Citation(
                document_title="Catechism",
                document_author="Church",
                document_year=1992,
                document_reference="CCC 1997",
                source_url="https://example.org/ccc",
            ),
            Citation(cited_text="no title here"),
        ],
        related_questions=["What is sanctifying grace?"],
        context_id="ctx-1",
        task=Task(id="task-1", context_id="ctx-1", status=TaskStatus(state="completed")),
    )


def test_an_answer_lists_its_sources_and_keeps_brackets_literal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    show_answer(_answer())
    out = capsys.readouterr().out
    assert "life of God. [1]" in out  # not swallowed as rich markup
    assert "[1] Catechism — Church, 1992, CCC 1997" in out
    assert "https://example.org/ccc" in out
    assert "[2] (untitled source)" in out
    assert "• What is sanctifying grace?" in out
    assert "context ctx-1" in out and "task task-1" in out


def test_json_of_an_answer_includes_its_task(capsys: pytest.CaptureFixture[str]) -> None:
    print_json(_answer())
    body = json.loads(capsys.readouterr().out)
    assert body["citations"][0]["document_year"] == 1992
    # The task as on the wire: camelCase, empty fields left out.
    assert body["task"] == {
        "kind": "task",
        "id": "task-1",
        "contextId": "ctx-1",
        "status": {"state": "completed"},
    }


def test_no_search_results_is_said_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    show_results("nothing", [])
    assert "No documents found for 'nothing'." in capsys.readouterr().out
    show_results("x", [SearchResult(id="7", url="https://e.org/7", title="Seven")])
    assert "Seven" in capsys.readouterr().out


def test_the_output_mode_prints_json_or_the_rendering(capsys: pytest.CaptureFixture[str]) -> None:
    shown: list[str] = []
    Output(json=True).result({"a": 1}, lambda: shown.append("human"))
    Output(json=True).summary({"ending": "done"}, lambda: ["Harvested"])
    Output(json=True).note("for people")
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"a": 1} and json.loads(captured.err) == {"ending": "done"}
    assert shown == []
    Output().result({"a": 1}, lambda: shown.append("human"))
    Output().summary({"ending": "done"}, lambda: ["Harvested", "  searched 1"])
    Output().note("for people")
    captured = capsys.readouterr()
    assert shown == ["human"] and captured.out == ""
    assert captured.err == "Harvested\n  searched 1\nfor people\n"
