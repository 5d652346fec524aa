"""Outcome codes and framing: a 4-byte big-endian length and a ``marshal`` payload of plain
values, on the host pipes, on the judge/zygote socket (with file descriptors attached) and on the
pipes between a program and its test."""

import marshal
import os
import socket
import struct

OK = "ok"
WRONG = "wrong_answer"
RUNTIME = "runtime_error"
TIMEOUT = "timeout"
MEMORY = "memory_limit"
OUTPUT = "output_limit"
SYNTAX = "syntax_error"
SANDBOX = "sandbox_error"
COMPILE = "compile_error"  # a C++ or Java program its compiler refused (none of it ran)
OUTCOMES = (OK, WRONG, RUNTIME, TIMEOUT, MEMORY, OUTPUT, SYNTAX, SANDBOX, COMPILE)
# The outcomes of a run that finished and answered: its output (stdio: what it printed; a probe:
# the call's value) is what a vote or MBR-exec compares. Any other outcome is an error, whatever the
# run printed before it.
ANSWERED = (OK, WRONG)
# The outcomes that say the harness (a judge, a container, a node), not the program, failed: such
# a cell was re-run once on a fresh judge and still failed, so its verdict is unknown. Training
# masks what it touches, evaluation reports it apart; it is never a wrong answer.
HARNESS = (SANDBOX,)

RETURN_OUTPUT_CAP = 65536  # characters of each cell's output sent back with return_outputs
STATUS_CAP = 1 << 20  # bytes a test cell may write to its status channel
CHILD_SETUP_FAILED = 121  # exit status of a cell whose isolation could not be set up
EXIT_MEMORY = 120  # exit status of a stdio program that ran out of memory (MemoryError)
FRAME_CAP = 256 << 20  # the largest message a cell accepts from the other side of a call


class ProtocolError(Exception):
    """A malformed or oversized message."""


def read_exact(fd, n):
    chunks = []
    while n:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            raise EOFError
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def recv(fd, cap=None):
    (n,) = struct.unpack(">I", read_exact(fd, 4))
    if cap is not None and n > cap:
        raise ProtocolError("a message of %d bytes (cap %d)" % (n, cap))
    return marshal.loads(read_exact(fd, n))


def send(fd, obj):
    data = marshal.dumps(obj)
    data = struct.pack(">I", len(data)) + data
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def send_msg(sock, obj, fds=()):
    """One datagram on the judge/zygote SOCK_SEQPACKET socket, with ``fds`` attached."""
    socket.send_fds(sock, [marshal.dumps(obj)], list(fds))


def recv_msg(sock, maxfds=8):
    """(message, fds); raises EOFError when the other end is gone."""
    data, fds, _, _ = socket.recv_fds(sock, 1 << 16, maxfds)
    if not data:
        for fd in fds:
            os.close(fd)
        raise EOFError
    return marshal.loads(data), fds
