"""The code that runs inside the isolation boundary: standard library (+ ctypes) only.

Nothing here imports the rest of coevo-code. The launcher ships these modules' sources to the
sandboxed interpreter on its command line (``coevo_code.execution.launchers.server_command``),
where a bootstrap loads them as the package ``coevo_sandbox``; the host imports them as
``coevo_code.sandbox`` (tests, outcome codes). Modules, by responsibility:

- ``protocol``: outcome codes, framed messages on pipes and on the judge/zygote socket;
- ``seccomp`` and ``landlock``: the two kernel filters, built once;
- ``codec``: values crossing between a program and its test, from a fixed list of exact types;
- ``handles``: a call between a test and the program: object shapes, the link, handles, binding
  the program's names into the test's namespace;
- ``cell``: what a forked cell runs (a stdio program, a program answering calls, a test, a checker);
- ``outcomes``: the verdict rules applied to what a cell left (exit, CPU, output);
- ``zygote``: the fork server of cells, which never holds job data;
- ``native``: C++ and Java: each language's compile-and-run record, the native zygote, the
  judge's cache of compiled programs;
- ``prepare``: a functional test as the judge prepares it once, and the hash-flood scan;
- ``answers``: the judge's own, bounded decoding of a program's answer;
- ``server``: the judge that talks to the host, holds the tests and decides every verdict.
"""

MODULES = ("protocol", "seccomp", "landlock", "codec", "handles", "cell", "outcomes", "zygote",
           "native", "prepare", "answers", "server")
