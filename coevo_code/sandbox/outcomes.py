"""The verdict rules the judge applies to what a cell left: the stdio comparison, a stdio
cell's output as returned, and the outcome of a stdio program (Python or native) or of a
functional test from exit statuses, CPU seconds and output."""

import os
import re
import signal

from .cell import output_text
from .protocol import (CHILD_SETUP_FAILED, EXIT_MEMORY, MEMORY, OK, OUTPUT, RETURN_OUTPUT_CAP,
                       RUNTIME, SANDBOX, TIMEOUT, WRONG)


def same_tokens(actual, expected):
    """The stdio rule: ``" ".join(actual.split()) == " ".join(expected.split())`` on text."""
    if actual == expected:
        return True
    a = actual.decode("utf-8", "surrogateescape").split()
    e = expected.decode("utf-8", "surrogateescape").split()
    return a == e


def stdio_output(out):
    """A stdio cell's output as returned: its text, or, past RETURN_OUTPUT_CAP characters, its
    token form (what the stdio rule compares) cut there with the SHA-256 of the whole token
    form, so that no truncation decides whether two outputs are the same.

    Bytes that are not UTF-8 are kept apart as the stdio rule keeps them, in text any JSON
    encoder takes: each such byte is U+FFFD and its two hex digits, and a U+FFFD the program
    wrote is doubled (so ``b"\\xff"``, ``b"\\xfe"`` and a real U+FFFD are three outputs;
    decoding with "replace" made them one). Output that is UTF-8 and holds no U+FFFD is
    returned as it is."""
    try:
        text = out.decode("utf-8").replace("\ufffd", "\ufffd\ufffd")
    except UnicodeDecodeError:
        text = out.decode("utf-8", "surrogateescape").replace("\ufffd", "\ufffd\ufffd")
        text = _LONE_BYTE.sub(lambda m: "\ufffd%02x" % (ord(m.group()) - 0xDC00), text)
    if len(text) <= RETURN_OUTPUT_CAP:
        return text
    return output_text(" ".join(text.split()))


_LONE_BYTE = re.compile("[\udc80-\udcff]")


def status_text(status):
    """The output a test process reported after ``OK`` (its own UTF-8, lone surrogates kept)."""
    try:
        return status.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # a test that wrote its status itself
        return status.decode("utf-8", "replace")


def take_memfd(fd, cap):
    """Read what a cell wrote and empty the memfd (offset too: it is shared with the cell)."""
    size = os.lseek(fd, 0, os.SEEK_CUR)
    if not size:
        return b""
    data = os.pread(fd, min(size, cap), 0)
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    return data


def _stdio_outcome(killed, rc, sig, used, time_limit, out, cap):
    """The verdict of a stdio program from its exit alone (None: it exited 0, compare its
    output). Precedence: timeout, sandbox error, output limit, memory limit, runtime error."""
    if killed or used > time_limit or sig == signal.SIGXCPU:
        return TIMEOUT
    if rc == CHILD_SETUP_FAILED:
        return SANDBOX
    if sig == signal.SIGXFSZ or len(out) > cap:
        return OUTPUT
    if rc == EXIT_MEMORY:
        return MEMORY
    if sig or rc != 0:
        return RUNTIME
    return None


def _functional_outcome(res, time_limit, out, cap, status):
    """The verdict of a functional test, from the test process's status (which the program
    cannot reach) and the two processes' exits."""
    (prc, psig, pcpu), (trc, tsig, tcpu) = res["cells"]
    if (res["killed"] or pcpu > time_limit or tcpu > time_limit
            or signal.SIGXCPU in (psig, tsig)):
        return TIMEOUT
    if CHILD_SETUP_FAILED in (prc, trc):
        return SANDBOX
    if psig == signal.SIGXFSZ or len(out) > cap or status == b"PROG OUTPUT":
        return OUTPUT
    if (status.startswith(b"MEM") or status.startswith(b"PROG MEM")
            or (prc == EXIT_MEMORY and not status.startswith(b"OK"))):
        return MEMORY
    if status.startswith(b"OK") and trc == 0 and tsig == 0:
        return OK
    if status == b"ASSERT":
        return WRONG
    return RUNTIME
