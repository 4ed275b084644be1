"""TCP sockets for the HTTP/1.1 client: connecting, the kernel's receive timestamps, and
:class:`StampedConn`, a connection read by an event loop with each read stamped.

``SO_TIMESTAMPNS`` makes Linux attach to each read the time its (last) packet reached the
socket, in CLOCK_REALTIME; :func:`kernel_stamp` converts it to ``perf_counter_ns`` terms
by reading both clocks together, so it compares with every other stamp in infertop.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time
from collections.abc import Callable

SO_TIMESTAMPNS = 35  # Linux (asm-generic); the socket module does not export it
_TIMESPEC = struct.Struct("qq")
_unpack_timespec = _TIMESPEC.unpack_from
_TIMESPEC_SIZE = _TIMESPEC.size
_perf_counter_ns = time.perf_counter_ns  # module globals: one lookup each, per read
_time_ns = time.time_ns
_SOL_SOCKET = socket.SOL_SOCKET
READ_SIZE = 256 * 1024
# With kernel stamps, one read spanning several packets carries the *last* packet's time.
# So a reader that finds data waiting reads small pieces (about one SSE event each, each
# with its own packet's stamp), and switches to whole-buffer reads only while what it reads
# arrived less than FRESH_NS ago: then everything behind it arrived within that window too,
# and sharing one stamp misplaces no event by more than FRESH_NS.
SMALL_READ = 1024
FRESH_NS = 1_000_000
# Bytes one read callback takes before it lets the loop run: a reader that takes parts
# (take()) runs between callbacks, so what it has not taken stays this small.
DRAIN_LIMIT = 4 * READ_SIZE
Stamped = tuple[int, bytes]
# pump()'s consumer: called with each read from the read callback; True = it has had enough
Sink = Callable[[int, bytes], bool]

ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0


def kernel_stamp(ancdata: list[tuple[int, int, bytes]], now_pc: int | None = None) -> int | None:
    """The SO_TIMESTAMPNS receive time in ``perf_counter_ns`` terms, or None.

    ``now_pc``: ``time.perf_counter_ns()`` read just now (else it is read here); the
    CLOCK_REALTIME − perf_counter offset is taken from it and a CLOCK_REALTIME read. A
    stamp later than ``now_pc`` (a clock step between the two reads) is ``now_pc``."""
    for level, kind, raw in ancdata:
        if kind == SO_TIMESTAMPNS and level == _SOL_SOCKET and len(raw) >= _TIMESPEC_SIZE:
            sec, nsec = _unpack_timespec(raw)
            if now_pc is None:
                now_pc = _perf_counter_ns()
            t = sec * 1_000_000_000 + nsec + now_pc - _time_ns()  # − (realtime − perf)
            return t if t < now_pc else now_pc
    return None


def probe_arrival_stamps(delay_s: float = 0.03) -> bool | None:
    """Whether this kernel's ``SO_TIMESTAMPNS`` stamps are arrival times, on loopback TCP.

    Sends a byte, waits ``delay_s`` before reading it, and checks the stamp is nearer the
    send than the read. Some kernels and sandboxes stamp loopback packets when they are
    read; there infertop's HTTP stamps are read times (still on the reader thread, never
    on the UI). None where the option does not exist.
    """
    if not sys.platform.startswith("linux") or not ANC_SIZE:
        return None
    with socket.create_server(("127.0.0.1", 0)) as server:
        with socket.create_connection(server.getsockname()) as client:
            peer, _ = server.accept()
            with peer:
                try:
                    client.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                except OSError:
                    return None
                t_send = time.perf_counter_ns()
                peer.sendall(b"x")
                time.sleep(delay_s)
                _data, anc, _flags, _addr = client.recvmsg(1, ANC_SIZE)
                t_read = time.perf_counter_ns()
    stamp = kernel_stamp(anc)
    if stamp is None:
        return None
    return stamp - t_send < (t_read - t_send) / 2


async def open_socket(loop: asyncio.AbstractEventLoop, host: str, port: int) -> socket.socket:
    """A connected non-blocking TCP socket (each resolved address tried in turn)."""
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    if not infos:
        raise OSError(f"cannot resolve {host}")
    last: OSError | None = None
    for family, kind, proto, _name, addr in infos:
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(sock, addr)
            return sock
        except OSError as e:
            sock.close()
            last = e
        except BaseException:
            sock.close()
            raise
    assert last is not None
    raise last


class StampedConn:
    """One TCP connection read by the event loop: stamped reads collect in ``parts``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        self.loop = loop
        self.sock = sock
        self.kernel_stamps = False
        if sys.platform.startswith("linux") and ANC_SIZE:
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                self.kernel_stamps = True
            except OSError:
                pass
        self.parts: list[Stamped] = []
        self.closed = False
        # kept alive in a pool between responses: the server has nothing to say then, so
        # a byte (or the end) that comes closes the connection instead of being kept
        self.idle = False
        self.error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timeout = 0.0
        self._since = 0.0  # loop.time() when the current wait began
        # pump(): each read straight to the sink, from the read callback (no wake-up per read)
        self._sink: Sink | None = None
        self._sink_end: bool | BaseException | None = None  # True: the sink had enough
        self._read_ns = 0  # perf_counter_ns when the last read returned (stall watchdog)

        loop.add_reader(sock.fileno(), self._on_readable)

    async def send(self, data: bytes | memoryview) -> None:
        await self.loop.sock_sendall(self.sock, data)

    def _on_readable(self) -> None:
        """Read what the socket holds, up to DRAIN_LIMIT bytes (then the loop gets a turn,
        and the level-triggered selector calls again): each read, with its own stamp,
        goes to the pump's sink (:meth:`pump`) or into ``parts`` (:meth:`take`). Reading
        stops at once when the sink has had enough or raised: a server that sends
        without pause must not be read on after that, nor faster than its reader
        takes the bytes."""
        size = SMALL_READ
        sock = self.sock
        budget = DRAIN_LIMIT
        while not self.closed:
            asked = size if self.kernel_stamps else READ_SIZE
            try:
                if self.kernel_stamps:
                    data, anc, _flags, _addr = sock.recvmsg(size, ANC_SIZE)
                    now = _perf_counter_ns()
                    t = now
                    if len(anc) == 1:  # kernel_stamp() inline: the usual one stamp, per read
                        level, kind, raw = anc[0]
                        if (
                            kind == SO_TIMESTAMPNS
                            and level == _SOL_SOCKET
                            and len(raw) >= _TIMESPEC_SIZE
                        ):
                            sec, nsec = _unpack_timespec(raw)
                            t = sec * 1_000_000_000 + nsec + now - _time_ns()
                            if t > now:  # a clock step between the two reads
                                t = now
                    elif anc:
                        t = kernel_stamp(anc, now) or now
                    size = READ_SIZE if now - t < FRESH_NS else SMALL_READ
                else:
                    data = sock.recv(READ_SIZE)
                    t = now = _perf_counter_ns()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self.connection_lost(e)
                return
            if not data:  # EOF: close our side too
                self.connection_lost(None)
                return
            if self.idle:  # bytes after the response, with none asked for: not kept
                self.connection_lost(None)
                return
            self._read_ns = now
            sink = self._sink
            if sink is None:
                self.parts.append((t, data))
                self._wake()
            else:
                try:
                    if sink(t, data):
                        self._sink_end = True
                        self._sink = None
                        self._wake()
                        return
                except Exception as e:  # noqa: BLE001 - raised again in pump(), on its task
                    self._sink_end = e
                    self._sink = None
                    self._wake()
                    return
            budget -= len(data)
            if budget <= 0:
                return
            if len(data) < asked:
                # a short read emptied the socket: no second read to learn that from
                # EAGAIN (a syscall and an exception per wake-up); the selector is
                # level-triggered, so bytes that came meanwhile wake us again
                return

    def park(self) -> None:
        """Kept alive in a pool between responses: no timer runs, and from now a byte
        (or the end) from the server closes it — it has nothing to say until asked
        (the pools call this, tui/transport/http1.py and tui/proxy/upstream.py)."""
        self._cancel_timer()
        self.idle = True

    def unpark(self) -> bool:
        """Taken from a pool for a request: True when it is still open and quiet (else
        it is closed, and the caller takes another)."""
        self.idle = False
        if self.closed or self.parts:
            self.close()
            return False
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.error = exc
        self._cancel_timer()
        self._release()
        self._wake()

    async def take(self, timeout: float) -> list[Stamped]:
        """The reads so far, waiting up to ``timeout`` s for one; [] once closed.

        Raises TimeoutError when nothing came in ``timeout`` seconds.
        """
        while not self.parts:
            if self.closed:
                return []
            self._since = self.loop.time()
            if self._timer is None or timeout != self._timeout:
                self._cancel_timer()
                self._timeout = timeout
                self._timer = self.loop.call_at(self._since + timeout, self._check)
            self._waiter = self.loop.create_future()
            await self._waiter
        parts, self.parts = self.parts, []
        return parts

    async def pump(self, sink: Sink, first: float, stall: float) -> bool:
        """Every read to ``sink(t_ns, data)`` as it comes, from the read callback itself,
        until the sink returns True (then True) or the connection closes (False).

        One wait for the whole body instead of a task wake-up per read (at one token per
        read, those wake-ups were a fifth of the client's CPU per token). Waits up to
        ``first`` seconds for the first read and ``stall`` after each later one, counted
        from when it was read, on the monotonic clock (TimeoutError; a kernel stamp is
        CLOCK_REALTIME underneath, which can step); what the sink raises is raised here.
        """
        parts, self.parts = self.parts, []
        for t, data in parts:
            if sink(t, data):
                return True
        if parts:  # bytes came before the pump began: the next wait is a gap between reads
            first = stall
        if self.closed:
            return False
        self._cancel_timer()
        self._sink, self._sink_end = sink, None
        start = time.perf_counter_ns()
        self._timer = self.loop.call_later(min(first, stall), self._pump_watch, start, first, stall)
        try:
            while self._sink_end is None and not self.closed:
                self._waiter = self.loop.create_future()
                await self._waiter
        finally:
            self._sink = None
            self._cancel_timer()
        end, self._sink_end = self._sink_end, None
        if isinstance(end, BaseException):
            raise end
        return end is True

    def _pump_watch(self, start: int, first: float, stall: float) -> None:
        """:meth:`pump`'s watchdog, re-armed until a wait is too long. (A method, not a
        closure: a closure that re-arms itself refers to itself, a reference cycle per
        pump left for the cycle collector, whose full collections stall every stream.)"""
        read = self._read_ns > start  # a read came since the pump began
        since, limit = (self._read_ns, stall) if read else (start, first)
        left = limit - (time.perf_counter_ns() - since) / 1e9
        w = self._waiter
        if left > 0:  # at most `stall` on: a read now and then silence ends sooner
            self._timer = self.loop.call_later(
                min(left, stall), self._pump_watch, start, first, stall
            )
        elif w is not None and not w.done():
            self._waiter = None
            w.set_exception(TimeoutError())

    def _wake(self) -> None:
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)

    def _check(self) -> None:
        """The watchdog: fail the wait if it is older than the timeout, else re-arm."""
        self._timer = None
        w = self._waiter
        if w is None or w.done():
            return
        due = self._since + self._timeout
        if self.loop.time() >= due:
            self._waiter = None
            w.set_exception(TimeoutError())
        else:
            self._timer = self.loop.call_at(due, self._check)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _release(self) -> None:
        if self.sock.fileno() != -1:
            self.loop.remove_reader(self.sock.fileno())
            self.sock.close()

    def close(self) -> None:
        self.closed = True
        self._cancel_timer()
        self._release()
