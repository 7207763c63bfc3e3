"""Which of the client's hosted tools a turn's vendor runs, and which are dropped (docs/adapters/web-search.md).

A door sets `options.hostedTools` when its client asked for a hosted tool (Codex CLI sends `web_search` with
every request). A hosted tool is served by the vendor's own equivalent only when

- the vendor's api has one (`WEB_SEARCH_APIS`: Anthropic's `web_search_20250305` server tool, OpenAI
  Responses' `web_search`, Gemini's `google_search`; Chat Completions has none a general model takes);
- the operator allows it for the serving model (catalog `hostedTools`, `app.catalog.HostedTools`): a hosted
  tool runs and is billed at the vendor, outside the gateway's view, so it is off by default;
- the vendor can honour what the client asked of it: a search limited to cached results
  (`externalWebAccess: false`, Codex's default) is OpenAI's alone.

Everything else is dropped, never refused: the adapter sends the turn without it and the dispatcher keeps the
dropped names on the turn, which the HTTP glue gives the client in `X-Gateway-Dropped-Tools` once the serving
provider is known (a fallback or a pool's deployment may serve differently from the first entry of the plan).
Each adapter asks `plan` and maps `HostedPlan.web_search` onto its vendor's tool; none decides on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.contract.catalog_entries import ModelInfo
from app.contract.request import StreamOptions

WEB_SEARCH = "web_search"  # the name a dropped web search has in `X-Gateway-Dropped-Tools`

# The apis whose vendor runs a web search of its own, and whether it can limit it to cached results.
WEB_SEARCH_APIS: dict[str, bool] = {
    "anthropic-messages": False,
    "openai-responses": True,
    "google-generative-ai": False,
}


@dataclass(frozen=True, slots=True)
class WebSearchPlan:
    """The vendor's web search, as the adapter sends it."""

    external_web_access: bool = True  # False: cached results only (OpenAI)
    max_uses: int | None = None  # searches per turn (Anthropic `max_uses`), from the catalog


@dataclass(frozen=True, slots=True)
class HostedPlan:
    web_search: WebSearchPlan | None = None
    dropped: tuple[str, ...] = ()


NOTHING = HostedPlan()


def plan(api: str, model: ModelInfo, options: StreamOptions) -> HostedPlan:
    """What the turn's vendor (`api`, serving `model`) runs of the hosted tools the client asked for."""
    asked = options.hosted_tools
    if asked is None or asked.web_search is None:
        return NOTHING
    allowed = model.hosted_tools
    cached_only = not asked.web_search.external_web_access
    if (
        allowed is None
        or not allowed.web_search
        or api not in WEB_SEARCH_APIS
        or (cached_only and not WEB_SEARCH_APIS[api])
    ):
        return HostedPlan(dropped=(WEB_SEARCH,))
    return HostedPlan(web_search=WebSearchPlan(asked.web_search.external_web_access, allowed.web_search_max_uses))


def dropped(api: str, model: ModelInfo, options: StreamOptions) -> tuple[str, ...]:
    """The hosted tools the turn is sent without (the dispatcher keeps them on the turn for the door)."""
    if options.hosted_tools is None:
        return ()
    return plan(api, model, options).dropped
