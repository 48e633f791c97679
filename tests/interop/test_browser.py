"""A browser orchestrator calls the emulator cross-origin: headless Chromium, two origins.

A page served from one loopback origin ``fetch()``-es the emulator on another port, as a
browser-based orchestrator calls the service without a proxy. The browser hands the page
an answer (its status, body and exposed headers) only if the CORS headers allow it. The
second test loads the @a2a-js/sdk clients themselves into such a page (after ``npm ci`` in
``tests/interop/js/``).

Needs a Chromium (``chromium``, ``chromium-browser``, ``google-chrome`` on PATH, or
``$MAGISTERIUM_CHROMIUM``); skips without one, in CI too: CI does not install a browser.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from aiohttp import web

from magisterium_async.testing import (
    BundledCorpus,
    Emulator,
    EmulatorConfig,
    Fault,
    RateLimitConfig,
)

from .js_common import JS, missing_sdks, send
from .plans import data, get, plan_of, text

pytestmark = pytest.mark.interop

BROWSER_TIMEOUT = 90.0
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)

# Each step is one fetch() from the page; the page reports what the browser let it read.
PAGE = """<!doctype html><meta charset="utf-8"><title>orchestrator</title><script>
const plan = %s;
async function step(s) {
  const init = {method: s.method, headers: {}};
  if (s.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(s.body);
  }
  if (s.token) init.headers["Authorization"] = "Bearer " + s.token;
  try {
    const r = await fetch(plan.origin + s.path, init);
    const text = await r.text();
    let body = text;
    try { body = JSON.parse(text); } catch (e) {}
    return {status: r.status, body: body,
            retryAfter: r.headers.get("Retry-After"),
            wwwAuthenticate: r.headers.get("WWW-Authenticate")};
  } catch (e) {
    return {error: String(e)};
  }
}
(async () => {
  const out = {};
  for (const s of plan.steps) {
    if (s.taskOf) s.body.params.id = ((out[s.taskOf].body || {}).result || {}).id || "?";
    out[s.label] = await step(s);
  }
  await fetch("/report", {method: "POST", body: JSON.stringify(out)});
})();
</script>"""


def _chromium() -> str:
    names = (
        os.environ.get("MAGISTERIUM_CHROMIUM"),
        "chromium",
        "chromium-browser",
        "google-chrome",
    )
    for name in names:
        found = shutil.which(name) if name else None
        if found:
            return found
    pytest.skip("no Chromium on PATH (apt-get install chromium, or $MAGISTERIUM_CHROMIUM)")


def _rpc(label: str, method: str, params: dict[str, Any], token: str | None) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": label, "method": method, "params": params}
    return {"label": label, "method": "POST", "path": "/api/v1/a2a", "body": body, "token": token}


def _send(label: str, skill: str, token: str | None = "emu-token") -> dict[str, Any]:
    message = {
        "role": "user",
        "kind": "message",
        "messageId": f"m-{label}",
        "parts": [{"kind": "text", "text": "faith"}],
        "metadata": {"skillId": skill},
    }
    return _rpc(label, "message/send", {"message": message}, token)


class _Page:
    """The orchestrator's origin: serves the page (and ``/js/``), takes the page's report."""

    def __init__(self) -> None:
        self.html = ""
        self.report: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    async def page(self, request: web.Request) -> web.Response:
        return web.Response(text=self.html, content_type="text/html")

    async def take(self, request: web.Request) -> web.Response:
        if not self.report.done():
            self.report.set_result(json.loads(await request.read()))
        return web.Response(status=204)


@pytest.fixture
async def page_origin() -> AsyncIterator[tuple[_Page, str]]:
    """Start a page server on a free 127.0.0.1 port; the page is set by the test."""
    page = _Page()
    app = web.Application()
    app.router.add_get("/", page.page)
    app.router.add_post("/report", page.take)
    if JS.is_dir():
        app.router.add_static("/js/", JS)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield page, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def _run_browser(browser: str, url: str, profile: Path, page: _Page) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        browser,
        *FLAGS,
        f"--user-data-dir={profile}",
        url,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        return await asyncio.wait_for(asyncio.shield(page.report), BROWSER_TIMEOUT)
    finally:
        # Chromium's helpers (zygote, renderer) share its session: end them with it.
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


async def test_a_page_on_another_origin_reads_every_kind_of_answer(
    page_origin: tuple[_Page, str], tmp_path: Path
) -> None:
    browser = _chromium()
    page, origin = page_origin
    config = EmulatorConfig(
        tokens={"emu-token": "pro", "free-token": "free"},
        rate_limits=RateLimitConfig(default=1, expensive=20, period=3600, retry_after_header=True),
    )
    async with Emulator(config) as emulator:
        emulator.script(Fault.http_503(retry_after=7), skill="catholic_qa")
        page.html = PAGE % json.dumps(
            {
                "origin": emulator.origin,
                "steps": [
                    _send("search", "document_search"),
                    {**_rpc("get", "tasks/get", {}, "emu-token"), "taskOf": "search"},
                    _rpc("not_found", "tasks/get", {"id": "nope"}, "emu-token"),
                    _send("limited", "document_search"),
                    _send("unavailable", "catholic_qa"),
                    _send("bad_token", "document_search", "wrong-token"),
                    _send("free_plan", "document_search", "free-token"),
                    {"label": "card", "method": "GET", "path": urlsplit(emulator.card_url).path},
                ],
            }
        )
        report = await _run_browser(browser, origin + "/", tmp_path / "profile", page)
        refused = {"Origin": origin, "Authorization": "Bearer wrong-token"}
        async with (
            aiohttp.ClientSession() as session,
            session.post(emulator.base_url, json={}, headers=refused) as direct,
        ):
            challenge = direct.headers.get("WWW-Authenticate")
        served = emulator.stats.total

    assert not [label for label, seen in report.items() if "error" in seen], report
    assert {label: seen["status"] for label, seen in report.items()} == {
        "search": 200,
        "get": 200,
        "not_found": 200,
        "limited": 429,
        "unavailable": 503,
        "bad_token": 401,
        "free_plan": 403,
        "card": 200,
    }
    assert report["search"]["body"]["result"]["status"]["state"] == "completed"
    assert report["get"]["body"]["result"]["id"] == report["search"]["body"]["result"]["id"]
    for label, code in (
        ("not_found", -32001),
        ("limited", -32003),
        ("bad_token", -32004),
        ("free_plan", -32005),
    ):
        assert report[label]["body"]["error"]["code"] == code, label
    retry_after = report["limited"]["body"]["error"]["data"]["retryAfter"]
    assert report["limited"]["retryAfter"] == str(retry_after)
    assert report["unavailable"]["retryAfter"] == "7"
    assert "503" in report["unavailable"]["body"]
    assert challenge is not None and challenge.startswith("Bearer ")
    assert report["bad_token"]["wwwAuthenticate"] == challenge
    assert report["card"]["body"]["url"] == emulator.base_url
    assert served == 8  # the seven calls from the page and the direct one; no preflight


# The @a2a-js/sdk clients themselves, loaded in the page from tests/interop/js/node_modules
# and run through the same plan runner as under node. 1.3 is tried as is, and with a fetch
# that drops its A2A-Version request header, which the service's preflight does not allow.
SDK_PAGE = """<!doctype html><meta charset="utf-8"><title>a2a-js</title>
<script type="importmap">{"imports": {"jose": "/js/node_modules/jose/dist/webapi/index.js"}}
</script><script type="module">
import { runPlan } from "/js/a2a_js_plan.mjs";
const plan = %s;
const withoutVersion = (url, init = {}) => {
  const headers = new Headers(init.headers || {});
  headers.delete("A2A-Version");
  return fetch(url, {...init, headers});
};
const runs = [
  ["03", "03", undefined], ["13", "13", undefined], ["13_no_version", "13", withoutVersion],
];
const out = {};
try {
  for (const [label, which, baseFetch] of runs) {
    const sdk = await import(`/js/node_modules/a2a-js-${which}/dist/client/index.js`);
    out[label] = await runPlan(sdk, which, "browser", plan, baseFetch);
  }
} catch (e) {
  out.page_error = String(e);
}
await fetch("/report", {method: "POST", body: JSON.stringify(out)});
</script>"""


async def test_the_a2a_js_sdk_in_a_page_on_another_origin(
    page_origin: tuple[_Page, str], tmp_path: Path
) -> None:
    browser = _chromium()
    if missing_sdks():
        pytest.skip("@a2a-js/sdk not installed: run `npm ci` in tests/interop/js/")
    page, origin = page_origin
    faith = text("faith")
    document = data({"id": next(iter(BundledCorpus())).id})
    steps = [
        send("search", "document_search", faith),
        get("get", {"task_of": "search"}),
        send("fetch", "document_fetch", document),
        send("bad_token", "document_search", faith, token="wrong-token"),
    ]
    # A 0.3 card: @a2a-js/sdk 1.3 turns its v0.3 compat layer on only for one.
    async with Emulator(EmulatorConfig(rate_limits=None, protocol="0.3")) as emulator:
        plan = plan_of(emulator, steps)
        page.html = SDK_PAGE % json.dumps(plan)
        report = await _run_browser(browser, origin + "/", tmp_path / "profile", page)

    assert "page_error" not in report, report["page_error"]
    ok = report["03"]["steps"]
    assert report["03"]["card"]["kind"] == "card"
    assert [ok[label]["state"] for label in ("search", "get", "fetch")] == ["completed"] * 3
    assert ok["get"]["id"] == ok["search"]["id"]
    assert (ok["bad_token"]["code"], ok["bad_token"]["name"]) == (
        -32004,
        "UnsupportedOperationError",
    )

    # 1.3 sends A2A-Version on every request, the card's included: the browser's preflight
    # refuses it, so nothing reaches the page.
    blocked = report["13"]
    assert blocked["card"]["message"] == "Failed to fetch"
    assert {o["message"] for o in blocked["steps"].values()} == {"Failed to fetch"}
    # Without that header it works, but for data parts: its v0.3 compat layer calls Node's
    # Buffer, which a browser does not have.
    stripped = report["13_no_version"]
    assert stripped["card"]["kind"] == "card"
    assert stripped["steps"]["search"]["state"] == "completed"
    assert stripped["steps"]["get"]["id"] == stripped["steps"]["search"]["id"]
    assert stripped["steps"]["fetch"]["message"] == "Buffer is not defined"
    assert stripped["steps"]["bad_token"]["code"] == -32004
