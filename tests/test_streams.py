"""The standard streams of a stdio program are a real interpreter's: every attribute a program
may read (``mode``, ``name``, ``encoding``, ``buffer``, ``fileno()``, ``isatty()``...) and the ten
most common competitive-programming input/output templates, each under every launcher."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import executor_fixture

executor = executor_fixture(docker=True)

TESTS = [{"input": "3\n1 2 3\n", "output": "6\n"},
         {"input": "5\n10 -2 7 0 4\n", "output": "19\n"},
         {"input": "1\n1000000000000\n", "output": "1000000000000\n"}]

PYRIVAL = '''import os
import sys
from io import BytesIO, IOBase

BUFSIZE = 8192


class FastIO(IOBase):
    newlines = 0

    def __init__(self, file):
        self._fd = file.fileno()
        self.buffer = BytesIO()
        self.writable = "x" in file.mode or "r" not in file.mode
        self.write = self.buffer.write if self.writable else None

    def read(self):
        while True:
            b = os.read(self._fd, max(os.fstat(self._fd).st_size, BUFSIZE))
            if not b:
                break
            ptr = self.buffer.tell()
            self.buffer.seek(0, 2), self.buffer.write(b), self.buffer.seek(ptr)
        self.newlines = 0
        return self.buffer.read()

    def readline(self):
        while self.newlines == 0:
            b = os.read(self._fd, max(os.fstat(self._fd).st_size, BUFSIZE))
            self.newlines = b.count(b"\\n") + (not b)
            ptr = self.buffer.tell()
            self.buffer.seek(0, 2), self.buffer.write(b), self.buffer.seek(ptr)
        self.newlines -= 1
        return self.buffer.readline()

    def flush(self):
        if self.writable:
            os.write(self._fd, self.buffer.getvalue())
            self.buffer.truncate(0), self.buffer.seek(0)


class IOWrapper(IOBase):
    def __init__(self, file):
        self.buffer = FastIO(file)
        self.flush = self.buffer.flush
        self.writable = self.buffer.writable
        self.write = lambda s: self.buffer.write(s.encode("ascii"))
        self.read = lambda: self.buffer.read().decode("ascii")
        self.readline = lambda: self.buffer.readline().decode("ascii")


sys.stdin, sys.stdout = IOWrapper(sys.stdin), IOWrapper(sys.stdout)
input = lambda: sys.stdin.readline().rstrip("\\r\\n")


def main():
    n = int(input())
    a = list(map(int, input().split()))
    print(sum(a[:n]))


if __name__ == "__main__":
    main()
'''

TEMPLATES = {
    "pyrival_fastio": PYRIVAL,
    "stdin_readline": "import sys\ninput = sys.stdin.readline\nn = int(input())\n"
                      "print(sum(map(int, input().split())))",
    "stdin_buffer_read": "import sys\ndata = sys.stdin.buffer.read().split()\n"
                         "print(sum(map(int, data[1:1 + int(data[0])])))",
    "os_read_fstat_bytesio": "import io, os\n"
                             "input = io.BytesIO(os.read(0, os.fstat(0).st_size)).readline\n"
                             "n = int(input())\nprint(sum(map(int, input().split())))",
    "open_0": "xs = open(0).read().split()\nprint(sum(map(int, xs[1:])))",
    "input": "n = int(input())\nprint(sum(int(x) for x in input().split()))",
    "stdout_write": "import sys\nn = int(sys.stdin.readline())\n"
                    "sys.stdout.write(str(sum(map(int, sys.stdin.readline().split()))) + '\\n')",
    "print_sep_end": "n = int(input())\nxs = list(map(int, input().split()))\n"
                     "print(sum(xs), sep='', end='')\nprint('', end='\\n')",
    "stdout_buffer_write": "import sys\nxs = sys.stdin.buffer.read().split()\n"
                           "sys.stdout.buffer.write(b'%d\\n' % sum(map(int, xs[1:])))\n"
                           "sys.stdout.flush()",
    "stdin_iteration": "import sys\nlines = [line for line in sys.stdin]\n"
                       "print(sum(map(int, lines[1].split())))",
}


def test_the_ten_common_io_templates_pass(executor):
    names = list(TEMPLATES)
    res = executor.run([{"programs": [TEMPLATES[n] for n in names], "tests": TESTS}])[0]
    assert dict(zip(names, res["outcomes"])) == {n: ["ok"] * len(TESTS) for n in names}


ATTRS = """import os, sys
out = []
for s in (sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__):
    out.append(repr((s.name, s.mode, s.encoding, s.errors, s.isatty(), s.fileno(),
                     s.buffer.name, s.buffer.raw.name, s.buffer.mode, type(s.buffer).__name__,
                     s.readable(), s.writable(), s.closed, s.line_buffering, s.write_through,
                     s.newlines)))
out.append(repr((os.isatty(0), os.fstat(0).st_size, sys.stdin.readline(), sys.stdin.read())))
print("\\n".join(out))
"""


def _fresh(program: str, data: bytes) -> str:
    """What a fresh ``python main.py`` prints with this input in a file and stdout a pipe, in
    the sandbox's locale."""
    import tempfile
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.seek(0)
        r = subprocess.run([sys.executable, "-I", "-c", program], stdin=f, capture_output=True,
                           env={"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"},
                           timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.decode()


def test_stream_attributes_are_a_fresh_interpreters(executor):
    """Name, mode, encoding and errors (C.UTF-8: surrogateescape), buffer and raw file, fd,
    isatty, line buffering, and lines split at ``\\n`` only (a ``\\r`` stays, as CPython's
    stdin keeps it): the same as ``python main.py`` prints with a file as stdin."""
    data = "2\r\nab \u00e9\n"
    res = executor.run([{"programs": [ATTRS], "tests": [{"input": data, "output": ""}],
                         "return_outputs": True}])[0]
    assert res["outcomes"] == [["wrong_answer"]]
    assert res["outputs"][0][0] == _fresh(ATTRS, data.encode())


@pytest.mark.parametrize("data", [b"", b"x" * 100_000 + b"\n", "é\u00ff\n".encode()])
def test_os_read_of_fd0_reads_the_whole_input(executor, data):
    prog = ("import os\nb = os.read(0, os.fstat(0).st_size)\nrest = os.read(0, 10)\n"
            "print(len(b), len(rest), b.count(b'x'))")
    res = executor.run([{"programs": [prog], "tests": [
        {"input": data.decode(), "output": f"{len(data)} 0 {data.count(b'x')}\n"}]}])[0]
    assert res["outcomes"] == [["ok"]]


def test_outputs_that_are_not_utf8_stay_apart(executor):
    """A label-free vote compares the outputs returned: bytes that are not UTF-8 are kept
    apart as the stdio rule keeps them (each is U+FFFD and its hex digits, a real U+FFFD is
    doubled), so ``\\xff``, ``\\xfe``, a real U+FFFD and the text a byte becomes are four
    outputs (decoded with "replace" the first three were one), in text any JSON encoder takes
    (a lone surrogate would make a UTF-8 JSON response fail)."""
    import json
    progs = ["import sys\nsys.stdout.buffer.write(b'\\xff')",
             "import sys\nsys.stdout.buffer.write(b'\\xfe')", "print('\\ufffd', end='')",
             "print('\\ufffdff', end='')", "print('caf\\xe9 \\u2713', end='')"]
    res = executor.run([{"programs": progs, "tests": [{"input": "", "output": "x"}],
                         "return_outputs": True}])[0]
    outs = [row[0] for row in res["outputs"]]
    assert len(set(outs)) == 5 and outs[0] == "\ufffdff" and outs[4] == "caf\xe9 \u2713"
    assert json.loads(json.dumps(res, ensure_ascii=False).encode("utf-8")) == res
