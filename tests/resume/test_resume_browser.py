"""A browser resumes a stream the way browsers do: `fetch` starts a resumable turn and is cancelled mid-way,
then an `EventSource` on `GET /v1/stream/{id}` reads it; after the terminal event the EventSource reconnects
by itself with `Last-Event-ID`, gets 204 and stops (no duplicate events, no endless reconnects).

Headless Chromium as in tests/console/test_console_browser.py (skips without /usr/bin/chromium outside CI). An
EventSource cannot send an Authorization header, so this gateway runs without client keys."""

from __future__ import annotations

import json
from typing import Any

from tests.conformance import check_frames, parse_sse
from tests.conftest import marker, turn
from tests.console.test_console_browser import browser  # noqa: F401  (the Chromium fixture)

SCRIPT = """
async (body) => {
  // `page.evaluate` has no timeout of its own: a stream that stalls or an EventSource that keeps reconnecting
  // must fail the test (with how far it got), not hang it.
  const state = {step: 'fetch', id: null, head: '', got: [], opens: 0};
  let source = null;
  const work = (async () => {
    const response = await fetch('/v1/stream', {
      method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify(body)});
    state.id = response.headers.get('x-request-id');
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    state.step = 'read';
    while ((text.match(/\\n\\n/g) || []).length < 30) {
      const {value, done} = await reader.read();
      if (done) break;
      text += decoder.decode(value, {stream: true});
    }
    await reader.cancel();  // the connection drops mid-stream
    state.head = text.slice(0, text.lastIndexOf('\\n\\n') + 2);
    state.step = 'resume';
    const types = ['start', 'text_start', 'text_delta', 'text_end', 'done', 'error'];
    await new Promise((resolve) => {
      source = new EventSource('/v1/stream/' + state.id);
      source.onopen = () => { state.opens += 1; };
      for (const type of types) {
        // `error` is also the EventSource's own connection event (not a MessageEvent): only messages count.
        source.addEventListener(type, (e) => { if (e instanceof MessageEvent) state.got.push({id: e.lastEventId, event: e.type, data: e.data}); });
      }
      source.onerror = () => { if (source.readyState === EventSource.CLOSED) resolve(); };
    });
    state.step = 'closed';
  })();
  const limit = new Promise((resolve) => setTimeout(resolve, 30000));
  await Promise.race([work, limit]);
  if (source) source.close();
  return state;
}
"""


def test_event_source_reads_a_resumable_stream_and_stops_after_the_terminal(browser, gateway_factory):  # noqa: F811
    gw = gateway_factory()  # no client keys: an EventSource sends no Authorization header
    context = browser.new_context()
    context.set_default_timeout(30_000)
    page = context.new_page()
    try:
        page.goto(f"{gw.url}/healthz")
        body = turn("anthropic/slow;n=120;delay_ms=10", marker())
        body["options"]["resumable"] = True
        result: dict[str, Any] = page.evaluate(SCRIPT, body)
    finally:
        context.close()
    assert result["step"] == "closed", f"stuck after 30 s: {result}"
    head = [f for f in parse_sse(result["head"]) if f.id is not None]
    assert 0 < len(head) < 100  # cut mid-way
    replayed = result["got"]
    frames = parse_sse("".join(f"id: {g['id']}\nevent: {g['event']}\ndata: {g['data']}\n\n" for g in replayed))
    events = check_frames(frames)  # ids 1 … N once each: the reconnect after the terminal added nothing
    assert events[-1]["type"] == "done"
    assert [json.loads(f.data) for f in head] == events[: len(head)]
    assert result["opens"] == 1  # the reconnect was answered 204, which closes the EventSource
    job = gw.job(result["id"])
    assert job.turn.outcome == "done" and gw.state.resume.times_resumed(job) == 1
