"""Pausing Python's cyclic garbage collector while a worker thread builds a large object graph.

Parsing or converting a 100,000-message conversation creates hundreds of thousands of objects; each young
collection in between rescans the ones just made, and each full one the whole heap: that was two thirds of the
time spent validating such a request and building its vendor request. Only code already running in a worker
thread (off the event loop) pauses it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class CollectorPause:
    """Pauses the cyclic garbage collector (`with gc_paused():`). Pauses from several threads nest:
    the collector resumes after the last one, if it was on before the first. Reference counting still frees
    everything that is not in a cycle; the collector catches up afterwards."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._resume = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            self._active += 1
            if self._active == 1:
                self._resume = gc.isenabled()
                gc.disable()
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0 and self._resume:
                    gc.enable()


gc_paused = CollectorPause()
