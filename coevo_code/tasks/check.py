"""``coevo tasks check``: a dataset's own solutions against its own gold tests, per problem.

Every reference solution (or the first ``references``) runs against every gold test, and so does
every incorrect solution a dataset publishes (CodeContests' ``incorrect_solutions``, kept in
``metadata["incorrect"]``): a correct solution should pass all, an incorrect one fail some. What
fails is reported by test (``public 2``, ``generated 17``) and outcome, so that every failure
can be explained.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .codecontests import reference_cap
from .model import TaskSet


def test_labels(task) -> list[str]:
    """``public 0``, ``private 3``, ``generated 17``... for a CodeContests task (its gold kinds
    and counts are in its metadata), ``test 5`` for others."""
    counts, gold = task.metadata.get("test_counts"), task.metadata.get("gold")
    if counts and gold:
        return [f"{kind} {j}" for kind in gold for j in range(counts[kind])]
    return [f"test {j}" for j in range(len(task.tests))]


@dataclass
class ProblemCheck:
    """One problem: how its references and its incorrect solutions fared on its gold tests."""

    id: str
    tests: int
    references: int = 0
    references_passed: int = 0
    incorrect: int = 0
    incorrect_failed: int = 0
    skipped: str | None = None  # why nothing was run
    # test label -> Counter of outcomes of the references that did not pass it
    failures: dict[str, Counter] = field(default_factory=dict)
    failing_references: list = field(default_factory=list)  # Python: index; else "cpp 3"
    passing_incorrect: list = field(default_factory=list)
    # with several languages: language -> {references, passed, incorrect, failed}
    languages: dict[str, dict] = field(default_factory=dict)

    def count(self, lang: str) -> dict:
        return self.languages.setdefault(lang, {"references": 0, "passed": 0, "incorrect": 0,
                                                "failed": 0})

    def line(self) -> str:
        if self.skipped:
            return f"{self.id}: not run ({self.skipped})"
        s = (f"{self.id}: {self.references_passed}/{self.references} references pass all "
             f"{self.tests} tests")
        if self.incorrect:
            s += f"; {self.incorrect_failed}/{self.incorrect} incorrect solutions fail"
        if len(self.languages) > 1 or set(self.languages) - {"python"}:
            s += " (" + ", ".join(
                f"{lang} {c['passed']}/{c['references']}, incorrect failing "
                f"{c['failed']}/{c['incorrect']}" for lang, c in self.languages.items()) + ")"
        if self.failures:
            worst = sorted(self.failures.items(), key=lambda kv: -sum(kv[1].values()))
            s += "; failed tests: " + ", ".join(
                f"{label} ({sum(c.values())}: {', '.join(f'{o} {n}' for o, n in c.items())})"
                for label, c in worst[:12]) + (f", ... {len(worst) - 12} more"
                                               if len(worst) > 12 else "")
        return s

    def to_dict(self) -> dict:
        return {"id": self.id, "tests": self.tests, "references": self.references,
                "references_passed": self.references_passed, "incorrect": self.incorrect,
                "incorrect_failed": self.incorrect_failed, "skipped": self.skipped,
                "failures": {k: dict(v) for k, v in self.failures.items()},
                "failing_references": self.failing_references,
                "passing_incorrect": self.passing_incorrect,
                **({"languages": self.languages} if set(self.languages) - {"python"} else {})}


@dataclass
class CheckReport:
    """How many reference solutions pass all their gold tests (``checked``, ``passed``: counts
    of references), which problems have a failing one, and the per-problem detail."""

    name: str
    problems: int
    checked: int
    passed: int
    failed: list[str] = field(default_factory=list)
    no_reference: list[str] = field(default_factory=list)
    per_problem: list[ProblemCheck] = field(default_factory=list)

    def summary(self) -> str:
        s = (f"{self.name}: {self.passed}/{self.checked} reference solutions pass all their gold "
             f"tests ({self.problems} problems")
        if self.no_reference:
            s += f", {len(self.no_reference)} without a reference"
        s += ")"
        bad = sum(p.incorrect for p in self.per_problem)
        if bad:
            s += (f"; {sum(p.incorrect_failed for p in self.per_problem)}/{bad} incorrect "
                  "solutions fail")
        if self.failed:
            s += "; failing: " + ", ".join(self.failed[:20]) + (" ..." if len(self.failed) > 20 else "")
        return s

    def table(self) -> str:
        """A markdown table, one row a problem."""
        rows = ["| problem | tests | references passing | incorrect failing | not run because |",
                "| --- | ---: | ---: | ---: | --- |"]
        for p in self.per_problem:
            rows.append(f"| {p.id} | {p.tests} | "
                        + (f"{p.references_passed}/{p.references} | "
                           f"{p.incorrect_failed}/{p.incorrect} | |" if not p.skipped
                           else f"- | - | {p.skipped} |"))
        return "\n".join(rows)


def _why_not_run(task, languages=("python",)) -> str:
    if not len(task.tests):
        return "no gold tests"
    if set(languages) - {"python"}:
        if task.input_mode != "stdio":
            return "file input, which only Python programs read here"
        return f"no {' / '.join(languages)} solution"
    langs = task.metadata.get("languages")
    if langs:
        if langs.get("Python 2") and not langs.get("Python 3"):
            return f"Python 2 solutions only ({langs['Python 2']})"
        others = ", ".join(f"{k} {v}" for k, v in langs.items())
        return f"no Python 3 solution ({others})"
    return "no reference solution"


def _stages(n: int) -> list[range]:
    """Test ranges an incorrect solution meets in turn (it stops at its first failing one):
    the first 4 tests, the next 28, the rest."""
    cuts = [0] + [c for c in (4, 32) if c < n] + [n]
    return [range(a, b) for a, b in zip(cuts, cuts[1:])]


def reference_count(task, lang: str) -> int:
    """How many references ``task`` has in ``lang`` (nothing decoded)."""
    if lang == "python":
        return len(task.references)
    if task.input_mode != "stdio":
        return 0
    return len((task.metadata.get("native_references") or {}).get(lang) or [])


def solutions_of(task, lang: str, references: int | None, incorrect: bool):
    """(references, incorrect solutions) of ``task`` in ``lang`` (``python``: ``references``
    and ``metadata["incorrect"]``; ``cpp``/``java``: what the loader kept with ``languages``),
    the first ``references`` of each (an int, or per language: :func:`.parse_references`)."""
    if lang == "python":
        refs, bad = task.references, task.metadata.get("incorrect") if incorrect else None
    else:
        if task.input_mode != "stdio":  # file input: the job format wraps Python programs only
            return [], []
        refs = (task.metadata.get("native_references") or {}).get(lang) or []
        bad = (task.metadata.get("native_incorrect") or {}).get(lang) if incorrect else None
    cap = reference_cap(references, lang)
    refs = list(refs[:cap])
    bad = list(bad[:cap]) if bad else []
    return refs, bad


def check_tasks(taskset: TaskSet, executor, progress=None, references: int | None = None,
                incorrect: bool = True, batch: int = 32,
                languages: tuple[str, ...] = ("python",)) -> CheckReport:
    """Run each problem's reference solutions (all, or the first ``references``) against its
    gold tests and, with ``incorrect``, its published incorrect solutions (as many), each until
    its first failing stage of tests (:func:`_stages`: an incorrect solution that loops is not
    run against every test). Problems go to the executor ``batch`` at a time, so that the tests
    and solutions of a large split are decoded a batch at a time too. ``languages``: whose
    solutions run (``cpp`` and ``java`` as the job format's native programs); every figure is
    the sum over them, and each problem also counts them per language."""
    per: list[ProblemCheck] = []
    failed: list[str] = []
    counts = [0, 0]
    tasks = list(taskset)
    for start in range(0, len(tasks), batch):
        _check_batch(tasks[start:start + batch], executor, progress, references, incorrect, per,
                     failed, counts, tuple(languages))
    no_ref = [p.id for p in per if p.skipped]
    return CheckReport(taskset.name, len(taskset), counts[0], counts[1], failed, no_ref, per)


def _job(task, programs, lang, **kw) -> dict:
    job = task.job(programs, **kw)
    if lang != "python":
        job["language"] = lang
    return job


def _name(lang, i):
    return i if lang == "python" else f"{lang} {i}"


def _check_batch(tasks, executor, progress, references, incorrect, per, failed, counts,
                 languages) -> None:
    jobs, plans = [], []
    for t in tasks:
        p = ProblemCheck(id=t.id, tests=len(t.tests))
        per.append(p)
        mine = []
        for lang in languages:
            refs, bad = solutions_of(t, lang, references, incorrect)
            if refs and len(t.tests):
                mine.append((lang, refs, bad))
        if not mine:
            p.skipped = _why_not_run(t, languages)
            continue
        for lang, refs, bad in mine:
            c = p.count(lang)
            c["references"], c["incorrect"] = len(refs), len(bad)
            p.references += len(refs)
            p.incorrect += len(bad)
            jobs.append(_job(t, refs, lang))
            plans.append((t, p, bad, lang))
    results = executor.run(jobs, progress=progress) if jobs else []
    for (t, p, _, lang), r in zip(plans, results):
        if not r.get("passed"):
            p.skipped = f"executor error: {r.get('error', 'no result')}"
            if t.id not in failed:
                failed.append(t.id)
            continue
        labels = test_labels(t)
        c = p.count(lang)
        for i, (row, outs) in enumerate(zip(r["passed"], r["outcomes"])):
            if all(row):
                p.references_passed += 1
                c["passed"] += 1
            else:
                p.failing_references.append(_name(lang, i))
                for j, ok in enumerate(row):
                    if not ok:
                        p.failures.setdefault(labels[j], Counter())[outs[j]] += 1
        if p.failing_references and t.id not in failed:
            failed.append(t.id)
    for p in {id(p): p for _, p, _, _ in plans}.values():
        if p.skipped is None:
            counts[0] += p.references
            counts[1] += p.references_passed
    del jobs, results
    _run_incorrect([(t, p, bad, lang) for t, p, bad, lang in plans if bad], executor, progress)


def _run_incorrect(plans, executor, progress) -> None:
    alive = {k: list(range(len(bad))) for k, (_, _, bad, _) in enumerate(plans)}
    tests = {k: list(t.tests) for k, (t, _, _, _) in enumerate(plans)}
    stages = {k: _stages(len(t.tests)) for k, (t, _, _, _) in enumerate(plans)}
    for s in range(3):
        jobs, owners = [], []
        for k, (t, p, bad, lang) in enumerate(plans):
            if s >= len(stages[k]) or not alive[k]:
                continue
            idx = alive[k]
            jobs.append(_job(t, [bad[i] for i in idx], lang,
                             tests=[tests[k][j] for j in stages[k][s]]))
            owners.append((k, p, idx, lang))
        if not jobs:
            break
        for (k, p, idx, lang), r in zip(owners, executor.run(jobs, progress=progress)):
            rows = r.get("passed") or [[False]] * len(idx)
            still = [i for i, row in zip(idx, rows) if all(row)]
            p.incorrect_failed += len(idx) - len(still)
            p.count(lang)["failed"] += len(idx) - len(still)
            alive[k] = still
    for k, (_, p, _, lang) in enumerate(plans):
        p.passing_incorrect.extend(_name(lang, i) for i in alive[k])
