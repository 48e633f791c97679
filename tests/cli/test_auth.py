"""``login``, ``logout`` and ``auth status`` as users run them, and exit code 3 for sign-ins."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from magisterium_async._redis import connect
from tests.helpers.credentials import PASSWORD, load_credentials, require_password
from tests.helpers.oauth_fake import FakeAuthServer, auth_server, redirect_location, sign_in
from tests.helpers.redis_server import RedisServer

from .helpers import TIMEOUT, LoginRun, Run, clean_env
from .helpers import cli as sync_cli

__all__ = ["auth_server"]


async def signed_in(
    auth_server: FakeAuthServer, path: Path | None, env: dict[str, str] | None = None
) -> Run:
    """``magisterium-async login`` to ``path``, the browser step done by following the URL."""
    login = await LoginRun.start(auth_server.base_url, path, env=env)
    async with aiohttp.ClientSession() as session, session.get(await login.url()):
        pass
    run = await login.finish()
    assert run.code == 0, run.err
    return run


async def cli(*args: str, stdin: bytes | None = None, **env: str) -> Run:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "magisterium_async",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(**env),
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), TIMEOUT)
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


async def test_login_by_the_browser_redirect(auth_server: FakeAuthServer, tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    login = await LoginRun.start(auth_server.base_url, path)
    url = await login.url()
    async with aiohttp.ClientSession() as session, session.get(url) as landed:
        assert landed.status == 200
        assert "Signed in" in await landed.text()
    run = await login.finish()
    assert run.code == 0, run.err
    assert "Signed in to" in run.err and str(path) in run.err
    stored = load_credentials(path)
    assert stored is not None
    assert stored.access_token not in run.err + run.out
    assert str(stored.refresh_token) not in run.err + run.out
    assert os.stat(path).st_mode & 0o777 == 0o600


async def test_login_by_the_pasted_url(auth_server: FakeAuthServer, tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    login = await LoginRun.start(auth_server.base_url, path)
    location = await redirect_location(await login.url())
    run = await login.finish((location + "\n").encode())
    assert run.code == 0, run.err
    assert "paste" in run.err
    # The wait says until when: the sign-in is given up after 10 minutes.
    assert re.search(r"Waiting for the browser until \d\d:\d\d:\d\d \(10m00s\)", run.err)
    stored = load_credentials(path)
    assert stored is not None and stored.access_token in auth_server.access


async def test_status_and_logout(auth_server: FakeAuthServer, tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    await signed_in(auth_server, path)
    stored = load_credentials(path)
    assert stored is not None

    status = await cli("auth", "status", "--credentials", str(path))
    assert status.code == 0, status.err
    assert auth_server.origin in status.out and "a2a" in status.out
    as_json = await cli("auth", "status", "--credentials", str(path), "--json")
    data = json.loads(as_json.out)
    assert data["issuer"] == auth_server.origin and data["scopes"] == ["a2a"]
    assert data["refreshable"] is True and data["expired"] is False
    for run in (status, as_json):
        assert stored.access_token not in run.out + run.err

    out = await cli("logout", "--credentials", str(path))
    assert out.code == 0, out.err
    assert "revoked" in out.err and not path.exists()
    assert auth_server.refresh_tokens == {}
    gone = await cli("auth", "status", "--credentials", str(path))
    assert gone.code == 3 and "not signed in" in gone.err and "login" in gone.err


async def test_a_command_uses_the_stored_sign_in(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    await signed_in(auth_server, path)
    run = await cli(
        "search", "grace", "--base-url", auth_server.base_url, "--credentials", str(path), "--json"
    )
    assert run.code == 0, run.err
    assert json.loads(run.out) == []


async def test_a_revoked_sign_in_exits_3_saying_to_log_in(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    await signed_in(auth_server, path)
    auth_server.revoke_all()
    run = await cli(
        "search", "grace", "--base-url", auth_server.base_url, "--credentials", str(path)
    )
    assert run.code == 3
    assert "magisterium-async login" in run.err and len(run.err.strip().splitlines()) == 1


async def test_an_unsafe_file_exits_3_and_sends_nothing(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    await signed_in(auth_server, path)
    path.chmod(0o640)
    before = (list(auth_server.requests), auth_server.rpc_calls)
    run = await cli(
        "search", "grace", "--base-url", auth_server.base_url, "--credentials", str(path)
    )
    assert run.code == 3
    assert f"chmod 600 {path}" in run.err
    assert (auth_server.requests, auth_server.rpc_calls) == before


async def test_no_sign_in_anywhere_exits_3_naming_login(tmp_path: Path) -> None:
    run = await cli("search", "grace", XDG_CONFIG_HOME=str(tmp_path))
    assert run.code == 3
    assert "MAGISTERIUM_TOKEN" in run.err and "magisterium-async login" in run.err


# A sign-in kept in Redis ----------------------------------------------------------------


async def test_login_status_search_and_logout_on_redis_never_show_its_password(
    auth_server: FakeAuthServer, redis_server: RedisServer
) -> None:
    url = await require_password(redis_server)
    masked = url.replace(PASSWORD, "***")
    login = await LoginRun.start(auth_server.base_url, url)  # type: ignore[arg-type]
    async with aiohttp.ClientSession() as session, session.get(await login.url()):
        pass
    runs = [await login.finish()]
    assert runs[0].code == 0, runs[0].err
    assert f"the credentials are in {masked}" in runs[0].err
    base = ["--base-url", auth_server.base_url]
    runs.append(await cli("auth", "status", "--credentials", url, *base))
    assert runs[-1].code == 0 and auth_server.origin in runs[-1].out and masked in runs[-1].out
    runs.append(await cli("search", "grace", *base, "--json", MAGISTERIUM_CREDENTIALS=url))
    assert runs[-1].code == 0, runs[-1].err
    runs.append(await cli("logout", "--credentials", url, *base))
    assert runs[-1].code == 0 and "revoked" in runs[-1].err, runs[-1].err
    runs.append(await cli("auth", "status", "--credentials", url, *base))
    assert runs[-1].code == 3 and f"login --credentials {masked}" in runs[-1].err
    assert auth_server.refresh_tokens == {}
    for run in runs:
        assert PASSWORD not in run.out + run.err
    assert not list(Path.cwd().glob("redis:*"))


async def test_a_sign_in_lost_from_redis_exits_3_naming_the_login_command(
    auth_server: FakeAuthServer, redis_server: RedisServer
) -> None:
    url = await require_password(redis_server)
    await sign_in(auth_server, url)
    redis = connect(url, 5.0).client
    try:
        await redis.flushall()  # a restart without persistence
    finally:
        await redis.aclose()
    run = await cli("search", "grace", "--base-url", auth_server.base_url, "--credentials", url)
    assert run.code == 3, run.err
    masked = url.replace(PASSWORD, "***")
    assert f"magisterium-async login --credentials {masked}" in run.err
    assert PASSWORD not in run.err + run.out


async def test_a_redis_that_refuses_the_url_is_a_refusal_exit_2_before_the_browser(
    auth_server: FakeAuthServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    url = await require_password(redis_server)
    base = ["--base-url", auth_server.base_url]
    for wrong in (url.replace(PASSWORD, "guessed"), url.replace(":" + PASSWORD, "nobody:x")):
        for words in (["login", "--no-browser"], ["auth", "status"], ["logout"]):
            run = await cli(*words, *base, "--credentials", wrong, stdin=b"")
            assert run.code == 2, (words, run.err)
            assert run.err.startswith("magisterium-async: error: --credentials: Redis at ")
            env = await cli(*words, *base, stdin=b"", MAGISTERIUM_CREDENTIALS=wrong)
            assert env.code == 2 and "$MAGISTERIUM_CREDENTIALS: Redis at " in env.err, env.err
            assert "refused the sign-in" in run.err and "check the user and password" in run.err
            assert "did not answer" not in run.err and "cannot reach" not in run.err
            assert "guessed" not in run.err and PASSWORD not in run.err
    assert (auth_server.requests, auth_server.rpc_calls) == ([], 0)  # not even discovery


def test_an_unsupported_location_exits_2_and_writes_no_file(tmp_path: Path) -> None:
    for location in ("xyz://127.0.0.1:1/0", "http://127.0.0.1:1/credentials"):
        run = sync_cli("login", "--no-browser", "--credentials", location, cwd=tmp_path)
        assert run.code == 2, run.err
        assert "redis+cluster://" in run.err and "redis+sentinel://" in run.err
        run = sync_cli("search", "grace", cwd=tmp_path, env={"MAGISTERIUM_CREDENTIALS": location})
        assert run.code == 2 and "MAGISTERIUM_CREDENTIALS" in run.err, run.err
    assert list(tmp_path.iterdir()) == []


# A store that holds something else ----------------------------------------------------


async def test_a_corrupt_credentials_file_never_traps_the_user(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    """The user's steps: ``echo '{' > ~/.config/magisterium-async/credentials.json``, then
    every command. Each says which file and which command gets out; ``login`` replaces
    it, keeping it aside; ``logout`` removes it."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    path = tmp_path / "config" / "magisterium-async" / "credentials.json"
    path.parent.mkdir(parents=True)
    path.write_text("{\n")
    path.chmod(0o600)
    base = ["--base-url", auth_server.base_url]
    for words in (["auth", "status"], ["search", "grace", *base]):
        run = await cli(*words, **env)
        assert run.code == 3, run.err
        assert str(path) in run.err and len(run.err.strip().splitlines()) == 1
        # The default file: the commands need no --credentials to find it.
        assert "`magisterium-async login` replaces it" in run.err
        assert "`magisterium-async logout` removes it" in run.err
    assert auth_server.rpc_calls == 0

    login = await signed_in(auth_server, None, env)
    [aside] = path.parent.glob("credentials.json.corrupt-*")
    assert f"moved it to {aside}" in login.err
    assert aside.read_text() == "{\n"  # kept as it was
    assert load_credentials(path) is not None
    search = await cli("search", "grace", *base, "--json", **env)
    assert search.code == 0, search.err

    path.write_bytes(b"\x00" * 100)
    out = await cli("logout", **env)
    assert out.code == 0, out.err
    assert "held no readable sign-in" in out.err and str(path) in out.err
    assert not path.exists() and aside.exists()
    status = await cli("auth", "status", **env)
    assert status.code == 3 and "not signed in" in status.err


async def test_another_versions_file_named_by_credentials_is_replaced_by_login(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "mine.json"
    await signed_in(auth_server, path)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "version": 99}))
    run = await cli("auth", "status", "--credentials", str(path))
    assert run.code == 3 and "another version" in run.err
    assert f"`magisterium-async login --credentials {path}` replaces it" in run.err
    assert data["access_token"] not in run.err
    login = await signed_in(auth_server, path)
    assert "moved it to" in login.err
    kept = await asyncio.to_thread(lambda: list(tmp_path.glob("mine.json.corrupt-*")))
    assert len(kept) == 1
    assert (await cli("auth", "status", "--credentials", str(path))).code == 0


@pytest.fixture
def not_files(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """Paths a careless user names for the credentials that are no file: a directory, the
    system's own /dev/null, a FIFO no one writes to, a socket."""
    os.mkfifo(tmp_path / "fifo", 0o600)
    (tmp_path / "dir").mkdir()
    with socket.socket(socket.AF_UNIX) as bound:
        bound.bind(str(tmp_path / "sock"))
        yield {
            "a directory": tmp_path / "dir",
            "a character device": Path(os.devnull),
            "a FIFO (named pipe)": tmp_path / "fifo",
            "a socket": tmp_path / "sock",
        }


async def test_a_path_that_is_no_file_is_said_as_what_it_is_never_to_be_removed(
    auth_server: FakeAuthServer, tmp_path: Path, not_files: dict[str, Path]
) -> None:
    base = ["--base-url", auth_server.base_url]
    before = sorted(os.listdir(tmp_path))
    for kind, path in not_files.items():
        for words, env in (
            (["auth", "status"], {"MAGISTERIUM_CREDENTIALS": str(path)}),
            (["auth", "status", "--credentials", str(path)], {}),
            (["search", "grace", *base], {"MAGISTERIUM_CREDENTIALS": str(path)}),
            (["logout", "--credentials", str(path)], {}),
            (["login", "--no-browser", *base, "--credentials", str(path)], {}),
        ):
            run = await cli(*words, stdin=b"", **env)
            assert run.code == 3, (words, run.err)
            assert f"the credentials path {path} is {kind}, not a file" in run.err, run.err
            assert "--credentials PATH" in run.err
            assert not re.search(r"\brm(dir)? ", run.err), run.err  # never a path it did not make
            assert len(run.err.strip().splitlines()) == 1
    assert sorted(os.listdir(tmp_path)) == before and os.listdir(tmp_path / "dir") == []
    assert "null.lock" not in os.listdir(Path(os.devnull).parent)
    assert (auth_server.requests, auth_server.rpc_calls) == ([], 0)


async def test_a_credentials_file_saved_by_notepad_is_read_alike(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    await signed_in(auth_server, path)
    text = (await asyncio.to_thread(path.read_text)).replace("\n", "\r\n")
    await asyncio.to_thread(path.write_bytes, b"\xef\xbb\xbf" + text.encode())
    status = await cli("auth", "status", "--credentials", str(path))
    assert status.code == 0 and auth_server.origin in status.out, status.err
    base = ["--base-url", auth_server.base_url]
    search = await cli("search", "grace", *base, "--credentials", str(path), "--json")
    assert search.code == 0 and json.loads(search.out) == [], search.err
    logout = await cli("logout", "--credentials", str(path))
    assert logout.code == 0 and "the tokens were revoked" in logout.err, logout.err


async def test_logout_of_a_named_private_file_that_is_no_sign_in_leaves_it_as_it_is(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"  # a typo for the credentials file, or ~/.ssh/id_ed25519
    notes.write_text("my precious notes\n")
    notes.chmod(0o600)
    for words in (["logout"], ["auth", "status"]):
        run = await cli(*words, "--credentials", str(notes))
        assert run.code == 3, run.err
        assert "no command moves or deletes a file you named" in run.err, run.err
        assert "logout --credentials" not in run.err  # never suggested for it
    assert notes.read_text() == "my precious notes\n"
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


# A careless user's terminal ----------------------------------------------------------------


def browser_env(tmp_path: Path) -> dict[str, str]:
    """``$BROWSER``: a browser on this machine that follows the URL it is given."""
    script = tmp_path / "browser.py"
    script.write_text("import sys, urllib.request\nurllib.request.urlopen(sys.argv[1]).read()\n")
    return {"BROWSER": f"{sys.executable} {script} %s"}


async def test_login_opens_the_browser_unless_told_not_to(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    login = await LoginRun.start(auth_server.base_url, path, env=browser_env(tmp_path))
    url = await login.url()  # --no-browser: shown, not opened; the person opens it
    async with aiohttp.ClientSession() as session, session.get(url):
        pass
    assert (await login.finish()).code == 0
    env = clean_env(**browser_env(tmp_path))
    opened = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "magisterium_async", "login", "--base-url", auth_server.base_url,
        "--credentials", str(path), stdin=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    _, err = await asyncio.wait_for(opened.communicate(), TIMEOUT)
    assert opened.returncode == 0, err
    assert auth_server.requests.count("authorize") == 2 and auth_server.registrations == 1


async def test_two_logins_at_once_leave_one_good_sign_in(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    logins = [await LoginRun.start(auth_server.base_url, path) for _ in range(2)]
    urls = [await login.url() for login in logins]
    async with aiohttp.ClientSession() as session:
        for url in reversed(urls):
            async with session.get(url) as landed:
                assert landed.status == 200
    runs = [await login.finish() for login in logins]
    assert [run.code for run in runs] == [0, 0], [run.err for run in runs]
    stored = load_credentials(path)
    assert stored is not None and stored.access_token in auth_server.access
    assert sorted(os.listdir(tmp_path)) == ["credentials.json", "credentials.json.lock"]
    status = await cli("auth", "status", "--credentials", str(path))
    assert status.code == 0, status.err


async def test_ctrl_c_in_the_middle_of_login_leaves_nothing(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    for stop, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        login = await LoginRun.start(auth_server.base_url, path)
        await login.url()  # waiting for the browser now
        login.proc.send_signal(stop)
        run = await login.finish()
        assert run.code == code, run.err
        assert "Traceback" not in run.err
    assert os.listdir(tmp_path) == []
    assert auth_server.requests == ["metadata", "register"] * 2  # no token was asked for


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
async def test_a_full_disk_through_the_command_line(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    """On a real full file system (a tmpfs of 256 KiB, mounted in a mount namespace of its
    own): ``login`` says the disk is full and leaves nothing half-made; a stored sign-in
    whose token expired is not refreshed while the disk is full (the refresh token is not
    spent), and is once there is room again."""
    disk, said = tmp_path / "disk", tmp_path / "said"
    disk.mkdir()
    said.mkdir()
    path = disk / "credentials.json"
    expire = "import json,sys; p=sys.argv[1]; d=json.load(open(p)); d['expires_at']=1.0; " + (
        "open(p,'w').write(json.dumps(d))"
    )
    steps = f"""
step() {{ name=$1; shift; "{sys.executable}" -m magisterium_async "$@" --credentials {path} \
  --base-url {auth_server.base_url} </dev/null 2>{said}/$name; echo $? >{said}/$name.code; }}
mount -t tmpfs -o size=256k tmpfs {disk} || exit 77
dd if=/dev/zero of={disk}/fill bs=4k 2>/dev/null
step full_login login
ls -A {disk} >{said}/listing
rm {disk}/fill
step login login
"{sys.executable}" -c "{expire}" {path}
dd if=/dev/zero of={disk}/fill bs=4k 2>/dev/null
step full_search search grace --json
rm {disk}/fill
step search search grace --json
"""
    proc = await asyncio.create_subprocess_exec(
        "unshare", "--mount", "--map-root-user", "sh", "-c", steps,
        env=clean_env(**browser_env(tmp_path)), stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 4 * TIMEOUT)
    if proc.returncode == 77 or b"unshare:" in err:
        pytest.skip(f"no tmpfs in a mount namespace here: {err.decode().strip()}")

    def read(name: str) -> str:
        return (said / name).read_text().strip()

    runs = {name: (read(f"{name}.code"), read(name)) for name in ("full_login", "login")}
    runs |= {name: (read(f"{name}.code"), read(name)) for name in ("full_search", "search")}
    assert runs["full_login"][0] == "3", runs
    assert f"cannot write the credentials file {path}: the disk is full" in runs["full_login"][1]
    assert read("listing").split() == ["credentials.json.lock", "fill"]  # nothing half-made
    assert runs["login"][0] == "0" and runs["search"][0] == "0", runs
    assert runs["full_search"][0] == "3" and "the disk is full" in runs["full_search"][1], runs
    assert auth_server.refreshes == 1 and auth_server.invalid_grants == 0
