"""ListenerWatch (tui/app/listeners.py) on listeners given to it: which ports a prompt
re-checks, what it holds against one, what it cannot tell. (A real port taken by another
user: tests/app/test_remembered_server.py.)"""

from __future__ import annotations

import os

from tui.app.listeners import ListenerWatch, changed_note, loopback_port
from tui.engines.base import EngineSpec
from tui.engines.servers.port_owner import PortOwner

ME, OTHER, THIRD = os.getuid(), 65534, 4242


def spec(url: str, name: str = "ollama:11434") -> EngineSpec:
    return EngineSpec(name, "ollama", url=url)


class Listening:
    """The listeners the watch reads, as a test sets them."""

    def __init__(self) -> None:
        self.now: dict[int, PortOwner] = {}
        self.reads = 0

    def __call__(self, ports: list[int]) -> dict[int, PortOwner]:
        self.reads += 1
        return {p: self.now.get(p, PortOwner(p, True)) for p in ports}


def test_only_found_servers_on_loopback_are_checked() -> None:
    watch = ListenerWatch(Listening())
    watch.found = {11434}
    specs = [
        spec("http://127.0.0.1:11434"),
        spec("http://localhost:11434/v1"),
        spec("http://127.0.0.1:8080"),  # not found by discovery: config's
        spec("http://10.0.0.7:11434"),  # another machine
        EngineSpec("local", "llamacpp"),  # in-process
    ]
    assert watch.ports(specs) == [11434]
    assert loopback_port(spec("http://[::1:bad")) is None


def test_a_changed_owner_is_held_until_the_user_chooses_the_server_again() -> None:
    listening = Listening()
    watch = ListenerWatch(listening)
    watch.found = {11434}
    watch.trust(PortOwner(11434, True, frozenset({ME})))  # at start: the user's own
    assert watch.changed([11434]) == []  # (nothing listens: it cannot be sent to anyway)
    listening.now[11434] = PortOwner(11434, True, frozenset({ME}))
    assert watch.changed([11434]) == []
    taken = listening.now[11434] = PortOwner(11434, True, frozenset({OTHER}))
    assert watch.changed([11434]) == [taken]
    assert watch.changed([11434]) == [taken]  # held: every prompt until chosen again
    watch.chosen(spec("http://127.0.0.1:11434"))  # the user's decision
    assert watch.changed([11434]) == []  # whoever listens now is trusted
    listening.now[11434] = PortOwner(11434, True, frozenset({THIRD}))
    assert watch.changed([11434]) != []  # and another change is held again
    listening.now[11434] = PortOwner(11434, True, frozenset({ME}))
    assert watch.changed([11434]) == []  # the user's own process is always trusted
    listening.now[11434] = PortOwner(11434, known=False)
    assert watch.changed([11434]) == []  # a system that cannot say: not held against it
    assert watch.changed([]) == [] and listening.reads == 8  # no ports: nothing read


def test_the_note_says_whose_the_port_is_and_what_to_do() -> None:
    note = changed_note("ollama:11434", PortOwner(11434, True, frozenset({OTHER})))
    assert note.startswith("ollama:11434: the process listening on port 11434 is not the one")
    assert f"uid {OTHER}" in note and "was not sent" in note and "Ctrl+N" in note
