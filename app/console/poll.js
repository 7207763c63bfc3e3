// A view's periodic refresh: `start` when the view shows (one refresh now, then every `everyMs`), `stop` when
// another view does. Each view that polls (Health, Pools) has one; the router stops them all on a change.

const pollers = new Set();

export class Poller {
  constructor(refresh, everyMs) {
    this.refresh = refresh;
    this.everyMs = everyMs;
    this.timer = null;
    pollers.add(this);
  }

  start() {
    this.stop();
    this.refresh();
    this.timer = setInterval(this.refresh, this.everyMs);
  }

  stop() {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}

/** Stop every view's polling (the router, before it shows a view). */
export function stopPolling() {
  for (const poller of pollers) poller.stop();
}
