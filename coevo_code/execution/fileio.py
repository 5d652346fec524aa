"""Two judge conventions that are not stdin/stdout, expressed with the sandbox's stdio cells.

- **File input** (``input_mode: "file"``, old Codeforces problems and CodeContests rows with an
  ``input_file``): the program reads ``input.txt`` and writes ``output.txt`` in its working
  directory; what it prints is not its answer. :func:`file_mode_program` wraps a program so that,
  in its cell's private work dir, the test's input is written to ``input.txt`` before the program
  runs, its standard output goes where its standard error goes (nowhere), and after it ends
  (atexit, after its own handlers) the bytes of ``output.txt`` are its output, compared as usual.
  The judge of the ``codeforces`` piston package open-r1 uses does the same (input.txt given,
  stdout to /dev/null, output.txt compared).
- **File checkers** (``checker_convention: "files"``, open-r1/codeforces' ``generated_checker``):
  a script run as ``checker.py INPUT CORRECT_OUTPUT SOLUTION_OUTPUT`` that prints its verdict.
  :func:`files_checker` turns it into the ``check(input, expected, actual)`` a stdio job's
  ``checker`` is: the three files are written in the checker cell's work dir with the judge's
  normalization (input and correct output without ``\\r``; empty lines removed from the correct
  and the contestant's output), the script runs as ``__main__`` with that ``sys.argv``, and the
  test passes iff it exits with status 0 and its standard output, all whitespace removed, is
  ``1`` or ``100`` (the piston ``run`` script's rule, whose ``1`` open-r1's ``cf_scoring``
  requires with exit code 0).
"""

from __future__ import annotations

_FILE_MODE = '''\
def _coevo_file_mode(source):
    import atexit, gc, io, os, sys
    with open("input.txt", "wb") as f:
        f.write(sys.stdin.buffer.read())
    sys.stdout.flush()
    answer = os.dup(1)
    os.dup2(2, 1)

    def emit():
        for obj in gc.get_objects():  # output.txt left open: flushed, as interpreter exit would
            try:
                if isinstance(obj, io.IOBase) and getattr(obj, "name", None) == "output.txt" \\
                        and not obj.closed:
                    obj.flush()
            except Exception:
                pass
        try:
            with open("output.txt", "rb") as f:
                data = f.read()
        except OSError:
            data = b""
        view = memoryview(data)
        while view:
            view = view[os.write(answer, view):]

    atexit.register(emit)
    return compile(source, "main.py", "exec", dont_inherit=True)


_coevo_code = _coevo_file_mode(%r)
del _coevo_file_mode
exec(_coevo_code)
'''

_FILES_CHECKER = '''\
_COEVO_CHECKER_SOURCE = %r


def check(input, expected, actual):
    import os, sys

    def unix(text):
        return "\\n".join(line[:-1] if line.endswith("\\r") else line
                         for line in text.split("\\n"))

    def no_empty_lines(text):
        return "".join(line + "\\n" for line in text.split("\\n") if line != "")

    files = {"input.txt": unix(input), "correct_output.txt": no_empty_lines(unix(expected)),
             "solution_output.txt": no_empty_lines(actual)}
    for name, text in files.items():
        with open(name, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
    verdict_fd = os.open("checker_stdout.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(verdict_fd, 1)
    import io
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
    sys.argv = ["checker.py", "input.txt", "correct_output.txt", "solution_output.txt"]
    status = 0
    try:
        exec(compile(_COEVO_CHECKER_SOURCE, "checker.py", "exec", dont_inherit=True),
             {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as e:
        status = 0 if e.code is None else (e.code if isinstance(e.code, int) else 1)
    except BaseException:
        status = 1
    try:
        sys.stdout.flush()
    except Exception:
        pass
    with open("checker_stdout.txt", encoding="utf-8", errors="replace") as f:
        said = "".join(f.read().split())
    return status == 0 and said in ("1", "100")
'''


def file_mode_program(source: str) -> str:
    """``source`` run the file-input way (reads ``input.txt``, writes ``output.txt``). A program
    that does not compile is returned as it is, so that the judge reports ``syntax_error``.
    This runs on the host, unsandboxed and without a CPU limit: the program is parsed (linear
    time) and scanned for colliding constants before it is compiled, and one that would cost
    the compiler quadratic time is wrapped unchecked (its cell compiles it, on its own
    budget)."""
    import ast

    from ..sandbox.server import hash_flood
    try:
        tree = ast.parse(source, "main.py")
        if not hash_flood(source, tree):
            compile(tree, "main.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return source
    return _FILE_MODE % (source,)


def files_checker(source: str) -> str:
    """The ``check(input, expected, actual)`` code running the checker script ``source`` with
    the open-r1 / Codeforces convention (see the module docstring)."""
    return _FILES_CHECKER % (source,)
