"""Run one turn: pick the provider, retry and fall back before content, pump wire events into the Turn.

The dispatcher is the only code that talks to both an adapter and the event stream. It owns:

- the attempt plan: the requested model, then each `fallback`; each entry retried on retryable failures
  (honouring the vendor's retry-after, capped) as long as nothing has reached the client yet; a pool's
  deployments (consecutive entries of the plan) are tried one each, in the order `app.pools` picks, a
  deployment that fails so cooled down, before the plan goes on;
- the commit point: the first content event of an attempt sends `start` naming that provider and model,
  after which no other provider may serve the turn;
- the watchdog (first event, idle gap, total, late-frame grace), driven by explicit transitions (attempt
  started, first frame, paused, resumed, between attempts, settled), each re-arming its timer;
- interruption from outside (client gone, shutdown, a writer failure, a watchdog deadline), never lost:
  interrupts arriving together resolve by precedence, WRITER > CLIENT > SHUTDOWN > TOTAL > FIRST_EVENT /
  IDLE (these two end the attempt only) > GRACE (see `app.contract.failures.Interrupt`);
- closing the upstream on every path, and telling the observers (ledger, metrics, …) once, with the settled
  turn's record (`app.core.settled`) built once for all of them.

It is the only writer of a job's progress (`TurnJob`: attempts, counts, interrupts, its task, its record).

docs/internals.md describes the watchdog's phases and the interrupt precedence.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Sequence

from app.catalog import Catalog
from app.catalog.resolve import ModelResolver
from app.contract.adapter_events import AdapterEvent
from app.contract.events import DELTA_TYPES  # the adapter events that carry a token have the same names
from app.contract.failures import Attempt, AttemptOutcome, ErrorKind, Interrupt
from app.contract.messages import Context, UserMessage
from app.contract.refusals import TokensNotCounted
from app.contract.request import StreamOptions
from app.core.job import Route, TurnJob, TurnObserver
from app.core.settled import settled_turn
from app.core.watchdog import Watchdog
from app.pools.balancer import Pools, conversation_key, cooling_reason, fails_over, listed
from app.pools.state import Acquired, Finished
from app.providers import hosted, sampling
from app.providers.base import Provider, ProviderError, Upstream
from app.settings import Settings
from app.stream.turn import ContractViolation, ToolArgumentsError

log = logging.getLogger("gateway.dispatch")


@dataclass(frozen=True, slots=True)
class Settled:
    """A step of the plan (an attempt, a route's tries, a pool's deployments) settled the turn: it served it,
    or failed so that nothing may follow."""


@dataclass(frozen=True, slots=True)
class Failed:
    """A step of the plan failed in a way the next step may take over: the route it tried last and its error."""

    route: Route
    error: ProviderError


SETTLED = Settled()


class Dispatcher:
    def __init__(
        self, providers: dict[str, Provider], catalog: Catalog, settings: Settings, pools: Pools | None = None
    ) -> None:
        self.providers = providers
        self.catalog = catalog
        self.settings = settings
        self.observers: list[TurnObserver] = []
        if settings.demo:  # only what the catalog lists; the demo's cloud entries only by `<provider>/<id>`
            from app.catalog.demo_clouds import demo_cloud_providers, demo_serves

            self.resolver = ModelResolver(catalog, providers, demo_serves(catalog), demo_cloud_providers())
        else:
            self.resolver = ModelResolver(catalog, providers)
        self.pools = pools if pools is not None else Pools()
        # provider/model -> (the first pool listing it, its deployment there): plain routes' traffic to these
        # counts in the pool's state (`_try_plain`)
        self.pooled = listed(route.pool for route in catalog.routes.values() if route.pool is not None)

    def plan(self, model: str, fallback: list[str]) -> list[Route]:
        """The routes a request names (its model, then its fallbacks; see `app.catalog.resolve`); raises UnknownModel
        or AmbiguousModel naming the field."""
        return [
            Route(self.providers[s.provider], s.model, s.pool, s.deployment)
            for s in self.resolver.plan(model, fallback)
        ]

    def start(self, job: TurnJob, context: contextvars.Context | None = None) -> asyncio.Task[None]:
        """Start the turn's pump (`run`) as a task of its own, in `context` (the current one when None); the job
        keeps it (`TurnJob.task`, which `TurnJob.interrupt` cancels)."""
        job.task = asyncio.create_task(self.run(job), name=f"turn-{job.turn.request_id}", context=context)
        return job.task

    async def run(self, job: TurnJob) -> None:
        """Drive the turn to settlement. Never raises except CancelledError from an unknown canceller. (Awaited
        directly rather than `start`ed, the turn cannot be interrupted.)"""
        turn = job.turn
        watchdog = Watchdog(job, self.settings)
        for observer in self.observers:
            _notify(observer.turn_started, job)
        try:
            await self._run_routes(job, watchdog)
        except asyncio.CancelledError:
            reason = job.interrupt_reason or Interrupt.SHUTDOWN
            if reason == Interrupt.CLIENT:
                # A client that leaves after the terminal event (during the late-frame grace) aborted nothing.
                if turn.settle_error(f"{_label(job)} request aborted: client disconnected", aborted=True):
                    job.client_disconnected = True
                    job.ended_by = reason
            elif reason != Interrupt.GRACE:
                if turn.settle_error(f"{_label(job)} {reason}" + _timeout_detail(reason, self.settings)):
                    job.ended_by = reason
            if job.interrupt_reason is None:
                raise
            _uncancel()
        except Exception as exc:  # a bug of ours: log it, never show a stack trace to the client
            log.exception("turn %s failed inside the gateway", turn.request_id)
            if turn.settle_error(f"{_label(job)} gateway internal error: {type(exc).__name__}") and job.attempts:
                job.attempts[-1].failed_with(ErrorKind.INTERNAL)
        finally:
            watchdog.stop()
            if not turn.settled:
                turn.settle_error(f"{_label(job)} turn ended without a result")
            if job.attempts and not job.attempts[-1].ended:
                last = job.attempts[-1]
                last.interrupt = job.ended_by
                if job.ended_by is Interrupt.WRITER:
                    last.failed_with(ErrorKind.INTERNAL)
                last.end(turn.outcome or AttemptOutcome.ERROR, turn.message.get("errorMessage"))
            settled = job.settled = settled_turn(job)
            for observer in self.observers:
                _notify(observer.turn_finished, job, settled)

    async def _run_routes(self, job: TurnJob, watchdog: Watchdog) -> None:
        turn = job.turn
        requested = job.request.requested_model
        last: Failed | None = None
        for step in _steps(job.request.routes):
            if isinstance(step, list):
                outcome = await self._run_pool(job, step, watchdog)
            else:
                outcome = await self._run_route(job, step, watchdog)
            if isinstance(outcome, Settled):
                return
            last = outcome or last
        if last is None:
            if job.pools_busy_ms is not None:
                turn.settle_error(
                    f"{requested} every deployment is cooling down or at its quota; "
                    f"the soonest is ready in {job.pools_busy_ms} ms retry-after-ms={job.pools_busy_ms}"
                )
                return
            turn.settle_error(f"{requested} no route")
            return
        suffix = f" (after {len(job.attempts)} attempts)" if len(job.attempts) > 1 else ""
        turn.settle_error(_format_error(last.route, last.error, suffix))

    async def _run_route(self, job: TurnJob, route: Route, watchdog: Watchdog) -> Settled | Failed:
        """One entry of the plan, retried on retryable failures: settled, or failed with its last error."""
        outcome = await self._try_plain(job, route, watchdog, self._new_attempt(job, route))
        for try_number in range(self.settings.retries):
            if isinstance(outcome, Settled):
                break
            watchdog.between_attempts()
            await asyncio.sleep(self._backoff(try_number, outcome.error))
            outcome = await self._try_plain(job, route, watchdog, self._new_attempt(job, route))
        return outcome

    async def _try_plain(self, job: TurnJob, route: Route, watchdog: Watchdog, attempt: Attempt) -> Settled | Failed:
        """A plain route's attempt. When a pool lists its provider/model (`self.pooled`), the attempt counts in
        that deployment's state, as a pool's would: in flight and against its rpm while it runs, its latency
        and tokens when it ends, and a failure before content that cools a pool's deployment cools it (by the
        first listing pool's rules). The plain route itself is never refused by that state. No pool lists it:
        nothing more (no call to the pool store)."""
        listed_by = self.pooled.get(f"{route.provider.name}/{route.model.id}")
        if listed_by is None:
            return await self._try(job, route, watchdog, attempt)
        pool, deployment = listed_by
        lease_ms = int(self.settings.total_timeout * 1000) + 60_000
        lease = await self.pools.take_direct(deployment.ref, lease_ms)
        result = Finished(ok=False)
        try:
            outcome = await self._try(job, route, watchdog, attempt)
            result = _finished(job, attempt, watchdog)
            reason = cooling_reason(attempt) if not attempt.after_content else None
            if reason is not None:
                if await self.pools.cool(pool, deployment.name, reason, attempt.retry_after_ms) is not None:
                    attempt.cooled = reason
                    self.pools.check_health(pool, deployment.name, functools.partial(self._health_probe, route))
            return outcome
        finally:
            await _shielded(self.pools.finish_direct(deployment.ref, lease, result))

    async def _run_pool(self, job: TurnJob, routes: list[Route], watchdog: Watchdog) -> Settled | Failed | None:
        """A pool's deployments, in the order `app.pools` picks per attempt (cooled ones and those at a quota
        skipped; when all are, the soonest waited for only within the pool's `waitMs`). Each is tried once, and
        the route's retry budget (`GATEWAY_RETRIES`) is kept: a retryable failure while the budget lasts lets
        its deployment be tried again (once its cooldown, if it has one, is over: a cooled deployment comes after
        the others, and is waited for up to `GATEWAY_RETRY_AFTER_CAP_MS`, as a plain route's retry waits).
        A deployment that fails with a 429, a 5xx, a refused key or missing model (401/403/404: these fail over
        here, where a plain route ends the turn), a connect error or a first-event timeout is cooled down.
        Settled, failed with the last deployment's error, or None when no deployment was tried (all cooling or
        at a quota: `TurnJob.pools_busy_ms` says for how long)."""
        pool = routes[0].pool
        assert pool is not None
        remaining = {route.deployment.name: route for route in routes if route.deployment is not None}
        prices = {name: r.model.pricing.input + r.model.pricing.output for name, r in remaining.items()}
        conversation = conversation_key(job.request.options, job.request.session, job.request.api_key_id)
        lease_ms = int(self.settings.total_timeout * 1000) + 60_000
        turn_seq = int(job.request.started_wall * 1000)  # a conversation's later turn places it over this one
        retries = self.settings.retries
        last: Failed | None = None
        waited = False
        while remaining:
            candidates = [route.deployment for route in remaining.values() if route.deployment is not None]
            grant = await self.pools.acquire(pool, candidates, prices, conversation, lease_ms, turn_seq)
            if not isinstance(grant, Acquired):
                # A deployment this turn may try again (the retry budget) is waited for as a retry waits; else
                # only as long as the pool's operator asked (`waitMs`, none by default: 429 at once).
                retrying = retries < self.settings.retries
                allowance_ms = self.settings.retry_after_cap_ms if retrying else pool.wait_ms
                if waited or grant.ms > allowance_ms:
                    if last is None:
                        job.pools_busy_ms = grant.ms if job.pools_busy_ms is None else min(job.pools_busy_ms, grant.ms)
                    return last
                waited = True  # wait once for the soonest, then take what is ready
                watchdog.between_attempts()
                await asyncio.sleep(self.pools.release_delay_ms(grant.ms) / 1000)  # not all at once
                continue
            waited = False
            route = remaining.pop(grant.name)
            attempt = self._new_attempt(job, route)
            result = Finished(ok=False)
            try:
                outcome = await self._try(job, route, watchdog, attempt, pooled=True)
                if isinstance(outcome, Settled):
                    result = _finished(job, attempt, watchdog)
                    return outcome
                result = _finished(job, attempt, watchdog)
                last = outcome
                reason = cooling_reason(attempt)
                if reason is not None:
                    if await self.pools.cool(pool, grant.name, reason, attempt.retry_after_ms) is not None:
                        attempt.cooled = reason  # (a failure below the pool's threshold is counted, cools nothing)
                        self.pools.check_health(pool, grant.name, functools.partial(self._health_probe, route))
                if retries > 0 and outcome.error.retryable:
                    retries -= 1
                    remaining[grant.name] = route  # may be tried again, after the others and its cooldown
            finally:
                await _shielded(self.pools.finish(pool, grant, result))
        return last

    async def _health_probe(self, route: Route) -> bool:
        """A pool's health check of a cooling deployment (`pool.healthCheck`): the cheapest request its adapter
        has, a token count of a one-word message, or where its api counts nothing a turn of one output token
        read to its end; True when it answered within the first-event timeout."""
        context = Context(messages=[UserMessage(content="ping")])
        options = StreamOptions(max_tokens=1)
        try:
            async with asyncio.timeout(self.settings.first_event_timeout):
                try:
                    await route.provider.count_tokens(route.model, context, options)
                    return True
                except TokensNotCounted:
                    pass
                upstream = await route.provider.open(route.model, context, options)
                try:
                    async for _ in upstream:
                        pass
                finally:
                    await upstream.aclose()
                return True
        except Exception:  # a vendor error, a timeout: still unwell
            return False

    def _new_attempt(self, job: TurnJob, route: Route) -> Attempt:
        attempt = Attempt(route.provider.name, route.provider.api, route.model.id)
        if (placement := route.provider.placement) is not None:  # its api runs on a cloud
            attempt.cloud, attempt.region = placement.cloud, placement.region
        if route.deployment is not None:
            attempt.deployment = route.deployment.name
        job.attempts.append(attempt)
        for observer in self.observers:
            _notify(observer.attempt_started, job, route)
        return attempt

    async def _try(
        self, job: TurnJob, route: Route, watchdog: Watchdog, attempt: Attempt, pooled: bool = False
    ) -> Settled | Failed:
        """One attempt: settled when it settled the turn (served it, or failed so that nothing may follow),
        else failed with its retryable error (or, on a pool's deployment (`pooled`), an error that says the
        deployment is at fault: `app.pools.balancer.fails_over`)."""
        turn = job.turn
        try:
            await self._attempt(job, route, watchdog, attempt)
            attempt.end(turn.outcome or AttemptOutcome.DONE, turn.message.get("errorMessage"))
            return SETTLED
        except ProviderError as error:
            message = _format_error(route, error)
            attempt.failed_with(error.kind, http_status=error.status, retry_after_ms=error.retry_after_ms)
            # Settled already: a failure after the terminal event, which leaves the outcome as it was.
            attempt.end(turn.outcome if turn.settled and turn.outcome else AttemptOutcome.ERROR, message)
            if turn.started or not (error.retryable or (pooled and fails_over(error.kind, error.status))):
                attempt.after_content = turn.started and not turn.settled
                turn.settle_error(message)
                return SETTLED
            return Failed(route, error)

    def _backoff(self, try_number: int, error: ProviderError) -> float:
        cap = self.settings.retry_after_cap_ms
        if error.retry_after_ms is not None:
            return min(error.retry_after_ms, cap) / 1000
        return min(self.settings.retry_backoff_ms * (1 << try_number), cap) / 1000

    async def _attempt(self, job: TurnJob, route: Route, watchdog: Watchdog, attempt: Attempt) -> None:
        turn = job.turn
        request = job.request
        provider, model = route.provider, route.model
        turn.prepare(provider.name, provider.api, model.id, model.pricing)
        if request.options.hosted_tools is not None:
            job.hosted_dropped = hosted.dropped(provider.api, model, request.options)
        if request.options.drop_params:
            job.params_dropped = sampling.dropped(provider.api, request.options)
        translator = provider.translator(model)
        deployment = route.deployment
        own_timeout = deployment.first_event_timeout_ms if deployment is not None else None
        watchdog.attempt_started(own_timeout / 1000 if own_timeout is not None else None)
        job.first_token_at = None
        upstream = None
        try:
            try:
                job.raise_dropped_interrupt()
                upstream = await _timed(job, provider.open(model, request.context, request.options))
                first_delta = not turn.started
                async for wire in _TimedFrames(job, upstream, watchdog):
                    job.upstream_frames += 1
                    if turn.settled:
                        turn.late_frames += 1
                        continue
                    try:
                        events = translator.feed(wire)
                    except ProviderError:
                        raise
                    except Exception as exc:  # a value of a type or size the adapter did not expect
                        raise _unreadable(job, provider, wire, exc) from None
                    self._apply(job, events, watchdog)
                    if turn.congested and not turn.settled:  # once settled nothing more is queued
                        await self._wait_for_reader(job, watchdog)
                    elif first_delta and any(event["type"] in DELTA_TYPES for event in events):
                        # The first token is queued: let the writer send it before the rest of this read is
                        # translated (a reply that comes in one read would reach the client whole, its first
                        # token as late as its last).
                        first_delta = False
                        job.first_token_at = watchdog.loop.time()
                        job.frames_at_first_token = job.upstream_frames
                        await asyncio.sleep(0)
                if not turn.settled:
                    try:
                        events = translator.end()
                    except ProviderError:
                        raise
                    except Exception as exc:
                        raise _unreadable(job, provider, None, exc) from None
                    self._apply(job, events, watchdog)
            except ProviderError:
                raise
            except ToolArgumentsError as exc:
                raise ProviderError(str(exc), kind=ErrorKind.TOOL_ARGUMENTS) from None
            except ContractViolation as exc:
                # Adapters translate frame by frame, so blocks out of order mean the upstream sent them so.
                raise ProviderError(f"sent events out of order: {exc}", kind=ErrorKind.PROTOCOL) from None
            except asyncio.CancelledError:
                reason = job.interrupt_reason
                if reason is not None and reason.ends_attempt_only:
                    # A watchdog timeout ends this attempt only: retryable while nothing was sent. (A client
                    # or shutdown interrupt arriving with it has replaced it: see `TurnJob.interrupt`.)
                    attempt.interrupt = reason
                    job.interrupt_reason = None
                    _uncancel()
                    detail = (
                        f" fired after {watchdog.first_event_timeout:g}s"
                        if reason is Interrupt.FIRST_EVENT
                        else _timeout_detail(reason, self.settings)
                    )
                    raise ProviderError(
                        reason + detail,
                        retryable=not turn.started,
                        kind=ErrorKind.TIMEOUT,
                    ) from None
                if reason == Interrupt.GRACE:
                    job.interrupt_reason = None
                    _uncancel()
                    return
                raise
            except Exception as exc:
                error = provider.error(exc)
                if error is None:
                    raise
                raise error from None
        finally:
            attempt.response_id = translator.response_id or None
            attempt.response_model = translator.response_model
            if upstream is not None:
                await asyncio.shield(upstream.aclose())

    @staticmethod
    def _apply(job: TurnJob, events: list[AdapterEvent], watchdog: Watchdog) -> None:
        turn = job.turn
        try:
            reason = turn.apply_until_finish(events)
            if reason is not None:
                turn.settle_done(reason)
                watchdog.settled()
        except ToolArgumentsError as error:
            last = events[-1]
            if last["type"] == "finish" and last["reason"] == "length":
                # The adapter closed, at the message's end, a call whose arguments the token limit had cut.
                raise error.cut_off() from None
            raise

    @staticmethod
    async def _wait_for_reader(job: TurnJob, watchdog: Watchdog) -> None:
        """The reader is far behind: stop reading the upstream until it catches up (not upstream silence)."""
        watchdog.paused()
        await job.turn.wait_drained()
        watchdog.resumed()


def _steps(routes: Sequence[Route]) -> list[Route | list[Route]]:
    """The plan as steps: a route alone, or a pool's consecutive deployments together."""
    steps: list[Route | list[Route]] = []
    for route in routes:
        if route.pool is None:
            steps.append(route)
        elif steps and isinstance(steps[-1], list) and steps[-1][0].pool is route.pool:
            steps[-1].append(route)
        else:
            steps.append([route])
    return steps


def _label(job: TurnJob) -> str:
    message = job.turn.message
    if message.get("provider"):
        return f"{message['provider']}/{message['model']}"
    return job.request.requested_model


def _format_error(route: Route, error: ProviderError, suffix: str = "") -> str:
    """`<provider>/<model> <what happened><suffix>`, then ` retry-after-ms=N` when the vendor said when to retry."""
    text = f"{route.label} {error.message}{suffix}"
    if error.retry_after_ms is not None:
        text += f" retry-after-ms={error.retry_after_ms}"
    return text


def _unreadable(job: TurnJob, provider: Provider, wire: Any, exc: Exception) -> ProviderError:
    """A wire event the adapter's translator raised on (not a `ProviderError`): a value of a type or size the
    vendor's format does not have, so a malformed upstream (retryable, fallback applies), never an internal
    error. Logged with its traceback, in case it is an adapter's bug after all."""
    log.warning(
        "turn %s: %s sent an event its adapter could not read", job.turn.request_id, provider.name, exc_info=exc
    )
    what = f"a {wire.get('type')} event" if isinstance(wire, dict) and isinstance(wire.get("type"), str) else "an event"
    return ProviderError(
        f"sent {what} the gateway could not read ({type(exc).__name__}: {str(exc)[:120]})",
        retryable=True,
        kind=ErrorKind.MALFORMED,
    )


def _timeout_detail(reason: Interrupt, settings: Settings) -> str:
    seconds = {
        Interrupt.FIRST_EVENT: settings.first_event_timeout,
        Interrupt.IDLE: settings.idle_timeout,
        Interrupt.TOTAL: settings.total_timeout,
        Interrupt.FIRST_CONTENT: settings.first_content_deadline,
    }.get(reason)
    return f" fired after {seconds:g}s" if seconds is not None else ""


async def _timed(job: TurnJob, awaitable: Awaitable[Upstream]) -> Upstream:
    """Await `awaitable`, adding the time it took to `job.upstream_wait`."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        return await awaitable
    finally:
        job.upstream_wait += loop.time() - start


class _TimedFrames:
    """Iterates an upstream, adding the time spent waiting for each frame to `job.upstream_wait` and telling
    the watchdog when the frame came (one clock reading serves both)."""

    __slots__ = ("job", "frames", "watchdog")

    def __init__(self, job: TurnJob, upstream: Upstream, watchdog: Watchdog) -> None:
        self.job = job
        self.frames: AsyncIterator[Any] = upstream.__aiter__()
        self.watchdog = watchdog

    def __aiter__(self) -> "_TimedFrames":
        return self

    async def __anext__(self) -> Any:
        clock = self.watchdog.loop.time
        start = clock()
        try:
            frame = await self.frames.__anext__()
        except BaseException:  # the end of the body, a transport error, or an interrupt: not a frame
            self.job.upstream_wait += clock() - start
            raise
        now = clock()
        self.job.upstream_wait += now - start
        self.watchdog.frame(now)
        return frame


def _finished(job: TurnJob, attempt: Attempt, watchdog: Watchdog) -> Finished:
    """What a pool learns from an attempt that ended: whether it served the turn, its time to first content
    event and the mean gap between frames after it (a first-event timeout counts as a time to first token of
    that timeout) and the tokens it used."""
    ok = attempt.outcome is AttemptOutcome.DONE
    ttft = gap = None
    if job.first_token_at is not None:
        ttft = max(job.first_token_at - watchdog.attempt_start, 0.0)
        frames = job.upstream_frames - job.frames_at_first_token
        if frames > 0 and watchdog.last_frame is not None:
            gap = max(watchdog.last_frame - job.first_token_at, 0.0) / frames
    elif attempt.interrupt is Interrupt.FIRST_EVENT:
        ttft = watchdog.first_event_timeout
    tokens = 0
    if ok:
        usage = job.turn.message.get("usage") or {}
        tokens = int(usage.get("input") or 0) + int(usage.get("output") or 0)
    return Finished(ok=ok, ttft=ttft, gap=gap, tokens=tokens)


async def _shielded(awaitable: Any) -> None:
    """Await `awaitable` to its end even when the turn is being cancelled (a pool's slot is always released)."""
    task = asyncio.ensure_future(awaitable)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])  # finish the release, then let the cancellation go on
        raise
    except Exception:
        log.exception("pool state update failed")


def _uncancel() -> None:
    """Take back the cancellation an interrupt sent the turn's task, which the pump has now handled."""
    task = asyncio.current_task()
    assert task is not None  # called by the pump, in the turn's task
    task.uncancel()


def _notify(callback: Any, job: TurnJob, *args: Any) -> None:
    try:
        callback(job, *args)
    except Exception:  # an observer must never break a turn
        log.exception("observer %r failed for %s", callback, job.turn.request_id)
