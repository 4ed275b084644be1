"""CancelToken: how a stream is asked to stop, from any thread."""

from __future__ import annotations

import threading
from collections.abc import Callable


class CancelToken:
    """Set from any thread to stop a stream; engines check it between tokens, or ask to
    be called (:meth:`on_cancel`)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def cancel(self) -> None:
        with self._lock:
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (in the cancelling thread) when cancelled, at once if already
        cancelled. Returns a function that unregisters it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()
