"""The interactive API page (`GET /docs`): served from this gateway with nothing from another host, and in a
real headless Chromium (when /usr/bin/chromium exists) it lists /openapi.json's operations and streams a turn."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.conftest import marker

CHROMIUM = Path(os.environ.get("GATEWAY_TEST_CHROMIUM", "/usr/bin/chromium"))


def test_docs_page_and_its_files_are_served_with_a_strict_policy(gateway):
    page = gateway.http.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert '<a href="/openapi.json">' in page.text
    for asset in re.findall(r'(?:src|href)="(/docs/[^"]+)"', page.text):
        assert gateway.http.get(asset).status_code == 200
    everything = page.text + gateway.http.get("/docs/apidocs.js").text + gateway.http.get("/docs/apidocs.css").text
    assert not re.search(r"https?://", everything), "the page must not load anything from another host"
    assert gateway.http.get("/docs/../main.py").status_code == 404
    assert gateway.http.get("/docs/nothing.js").status_code == 404


def test_docs_page_is_not_in_the_api_document(gateway):
    assert not [p for p in gateway.http.get("/openapi.json").json()["paths"] if p.startswith("/docs")]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
        )
        yield chromium
        chromium.close()


def test_docs_page_streams_a_turn_in_a_browser(browser, gateway):
    context = browser.new_context()
    context.set_default_timeout(30_000)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.goto(f"{gateway.url}/docs")
    operation = page.locator("details", has=page.locator("summary", has_text="/v1/stream")).first
    operation.locator("summary").first.click()
    m = marker()
    body = {"model": "anthropic/text", "context": {"messages": [{"role": "user", "content": m}]}}
    operation.locator("textarea").fill(json.dumps(body))
    operation.locator("button", has_text="Send").click()
    output = operation.locator("pre").last
    page.wait_for_function("(node) => node.textContent.includes('event: done')", arg=output.element_handle())
    text = output.inner_text()
    assert text.startswith("HTTP 200") and f"You said: {m}" in text
    # The API document's `code` spans are shown as code, not as raw Markdown backticks.
    prose = page.locator("details .body > p, details summary .what, details td").all_inner_texts()
    assert not [line for line in prose if "`" in line]
    assert page.locator("details .body > p code, details td code").count() > 0
    context.close()
    assert problems == []
