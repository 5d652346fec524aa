"""scripts/gpu_check.py, the Python half of scripts/gpu-check.sh: the carried size against the
device's limit, the dependency closure against the device's packages and the carried wheels, the
held-out curves side by side, and the summary's exit status. (CI also runs the whole dry run:
`scripts/gpu-check.sh --dry-run`, from .ci/run.)"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)


def test_the_pins_and_the_device_list_are_read_from_the_wheel_script():
    pins = gpu_check._script_list("--list")
    assert "trl==1.16.0" in pins  # the project's own pin (pyproject.toml)
    assert all("==" in p for p in pins) and len({p.split("==")[0] for p in pins}) == len(pins)
    device = gpu_check._script_list("--device")
    assert {"torch", "transformers", "accelerate", "peft"} <= set(device)
    assert not {p.split("==")[0] for p in pins} & set(device)  # nothing carried twice
    p = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-wheels.sh"), "--bogus"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "--bogus" in p.stderr


def test_the_closure_is_complete_and_names_what_is_missing(monkeypatch, capsys):
    if importlib.util.find_spec("trl") is None:
        pytest.skip("trl is not installed: the closure reads the installed packages' needs")
    assert gpu_check.closure(None) == 0
    out = capsys.readouterr().out
    assert "carried as wheels: datasets==" in out and "trl==1.16.0" in out
    real = gpu_check._script_list

    def without(flag, drop):
        return [x for x in real(flag) if not x.startswith(drop)]

    # a need neither on the device nor pinned: named, with who needs it
    monkeypatch.setattr(gpu_check, "_script_list",
                        lambda flag: without(flag, "dill") if flag == "--list" else real(flag))
    assert gpu_check.closure(None) == 1
    out = capsys.readouterr().out
    assert "dill (needed by " in out
    # a pin nothing needs any more is named too (it would only take room)
    monkeypatch.setattr(gpu_check, "_script_list",
                        lambda flag: real(flag) + ["six==1.0"] if flag == "--list"
                        else without(flag, "six"))
    assert gpu_check.closure(None) == 1
    assert "pinned but needed by nothing: six" in capsys.readouterr().out


def test_carry_measures_the_tree_and_fails_over_the_limit(monkeypatch, capsys):
    assert gpu_check.carry() == 0
    out = capsys.readouterr().out
    assert "MiB of the device's 64 MiB" in out and "git: tracked" in out
    monkeypatch.setattr(gpu_check, "LIMIT", 1024)
    assert gpu_check.carry() == 1
    assert "over the limit; the largest files:" in capsys.readouterr().out


def _eval_run(path: Path, rows):
    path.mkdir(parents=True)
    (path / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_curve_sets_the_runs_side_by_side(tmp_path, capsys):
    _eval_run(tmp_path / "cpu", [{"step": 0, "code_acc": 0.35, "ut_acc": 0.31},
                                 {"step": 90, "code_acc": 0.57, "ut_acc": 0.47}])
    _eval_run(tmp_path / "cuda", [{"step": 0, "code_acc": 0.35, "ut_acc": 0.30}])
    assert gpu_check.curve(tmp_path / "cpu", tmp_path / "cuda") == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines[0].split("\t")
    assert head[0] == "step" and "cpu:code_acc" in head and "cuda:ut_acc" in head
    row90 = dict(zip(head, lines[2].split("\t")))
    assert row90["cpu:code_acc"] == "0.570" and row90["cuda:code_acc"] == ""
    assert gpu_check.curve(tmp_path / "cpu", tmp_path / "absent") == 1  # a run wrote nothing


def test_summary_names_the_failed_steps_and_exits_1(tmp_path, capsys):
    steps = tmp_path / "steps.tsv"
    steps.write_text("carry\tPASS\t0\t6.7 MiB\ncuda\tSKIP\t0\tdry run\n"
                     "tests\tFAIL\t40\texit 1\ntraining\tFAIL\t0\tout of time\n")
    (tmp_path / "out").mkdir()
    assert gpu_check.summary(steps, tmp_path, tmp_path / "out") == 1
    text = (tmp_path / "out" / "summary.txt").read_text()
    assert "| tests | FAIL | 40 | exit 1 |" in text
    assert text.rstrip().endswith("gpu-check: FAILED: tests, training")
    steps.write_text("carry\tPASS\t0\t6.7 MiB\ncuda\tSKIP\t0\tdry run\n")
    assert gpu_check.summary(steps, tmp_path, tmp_path / "out") == 0
    assert "1 skipped" in capsys.readouterr().out.splitlines()[-1]
