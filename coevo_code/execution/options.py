"""Where and how programs run: the execution options every command that runs programs takes
(``coevo execute``, ``doctor``, ``eval``, ``rank``, ``tasks``, ``serve``) and the training config
composes (:class:`~coevo_code.training.config.CoevoConfig` is one). Each field is a
``--field`` of the command (its help is the field's ``help``), or a key of its ``--config``
YAML; :meth:`ExecutionOptions.executor_options` is what
:func:`~coevo_code.execution.make_executor` takes."""

from __future__ import annotations

from dataclasses import dataclass, field

from .launchers import LAUNCHER_CHOICES
from .registry import check_backend

# the flags these fields had before they were one spelling (they still work, with a warning)
OLD_SPELLINGS = {"--backend": "exec_backend", "--address": "exec_address",
                 "--slots": "exec_slots", "--launcher": "exec_launcher",
                 "--allow-unsafe": "exec_allow_unsafe", "--no-uid": "exec_no_uid"}


def _f(default, help: str, **kw):
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class ExecutionOptions:
    """The sandbox: backend, slots, launcher and the refusal to run unprotected."""

    exec_backend: str = _f("local", "where programs run: a backend of the registry (built in: "
                                    "local slots, or ray: a Ray cluster)")
    exec_address: str | None = _f(None, "ray backend: the cluster's address (default: start a "
                                        "local Ray instance)")
    exec_slots: int | None = _f(None, "sandbox slots (default: CPU cores / local processes)")
    exec_launcher: str = _f("auto", "sandbox launcher (auto: bubblewrap if it works here)",
                            choices=list(LAUNCHER_CHOICES))
    exec_allow_unsafe: bool = _f(False, "run generated code even with no isolation layer "
                                        "(unprotected!)")
    exec_no_uid: bool = _f(False, "do not drop children to a per-slot uid when root")

    def __post_init__(self):
        self.check_execution()

    def check_execution(self) -> None:
        """ValueError (one line) for a value no backend takes."""
        problem = check_backend(self.exec_backend, self.exec_address,
                                backend_flag="--exec_backend", address_flag="--exec_address")
        if problem:
            raise ValueError(problem)
        if self.exec_launcher not in LAUNCHER_CHOICES:
            raise ValueError(f"--exec_launcher must be one of {', '.join(LAUNCHER_CHOICES)}, "
                             f"got {self.exec_launcher!r}")
        if self.exec_slots is not None and self.exec_slots < 1:
            raise ValueError(f"--exec_slots must be >= 1, got {self.exec_slots}")

    def executor_options(self) -> dict:
        """The keyword arguments of :func:`~coevo_code.execution.make_executor` these options
        give (``None``: the backend's default)."""
        return {"backend": self.exec_backend, "address": self.exec_address,
                "slots": self.exec_slots, "launcher": self.exec_launcher,
                "allow_unsafe": self.exec_allow_unsafe, "use_uid": not self.exec_no_uid}
