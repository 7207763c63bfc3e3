"""The budget webhook (`GATEWAY_BUDGET_WEBHOOK_URL`, docs/admin.md, Budget alerts): one JSON POST when a team's
or a key's budget passes 80 % and one at 100 %, per period.

`Limits` calls `BudgetAlerts.check` after a charged turn settles, with the subject's spend read back from the
limit store. Each (subject, period, threshold) is claimed once in the limit store (`LimitStore.claim`: Redis
`SET NX`, so one replica sends it; the embedded store, once per process) before it is sent. Sending runs off
the request path, bounded by `timeout`; a receiver that fails or does not answer is logged, not retried. The
body names the team, the key's name and the figures, never a secret.
"""

from __future__ import annotations

import logging
from typing import Any


from app.policy.store import LimitStore, Periods

log = logging.getLogger("gateway.budget_alerts")

THRESHOLDS = (0.8, 1.0)
CLAIM_TTL_MS = 32 * 86_400_000  # longer than any period: a claim outlives the period it is for


class BudgetAlerts:
    def __init__(self, url: str, store: LimitStore, *, timeout: float = 2.0) -> None:
        self.url = url
        self.store = store
        self.timeout = timeout
        self._claimed: set[str] = set()  # markers some replica already claimed: not asked of the store again

    async def check(
        self, subject: str, team: str, key: str, period: str, periods: Periods, spent: float, budget: float
    ) -> list[dict[str, Any]]:
        """The alerts this spend crosses that no replica has sent yet (claimed now): the bodies to send."""
        started = periods.day if period == "day" else periods.month
        due = []
        for threshold in THRESHOLDS:
            if spent < threshold * budget:
                break
            marker = f"alert:{subject}:{period}:{started}:{threshold:g}"
            if marker in self._claimed:
                continue
            won = await self.store.claim(marker, CLAIM_TTL_MS)
            self._claimed.add(marker)
            if won:
                due.append(
                    {
                        "type": "budget_threshold",
                        "threshold": threshold,
                        "team": team or None,
                        "key": key or None,
                        "period": period,
                        "periodStart": started,
                        "spentUsd": spent,
                        "budgetUsd": budget,
                        "usedRatio": spent / budget,
                    }
                )
        return due

    async def send(self, body: dict[str, Any]) -> None:
        """POST one alert; failures are logged (the alert is not sent again)."""
        import aiohttp  # when the first alert is sent: start-up imports no HTTP client (docs/performance.md)

        try:
            timeout = aiohttp.ClientTimeout(total=self.timeout)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.post(self.url, json=body) as response:
                    if response.status >= 300:
                        log.warning("budget webhook answered %d", response.status)
        except Exception as exc:  # a receiver that fails must not touch the turns
            log.warning("budget webhook failed (%s)", type(exc).__name__)
