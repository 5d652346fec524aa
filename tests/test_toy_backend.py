"""A backend is one module plus one registry line: a toy backend (``toy_backend.py``, one slot,
units in sequence, on the public execution core) is registered by name, built by the factory
from ``--backend``-style options, and passes the whole verdict suite (``test_verdicts.py``'s
tests, run here against it)."""

from __future__ import annotations

import argparse

import pytest
import test_verdicts

from coevo_code.execution import BackendError, ExecutorProtocol, make_executor
from coevo_code.execution.backends import add_backend_arguments
from coevo_code.execution.registry import (
    Processes,
    backend_names,
    register_backend,
    share_options,
    unregister_backend,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def toy_registered():
    """Known for this module's tests only (every test module is imported before any runs)."""
    register_backend("toy", "toy_backend:BACKEND")  # the one line a new backend adds
    yield
    unregister_backend("toy")


@pytest.fixture(scope="module", name="executor")
def toy_executor(toy_registered):
    """The verdict suite's ``executor``, through the registry and the factory."""
    with make_executor("toy", None, launcher="auto", chunk_tests=None) as ex:
        from toy_backend import ToyExecutor
        assert type(ex) is ToyExecutor and isinstance(ex, ExecutorProtocol)
        yield ex


# every test of the verdict suite, against the toy backend
for _name in dir(test_verdicts):
    if _name.startswith("test_"):
        globals()[_name] = getattr(test_verdicts, _name)


def test_the_toy_backend_is_a_registry_entry():
    assert "toy" in backend_names()
    parser = argparse.ArgumentParser()
    add_backend_arguments(parser)
    args = parser.parse_args(["--backend", "toy"])
    assert args.backend == "toy"
    with pytest.raises(BackendError, match=r"^the toy backend takes no option 'slots'; it takes "
                                           r"chunk_tests, launcher$"):
        make_executor("toy", slots=2)
    with pytest.raises(BackendError, match="is for the ray backend; the toy backend runs on"):
        make_executor("toy", "h:6379")
    # no share arithmetic of its own: each process takes the options it is given
    assert share_options({"backend": "toy"}, Processes(4, 4, 2)) == {"backend": "toy"}


def test_an_unregistered_backend_is_unknown():
    register_backend("toy2", "toy_backend:BACKEND")
    try:
        with pytest.raises(BackendError, match="is not the record of backend 'toy2'"):
            make_executor("toy2")
    finally:
        unregister_backend("toy2")
    with pytest.raises(BackendError, match="unknown executor backend 'toy2'"):
        make_executor("toy2")
