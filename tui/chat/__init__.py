"""The chat core: a conversation with one engine or two (A/B), without a screen.

Front ends (the TUI in tui/app, ``infertop run``) drive a :class:`~tui.chat.core.ChatCore`
and draw what it tells them (tui/chat/events.py). No Textual import here.
"""
