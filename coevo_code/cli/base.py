"""What every ``coevo`` command shares: the :class:`Command` it is, the :class:`CLIError` it
raises to refuse, and the sandbox flags and executor of the commands that run programs."""

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


def sandbox_flags(parser) -> None:
    """``--launcher``, ``--no-uid``, ``--backend`` and ``--address``: where and how a command's
    programs run."""
    from ..execution.backends import add_backend_arguments
    from ..execution.launchers import LAUNCHER_CHOICES

    parser.add_argument("--launcher", default="auto", choices=LAUNCHER_CHOICES,
                        help="how slot servers are isolated (auto: bubblewrap if it works here)")
    parser.add_argument("--no-uid", action="store_true",
                        help="do not drop children to a per-slot uid when root")
    add_backend_arguments(parser)


def make_executor(args):
    """The executor the sandbox flags ask for (``--backend``, ``--address``, ``--slots``,
    ``--launcher``...), through the one factory; a refusal is one line."""
    from ..execution import IsolationError
    from ..execution.backends import executor_from_args
    try:
        return executor_from_args(args)
    except (IsolationError, RuntimeError, ValueError, ImportError) as e:
        raise CLIError(str(e).splitlines()[0])
