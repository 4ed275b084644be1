"""TCP sockets for the HTTP/1.1 client: connecting, and the kernel's receive timestamps.

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

SO_TIMESTAMPNS = 35  # Linux (asm-generic); the socket module does not export it
_TIMESPEC = struct.Struct("qq")
ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0


def kernel_stamp(ancdata: list[tuple[int, int, bytes]]) -> int | None:
    """The SO_TIMESTAMPNS receive time in ``perf_counter_ns`` terms, or None."""
    for level, kind, raw in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(raw)
            now_pc = time.perf_counter_ns()
            offset = time.time_ns() - now_pc  # CLOCK_REALTIME − perf_counter, read together
            return min(sec * 1_000_000_000 + nsec - offset, now_pc)
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
