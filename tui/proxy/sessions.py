"""Agent sessions: the requests through the proxy that continue one conversation.

An agent (or a chat client) resends the whole conversation every turn: turn n+1's
messages are turn n's, then the answer, then a tool result or the next user message.
So two requests belong to one session when they come from the same client (its address
without the port, the API and the model) and the later one's messages start with all of
the earlier one's. That is decided on hashes, never on text:

    h_0 = b"",  h_i = BLAKE2b-128(h_{i−1} ‖ canonical JSON of message i)

over the messages the request carries (chat and Ollama ``messages``; Messages ``system``
then ``messages``; Responses ``instructions`` then ``input``). A request continues the
session whose last request had k messages when its own h_k equals that request's h_k
and it has more than k messages; of several, the longest such session wins. Only the
last hash and the message count of each session's last turn are kept, with numbers per
turn — no text. The hashing runs off the proxy's loop (the caller's thread pool).

Per turn: its messages and prompt tokens, context growth over the previous turn, prompt
tokens read from the cache and computed (the engine's report: llama-server ``cache_n`` /
``prompt_n``, usage ``cached_tokens`` / ``cache_read_input_tokens``), and its time in
queue (where the verdict knows it), prefill, decode, and the client's time before it:
this request's send − the previous turn's end (a tool running, or a person reading).

Bounds: :data:`SESSIONS_KEPT` sessions (the least recently continued go first), each
keeping its last :data:`TURNS_KEPT` turns; a request body that is not JSON with a
message list starts no session.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final

from tui.core.verdict import Verdict

SESSIONS_KEPT: Final = 256
TURNS_KEPT: Final = 200
MESSAGES_HASHED: Final = 10_000  # a request with more messages is hashed this far


@dataclass(frozen=True, slots=True)
class Turn:
    """One request of a session (numbers only; see the module docstring)."""

    request_id: str
    messages: int
    prompt_tokens: int | None
    growth: int | None  # prompt tokens over the previous turn's
    cached_tokens: int | None
    computed_tokens: int | None
    queue_ms: float | None
    prefill_ms: float | None
    decode_ms: float | None
    client_ms: float | None  # the client's time between the previous turn's end and this send
    verdict: str | None = None  # the verdict's kind

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass
class Session:
    id: str
    client: str
    api: str
    model: str | None
    turns: list[Turn] = field(default_factory=list)
    turn_count: int = 0  # every turn, those no longer kept too
    last_hash: bytes = b""
    last_messages: int = 0
    last_end_ns: int | None = None

    def to_dict(self) -> dict[str, Any]:
        def total(key: str) -> float:
            return sum(getattr(t, key) or 0 for t in self.turns)

        return {
            "id": self.id,
            "client": self.client,
            "model": self.model,
            "turns": self.turn_count,
            "prefill_ms": total("prefill_ms"),
            "decode_ms": total("decode_ms"),
            "queue_ms": total("queue_ms"),
            "client_ms": total("client_ms"),
            "cached_tokens": total("cached_tokens"),
            "computed_tokens": total("computed_tokens"),
            "per_turn": [t.to_dict() for t in self.turns],
        }


def messages_of(body: bytes | None, dialect: str) -> list[Any] | None:
    """The messages a request carries, in order (None: not a conversation)."""
    if not body:
        return None
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    if dialect == "openai-responses":
        inp = obj.get("input")
        msgs: list[Any] = inp if isinstance(inp, list) else [{"role": "user", "content": inp}]
        if obj.get("instructions") is not None:
            msgs = [{"role": "system", "content": obj["instructions"]}, *msgs]
        return msgs if inp is not None else None
    messages = obj.get("messages")
    if not isinstance(messages, list):
        return None
    if dialect == "anthropic" and obj.get("system") is not None:
        return [{"role": "system", "content": obj["system"]}, *messages]
    return messages


def chain(messages: list[Any]) -> list[bytes]:
    """h_1 … h_n (see the module docstring)."""
    out: list[bytes] = []
    h = b""
    for m in messages[:MESSAGES_HASHED]:
        try:
            canon = json.dumps(m, sort_keys=True, separators=(",", ":")).encode()
        except (TypeError, ValueError, RecursionError):
            canon = repr(type(m)).encode()
        h = hashlib.blake2b(h + canon, digest_size=16).digest()
        out.append(h)
    return out


@dataclass(frozen=True, slots=True)
class Arrival:
    """What the session book needs of one finished request (numbers and hashes)."""

    request_id: str
    client: str
    dialect: str
    model: str | None
    hashes: list[bytes]
    t_sent_ns: int | None
    t_end_ns: int | None
    verdict: Verdict | None


def client_key(peer: str) -> str:
    """A client's address without its port ("127.0.0.1:51234" → "127.0.0.1")."""
    host, sep, port = peer.rpartition(":")
    return host if sep and port.isdigit() else peer


class SessionBook:
    """The sessions seen so far (see the module docstring). Not thread-safe: call from
    one thread (the proxy's loop), with hashes made elsewhere."""

    def __init__(self) -> None:
        self.sessions: OrderedDict[str, Session] = OrderedDict()
        self.seq = 0

    def add(self, a: Arrival) -> Session | None:
        """File one finished request; its session (None: it carried no conversation)."""
        if not a.hashes:
            return None
        who = client_key(a.client)
        best: Session | None = None
        for s in self.sessions.values():
            if s.client != who or s.model != a.model or s.api != _api(a.dialect):
                continue
            k = s.last_messages
            if len(a.hashes) > k and a.hashes[k - 1] == s.last_hash:
                if best is None or k > best.last_messages:
                    best = s
        if best is None:
            self.seq += 1
            api = _api(a.dialect)
            best = Session(f"{api}-{self.seq}", who, api, a.model)
            self.sessions[best.id] = best
            while len(self.sessions) > SESSIONS_KEPT:
                self.sessions.popitem(last=False)
        self.sessions.move_to_end(best.id)
        best.turns.append(_turn(a, best))
        if len(best.turns) > TURNS_KEPT:
            del best.turns[0]
        best.turn_count += 1
        best.last_hash, best.last_messages = a.hashes[-1], len(a.hashes)
        best.last_end_ns = a.t_end_ns
        return best

    def summaries(self, limit: int = 20) -> list[dict[str, Any]]:
        """The most recently continued sessions, newest first, without their turns."""
        out = []
        for s in reversed(self.sessions.values()):
            d = s.to_dict()
            d.pop("per_turn")
            last = s.turns[-1] if s.turns else None
            d["context_tokens"] = None if last is None else last.prompt_tokens
            out.append(d)
            if len(out) >= limit:
                break
        return out


def _api(dialect: str) -> str:
    return {"openai-chat": "chat", "openai-responses": "resp", "anthropic": "msg"}.get(
        dialect, "ses"
    )


def _turn(a: Arrival, s: Session) -> Turn:
    b = a.verdict.breakdown if a.verdict is not None else None
    prompt = b.prompt_tokens if b is not None else None
    prev = s.turns[-1].prompt_tokens if s.turns else None
    client_ms = None
    if s.last_end_ns is not None and a.t_sent_ns is not None:
        client_ms = max(0.0, (a.t_sent_ns - s.last_end_ns) / 1e6)
    return Turn(
        request_id=a.request_id,
        messages=len(a.hashes),
        prompt_tokens=prompt,
        growth=None if prompt is None or prev is None else prompt - prev,
        cached_tokens=b.cached_tokens if b is not None else None,
        computed_tokens=b.computed_tokens if b is not None else None,
        queue_ms=b.queue_ms if b is not None else None,
        prefill_ms=b.prefill_ms if b is not None else None,
        decode_ms=b.decode_ms if b is not None else None,
        client_ms=client_ms,
        verdict=a.verdict.kind if a.verdict is not None else None,
    )
