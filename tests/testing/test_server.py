"""Starting and stopping the emulator: in the loop, in a thread, and as a blocking server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from magisterium_async.testing import Emulator, EmulatorConfig, create_app


def _search_request() -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "role": "user",
                "kind": "message",
                "messageId": "m",
                "parts": [{"kind": "text", "text": "grace"}],
                "metadata": {"skillId": "document_search"},
            }
        },
    }


async def test_port_zero_picks_a_free_port() -> None:
    async with Emulator() as one, Emulator() as two:
        assert one.port != two.port
        assert one.origin == f"http://127.0.0.1:{one.port}"
        assert one.base_url == f"http://127.0.0.1:{one.port}/api/v1/a2a"
        assert one.card_url == f"http://127.0.0.1:{one.port}/.well-known/agent.json"
        assert one.token == "emu-token"
        assert repr(one) == f"<Emulator {one.origin}>"
        with pytest.raises(RuntimeError, match="already running"):
            await one.start()


async def test_stop_closes_the_port() -> None:
    emulator = Emulator()
    assert repr(emulator) == "<Emulator not started>"
    with pytest.raises(RuntimeError):
        _ = emulator.port
    await emulator.start()
    url = emulator.card_url
    await emulator.stop()
    await emulator.stop()
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectionError):
            async with session.get(url):
                pass


async def test_create_app_works_with_aiohttp_test_utilities() -> None:
    app = create_app(EmulatorConfig(tokens={"t": "pro"}))
    async with TestClient(TestServer(app)) as client:
        response = await client.post(
            "/api/v1/a2a", json=_search_request(), headers={"Authorization": "Bearer t"}
        )
        assert response.status == 200
        body = await response.json()
        assert body["result"]["status"]["state"] == "completed"


def test_emulator_runs_in_a_background_thread() -> None:
    with Emulator() as emu:
        request = urllib.request.Request(
            emu.base_url,
            data=json.dumps(_search_request()).encode(),
            headers={"Authorization": f"Bearer {emu.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = json.loads(response.read())
        assert body["result"]["artifacts"][0]["name"] == "search_results"
        assert emu.stats.count(outcome="ok") == 1


_SERVE = """
import sys
from magisterium_async.testing import EmulatorConfig, run_emulator
run_emulator(EmulatorConfig(rate_limits=None), port=0,
             on_start=lambda emu: print(emu.base_url, emu.token, flush=True))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGINT")
def test_run_emulator_serves_until_interrupted() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    try:
        assert process.stdout is not None
        base_url, token = process.stdout.readline().split()
        request = urllib.request.Request(
            base_url,
            data=json.dumps(_search_request()).encode(),
            headers={"Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    assert stdout == ""
    assert stderr == ""


def test_a_port_out_of_range_is_refused() -> None:
    # Bound as is, 99999 would listen on 34463 (the port modulo 65536).
    with pytest.raises(ValueError, match="port must be an int from 0 to 65535, got 99999"):
        Emulator(port=99999)
