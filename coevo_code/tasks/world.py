"""The task world: generated problems small enough for a tiny model to solve and to test, so that
co-evolution can be watched on a laptop (``load_tasks("world", split=...)``).

Ten parameterised families, five stdio and five functional, plus compositions of the functional
ones: each problem is a family, a parameter tuple (``K``, ``C``, a separator, a word...), a surface
form (function and argument names, one of two phrasings), eight gold tests and three mutants (the
natural mistakes of the family: a wrong end, operator or separator, an off-by-one, a wrong
constant; the first is the one a model copying the statement's parameters makes most easily). Every
value is computed from one expression per problem, the same text the reference solution returns
or prints, so the gold outputs are the reference's by construction and ``coevo tasks check world``
confirms it in the sandbox.

Splits, disjoint and deterministic from ``seed``:

- ``sft``: for the warm start of the tiny models only;
- ``train``: for reinforcement learning (the same parameter tuples as ``sft``, other problems);
- ``heldout``: parameter tuples no ``sft`` or ``train`` problem has (about a quarter of each
  family's tuples, and at least two);
- ``heldout_combo``: a composition of families (``take`` then ``extreme``) that no other split
  has; ``sft`` and ``train`` hold the other two compositions.

Gold tests have distinct inputs and as many distinct outputs as the family allows (no output more
than twice in eight), so a program that prints or returns a constant solves no problem.

Options: ``split`` (default ``train``), ``seed`` (default 0), ``size`` (problems in the split;
defaults :data:`SIZES`).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from .model import LoaderError, Task, TaskSet, TestCase

SPLITS = ("sft", "train", "heldout", "heldout_combo")
SIZES = {"sft": 4000, "train": 2000, "heldout": 480, "heldout_combo": 160}
N_TESTS = 8
WORDS = ("cat", "dog", "sun", "red", "box", "cup", "hat", "pen", "map", "egg", "fox", "owl")
SEPS = {"space": " ", "comma": ",", "dash": "-", "plus": "+", "slash": "/", "colon": ":"}
ARGS = ("xs", "nums", "values", "items")


@dataclass(frozen=True)
class Problem:
    """What a family makes of one parameter tuple and surface form: the statement, the
    expression the reference computes, and the mutants' expressions (same variables)."""

    statement: str
    expr: str
    mutants: tuple[str, ...]


@dataclass(frozen=True)
class Family:
    """A family of problems. ``make(params, arg, phrasing)`` -> :class:`Problem`; ``inputs(rng,
    params)`` -> one input value (a list of words or digits, a word or an integer)."""

    name: str
    kind: str                     # stdio | functional
    difficulty: int               # 1 copy, 2 count or arithmetic, 3 composition
    grid: tuple[dict, ...]        # every parameter tuple
    make: Callable[[dict, str, int], Problem]
    inputs: Callable[[random.Random, dict], object]
    read: str = ""                # stdio: the line that reads the input into the variable
    names: tuple[str, ...] = ()   # functional: entry-point names
    parts: tuple[str, ...] = field(default=())  # composition: its two families


def _grid(**axes) -> tuple[dict, ...]:
    keys = list(axes)
    return tuple(dict(zip(keys, v)) for v in itertools.product(*axes.values()))


def _words(lo: int, hi: int, often: str | None = None):
    """Lists of ``lo`` to ``hi`` words; with ``often`` (a parameter's name), that parameter's
    word makes up about a third of them (so counts vary)."""
    return lambda rng, p: [p[often] if often and rng.random() < 0.35 else rng.choice(WORDS)
                           for _ in range(rng.randint(lo, hi))]


def _digits(lo: int, hi: int, often: str | None = None):
    return lambda rng, p: [p[often] if often and rng.random() < 0.35 else rng.randint(0, 9)
                           for _ in range(rng.randint(lo, hi))]


def _ordinal(k: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(k, f"{k}th")


# ---- stdio families (the variable is xs, a list of words, w, a word, or x, an integer) -----------
def _reverse_words(p, arg, ph):
    s = SEPS[p["sep"]]
    other = "," if s == " " else " "
    text = ("Read a line of words separated by spaces and print the words in reverse order, "
            f"joined by {p['sep']} ({s!r})." if ph == 0 else
            f"Given a line of space-separated words, print them from last to first with "
            f"{p['sep']} ({s!r}) between them.")
    return Problem(text, f"{s!r}.join(xs[::-1])",
                   (f"{s!r}.join(xs)", f"{s!r}.join(xs[:0:-1])", f"{other!r}.join(xs[::-1])"))


def _pick_word(p, arg, ph):
    k, end = p["k"], p["end"]
    where = "from the end" if end else "from the start"
    text = (f"Read a line of at least 5 words separated by spaces and print the {_ordinal(k)} "
            f"word counting {where} (the {'last' if end else 'first'} word is the 1st)." if ph == 0
            else f"Given a line of space-separated words (5 or more), print word number {k} "
                 f"counted {where}, starting at 1.")
    expr = f"xs[{-k}]" if end else f"xs[{k - 1}]"
    mutants = ((f"xs[{k - 1}]", f"xs[{-k - 1}]", f"xs[{-k + 1 if k > 1 else -3}]") if end else
               (f"xs[{-k}]", f"xs[{k}]", f"xs[{k - 2 if k > 1 else 2}]"))
    return Problem(text, expr, mutants)


def _repeat_word(p, arg, ph):
    n, s = p["n"], SEPS[p["sep"]]
    other = "," if s == " " else " "
    text = (f"Read one word and print it {n} times, separated by {p['sep']} ({s!r})." if ph == 0
            else f"Given a single word, print {n} copies of it with {p['sep']} ({s!r}) between "
                 f"them.")
    return Problem(text, f"{s!r}.join([w] * {n})",
                   (f"{other!r}.join([w] * {n})", f"{s!r}.join([w] * {n - 1})",
                    f"{s!r}.join([w] * {n + 1})"))


def _add_const(p, arg, ph):
    c, minus = p["c"], p["minus"]
    op = "-" if minus else "+"
    text = (f"Read an integer x and print x {op} {c}." if ph == 0 else
            f"Given one integer on a line, print the result of "
            f"{'subtracting' if minus else 'adding'} {c} {'from' if minus else 'to'} it.")
    flip = "+" if minus else "-"
    return Problem(text, f"x {op} {c}", (f"x {flip} {c}", f"x {op} {c + 1}", f"x {op} {c - 1}"))


def _count_word(p, arg, ph):
    w = p["word"]
    text = (f"Read a line of words separated by spaces and print how many times the word {w} "
            f"appears in it." if ph == 0 else
            f"Given a line of space-separated words, print the number of words equal to {w}.")
    return Problem(text, f"xs.count({w!r})",
                   ("len(xs)", f"int({w!r} in xs)", f"xs[1:].count({w!r})"))


# ---- functional families (the argument is named arg) ---------------------------------------------
def _take(p, arg, ph):
    k, end = p["k"], p["end"]
    part = f"the {'last' if end else 'first'} {k} elements of {arg}"
    text = (f"Return a list of {part}." if ph == 0 else
            f"Return {part}, in their original order, as a list.")
    if end:
        return Problem(text, f"{arg}[{-k}:]", (f"{arg}[:{k}]", f"{arg}[{-k - 1}:]",
                                              f"{arg}[{k}:]"))
    return Problem(text, f"{arg}[:{k}]", (f"{arg}[{-k}:]", f"{arg}[:{k + 1}]",
                                         f"{arg}[:{k - 1}]"))


def _count_value(p, arg, ph, of=None):
    v = p["v"]
    of = of or arg
    text = (f"Return how many times {v} occurs in {of}." if ph == 0 else
            f"Return the number of elements of {of} that are equal to {v}.")
    src = of_expr(p, arg)
    return Problem(text, f"{src}.count({v})",
                   (f"len({src})", f"int({v} in {src})", f"{src}[1:].count({v})"))


def _extreme(p, arg, ph, of=None):
    big, c = p["largest"], p["c"]
    of = of or arg
    fn = "max" if big else "min"
    which = "largest" if big else "smallest"
    plus = f" plus {c}" if c else ""
    text = (f"Return the {which} element of {of}{plus}." if ph == 0 else
            f"Return the {'maximum' if big else 'minimum'} value in {of}{plus}.")
    src = of_expr(p, arg)
    add = f" + {c}" if c else ""
    other = "min" if big else "max"
    return Problem(text, f"{fn}({src}){add}",
                   (f"{other}({src}){add}", f"{fn}({src}) + {c + 1}",
                    f"sorted({src})[{-2 if big else 1}]{add}"))


def _element_at(p, arg, ph):
    k, end = p["k"], p["end"]
    if end:
        text = (f"Return the element of {arg} at index {k} counting from the end (the last "
                f"element has index 0)." if ph == 0 else
                f"Return the {_ordinal(k + 1)} element of {arg} counting from the back.")
        return Problem(text, f"{arg}[{-k - 1}]", (f"{arg}[{-k}]", f"{arg}[{k}]",
                                                  f"{arg}[{-k - 2}]"))
    text = (f"Return the element of {arg} at index {k} (the first element has index 0)."
            if ph == 0 else f"Return the {_ordinal(k + 1)} element of {arg}.")
    return Problem(text, f"{arg}[{k}]", (f"{arg}[{-k}]" if k else f"{arg}[-1]",
                                         f"{arg}[{k + 1}]", f"{arg}[{-k - 1}]"))


def _add_each(p, arg, ph, of=None):
    c, minus = p["c"], p["minus"]
    of = of or arg
    op = "-" if minus else "+"
    text = (f"Return a new list with {c} {'subtracted from' if minus else 'added to'} every "
            f"element of {of}." if ph == 0 else
            f"Return the list of x {op} {c} for every element x of {of}, in order.")
    src = of_expr(p, arg)
    flip = "+" if minus else "-"
    return Problem(text, f"[x {op} {c} for x in {src}]",
                   (f"[x {flip} {c} for x in {src}]", f"[x {op} {c + 1} for x in {src}]",
                    f"[x {op} {c} for x in {src}[1:]]"))


def of_expr(p, arg) -> str:
    """The expression an outer family reads: the argument, or the inner ``take`` of a
    composition."""
    if "take_k" not in p:
        return arg
    k = p["take_k"]
    return f"{arg}[{-k}:]" if p["take_end"] else f"{arg}[:{k}]"


def _compose(outer: Callable):
    def make(p, arg, ph):
        k = p["take_k"]
        of = f"the {'last' if p['take_end'] else 'first'} {k} elements of {arg}"
        return outer(p, arg, ph, of=of)
    return make


TAKE = dict(take_k=(2, 3, 4), take_end=(False, True))
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("reverse_words", "stdio", 1, _grid(sep=tuple(SEPS)), _reverse_words, _words(2, 5),
           read="xs = input().split()"),
    Family("pick_word", "stdio", 1, _grid(k=(1, 2, 3, 4, 5), end=(False, True)), _pick_word,
           _words(5, 7), read="xs = input().split()"),
    Family("repeat_word", "stdio", 1, _grid(n=(2, 3, 4, 5), sep=("space", "comma", "dash")),
           _repeat_word, lambda rng, p: rng.choice(WORDS), read="w = input().strip()"),
    Family("add_const", "stdio", 2, _grid(c=tuple(range(1, 10)), minus=(False, True)), _add_const,
           lambda rng, p: rng.randint(0, 19), read="x = int(input())"),
    Family("count_word", "stdio", 2, _grid(word=WORDS), _count_word, _words(3, 6, "word"),
           read="xs = input().split()"),
    Family("take", "functional", 1, _grid(k=(1, 2, 3, 4), end=(False, True)), _take,
           _digits(5, 7), names=("take", "part_of", "slice_list")),
    Family("count_value", "functional", 2, _grid(v=tuple(range(10))), _count_value, _digits(4, 7, "v"),
           names=("count_of", "occurrences", "how_many")),
    Family("extreme", "functional", 2, _grid(largest=(True, False), c=(0, 1, 2, 3, 4)), _extreme,
           _digits(3, 6), names=("extreme", "pick_value", "bound")),
    Family("element_at", "functional", 1, _grid(k=(0, 1, 2, 3), end=(False, True)), _element_at,
           _digits(5, 7), names=("element_at", "get_item", "nth")),
    Family("add_each", "functional", 2, _grid(c=(1, 2, 3, 4, 5), minus=(False, True)), _add_each,
           _digits(2, 5), names=("add_each", "shift_all", "adjust")),
    Family("take+count_value", "functional", 3, _grid(**TAKE, v=tuple(range(10))),
           _compose(_count_value), _digits(5, 7, "v"), names=("count_of", "occurrences", "how_many"),
           parts=("take", "count_value")),
    Family("take+add_each", "functional", 3, _grid(**TAKE, c=(1, 2, 3, 4, 5), minus=(False, True)),
           _compose(_add_each), _digits(5, 7), names=("add_each", "shift_all", "adjust"),
           parts=("take", "add_each")),
    Family("take+extreme", "functional", 3, _grid(**TAKE, largest=(True, False), c=(0, 1, 2, 3, 4)),
           _compose(_extreme), _digits(5, 7), names=("extreme", "pick_value", "bound"),
           parts=("take", "extreme")),
)}
BASE = [n for n, f in FAMILIES.items() if not f.parts]
SEEN_COMBOS = ["take+count_value", "take+add_each"]
UNSEEN_COMBOS = ["take+extreme"]


def heldout_params(family: str, seed: int = 0) -> list[dict]:
    """The parameter tuples of ``family`` that only the ``heldout`` split has (a quarter of its
    grid, at least two; compositions hold out none: their unseen case is a whole family)."""
    f = FAMILIES[family]
    if f.parts:
        return []
    grid = list(f.grid)
    random.Random(f"{seed}/{family}/heldout").shuffle(grid)
    return grid[:max(2, len(grid) // 4)]


def _families_of(split: str, seed: int) -> list[tuple[str, list[dict]]]:
    if split == "heldout":
        return [(n, heldout_params(n, seed)) for n in BASE]
    if split == "heldout_combo":
        return [(n, list(FAMILIES[n].grid)) for n in UNSEEN_COMBOS]
    out = []
    for n in BASE + SEEN_COMBOS:
        held = heldout_params(n, seed)
        out.append((n, [p for p in FAMILIES[n].grid if p not in held]))
    return out


def evaluate(expr: str, var: str, value):
    """The value of a problem's expression on one input (the world's own trusted expressions)."""
    return eval(expr, {"__builtins__": {"len": len, "max": max, "min": min, "sorted": sorted,
                                        "int": int}}, {var: value})


def _var(f: Family, arg: str) -> str:
    return f.read.split(" = ")[0] if f.kind == "stdio" else arg


def render_input(f: Family, value) -> str:
    """A stdio input line (with its newline) or a functional argument's literal."""
    if f.kind == "functional":
        return repr(value)
    return (" ".join(value) if isinstance(value, list) else str(value)) + "\n"


def render_output(f: Family, value) -> str:
    return repr(value) if f.kind == "functional" else str(value) + "\n"


def program(f: Family, expr: str, name: str, arg: str) -> str:
    """The program whose answer is ``expr``: stdio reads and prints, functional returns."""
    if f.kind == "stdio":
        return f"{f.read}\nprint({expr})\n"
    return f"def {name}({arg}):\n    return {expr}\n"


def test_case(f: Family, name: str, inp, out) -> TestCase:
    if f.kind == "stdio":
        return TestCase(input=render_input(f, inp), output=render_output(f, out))
    return TestCase(code=f"assert {name}({render_input(f, inp)}) == {render_output(f, out)}")


def catches(mutant: str, var: str, value, out) -> bool:
    """Whether an input whose right output is ``out`` tells the mutant expression apart (a
    mutant that raises on it is caught)."""
    try:
        return evaluate(mutant, var, value) != out
    except (IndexError, ValueError):
        return True


def _gold(f: Family, prob: Problem, params: dict, var: str, rng: random.Random) -> list[tuple]:
    """Eight (input, output) pairs with distinct inputs, no output more than twice (three times
    where the family has fewer than five outputs, as a count over two elements), and for every
    mutant an input that catches it."""
    pairs, seen, outs = [], set(), Counter()
    todo = list(dict.fromkeys(m for m in prob.mutants if m != prob.expr))
    for tries in range(2000):
        cap = 2 if tries < 1000 else 3
        v = f.inputs(rng, params)
        key = repr(v)
        if key in seen:
            continue
        try:
            out = evaluate(prob.expr, var, v)
        except (IndexError, ValueError):
            continue
        if outs[repr(out)] >= cap:
            continue
        caught = [m for m in todo if catches(m, var, v, out)]
        if todo and not caught and len(pairs) >= N_TESTS - len(todo):
            continue  # the last places go to inputs that catch the mutants still uncaught
        todo = [m for m in todo if m not in caught]
        seen.add(key)
        outs[repr(out)] += 1
        pairs.append((v, out))
        if len(pairs) == N_TESTS:
            return pairs
    raise LoaderError(f"world: family {f.name}: could not draw {N_TESTS} distinct gold tests "
                      f"that catch every mutant")


def mutant_exprs(task: Task) -> list[str]:
    """The expressions of a world problem's mutants (its metadata holds them as programs)."""
    meta = task.metadata
    prob = FAMILIES[meta["family"]].make(meta["params"], meta["var"], 0)
    return [m for m in dict.fromkeys(prob.mutants) if m != meta["expr"]]


def make_task(family: str, params: dict, index: int, split: str, seed: int,
              rng: random.Random) -> Task:
    f = FAMILIES[family]
    arg = rng.choice(ARGS)
    name = rng.choice(f.names) if f.names else ""
    phrasing = rng.randrange(2)
    prob = f.make(params, arg, phrasing)
    var = _var(f, arg)
    gold = _gold(f, prob, params, var, rng)
    tests = [test_case(f, name, i, o) for i, o in gold]
    ptext = ",".join(f"{k}={v}" for k, v in params.items())
    meta = {"family": family, "params": dict(params), "difficulty": f.difficulty, "split": split,
            "expr": prob.expr, "var": var,
            "mutants": [program(f, m, name, arg) for m in dict.fromkeys(prob.mutants)
                        if m != prob.expr]}
    if f.kind == "stdio":
        return Task(id=f"world/{split}/{index}", source="world", kind="stdio",
                    prompt=prob.statement, tests=tests, references=[program(f, prob.expr, name,
                                                                            arg)],
                    metadata={**meta, "param_key": ptext})
    starter = f'def {name}({arg}):\n    """{prob.statement}"""\n'
    return Task(id=f"world/{split}/{index}", source="world", kind="functional", prompt="",
                tests=tests, entry_point=name, starter_code=starter,
                references=[program(f, prob.expr, name, arg)],
                metadata={**meta, "param_key": ptext})


def generate(split: str = "train", seed: int = 0, size: int | None = None) -> list[Task]:
    """The problems of one split: families in turn, each problem a seeded draw of a parameter
    tuple of the split, a surface form and its gold tests."""
    if split not in SPLITS:
        raise LoaderError(f"world: unknown split {split!r}; choose from {', '.join(SPLITS)}")
    n = SIZES[split] if size is None else int(size)
    if n < 1:
        raise LoaderError(f"world: size must be >= 1, got {size}")
    fams = _families_of(split, seed)
    rng = random.Random(f"{seed}/{split}")
    tasks = []
    for i in range(n):
        family, grid = fams[i % len(fams)]
        tasks.append(make_task(family, rng.choice(grid), i, split, seed, rng))
    return tasks


def with_examples(task: Task, n: int) -> Task:
    """``task`` with its first ``n`` gold tests as public examples, left out of its gold tests
    (the rest judge): what a benchmark's public tests are to its hidden ones."""
    if n <= 0:
        return task
    return dataclasses.replace(task, examples=list(task.tests[:n]), tests=list(task.tests[n:]))


def load_world(source=None, split: str | None = None, seed: int = 0,
               size: int | None = None, examples: int = 0) -> TaskSet:
    """The task world's ``split`` (``source`` is not used: the world is generated);
    ``examples``: that many of each problem's gold tests become its public examples
    (:func:`with_examples`; at most 6 of the 8)."""
    if source is not None:
        raise LoaderError("world: the task world is generated; it takes no file (options: split, "
                          "seed, size, examples)")
    n = int(examples or 0)
    if not 0 <= n <= N_TESTS - 2:
        raise LoaderError(f"world: examples must be 0 to {N_TESTS - 2} (of {N_TESTS} gold "
                          f"tests, two or more stay hidden), got {examples}")
    split = split or "train"
    shown = f", {n} examples" if n else ""
    return TaskSet("world", f"generated (split {split}, seed {seed}{shown})",
                   [with_examples(t, n) for t in generate(split, int(seed), size)])
