"""The import contract of pyproject.toml ([tool.importlinter]): the package's layers (cli >
training > evaluation > generation > core > execution > sandbox) hold, the sandbox imports
nothing else of coevo_code, and the old import paths of moved parts still work."""

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


def test_the_old_import_paths_of_moved_parts_still_work():
    import coevo_code
    from coevo_code import evaluation, generation
    from coevo_code.evaluation import engines, tester_reward
    from coevo_code.generation import tiny
    from coevo_code.training import model
    from coevo_code.training import tester_reward as reward

    assert engines.make_engine is generation.make_engine is evaluation.make_engine
    assert model.save_tiny is tiny.save_tiny
    assert tester_reward.TesterReward is reward.TesterReward is evaluation.TesterReward
    assert coevo_code.TesterReward is reward.TesterReward
    assert tester_reward.coder_rows is reward.coder_rows
