"""The console's admin pages (Keys, Teams, Spend, Sessions) in a real headless Chromium against a demo gateway
with `GATEWAY_ADMIN_KEYS`, reusing test_console_browser's gateway, browser and page fixtures: the admin key is
entered in its own field and every page must log no error (no CSP violation) to the end."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import httpx
import pytest

from tests.conftest import marker
from tests.console.test_console_browser import KEY, browser, console_page, demo_gateway  # noqa: F401 (a fixture)
from tests.procs import ROOT, GatewayProcess

ADMIN_KEY = "adm-console-test-0123456789abcdef"


@pytest.fixture(scope="module")
def admin_demo() -> Iterator[GatewayProcess]:
    with demo_gateway(ROOT / "app" / "catalog" / "catalog.json", GATEWAY_ADMIN_KEYS=f"ops:{ADMIN_KEY}") as gateway:
        yield gateway


@contextmanager
def admin_page(chromium: Any, gateway: GatewayProcess) -> Iterator[Any]:
    """A console tab on `chromium` with the client key and the admin key entered."""
    with console_page(chromium, gateway) as page:
        page.fill("#admin-key-input", ADMIN_KEY)
        page.click("#admin-key-form button[type=submit]")
        page.locator("#admin-key-state:has-text('admin key set for this tab')").wait_for()
        yield page


def turn(gateway: GatewayProcess, key: str, text: str, **headers: str) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}/v1/complete",
        json={"model": "anthropic/claude-sonnet-4-5", "context": {"messages": [{"role": "user", "content": text}]}},
        headers={"Authorization": f"Bearer {key}", **headers},
        timeout=30,
    )


def test_keys_page_creates_a_key_shows_its_secret_once_rotates_and_revokes_it(browser, admin_demo):  # noqa: F811
    name = f"dev-{marker()}"[:60].replace(" ", "-")
    with admin_page(browser, admin_demo) as page:
        page.click("nav a[data-view=keys]")
        console_row = page.locator("#keys tr[data-key='console']")
        console_row.wait_for()
        assert console_row.locator("td").nth(1).inner_text() != "managed"  # from GATEWAY_API_KEYS: read-only
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
