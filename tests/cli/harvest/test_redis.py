"""``harvest --redis URL``: a Redis that refuses (the password, an ACL user) is said as a
refusal, exit 2, before any file is made; one that does not answer leaves the harvest to
the shared quota's fallback."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.helpers import cli
from tests.helpers.redis_server import RedisServer, redis_unavailable

pytestmark = pytest.mark.skipif(redis_unavailable() is not None, reason=str(redis_unavailable()))


@pytest.fixture(scope="module")
def guarded() -> Iterator[RedisServer]:
    """A Redis with a password and an ACL user who may run no script."""
    server = RedisServer(["--requirepass", "s3cret"])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def harvest(tmp_path: Path, url: str, *more: str) -> tuple[int, str]:
    run = cli("harvest", "--emulator", "-q", "grace", "--out", "d.jsonl", "--redis", url, *more,
              cwd=tmp_path)  # fmt: skip
    return run.code, run.err


@pytest.mark.parametrize(
    ("credentials", "says"),
    [(":wrong@", "refused the sign-in"), ("", "refused the sign-in"), ("nobody:s3cret@", "")],
    ids=["wrong password", "no password", "no such user"],
)
@pytest.mark.parametrize("resume", [(), ("--resume",)], ids=["new", "--resume"])
def test_a_refused_redis_is_exit_2_before_any_file_is_made(
    tmp_path: Path, guarded: RedisServer, credentials: str, says: str, resume: tuple[str, ...]
) -> None:
    if resume:  # a harvest to continue: its files left as they are
        assert (
            cli("harvest", "--emulator", "-q", "grace", "--out", "d.jsonl", cwd=tmp_path).code == 0
        )
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code, err = harvest(tmp_path, f"redis://{credentials}127.0.0.1:{guarded.port}/0", *resume)
    assert code == 2, err
    assert "--redis: Redis at redis://" in err and "refused" in err and says in err
    assert "s3cret" not in err and "wrong" not in err  # no password said
    assert "--resume" not in err  # nothing ran: nothing to resume
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing made


def test_a_redis_that_does_not_answer_leaves_the_harvest_to_its_fallback(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, err = harvest(tmp_path, f"redis://127.0.0.1:{port}/0")
    assert code == 0, err
    assert "refused" not in err and (tmp_path / "d.jsonl").read_text()


def test_a_redis_that_lets_the_harvest_in_shares_its_quota(
    tmp_path: Path, guarded: RedisServer
) -> None:
    code, err = harvest(tmp_path, f"redis://:s3cret@127.0.0.1:{guarded.port}/0")
    assert code == 0, err
    assert "refused" not in err and "did not answer" not in err
