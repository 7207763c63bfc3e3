"""Resumable streams (`options.resumable: true`): the turn's events are kept, a client that disconnects may
continue with `GET /v1/stream/{requestId}` and `Last-Event-ID`, on this replica or (with Redis) any other.

How it works, for a resumable turn on the replica that runs it (the origin):

- a tee task reads the turn's events (`turn.next_event()`), numbers them 1, 2, 3 … and appends each to a
  `LocalStream` in memory and, with `GATEWAY_REDIS_URL`, to a Redis stream (a writer task per turn, in
  order, in pipelined batches; kept `GATEWAY_RESUME_TTL` seconds);
- what is kept is bounded: per turn by `GATEWAY_RESUME_MAX_EVENTS` and `GATEWAY_RESUME_MAX_TURN_BYTES` (its
  oldest frames dropped), per replica by `GATEWAY_RESUME_MAX_BYTES` (the frames of the turns that finished
  first are dropped, then the oldest frames of the turn that grows); Redis keeps what the origin keeps;
- every SSE response for the turn — the original one and each resumption — reads from the kept events, so
  a reader never holds the upstream back (the turn is buffered up to the cap instead of back-pressured);
- when the last reader goes away before the terminal event, the turn is not cancelled: a grace monitor
  waits until `GATEWAY_RESUME_GRACE` seconds pass with no reader on any replica (readers on other replicas
  hold a short lease in Redis), then interrupts the turn as a client disconnect (it settles `aborted`).

A resumption on another replica reads the Redis stream without holding a connection of its own: a caught-up
reader waits for a `StreamWatch`, one task per replica that waits for new entries of every followed turn
with one blocking `XREAD` on one connection and hands the entries it read to the readers; a reader that is
behind fetches with short non-blocking calls through a bounded pool (`events_client`). A resumption counts
against the key's concurrent streams and the replica's stream limits (`Gateway.admit_resumption`). Only the key that made the request may resume it
(another key: 404). When the kept events do not reach back to `Last-Event-ID` (dropped by a bound, expired,
or lost with a Redis restart) the answer is 410 `resume_unavailable`; if events go missing while a
resumption is being served, that response ends without a terminal event (and says why in an SSE comment),
never with a silent gap.

A Redis stall is ridden out, not taken for the end: a call of a resumption (finding the turn, attaching,
each read) and the grace monitor's status check that times out or loses its connection is tried again with
a backoff (`StallRetry`: 50 ms doubling up to 1 s, for at most 5 s); only then does the resumption end as
described (503 before the response starts, a cut response after). The mirror keeps a batch whose write
failed and writes it with the next one; each write is one MULTI/EXEC that also records the last sequence
number written (`last`), so a write that ran although its answer was lost is not written twice.

The package:

- `hub.py`: `ResumeHub`, the resumable turns this replica runs (the tee, the bounds, the grace monitor) and
  their resumption, here or through Redis (`find`, `open`), with what finding one answers (`Found`,
  `StreamEnded`, `NotInStore`);
- `frames.py`: `Frame`, one numbered event, and what the origin keeps of them in memory: a turn's
  `LocalStream`, bounded per turn, and the replica's `KeptBytes`;
- `mirror.py`: `Mirror`, the origin's copy of a local stream to Redis, in order, in batches;
- `redis_store.py`: `RedisEvents`, a turn's keys and calls in Redis (`StoredBounds`: what Redis keeps of it),
  and the event store's client (`events_client`);
- `watch.py`: `StreamWatch`, the one blocking read per replica that the readers of turns kept in Redis wait on;
- `stall.py`: `StallRetry` and `through_stall`, how a call that stalls is tried again.
"""
