"""The web console in a real headless Chromium (Debian's `chromium`, driven by Playwright's Python package)
against a real gateway process in demo mode (`python -m app`, the simulator mounted in the same process),
with client keys on.

Without /usr/bin/chromium these tests skip, loudly, unless running in CI (`CI` or
`GATEWAY_TEST_BROWSER=required`, which `.ci/run` sets after installing chromium): there they fail.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from tests.conftest import marker
from tests.procs import ROOT, GatewayProcess

CHROMIUM = Path(os.environ.get("GATEWAY_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
KEY = "sk-console-test-0123456789abcdef"
OTHER_KEY = "sk-console-other-0123456789abcdef"
TIMEOUT_MS = 30_000


def _browser_required() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("GATEWAY_TEST_BROWSER") == "required"


@contextmanager
def demo_gateway(catalog: Path, **env: str) -> Iterator[GatewayProcess]:
    """`python -m app` in demo mode with client keys and `catalog` as its extra catalog (`env`: more settings)."""
    log = tempfile.NamedTemporaryFile(prefix="gateway-console-", suffix=".log", delete=False)
    gateway = GatewayProcess(
        "http://127.0.0.1:9",  # unused: demo mode points every provider at its own mounted simulator
        stderr=log,
        GATEWAY_DEMO="1",
        GATEWAY_API_KEYS=f"console:{KEY},other:{OTHER_KEY}",
        GATEWAY_CATALOG=str(catalog),
        **env,
    )
    try:
        gateway.wait_ready()
        yield gateway
    finally:
        gateway.stop()
        log.close()


@pytest.fixture(scope="module")
def demo() -> Iterator[GatewayProcess]:
    with demo_gateway(ROOT / "app" / "catalog" / "catalog.json") as gateway:
        yield gateway


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium) to run the console tests"
        if _browser_required():
            pytest.fail(reason)
        warnings.warn(reason, stacklevel=1)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@contextmanager
def console_page(browser: Any, gateway: GatewayProcess, refused: tuple[int, ...] = (401,)) -> Iterator[Any]:
    """A tab on `gateway`'s console with the client key entered; it must log no error to the end but failed
    fetches with a status in `refused` (those the test provokes)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))

    def console_message(message: Any) -> None:
        # Chromium logs every failed fetch; the first /v1/models, before the key is entered, is a 401.
        if message.type == "error" and not any(f"status of {status} " in message.text for status in refused):
            problems.append(f"console {message.type}: {message.text}")

    page.on("console", console_message)
    page.goto(f"{gateway.url}/console#/playground")
    page.wait_for_selector("body[data-ready=true]")
    page.fill("#key-input", KEY)
    page.click("#key-form button[type=submit]")
    page.wait_for_selector("#model-list option[value='anthropic/claude-sonnet-4-5']", state="attached")
    yield page
    context.close()
    # CSP violations and script errors surface as console errors: the page must have none.
    assert problems == []


@pytest.fixture
def page(browser: Any, demo: GatewayProcess) -> Iterator[Any]:
    with console_page(browser, demo) as opened:
        yield opened


def send_turn(page: Any, model: str, message: str, *, throttle: str = "0") -> Any:
    """Fill the playground form, send, and return the new turn's element."""
    turns_before = page.locator("#turns > li").count()
    page.fill("#model", model)
    page.select_option("#throttle", throttle)
    page.fill("#message", message)
    page.click("#send")
    turn = page.locator("#turns > li").nth(turns_before)
    turn.wait_for()
    return turn


def api(demo: GatewayProcess, path: str, key: str = KEY) -> Any:
    response = httpx.get(f"{demo.url}{path}", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def test_text_turn_streams_into_the_page(page, demo):
    m = marker()
    turn = send_turn(page, "anthropic/claude-sonnet-4-5", f"Hello {m}")
    turn.locator(".outcome-done").wait_for()
    assert turn.locator(".block-text pre").inner_text() == f"Hello from the simulator. You said: Hello {m}"
    assert "served by anthropic/claude-sonnet-4-5" in turn.locator(".turn-head").inner_text()
    usage = turn.locator("table.usage td").all_inner_texts()
    assert usage[0] == "25" and int(usage[1]) > 0 and int(usage[4]) == int(usage[0]) + int(usage[1])
    assert float(usage[5]) > 0  # cost from the catalog's prices
    # the timeline: every frame with its time, the first token marked, the terminal frame last
    frames = page.locator("#frames tbody tr")
    assert frames.first.locator("td").nth(3).inner_text() == "start"
    assert frames.last.locator("td").nth(3).inner_text() == "done"
    assert "first token" in page.locator("#frames").inner_text()
    assert "time to first token" in page.locator("#timeline-summary").inner_text()
    merged = page.locator(".timeline-panel .merged")
    merged.wait_for()  # from the record: upstream frames against events sent
    assert "upstream frames →" in merged.inner_text()


def test_thinking_grows_in_its_own_block(page, demo):
    turn = send_turn(page, "anthropic/thinking", f"Think {marker()}")
    turn.locator(".outcome-done").wait_for()
    assert turn.locator(".block-thinking pre").inner_text() == "The user greets me. I should greet back."
    assert turn.locator(".block-text pre").inner_text().startswith("Hello from the simulator.")


def test_tool_call_turn_shows_arguments_as_a_tree(page, demo):
    page.click("#example-tool")
    turn = send_turn(page, "anthropic/tools", f"Weather? {marker()}")
    turn.locator(".outcome-done").wait_for()
    assert turn.locator(".outcome").inner_text() == "done: toolUse"
    calls = turn.locator(".block-tool")
    assert calls.count() == 2
    assert calls.nth(0).locator(".tool-name").inner_text() == "get_weather"
    assert calls.nth(1).locator(".tool-name").inner_text() == "get_time"
    weather = calls.nth(0).locator(".tool-tree li").all_inner_texts()
    assert weather == ['city: "Paris"', 'unit: "celsius"']
    assert calls.nth(1).locator(".tool-tree li").all_inner_texts() == ['timezone: "Europe/Paris"']
    assert calls.nth(0).locator(".raw-args").text_content() == '{"city": "Paris", "unit": "celsius"}'
    # the pending calls are answered with the next turn; switching the model shows the handoff
    assert page.locator("#tool-result-label").is_visible()
    second = send_turn(page, "openai/gpt-5", "Thanks")
    second.locator(".outcome-done").wait_for()
    assert "handoff anthropic/tools → openai/gpt-5" in second.locator(".turn-head").inner_text()
    record = api(demo, f"/v1/requests/{second.locator('.request-link').inner_text()}")
    assert record["requestedModel"] == "openai/gpt-5" and record["outcome"] == "done"


def test_partial_arguments_build_up_while_the_call_streams(page, demo):
    page.click("#example-tool")
    turn = send_turn(page, "anthropic/tools;delay_ms=150", f"Slow weather {marker()}")
    tree = turn.locator(".block-tool").first.locator(".tool-tree")
    # a partial state: the city being written, before the call completes
    page.wait_for_function(
        "() => { const t = document.querySelector('.turn:last-child .block-tool .tool-tree'); "
        "return t && /city/.test(t.textContent) && !t.closest('.block-tool').classList.contains('complete'); }"
    )
    assert "city" in tree.inner_text()
    turn.locator(".outcome-done").wait_for()
    assert tree.locator("li").all_inner_texts() == ['city: "Paris"', 'unit: "celsius"']


def test_stop_cancels_the_upstream_and_the_record_is_aborted(page, demo):
    m = marker()
    turn = send_turn(page, "anthropic/slow;n=200;delay_ms=20", f"Count {m}")
    page.wait_for_function("() => document.querySelectorAll('#frames tbody tr.delta').length >= 5")
    assert api(demo, "/v1/console/summary")["activeStreams"] == 1  # this key's stream, in flight
    page.click("#stop")
    turn.locator(".outcome-aborted").wait_for()
    seen = httpx.get(
        f"{demo.url}/_simulator/_sim/wait",
        params={"contains": m, "until": "closed", "timeout": 10},
        headers={"Authorization": f"Bearer {KEY}"},  # the demo simulator's log needs a gateway key when auth is on
        timeout=15,
    )
    assert seen.status_code == 200 and seen.json()["clientClosed"] is True
    request_id = turn.locator(".request-link").inner_text()
    # the record settles as aborted (the ledger write is queued: the route waits for this replica's writes)
    record = api(demo, f"/v1/requests/{request_id}")
    assert record["outcome"] == "aborted" and record["clientDisconnected"] is True


def test_requests_table_and_a_record_page(page, demo):
    m = marker()
    turn = send_turn(page, "anthropic/claude-sonnet-4-5", f"For the table {m}")
    turn.locator(".outcome-done").wait_for()
    request_id = turn.locator(".request-link").inner_text()
    page.click("nav a[data-view=requests]")
    row = page.locator(f"#records tr[data-id='{request_id}']")
    row.wait_for()
    cells = row.locator("td").all_inner_texts()
    assert cells[1] == "unified"
    assert (
        cells[2] == "anthropic/claude-sonnet-4-5" and cells[3] == "anthropic/claude-sonnet-4-5" and cells[4] == "done"
    )
    assert cells[9] == "1"  # one attempt
    # filters go to the server: aborted only hides this record
    page.select_option("#filter-outcome", "aborted")
    page.wait_for_function(f"() => !document.querySelector(\"#records tr[data-id='{request_id}']\")")
    page.select_option("#filter-outcome", "")
    row.wait_for()
    row.click()
    page.locator("#record h2").wait_for()
    assert request_id in page.locator("#record h2").inner_text()
    assert page.locator("#record table.attempts tbody tr").count() == 1
    assert (
        page.locator("#record .message pre.text").inner_text()
        == f"Hello from the simulator. You said: For the table {m}"
    )


def test_records_of_another_key_are_not_shown(page, demo):
    m = marker()
    response = httpx.post(
        f"{demo.url}/v1/stream",
        headers={"Authorization": f"Bearer {OTHER_KEY}"},
        json={"model": "anthropic/claude-sonnet-4-5", "context": {"messages": [{"role": "user", "content": m}]}},
        timeout=30,
    )
    other_id = response.headers["x-request-id"]
    assert response.status_code == 200
    page.click("nav a[data-view=requests]")
    page.wait_for_function("() => /records/.test(document.querySelector('#records-state').textContent)")
    assert page.locator(f"#records tr[data-id='{other_id}']").count() == 0


def test_model_output_with_markup_is_shown_as_text(page, demo):
    hostile = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    turn = send_turn(page, "anthropic/claude-sonnet-4-5", hostile)
    turn.locator(".outcome-done").wait_for()
    shown = turn.locator(".block-text pre")
    assert shown.inner_text() == f"Hello from the simulator. You said: {hostile}"
    assert shown.locator("script, img").count() == 0
    assert page.locator("#turns img, #turns script").count() == 0
    assert page.evaluate("() => window.__pwned") is None
    # the record page shows the stored message as text too
    turn.locator(".request-link").click()
    page.locator("#record .message pre.text").wait_for()
    assert hostile in page.locator("#record .message pre.text").inner_text()
    assert page.locator("#record img, #record script").count() == 0
    assert page.evaluate("() => window.__pwned") is None


def test_health_view_draws_the_summary(page, demo):
    turn = send_turn(page, "anthropic/claude-sonnet-4-5", f"Health {marker()}")
    turn.locator(".outcome-done").wait_for()
    page.click("nav a[data-view=health]")
    page.locator("#health .cards").wait_for()
    summary = api(demo, "/v1/console/summary")
    assert summary["turns"]["done"] >= 1
    assert page.locator("#health .chart svg.chart-svg").count() == 3
    assert page.locator("#health .chart").first.locator("rect.outcome-fill-done").count() >= 1
    assert "anthropic" in page.locator("#health table.providers").inner_text()


def test_the_header_says_this_gateway_needs_a_key_and_shows_its_whole_placeholder(browser, demo):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    fresh = context.new_page()
    fresh.goto(f"{demo.url}/console#/playground")
    fresh.wait_for_selector("body[data-ready=true]")
    # The gateway answered the console's first request without a key with 401: it needs one, and says so.
    assert fresh.inner_text("#key-state") == "this gateway requires a client key: enter one"
    fits = fresh.eval_on_selector(
        "#key-input",
        """(input) => {
          const style = getComputedStyle(input);
          const context = document.createElement("canvas").getContext("2d");
          context.font = `${style.fontSize} ${style.fontFamily}`;
          const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
          return context.measureText(input.placeholder).width <= room;
        }""",
    )
    assert fits, "the key field's placeholder is cut"
    fresh.fill("#key-input", "sk-not-a-key-of-this-gateway")
    fresh.click("#key-form button[type=submit]")
    fresh.locator("#key-state:has-text('key refused: enter another')").wait_for()
    context.close()


def test_the_health_window_names_its_unit_and_costs_are_plain_decimals(page):
    page.click("nav a[data-view=health]")
    options = page.locator("#health-minutes option").all_inner_texts()
    assert options == ["5 min", "15 min", "30 min"]
    costs = page.evaluate(
        "async () => { const { fmtCost } = await import('/console/dom.js'); return [2.22e-5, 0.00018, 1.5e-9, 0.0123, 0].map(fmtCost); }"
    )
    assert costs == ["0.0000222", "0.000180", "0.00000000150", "0.012300", "0"]


def shoot(page: Any, path: Path, **options: Any) -> None:
    """A screenshot, reduced to a 128-colour palette so the committed PNGs stay small."""
    from PIL import Image

    page.screenshot(path=str(path), **options)
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def test_screenshots(page, demo):
    """Screenshots of each view for docs/console/ (written only with GATEWAY_TEST_CONSOLE_SCREENSHOTS=<dir>)."""
    out = os.environ.get("GATEWAY_TEST_CONSOLE_SCREENSHOTS")
    if not out:
        pytest.skip("set GATEWAY_TEST_CONSOLE_SCREENSHOTS=<dir> to write the docs' screenshots")
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 820})
    # a few turns of each outcome for the table and the health charts
    page.fill("#fallback", "openai/gpt-5")
    for model in [
        "anthropic/claude-sonnet-4-5",
        "anthropic/http-500",
        "google/gemini-2.5-flash",
        "anthropic/error-mid-stream",
    ]:
        turn = send_turn(page, model, f"Hello {marker()}", throttle="")
        turn.locator(".turn-foot .outcome").wait_for()
    page.fill("#fallback", "")
    page.click("#reset")
    page.click("#example-tool")
    page.fill("#system", "You are a weather assistant.")
    turn = send_turn(page, "anthropic/tools;delay_ms=250", "What is the weather in Paris?")
    page.wait_for_function(
        "() => { const t = document.querySelector('.block-tool .tool-tree'); return t && /Pa/.test(t.textContent); }"
    )
    shoot(page, target / "playground-streaming.png")
    turn.locator(".outcome-done").wait_for()
    second = send_turn(page, "openai/gpt-5", "Thanks! And in Lyon?", throttle="")
    second.locator(".outcome-done").wait_for()
    shoot(page, target / "playground-done.png")
    page.click("nav a[data-view=requests]")
    page.locator("#records tbody tr").first.wait_for()
    shoot(page, target / "requests.png")
    page.locator("#records tbody tr", has_text="anthropic/http-500").click()  # retried, then the fallback served
    page.locator("#record h2").wait_for()
    shoot(page, target / "record.png", full_page=True)
    page.click("nav a[data-view=health]")
    page.locator("#health .charts").wait_for()
    shoot(page, target / "health.png")


DEMO_POOL = {
    "name": "demo-pool",
    "pool": {
        "strategy": "least-in-flight",
        "deployments": [
            {"provider": "anthropic", "model": "claude-sonnet-4-5", "rpm": 600},
            {"provider": "anthropic", "model": "http-429;retry_after=120", "name": "anthropic-throttled"},
            {"provider": "openai", "model": "gpt-5", "weight": 2},
        ],
    },
}


@pytest.fixture(scope="module")
def pool_demo(tmp_path_factory) -> Iterator[GatewayProcess]:
    """A demo gateway whose catalog adds a pool of three deployments (one always answers 429)."""
    catalog = tmp_path_factory.mktemp("console-pools") / "catalog.json"
    catalog.write_text(json.dumps({"routes": [DEMO_POOL]}))
    with demo_gateway(catalog) as gateway:
        yield gateway


def test_pools_view_lists_the_deployments_and_shows_a_cooldown(browser, pool_demo):
    with console_page(browser, pool_demo) as page:
        page.click("nav a[data-view=pools]")
        panel = page.locator("#pools .pool[data-pool='demo-pool']")
        panel.wait_for()
        assert "least-in-flight" in panel.locator("h3").inner_text()
        assert "this process's own state" in panel.locator(".pool-shared").inner_text()
        rows = panel.locator("tbody tr")
        assert rows.evaluate_all("rows => rows.map(r => r.dataset.deployment)") == [
            "anthropic/claude-sonnet-4-5",
            "anthropic-throttled",
            "openai/gpt-5",
        ]
        assert panel.locator("tbody tr.pool-ready").count() == 3
        first = panel.locator("tr[data-deployment='anthropic/claude-sonnet-4-5'] td").all_inner_texts()
        assert first[:5] == ["anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", "1", "0"]
        assert first[9] == "0 / 600"
        for _ in range(60):  # until a turn tries the throttled deployment (its 429 cools it; another serves)
            response = httpx.post(
                f"{pool_demo.url}/v1/complete",
                json={"model": "demo-pool", "context": {"messages": [{"role": "user", "content": marker()}]}},
                headers={"Authorization": f"Bearer {KEY}"},
                timeout=30,
            )
            assert response.status_code == 200, response.text
            attempts = api(pool_demo, f"/v1/requests/{response.json()['requestId']}")["attempts"]
            if any(a.get("deployment") == "anthropic-throttled" for a in attempts):
                break
        else:
            pytest.fail("no turn tried the throttled deployment")
        cooled = panel.locator("tr[data-deployment='anthropic-throttled'].pool-cooling")
        cooled.wait_for()  # the view's next refresh
        cells = cooled.locator("td").all_inner_texts()
        assert "cooling until" in cells[5] and "rate_limited" in cells[5], cells
        assert cells[6] == "1", cells
        served = panel.locator("tr.pool-ready td:nth-child(8)").all_inner_texts()  # TTFT of those that served
        assert any(text != "–" for text in served), served
        if os.environ.get(
            "GATEWAY_TEST_CONSOLE_SCREENSHOTS"
        ):  # the docs' screenshot of this view (see test_screenshots)
            page.set_viewport_size({"width": 1280, "height": 420})
            shoot(page, Path(os.environ["GATEWAY_TEST_CONSOLE_SCREENSHOTS"]) / "pools.png")
