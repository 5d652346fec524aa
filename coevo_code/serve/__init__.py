"""``coevo serve``: the judge and a trained tester over HTTP (``docs/SERVICE.md``).

:mod:`.dispatcher` feeds many requests' cells into shared executors, round-robin;
:mod:`.sandboxfusion` and :mod:`.rewards` translate SandboxFusion's ``/run_code`` and OpenRLHF's
remote reward model; :mod:`.jsonscan` bounds a body's JSON while it streams in; :mod:`.app` is
the Starlette application; :mod:`.server` assembles and runs it under uvicorn;
:mod:`.trainer_clients` drives veRL's and OpenRLHF's own reward clients against a server.
"""

from .dispatcher import Dispatcher, Limits, QueueFull, QueueTimeout, ShuttingDown, TooLarge

__all__ = ["Dispatcher", "Limits", "QueueFull", "QueueTimeout", "ShuttingDown", "TooLarge"]
