"""What every ``coevo`` command shares: the :class:`Command` it is (an :class:`OptionsCommand`
when its options are dataclasses), the :class:`CLIError` it raises to refuse, and the executor
of the commands that run programs."""

from __future__ import annotations

from ..tasks import LOADERS

# the loaders that take an executor (EvalPlus: expected outputs run from a seeded sample)
PLUS = tuple(n for n, loader in LOADERS.items() if loader.needs_executor)


class CLIError(Exception):
    """A command's refusal: ``coevo`` prints ``coevo: MESSAGE`` (one line) and exits with
    ``code``."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


class Command:
    """One ``coevo`` command (TRL's pattern): :meth:`register` adds its parser to the
    subcommands, :meth:`run` does the work and returns the exit code.

    A ``raw`` command parses its own arguments: ``run(None, argv)`` gets the words after its
    name, before the ``coevo`` parser sees them (``train``: TRL's parser; ``build-image``)."""

    name = ""
    help = ""
    raw = False

    def register(self, sub) -> None:
        self.add_parser(sub)

    def add_parser(self, sub, name: str | None = None, **kw):
        """The subparser ``name`` (default: the command's), whose arguments :meth:`run` gets."""
        p = sub.add_parser(name or self.name, help=kw.pop("help", self.help), **kw)
        p.set_defaults(func=self.run)
        return p

    def run(self, args, argv: list[str]) -> int:  # pragma: no cover - every command has one
        raise NotImplementedError


class OptionsCommand(Command):
    """A command whose options are dataclasses (TRL's model): :func:`coevo_code.argv.parse_options`
    reads them, the same way for every command (``--config FILE`` YAML, then ``--field value``
    overrides; old spellings work with a warning naming the new one), and :meth:`main` gets one
    instance of each of :attr:`options`, in order.

    ``positional``: the fields bare words fill; ``renamed``: old flag -> field."""

    raw = True
    options: tuple[type, ...] = ()
    positional: tuple[str, ...] = ()
    renamed: dict[str, str] = {}

    def parse(self, argv: list[str], options: tuple[type, ...] | None = None,
              positional: tuple[str, ...] | None = None, prog: str | None = None,
              description: str | None = None):
        """The options' instances from ``argv``; None after printing ``--help``; a
        :class:`CLIError` (one line) for a bad flag or value."""
        from ..argv import HelpRequested, parse_options
        from ..execution.options import OLD_SPELLINGS
        try:
            return parse_options(options or self.options, argv, prog=prog or f"coevo {self.name}",
                                 positional=self.positional if positional is None else positional,
                                 renamed={**OLD_SPELLINGS, **self.renamed},
                                 description=description or self.help)
        except HelpRequested as h:
            print(h.args[0])
            return None
        except (ValueError, TypeError) as e:
            raise CLIError(str(e).splitlines()[0] if str(e) else type(e).__name__)

    def run(self, args, argv: list[str]) -> int:
        parsed = self.parse(argv)
        return 0 if parsed is None else self.main(*parsed)

    def main(self, *options) -> int:  # pragma: no cover - every options command has one
        raise NotImplementedError


def make_executor(options):
    """The executor :class:`~coevo_code.execution.options.ExecutionOptions` ask for, through the
    one factory; a refusal is one line."""
    from ..execution import IsolationError
    from ..execution import make_executor as factory
    try:
        return factory(**options.executor_options())
    except (IsolationError, RuntimeError, ValueError, ImportError) as e:
        raise CLIError(str(e).splitlines()[0])
