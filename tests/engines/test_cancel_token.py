"""CancelToken: polled, or calling back once when cancelled."""

from __future__ import annotations

from tui.engines.base import CancelToken


def test_on_cancel_calls_once_at_cancel_or_at_once_if_already_cancelled() -> None:
    calls: list[str] = []
    token = CancelToken()
    token.on_cancel(lambda: calls.append("a"))
    forget = token.on_cancel(lambda: calls.append("b"))
    forget()
    assert calls == [] and not token.cancelled
    token.cancel()
    token.cancel()
    assert calls == ["a"] and token.cancelled
    token.on_cancel(lambda: calls.append("late"))
    assert calls == ["a", "late"]
