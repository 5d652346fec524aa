"""The executor interface and its factory: every caller gets its executor from make_executor,
the local backend is the default and behaves as the Executor it wraps, bad choices are one line."""

from __future__ import annotations

import builtins
import json
import subprocess
import sys

import pytest

from coevo_code.execution import (BackendError, Executor, ExecutorProtocol, make_executor)
from coevo_code.execution.backends import executor_from_args

JOB = {"id": "j", "programs": ["print(int(input()) + 1)", "print(0)"],
       "tests": [{"input": "1\n", "output": "2\n"}, {"input": "5\n", "output": "6\n"}]}


def test_local_is_the_default_and_is_the_executor():
    with make_executor(slots=1, launcher="direct") as ex:
        assert type(ex) is Executor
        assert isinstance(ex, ExecutorProtocol)
        (res,) = ex.run([JOB])
        assert res["passed"] == [[True, True], [False, False]]
        assert ex.stats()["cells"] == 4
        assert ex.isolation["slots"] == 1


def test_none_options_mean_the_backend_default():
    with make_executor("local", None, slots=None, launcher="direct", allow_unsafe=None) as ex:
        assert len(ex.slots) >= 1


@pytest.mark.parametrize("backend, address, words", [
    ("nope", None, "unknown executor backend 'nope' (--exec_backend); choose from local, ray"),
    ("local", "10.0.0.1:6379", "--exec_address '10.0.0.1:6379' is for the ray backend"),
])
def test_bad_choices_are_one_clear_line(backend, address, words):
    with pytest.raises(BackendError) as e:
        make_executor(backend, address, slots=1)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_ray_missing_is_one_clear_line(monkeypatch):
    real = builtins.__import__

    def no_ray(name, *a, **kw):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    monkeypatch.delitem(sys.modules, "coevo_code.execution.ray.cluster", raising=False)
    with pytest.raises(ImportError) as e:
        make_executor("ray")
    assert "pip install -e '.[ray]'" in str(e.value)


def test_args_without_the_flags_take_defaults():
    class Args:
        slots = 1
        launcher = "direct"

    with executor_from_args(Args()) as ex:
        assert type(ex) is Executor and len(ex.slots) == 1


def test_cli_backend_flag(tmp_path):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps(JOB) + "\n")
    out = tmp_path / "out.jsonl"
    run = subprocess.run([sys.executable, "-m", "coevo_code.cli", "execute", str(jobs), "-o",
                          str(out), "--exec_slots", "1", "--exec_backend", "local", "-q"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(out.read_text())["passed"] == [[True, True], [False, False]]
    bad = subprocess.run([sys.executable, "-m", "coevo_code.cli", "execute", str(jobs), "-o",
                          str(out), "--exec_address", "10.0.0.1:6379", "-q"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "coevo: --exec_address '10.0.0.1:6379' is for the ray backend; the local backend runs "
        "on this machine (pass --exec_backend ray)"]


def test_training_config_names_the_backend():
    from coevo_code.training.config import CoevoConfig
    with pytest.raises(ValueError) as e:
        CoevoConfig(output_dir="/tmp/x", exec_backend="nope", use_cpu=True, problems_per_generation=1)
    assert "unknown executor backend 'nope' (--exec_backend); choose from local, ray" in str(
        e.value)
    with pytest.raises(ValueError) as e:
        CoevoConfig(output_dir="/tmp/x", exec_address="h:6379", use_cpu=True, problems_per_generation=1)
    assert "--exec_address 'h:6379' is for the ray backend" in str(e.value)


def test_an_option_the_backend_does_not_take_is_one_line_naming_it():
    with pytest.raises(BackendError) as e:
        make_executor("local", slots=1, launcher="direct", unit_cells=8)  # a ray option
    msg = str(e.value)
    assert msg.startswith("the local backend takes no option 'unit_cells'; it takes ")
    assert "slots" in msg and "\n" not in msg


def test_the_factory_and_the_flags_read_the_registry():
    import argparse

    from coevo_code.execution import registry
    assert registry.backend_names()[:2] == ("local", "ray")
    local, ray = registry.get_backend("local"), registry.get_backend("ray")
    assert local.factory is Executor and not local.takes_address and local.doctor is None
    assert ray.takes_address and ray.doctor is not None and "share" in ray.options
    parser = argparse.ArgumentParser()
    from coevo_code.execution.backends import add_backend_arguments
    add_backend_arguments(parser)
    choices = next(a.choices for a in parser._actions if a.dest == "backend")
    assert tuple(choices) == registry.backend_names()


@pytest.mark.parametrize("opts, procs, want", [
    # local: without slots, an equal part of this machine's cores per process on it
    ({"backend": "local"}, (4, 2, 1), {"backend": "local", "slots": "cores/2"}),
    ({"backend": "local", "slots": 3}, (4, 2, 1), {"backend": "local", "slots": 3}),
    ({}, (1, 1, 1), {"slots": "cores/1"}),
    # ray: every process of every agent takes an equal part of the pool
    ({"backend": "ray"}, (2, 2, 2), {"backend": "ray", "share": 0.25}),
    ({"backend": "ray", "slots": 8}, (2, 1, 1), {"backend": "ray", "share": 0.5, "slots": 4}),
    ({"backend": "ray", "slots": 1}, (4, 4, 1), {"backend": "ray", "share": 0.25, "slots": 1}),
    ({"backend": "ray", "share": 1.0, "slots": 8}, (2, 1, 2),
     {"backend": "ray", "share": 1.0, "slots": 8}),
])
def test_share_arithmetic_of_each_backend(opts, procs, want):
    import os

    from coevo_code.execution.registry import Processes, share_options
    cores = os.cpu_count() or 1
    want = {k: (max(1, cores // int(v[6:])) if str(v).startswith("cores/") else v)
            for k, v in want.items()}
    given = dict(opts)
    assert share_options(given, Processes(*procs)) == want
    assert given == opts  # the caller's options are left as they were
