"""Command-line argument lists, read one way: a flag's value, the list without it, the flags given.

For the parts of the command line that a parser does not see, or sees too late: ``coevo train``
picks a pair config from ``--config``/``--resume`` before TRL's parser runs, and ``coevo eval
--config FILE`` lets the flags given on the command line win over the file. A flag's value is
written ``--flag value`` or ``--flag=value``.
"""

from __future__ import annotations


def _first(argv: list[str], flag: str) -> tuple[int, int, str] | None:
    """(index, tokens taken, value) of the first ``flag`` in ``argv``; ValueError when it is
    the last token, with no value."""
    for i, a in enumerate(argv):
        if a == flag:
            if i + 1 >= len(argv):
                raise ValueError(f"{flag} needs a value")
            return i, 2, argv[i + 1]
        if a.startswith(flag + "="):
            return i, 1, a.split("=", 1)[1]
    return None


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value of the first ``flag`` in ``argv``, None when it is absent."""
    found = _first(argv, flag)
    return None if found is None else found[2]


def pop_flag(argv: list[str], flag: str) -> tuple[str | None, list[str]]:
    """The value of the first ``flag`` in ``argv`` (None when absent) and ``argv`` without it."""
    found = _first(argv, flag)
    if found is None:
        return None, list(argv)
    i, taken, value = found
    return value, argv[:i] + argv[i + taken:]


def without_flag(argv: list[str], flag: str) -> list[str]:
    """``argv`` without any ``flag`` and its value."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == flag:
            skip = True
        elif not a.startswith(flag + "="):
            out.append(a)
    return out


def given_flags(argv: list[str]) -> set[str]:
    """The names of the long flags in ``argv``, dashes as underscores (``--top-p=1``: ``top_p``)."""
    return {a[2:].split("=")[0].replace("-", "_") for a in argv if a.startswith("--")}


def flag_pairs(argv: list[str]) -> list[tuple[str, str | None]]:
    """Every long flag of ``argv`` in order, as (name with dashes as underscores, value): the
    next token or the text after ``=``; None for a flag with no value (the next token is a flag,
    or there is none). ValueError names a token that is neither a flag nor a flag's value."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if not a.startswith("--"):
            raise ValueError(f"unexpected argument {a!r}")
        name, eq, value = a[2:].partition("=")
        if not eq:
            value = None
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                value = argv[i + 1]
                i += 1
        out.append((name.replace("-", "_"), value))
        i += 1
    return out
