"""Command lines, read one way.

:func:`parse_options` is the one parser of every ``coevo`` command's options (TRL's model: the
options are dataclasses, each field a ``--field`` with its help in the field's metadata, read by
transformers' ``HfArgumentParser``): ``--config FILE`` (YAML of field: value), then ``--field
value`` overrides, which win. One spelling, the training config's (``--k_code``,
``--exec_slots``); an old spelling (``--k-code``, ``--slots``) still works for one release, with
a :class:`RenamedFlagWarning` naming the new one. :func:`option` declares such a field.

And the parts of a command line a parser does not see, or sees too late: ``coevo train`` picks a
pair config from ``--config``/``--resume`` before TRL's parser runs (:func:`flag_value`,
:func:`pop_flag`, :func:`without_flag`, :func:`flag_pairs`). A flag's value is written ``--flag
value`` or ``--flag=value``.
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


# ---- every command's options: dataclasses read by one parser (TRL's model) ----------------------

BOOL_WORDS = frozenset({"true", "false", "yes", "no", "1", "0", "t", "f", "y", "n"})


class RenamedFlagWarning(FutureWarning):
    """A flag given in an old spelling (``--k-code``, ``--slots``): it still works, for one
    release; the message names the new spelling."""


class HelpRequested(Exception):
    """``-h``/``--help``: the text to print (the parser's help)."""


def _is_flag(token: str) -> bool:
    if not token.startswith("-") or token == "-":
        return False
    try:
        float(token)
    except ValueError:
        return True
    return False  # a negative number is a value


def _kind(t) -> str:
    """``bool``, ``list`` or ``value``: how a field of type ``t`` takes its value."""
    import typing
    if t is bool or t == (bool | None):
        return "bool"
    origin = typing.get_origin(t)
    if origin is list or t is list:
        return "list"
    return "value"


class _Spellings:
    """The options of ``types`` (dataclasses) by name, and the old spellings that name them."""

    def __init__(self, types, prog: str, renamed: dict | None, short: dict | None):
        import dataclasses
        import typing
        self.prog = prog
        self.kind: dict[str, str] = {}
        self.short: dict[str, str] = {}
        for t in types:
            hints = typing.get_type_hints(t)
            for f in dataclasses.fields(t):
                if f.init:
                    self.kind[f.name] = _kind(hints[f.name])
                    for alias in f.metadata.get("aliases") or ():
                        self.short[alias] = f.name
        self.renamed = {k.lstrip("-").replace("-", "_"): v for k, v in (renamed or {}).items()}
        self.short.update(short or {})

    def field(self, spelled: str, where: str = "") -> str:
        """The field an option spelled ``spelled`` (without dashes) sets; a warning when the
        spelling is an old one, ValueError when it names no option."""
        if spelled in self.kind:
            return spelled
        norm = spelled.replace("-", "_")
        new = self.renamed.get(norm, norm if norm in self.kind else None)
        if new is None:
            raise ValueError(f"unknown {'flag --' if not where else 'field '}{spelled}"
                             f"{where} (see `{self.prog} --help`)")
        import warnings
        old = f"--{spelled}" if not where else f"{spelled!r}{where}"
        warnings.warn(f"{self.prog}: {old} is now --{new} (the old spelling works until the "
                      f"next release)", RenamedFlagWarning, stacklevel=4)
        return new


def normalize_argv(spellings: _Spellings, argv: list[str],
                   positional: tuple[str, ...] = ()) -> list[str]:
    """``argv`` in the one spelling: every option as ``--field=value`` (a list field as
    ``--field v1 v2``: every value it is given, a repeated flag adding), bare words as the
    ``positional`` fields in order, old spellings rewritten with a :class:`RenamedFlagWarning`.
    ValueError names an unknown flag, a flag without its value or a word too many."""
    argv = list(argv)
    out: list[str] = []
    lists: dict[str, list[str]] = {}
    free = list(positional)
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not _is_flag(token):
            if not free:
                raise ValueError(f"unexpected argument {token!r} (see `{spellings.prog} --help`)")
            out.append(f"--{free.pop(0)}={token}")
            continue
        if token.startswith("--"):
            spelled, eq, value = token[2:].partition("=")
            name = spellings.field(spelled)
        elif token in spellings.short:
            name, eq, value = spellings.short[token], "", ""
        elif token[:2] in spellings.short:  # as argparse reads them: -qv, -oDIR, -o=DIR
            name, rest = spellings.short[token[:2]], token[2:]
            if spellings.kind[name] == "bool":
                if not all(f"-{c}" in spellings.short
                           and spellings.kind[spellings.short[f"-{c}"]] == "bool" for c in rest):
                    raise ValueError(f"unknown flag {token} (see `{spellings.prog} --help`)")
                argv[i:i] = [f"-{c}" for c in rest]  # the flags joined after the first
                eq, value = "", ""
            else:
                eq, value = "=", rest[1:] if rest.startswith("=") else rest
        else:
            raise ValueError(f"unknown flag {token} (see `{spellings.prog} --help`)")
        if name in free:
            free.remove(name)
        kind = spellings.kind[name]
        if eq and kind == "list":
            lists.setdefault(name, []).append(value)  # --problems=a --problems=b: both
        elif eq:
            out.append(f"--{name}={value}")
        elif kind == "bool":
            if i < len(argv) and argv[i].lower() in BOOL_WORDS:
                value, i = argv[i], i + 1
            else:
                value = "true"
            out.append(f"--{name}={value}")
        elif kind == "list":
            values = []
            while i < len(argv) and not _is_flag(argv[i]):
                values.append(argv[i])
                i += 1
            if not values:
                raise ValueError(f"--{name} needs a value")
            lists.setdefault(name, []).extend(values)  # a repeated list flag adds to it
        else:
            if i >= len(argv) or (_is_flag(argv[i]) and argv[i] != "-"):
                raise ValueError(f"--{name} needs a value")
            out.append(f"--{name}={argv[i]}")
            i += 1
    for name, values in lists.items():
        out += [f"--{name}", *values]
    return out



def _hf_argument_parser():
    """transformers' ``HfArgumentParser`` class, from its module loaded on its own when
    transformers is not imported yet: that module needs only the standard library and yaml,
    while ``import transformers`` costs a command that never touches a model over a second (the
    same class either way; ``coevo train`` imports transformers anyway)."""
    import sys
    if "transformers" in sys.modules:
        from transformers import HfArgumentParser
        return HfArgumentParser
    mod = sys.modules.get("coevo_code._hf_argparser")
    if mod is None:
        import importlib.util
        try:
            spec = importlib.util.find_spec("transformers")
            path = f"{spec.submodule_search_locations[0]}/hf_argparser.py"
            found = importlib.util.spec_from_file_location("coevo_code._hf_argparser", path)
            mod = importlib.util.module_from_spec(found)
            found.loader.exec_module(mod)
        except Exception:  # noqa: BLE001 - any other layout: the package's own import path
            from transformers import HfArgumentParser
            return HfArgumentParser
        sys.modules["coevo_code._hf_argparser"] = mod
    return mod.HfArgumentParser

def options_parser(types, prog: str, description: str | None = None, usage: str | None = None):
    """transformers' ``HfArgumentParser`` over ``types`` (every field a ``--field``, its help
    from the field's metadata), whose errors are one-line ``ValueError``s."""
    HfArgumentParser = _hf_argument_parser()

    class _Parser(HfArgumentParser):
        def error(self, message):
            raise ValueError(message)

        @staticmethod
        def _parse_dataclass_field(parser, field):
            # one spelling: HfArgumentParser also adds a dashed ``--k-code`` for ``--k_code``;
            # here that is an old spelling, rewritten (with its warning) before parsing
            add = parser.add_argument
            parser.add_argument = lambda *names, **kw: add(
                *[n for n in names if "-" not in n.lstrip("-")], **kw)
            try:
                HfArgumentParser._parse_dataclass_field(parser, field)
            finally:
                del parser.add_argument

    return _Parser(list(types), prog=prog, description=description, usage=usage,
                   epilog="Every option can also be set in a YAML file of field: value given as "
                          "--config FILE; the command line wins over the file.")


def parse_options(types, argv: list[str], *, prog: str, positional: tuple[str, ...] = (),
                  renamed: dict | None = None, short: dict | None = None,
                  description: str | None = None, config: bool = True) -> tuple:
    """One instance of each dataclass of ``types``, from ``argv``: ``--config FILE`` (a YAML
    mapping of field: value; when ``config``), then ``--field value`` overrides on the command
    line (the command line wins). ``renamed`` maps an old flag (``--slots``) to its field
    (``exec_slots``); a field's dashed spelling (``--k-code``) is an old one too; both still
    work with a :class:`RenamedFlagWarning`. ``short`` maps short flags (``-o``) to fields.
    ``positional``: the fields bare words fill, in order.

    ValueError (one line) names an unknown flag or field, a bad value, or a file that is not a
    YAML mapping; :class:`HelpRequested` carries the help for ``-h``/``--help``."""
    from pathlib import Path

    import yaml

    words = "".join(f" [{p.upper()}]" for p in positional)
    parser = options_parser(types, prog, description,
                            usage=f"{prog}{words} [--config FILE] [--FIELD VALUE ...]")
    if "-h" in argv or "--help" in argv:
        raise HelpRequested(parser.format_help())
    spellings = _Spellings(types, prog, renamed, short)
    config_file = None
    if config:
        config_file, argv = pop_flag(argv, "--config")
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise ValueError(f"--config: no such file {config_file}")
        try:
            base = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as e:
            raise ValueError(f"--config {config_file}: not valid YAML "
                             f"({str(e).splitlines()[0]})")
        if not isinstance(base, dict):
            raise ValueError(f"--config {config_file}: must hold a mapping of field: value")
        from_file = _as_argv(parser, {spellings.field(str(k), f" in {config_file}"): v
                                      for k, v in base.items()})
    else:
        from_file = []
    # the file's values are read as the command line's are (types, choices), and come first:
    # a field given on the command line too takes its value from there
    return tuple(parser.parse_args_into_dataclasses(
        args=from_file + normalize_argv(spellings, argv, positional), look_for_args_file=False))


def _as_argv(parser, values: dict) -> list[str]:
    """A YAML file's ``field: value`` pairs as ``--field=value`` words (a list as ``--field v1
    v2``); a null value or an empty list becomes the parser's default for the field."""
    out = []
    for name, v in values.items():
        if v is None or v == []:
            parser.set_defaults(**{name: v})
        elif isinstance(v, list):
            out += [f"--{name}", *map(str, v)]
        elif isinstance(v, bool):
            out.append(f"--{name}={'true' if v else 'false'}")
        else:
            out.append(f"--{name}={v}")
    return out


class OptionMetadata(dict):
    """An option's field metadata, with coevo's own keys (``lockstep``) hidden from the argument
    parser: ``HfArgumentParser`` passes a copy of every field's metadata to ``add_argument``."""

    OWN = ("lockstep",)

    def copy(self) -> dict:
        return {k: v for k, v in self.items() if k not in self.OWN}


def option(default=None, help: str = "", *, default_factory=None, **kw):
    """A dataclass field that is a command-line option: ``--NAME`` with ``help`` (and
    ``choices``, ``aliases``... as ``add_argument`` takes them); ``lockstep=True`` marks a field
    every agent of a pair or ring must share."""
    import dataclasses
    meta = OptionMetadata(help=help, **kw)
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)
