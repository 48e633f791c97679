"""``rebuild``: a damaged output written again from its harvest's state, line for line as
the harvest wrote it, sending nothing; CSV for tools that load a table; never over a file."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import sqlite3
from pathlib import Path

import pytest

from tests.cli.helpers import cli, jsonl

HARVEST = ("harvest", "--emulator")
QUERIES = ("-q", "grace", "-q", "holy spirit", "-q", "mercy", "-q", "Eucharist")
STATE = "docs.jsonl.state.sqlite"


def harvested(tmp_path: Path) -> bytes:
    run = cli(*HARVEST, *QUERIES, "--out", "docs.jsonl", cwd=tmp_path)
    assert run.code == 0, run.err
    whole = (tmp_path / "docs.jsonl").read_bytes()
    assert len(whole.splitlines()) >= 5
    return whole


def _delete_a_middle_line(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    del lines[len(lines) // 2]
    return b"".join(lines)


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b.replace(b'"title":"', b'"title":"my ', 1),
        _delete_a_middle_line,
        lambda b: b[: len(b) // 3],
        lambda b: b"",
    ],
    ids=["a line edited", "a middle line deleted", "truncated", "emptied"],
)
def test_a_damaged_output_is_rebuilt_line_for_line_and_the_harvest_goes_on(
    tmp_path: Path, damage: object
) -> None:
    original = harvested(tmp_path)
    out = tmp_path / "docs.jsonl"
    damaged = damage(original)  # type: ignore[operator]
    out.write_bytes(damaged)
    more = (*QUERIES, "-q", "saints")
    refused = cli(*HARVEST, *more, "--out", "docs.jsonl", "--resume", cwd=tmp_path)
    assert refused.code == 2, refused.err
    command = f"magisterium-async rebuild {STATE} --out docs.rebuilt.jsonl"
    assert f"Or rebuild it from the state, sending nothing: `{command}`" in refused.err

    # As the refusal says: no request, and the file as the harvest wrote it.
    rebuilt = cli(*command.split()[1:], cwd=tmp_path)
    assert rebuilt.code == 0, rebuilt.err
    assert "nothing was sent" in rebuilt.err
    assert (tmp_path / "docs.rebuilt.jsonl").read_bytes() == original
    assert out.read_bytes() == damaged  # the user's file, left as it is

    # The rebuilt file is the harvest's output now: the harvest continues into it.
    go_on = ("--out", "docs.rebuilt.jsonl", "--state", STATE, "--resume")
    resumed = cli(*HARVEST, *more, *go_on, "--json", cwd=tmp_path)
    assert resumed.code == 0, resumed.err
    assert json.loads(resumed.err)["searched"] == 1  # only the new query: no quota spent again
    grown = (tmp_path / "docs.rebuilt.jsonl").read_bytes()
    assert grown.startswith(original) and len(grown) > len(original)
    ids = [record["id"] for record in jsonl(grown.decode())]
    assert len(ids) == len(set(ids))


def test_the_rebuild_never_replaces_a_file(tmp_path: Path) -> None:
    harvested(tmp_path)
    output = cli("rebuild", "docs.jsonl", cwd=tmp_path)  # the output, for its state
    assert output.code == 2
    assert f"docs.jsonl is not a harvest state (its harvest's is {STATE})" in output.err
    mine = tmp_path / "mine.jsonl"
    mine.write_bytes(b"my notes\n")
    refused = cli("rebuild", STATE, "--out", "mine.jsonl", cwd=tmp_path)
    assert refused.code == 2
    assert "--out mine.jsonl exists (a file): the rebuild writes only a new file" in refused.err
    assert mine.read_bytes() == b"my notes\n"
    for path in ("docs.jsonl", "."):
        assert cli("rebuild", STATE, "--out", path, cwd=tmp_path).code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl", STATE, "mine.jsonl"]


def test_a_rebuild_to_stdout_and_as_csv(tmp_path: Path) -> None:
    original = harvested(tmp_path)
    to_stdout = cli("rebuild", STATE, cwd=tmp_path)
    assert to_stdout.code == 0, to_stdout.err
    assert to_stdout.out.encode() == original

    table = cli("rebuild", STATE, "--format", "csv", "--out", "docs.csv", cwd=tmp_path)
    assert table.code == 0, table.err
    text = (tmp_path / "docs.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    records = jsonl(original.decode())
    assert [row["id"] for row in rows] == [record["id"] for record in records]
    for row, record in zip(rows, records, strict=True):
        assert row["text"] == record["text"] and row["title"] == record["title"]
        assert json.loads(row["queries"]) == record["queries"]
        assert json.loads(row["extra"]) == record["extra"]
    # A table is not the harvest's output: the harvest still continues into docs.jsonl.
    resumed = cli(*HARVEST, *QUERIES, "--out", "docs.jsonl", "--resume", cwd=tmp_path)
    assert resumed.code == 0, resumed.err


def test_records_a_killed_run_left_are_rebuilt_in_the_order_of_the_file(tmp_path: Path) -> None:
    """A run killed between writing two records and recording them leaves them after the
    mark, in the order it wrote them (not the order it found them): the resume keeps them,
    and the rebuild has them where the file has them."""
    original = harvested(tmp_path)
    lines = original.splitlines(keepends=True)
    kept = b"".join(lines[:-2])
    left = [lines[-1], lines[-2]]  # written in the other order than found
    out = tmp_path / "docs.jsonl"
    out.write_bytes(kept + b"".join(left))
    stat = out.stat()
    mark = [stat.st_dev, stat.st_ino, len(kept), "sha256:" + hashlib.sha256(kept).hexdigest()]
    db = sqlite3.connect(tmp_path / STATE)
    with db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'output'", (json.dumps(mark),))
        for line in left:  # fetched, not yet delivered: what the killed run had recorded
            db.execute(
                "UPDATE documents SET status = 'fetched', line = NULL WHERE id = ?",
                (json.loads(line)["id"],),
            )
    db.close()
    resumed = cli(*HARVEST, *QUERIES, "--out", "docs.jsonl", "--resume", cwd=tmp_path)
    assert resumed.code == 0, resumed.err
    assert out.read_bytes() == kept + b"".join(left)  # each once, nothing written again
    rebuilt = cli("rebuild", STATE, cwd=tmp_path)
    assert rebuilt.code == 0, rebuilt.err
    assert rebuilt.out.encode() == out.read_bytes()


def test_what_the_rebuild_refuses(tmp_path: Path) -> None:
    missing = cli("rebuild", "nowhere.sqlite", cwd=tmp_path)
    assert missing.code == 2 and "there is no harvest state at nowhere.sqlite" in missing.err
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"mine\n" * 40)
    foreign = cli("rebuild", "notes.txt", "--out", "x.jsonl", cwd=tmp_path)
    assert foreign.code == 2 and "notes.txt is not a harvest state: give rebuild" in foreign.err
    assert notes.read_bytes() == b"mine\n" * 40
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
