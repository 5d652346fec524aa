"""The import contract of pyproject.toml ([tool.importlinter]): the package's layers (cli >
training > evaluation > generation > core > execution > sandbox) hold, the sandbox imports
nothing else of coevo_code, and no import is ignored and no re-export shim remains."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the package under ``root`` with the repository's contract."""
    assert LINT_IMPORTS.exists(), "lint-imports is missing: pip install -e '.[test]'"
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo",
                           str(REPO / "pyproject.toml")], cwd=root, capture_output=True,
                          text=True, timeout=120)


def test_the_import_contract_holds():
    p = lint_imports(REPO)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "0 broken" in p.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    """The contract is not vacuous: generation importing evaluation (a layer above) breaks it."""
    shutil.copytree(REPO / "coevo_code", tmp_path / "coevo_code",
                    ignore=shutil.ignore_patterns("assets", "__pycache__"))
    with open(tmp_path / "coevo_code" / "generation" / "tiny.py", "a") as f:
        f.write("\nfrom ..evaluation.harness import RANKERS  # noqa: E402,F401\n")
    p = lint_imports(tmp_path)
    assert p.returncode != 0
    assert "coevo_code.generation is not allowed to import coevo_code.evaluation" in p.stdout


def test_no_ignore_entry_and_no_old_paths():
    """The contract holds with no exception: no import is ignored, and the old homes of moved
    parts (re-export shims: evaluation.engines, evaluation.tester_reward, training.model) are
    gone, so nothing imports up through them."""
    import importlib

    import coevo_code
    from coevo_code import evaluation
    from coevo_code.training import tester_reward

    assert "ignore_imports" not in (REPO / "pyproject.toml").read_text()
    for old in ("coevo_code.evaluation.engines", "coevo_code.evaluation.tester_reward",
                "coevo_code.training.model"):
        try:
            importlib.import_module(old)
        except ModuleNotFoundError:
            continue
        raise AssertionError(f"{old} still imports")
    assert not hasattr(evaluation, "TesterReward")
    assert coevo_code.TesterReward is tester_reward.TesterReward
