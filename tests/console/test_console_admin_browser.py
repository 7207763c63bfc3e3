"""The console's admin pages (Keys, Teams, Spend, Sessions) in a real headless Chromium against a demo gateway
with `GATEWAY_ADMIN_KEYS`, reusing test_console_browser's gateway, browser and page fixtures: the admin key is
entered in its own field and every page must log no error (no CSP violation) to the end."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from tests.conftest import marker
from tests.console.test_console_browser import KEY, OTHER_KEY, browser, console_page, demo_gateway, shoot  # noqa: F401 (a fixture)
from tests.procs import ROOT, GatewayProcess

ADMIN_KEY = "adm-console-test-0123456789abcdef"


@pytest.fixture(scope="module")
def admin_demo() -> Iterator[GatewayProcess]:
    with demo_gateway(ROOT / "app" / "catalog" / "catalog.json", GATEWAY_ADMIN_KEYS=f"ops:{ADMIN_KEY}") as gateway:
        yield gateway


@contextmanager
def admin_page(chromium: Any, gateway: GatewayProcess, refused: tuple[int, ...] = (401,)) -> Iterator[Any]:
    """A console tab on `chromium` with the client key and the admin key entered."""
    with console_page(chromium, gateway, refused) as page:
        page.fill("#admin-key-input", ADMIN_KEY)
        page.click("#admin-key-form button[type=submit]")
        page.locator("#admin-key-state:has-text('admin key set for this tab')").wait_for()
        yield page


def turn(
    gateway: GatewayProcess, key: str, text: str, model: str = "anthropic/claude-sonnet-4-5", **headers: str
) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}/v1/complete",
        json={"model": model, "context": {"messages": [{"role": "user", "content": text}]}},
        headers={"Authorization": f"Bearer {key}", **headers},
        timeout=30,
    )


def test_keys_page_creates_a_key_shows_its_secret_once_rotates_and_revokes_it(browser, admin_demo):  # noqa: F811
    name = f"dev-{marker()}"[:60].replace(" ", "-")
    with admin_page(browser, admin_demo) as page:
        page.click("nav a[data-view=keys]")
        console_row = page.locator("#keys tr[data-key='console']")
        console_row.wait_for()
        assert console_row.locator("td").nth(1).inner_text() == "env"  # from GATEWAY_API_KEYS: read-only
        assert console_row.locator("button").count() == 0
        page.fill("#new-key-name", name)
        page.fill("#new-key-day", "0.001")
        page.click("#key-create button[type=submit]")
        shown = page.locator(f"#key-secret .secret-value[data-key='{name}']")
        shown.wait_for()
        secret = shown.inner_text()
        assert turn(admin_demo, secret, "first").status_code == 200
        row = page.locator(f"#keys tr[data-key='{name}']")
        assert row.locator("td").nth(1).inner_text() == "managed"
        # the budget bar: this UTC day's spend of the key against its day budget, after a refresh
        page.click("#key-secret button")
        assert page.locator("#key-secret").is_hidden()
        page.evaluate("() => { location.hash = '#/pools'; }")
        page.click("nav a[data-view=keys]")
        page.wait_for_function(
            f"() => Number(document.querySelector(\"#keys tr[data-key='{name}'] .budget-day .budget\")?.dataset.ratio) > 0"
        )
        assert "of $0.001" in row.locator(".budget-day").inner_text()
        assert row.locator(".budget-month .budget-none").count() == 1
        # rotate: a new secret, shown once; the old one is refused at once (no overlap)
        page.once("dialog", lambda dialog: dialog.accept("0"))
        row.locator("button.rotate").click()
        page.wait_for_function(
            f"() => {{ const s = document.querySelector(\"#key-secret .secret-value[data-key='{name}']\"); "
            f"return s && s.textContent !== {secret!r}; }}"
        )
        rotated = shown.inner_text()
        assert "rotated" in page.locator("#key-secret").inner_text()
        assert turn(admin_demo, secret, "old").status_code == 401
        # revoke: the row goes, the secret is refused
        page.once("dialog", lambda dialog: dialog.accept())
        row.locator("button.revoke").click()
        row.wait_for(state="detached")
        assert turn(admin_demo, rotated, "revoked").status_code == 401
        # the secret is not kept anywhere the page can show it again
        page.reload()
        page.wait_for_selector("body[data-ready=true]")
        page.click("nav a[data-view=keys]")
        console_row.wait_for()
        assert page.locator("#key-secret").is_hidden()
        assert secret not in page.content() and rotated not in page.content()


def test_admin_pages_refuse_a_client_key_as_the_admin_key(browser, admin_demo):  # noqa: F811
    with console_page(browser, admin_demo) as page:
        page.fill("#admin-key-input", KEY)
        page.click("#admin-key-form button[type=submit]")
        page.locator("#admin-key-state:has-text('admin key refused')").wait_for()
        page.click("nav a[data-view=keys]")
        page.locator("#keys-state:has-text('enter an admin key')").wait_for()
        assert page.locator("#keys tbody tr").count() == 0


def test_sessions_page_lists_a_session_and_draws_its_turns_across_vendors(browser, admin_demo):  # noqa: F811
    session = f"task-{marker()}"[:60].replace(" ", "-")
    for model in ["anthropic/claude-sonnet-4-5", "openai/gpt-5", "anthropic/claude-sonnet-4-5"]:
        response = turn(admin_demo, KEY, f"step {marker()}", model, **{"X-Gateway-Session": session})
        assert response.status_code == 200, response.text
    with admin_page(browser, admin_demo) as page:
        page.click("nav a[data-view=sessions]")
        row = page.locator(f"#sessions tr[data-session='{session}']")
        row.wait_for()
        cells = row.locator("td").all_inner_texts()
        assert cells[2] == "3" and "anthropic/claude-sonnet-4-5" in cells[3] and "openai/gpt-5" in cells[3]
        assert cells[4] == "console" and float(cells[5]) > 0 and cells[7] == "0"
        row.click()
        page.locator("#session h2").wait_for()
        assert session in page.locator("#session h2").inner_text()
        turns = page.locator("#session table.session-turns tbody tr")
        assert turns.count() == 3
        assert [turns.nth(i).locator("td").nth(5).inner_text() for i in range(3)] == [
            "anthropic",
            "openai",
            "anthropic",
        ]
        assert all(turns.nth(i).locator("td.outcome").inner_text().startswith("done") for i in range(3))
        bars = page.locator("#session svg.session-timeline g.timeline-turn rect.outcome-fill-done")
        assert bars.count() == 3
        xs = bars.evaluate_all("rects => rects.map(r => Number(r.getAttribute('x')))")
        assert xs == sorted(xs)  # in order on the session's clock
        total = float(page.locator("#session .session-totals .card-value").first.inner_text())
        assert total == pytest.approx(float(cells[5]), rel=1e-3)
        # a turn links to its record page
        turns.first.locator("a").click()
        page.locator("#record h2").wait_for()


def test_spend_page_charts_by_day_and_by_the_chosen_group_and_offers_the_csv(browser, admin_demo):  # noqa: F811
    tag = f"t{marker()}"[:40].replace(" ", "-").lower()
    for key in [KEY, OTHER_KEY]:
        assert turn(admin_demo, key, f"spend {marker()}", **{"X-Gateway-Tags": tag}).status_code == 200
    with admin_page(browser, admin_demo) as page:
        page.click("nav a[data-view=spend]")
        page.locator("#spend .spend-table").wait_for()
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        report = httpx.get(f"{admin_demo.url}/v1/spend", params={"groupBy": "key"}, headers=headers).json()
        shown = {
            row.locator("td").first.inner_text(): float(row.locator("td").nth(1).inner_text())
            for row in page.locator("#spend .spend-table tbody tr").all()
        }
        expected = {g["group"]: g["costUsd"] for g in report["groups"]}
        assert shown.keys() == expected.keys() >= {"console", "other"}
        assert all(shown[name] == pytest.approx(expected[name], rel=1e-3) for name in shown)
        assert page.locator("#spend .spend-by-group g.spend-group").count() == len(expected)
        today = httpx.get(f"{admin_demo.url}/v1/spend", params={"groupBy": "day"}, headers=headers).json()
        day = today["groups"][0]["group"]
        bar = page.locator(f"#spend .spend-by-day rect.spend-bar[data-group='{day}']")
        assert float(bar.get_attribute("data-cost")) == pytest.approx(today["groups"][0]["costUsd"])
        assert float(bar.get_attribute("height")) > 0
        # the chosen group: by tag, the two turns' tag
        page.select_option("#spend-group", "tag")
        tagged = page.locator(f"#spend .spend-table tbody tr[data-group='{tag}']")
        tagged.wait_for()
        assert tagged.locator("td").nth(2).inner_text() == "2"
        assert page.locator(f"#spend .spend-by-group g.spend-group[data-group='{tag}']").count() == 1
        # the CSV: the same report, downloaded with the admin key
        with page.expect_download() as download:
            page.click("#spend-csv")
        csv_text = download.value.path().read_text()
        assert csv_text.splitlines()[0].startswith("tag,costUsd,turns")
        assert any(line.startswith(f"{tag},") and line.split(",")[2] == "2" for line in csv_text.splitlines())


def test_teams_page_creates_a_team_shows_its_keys_and_spend_and_deletes_it_once_empty(browser, admin_demo):  # noqa: F811
    team = f"team-{marker()}"[:60].replace(" ", "-")
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    with admin_page(browser, admin_demo, refused=(401, 409)) as page:  # 409: deleting a team with keys
        page.click("nav a[data-view=teams]")
        page.locator("#teams-state:has-text('teams')").wait_for()
        page.fill("#new-team-name", team)
        page.fill("#new-team-day", "2")
        page.fill("#new-team-rpm", "120")
        page.click("#team-create button[type=submit]")
        row = page.locator(f"#teams tr[data-team='{team}']")
        row.wait_for()
        stored = httpx.get(f"{admin_demo.url}/v1/admin/teams/{team}", headers=headers).json()
        assert stored["budgets"]["budget_usd_per_day"] == 2 and stored["limits"]["requests_per_minute"] == 120
        cells = row.locator("td").all_inner_texts()
        assert cells[1] == "0" and "of $2" in cells[2] and cells[4] == "120"
        # a key of the team, one turn: the team's key count and its day budget bar
        created = httpx.post(
            f"{admin_demo.url}/v1/admin/keys", json={"name": f"{team}-dev", "team": team}, headers=headers
        )
        assert created.status_code == 201, created.text
        assert turn(admin_demo, created.json()["secret"], "team turn").status_code == 200
        page.click("nav a[data-view=keys]")
        page.click("nav a[data-view=teams]")
        page.wait_for_function(
            f"() => Number(document.querySelector(\"#teams tr[data-team='{team}'] .budget-day .budget\")?.dataset.ratio) > 0"
        )
        assert row.locator("td").nth(1).inner_text() == "1"
        # a team with keys is not deleted: the gateway says why
        page.once("dialog", lambda dialog: dialog.accept())
        row.locator("button.delete").click()
        page.locator("#teams-state:has-text('still has keys')").wait_for()
        assert row.count() == 1
        revoked = httpx.delete(f"{admin_demo.url}/v1/admin/keys/{team}-dev", headers=headers)
        assert revoked.status_code == 200
        page.once("dialog", lambda dialog: dialog.accept())
        row.locator("button.delete").click()
        row.wait_for(state="detached")
        assert httpx.get(f"{admin_demo.url}/v1/admin/teams/{team}", headers=headers).status_code == 404


def test_admin_screenshots(browser, admin_demo):  # noqa: F811
    """Screenshots of the admin pages for docs/console/ (written only with GATEWAY_TEST_CONSOLE_SCREENSHOTS=<dir>)."""
    out = os.environ.get("GATEWAY_TEST_CONSOLE_SCREENSHOTS")
    if not out:
        pytest.skip("set GATEWAY_TEST_CONSOLE_SCREENSHOTS=<dir> to write the docs' screenshots")
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    httpx.post(f"{admin_demo.url}/v1/admin/teams", json={"name": "platform"}, headers=headers)
    secrets = {}
    for name, budget in [("alice", 0.001), ("bob", 0.01)]:
        body = {"name": name, "team": "platform", "budgets": {"budget_usd_per_day": budget}}
        secrets[name] = httpx.post(f"{admin_demo.url}/v1/admin/keys", json=body, headers=headers).json()["secret"]
    steps = ["anthropic/claude-sonnet-4-5", "anthropic/tools", "openai/gpt-5", "google/gemini-2.5-flash"]
    for model in steps:
        turn(admin_demo, secrets["alice"], f"fix the build {marker()}", model, **{"X-Gateway-Session": "fix-build-42"})
    turn(admin_demo, secrets["bob"], "hello", **{"X-Gateway-Tags": "docs"})
    with admin_page(browser, admin_demo) as page:
        page.set_viewport_size({"width": 1280, "height": 560})
        page.click("nav a[data-view=keys]")
        page.locator("#keys tr[data-key='alice'] .budget-day .budget").wait_for()
        shoot(page, target / "keys.png")
        page.click("nav a[data-view=spend]")
        page.locator("#spend .spend-table").wait_for()
        shoot(page, target / "spend.png")
        page.goto(f"{admin_demo.url}/console#/sessions/fix-build-42")
        page.locator("#session table.session-turns").wait_for()
        shoot(page, target / "session.png", full_page=True)
