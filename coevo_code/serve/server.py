"""Assembling and running ``coevo serve``: executors, dispatcher, rewards, the application, and
uvicorn on a socket bound before the sandbox starts (so a taken port fails fast)."""

from __future__ import annotations

import ipaddress
import logging
import socket
import sys
from typing import Callable

from .dispatcher import Dispatcher, Limits

log = logging.getLogger("coevo.serve")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ServeError(RuntimeError):
    """A refusal to start (one line)."""


def check_exposure(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise ServeError(f"--host {host} is reachable from other machines: give a token "
                         "(--token or COEVO_SERVE_TOKEN) or serve on 127.0.0.1")


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted connections inherit it: no 40 ms Nagle / delayed-ACK stall between a response's
    # head and body
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def make_executors(backend: str, address: str | None, slots: int | None, **options) -> list:
    """Local: one single-slot executor per slot (each fed by its own worker, so no worker waits
    on another's slow piece); Ray: one executor for the cluster."""
    import os

    from ..execution import make_executor
    if backend == "ray":
        return [make_executor("ray", address, slots=slots, **options)]
    if slots is None:
        slots = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)
    out = []
    try:
        for _ in range(slots):
            out.append(make_executor("local", address, slots=1, **options))
    except Exception:
        for ex in out:
            ex.close()
        raise
    return out


def raise_open_files(max_connections: int | None, spare: int = 512) -> int | None:
    """The process's open-file limit raised (up to its hard limit) to hold ``max_connections``
    sockets and ``spare`` more (the sandbox's pipes, the log); the connections it holds."""
    if max_connections is None:
        return None
    try:
        import resource
    except ImportError:  # not POSIX
        return max_connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max_connections + spare
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(hard, want)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= want:
        return max_connections
    return max(1, soft - spare)


def _server_class():
    import contextlib
    import signal
    import threading

    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, whose SIGINT/SIGTERM handling (stop accepting, finish what is in
        flight, run the shutdown) ends with exit status 0 instead of raising the signal again,
        and tells the application at the signal itself (``on_exit``), so that requests arriving
        on open connections while in-flight ones finish get 503 and the grace starts then."""

        on_exit = None

        def handle_exit(self, sig, frame):
            if self.on_exit is not None:
                self.on_exit()
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self):
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            sigs = (signal.SIGINT, signal.SIGTERM)
            original = {sig: signal.signal(sig, self.handle_exit) for sig in sigs}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    return Server


TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
             b"connection: close\r\ncontent-length: %d\r\n\r\n%s")


def _header_deadline_protocol(seconds: float):
    """uvicorn's HTTP/1.1 protocol with a deadline on a request's line and headers: from the
    connection's start, and from the first byte of each later request on a kept-alive one, a
    client has ``seconds`` to send them all; then it is answered 408 and closed (uvicorn itself
    waits for ever: a client trickling one header byte at a time holds a connection and its
    buffer). The body's own deadline is the application's (``--body_timeout``)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadline(H11Protocol):
        _header_timer = None

        def connection_made(self, transport):
            super().connection_made(transport)
            self._arm()

        def _arm(self):
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(seconds, self._expired)

        def _disarm(self):
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _expired(self):
            self._header_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                msg = f"the request's headers were not sent within {seconds:g} s".encode()
                self.transport.write(TIMED_OUT % (len(msg), msg))
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            if self.conn.their_state is h11.IDLE:
                self._arm()  # a new request begins: its headers get the deadline
            super().data_received(data)

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE:
                self._disarm()  # the headers are in

        def connection_lost(self, exc):
            self._disarm()
            super().connection_lost(exc)

    return HeaderDeadline


def serve(sock: socket.socket, executors: list, limits: Limits, options, rewards=None,
          grace_s: float = 30.0, announce: Callable[[str], None] | None = None,
          batch_cells: int | None = None, max_connections: int | None = 1024,
          header_timeout_s: float = 30.0) -> None:
    """Run until SIGINT/SIGTERM: then stop accepting, answer what is in flight (up to
    ``grace_s``: what is unanswered then gets 503 and its cells are dropped), close the
    executors. Above ``max_connections`` open connections and requests uvicorn answers 503."""
    import uvicorn

    from .app import create_app
    _Server = _server_class()

    ray = options.backend == "ray"
    dispatcher = Dispatcher(executors, limits, batch_cells=batch_cells or (512 if ray else 16))

    def shutdown():
        dispatcher.abort()   # nothing more taken; a piece running ends with its executor
        for ex in executors:
            ex.close()
        # a worker still inside a piece (its executor may try to restart the killed slot) is a
        # daemon thread: not waited for long, it ends with the process
        dispatcher.close(timeout=1)

    options.grace_s = grace_s
    held = raise_open_files(max_connections)
    if held != max_connections:
        print(f"coevo serve: the open-file limit holds {held} connections, not --max_connections "
              f"{max_connections}: above {held} requests get 503 (raise it: ulimit -n)",
              file=sys.stderr, flush=True)
        max_connections = held
    app = create_app(dispatcher, rewards, options, on_shutdown=shutdown)
    # uvicorn cancels handlers a little after the grace: by then they have answered 503
    config = uvicorn.Config(app, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=grace_s + 2, lifespan="on",
                            limit_concurrency=max_connections, timeout_keep_alive=30,
                            http=_header_deadline_protocol(header_timeout_s))
    server = _Server(config)
    server.on_exit = app.state.begin_shutdown
    host, port = sock.getsockname()[:2]
    if announce:
        announce(f"coevo serve: listening on http://{host}:{port} ({options.backend}, "
                 f"{options.slots} slots{', tester ' + options.tester if options.tester else ''})")
    try:
        server.run(sockets=[sock])
    finally:
        if not dispatcher._stop:  # the lifespan did not run (start-up failed)
            shutdown()
    print("coevo serve: stopped", file=sys.stderr, flush=True)
