"""Roles: the coder and the tester. Prompts as chat messages; parsers from completions to
programs and test cases.

Parsers never raise and stay linear in the completion's length (no backtracking regexes): an
unparseable completion becomes a program or a test that fails everything, flagged ``ok=False``,
and :func:`parse_failure_rate` reports how often that happened. The tester's stdio format is
CURE's (``**Test Input:**`` / ``**Test Output:**`` fenced blocks); for functional tasks the tester
writes one ``assert`` line that calls the entry point on literal arguments and compares the result
with a literal expected value: an input/output pair, as CURE's tester writes (:func:`io_test`).
A functional test of any other form (one that compares the function with itself, ``or True``,
``is not None``, computed arguments) is invalid: ``ok=False``, like a test that does not parse.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from typing import Iterable

from .tasks.model import Task, TestCase, unrunnable_text

CODE, TEST = "code", "test"  # the two roles (a dataset row's ``role``, a reward group's role)

# What an unparseable completion becomes.
FAILED_PROGRAM = "raise SystemExit('coevo: no program could be parsed from the completion')"
FAILED_STDIO_TEST = TestCase(input="", output="\x00coevo: the test could not be parsed\x00")
FAILED_FUNCTIONAL_TEST = TestCase(code="raise AssertionError('coevo: the test could not be parsed')")

CODER_SYSTEM = "You are a helpful assistant that solves programming problems."
TESTER_SYSTEM = "You are a helpful assistant that writes test examples for programming problems."

STDIO_CODER = (
    "Solve the following problem in Python. Read the input with input() (or sys.stdin) and write "
    "the answer with print(). Think first, then put the complete program in one ```python code "
    "block at the end.\n\n{problem}{examples}")
FUNCTIONAL_CODER = (
    "Complete the following Python function `{entry}`. Think first, then put the complete "
    "function (with any imports and helpers) in one ```python code block at the end.\n\n"
    "```python\n{problem}\n```")
STDIO_TESTER = (
    "Given the problem below, write one test example: an input and the output a correct "
    "program prints for it. Derive the output step by step, and prefer an input you can handle "
    "reliably. Finally you MUST put your test example in the following format:\n\n"
    "**Test Input:**\n```input here```\n\n**Test Output:**\n```output here```\n\n"
    "**Explanation:**\n\nexplanation here.\n\nThis is the problem:\n{problem}{examples}")
FUNCTIONAL_TESTER = (
    "Given the Python function below, write one unit test: a single `assert` line that calls "
    "`{call}` on an input and compares the result with the output a correct implementation "
    "returns. Derive the output step by step, then put the assert line in one ```python code "
    "block at the end, e.g.\n```python\nassert {call}(...) == ...\n```\n\n"
    "```python\n{problem}\n```")


def _examples(task: Task) -> str:
    parts = []
    for t in task.examples[:3]:
        if t.kind == "stdio":
            parts.append(f"Input:\n{t.input}\nOutput:\n{t.output}")
        elif t.code:  # a functional example (MBPP's first test): how the function is called
            parts.append(f"```python\n{t.code.strip()}\n```")
    return ("\n\nExample:\n" + "\n\n".join(parts)) if parts else ""


def coder_messages(task: Task) -> list[dict]:
    """Chat messages asking for a solution."""
    if task.kind == "stdio":
        user = STDIO_CODER.format(problem=task.prompt.strip(), examples=_examples(task))
    else:
        problem = (task.starter_code or task.prompt).rstrip()
        if task.starter_code and task.prompt:
            problem = task.prompt.strip() + "\n\n" + task.starter_code.rstrip()
        user = FUNCTIONAL_CODER.format(entry=task.entry_point or "the function",
                                       problem=problem) + _examples(task)
    return [{"role": "system", "content": CODER_SYSTEM}, {"role": "user", "content": user}]


def tester_messages(task: Task) -> list[dict]:
    """Chat messages asking for one unit test."""
    if task.kind == "stdio":
        user = STDIO_TESTER.format(problem=task.prompt.strip(), examples=_examples(task))
    else:
        problem = task.prompt.rstrip() + (("\n\n" + task.starter_code.rstrip())
                                          if task.starter_code else "")
        call = task.entry_point or "the function"
        if task.entry_point and "class Solution" in (task.starter_code or ""):
            call = f"Solution().{task.entry_point}"
        user = FUNCTIONAL_TESTER.format(call=call, problem=problem) + _examples(task)
    return [{"role": "system", "content": TESTER_SYSTEM}, {"role": "user", "content": user}]


# ---- parsing -------------------------------------------------------------------------------------
def completion_text(completion) -> str:
    """The text of a completion as TRL hands it over: a string, or chat messages (the last
    one's content, content blocks joined)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion:
        last = completion[-1]
        if isinstance(last, dict):
            content = last.get("content", "")
            if isinstance(content, list):  # content blocks
                return "".join(b.get("text", "") for b in content if isinstance(b, dict))
            return str(content)
    return ""



@dataclass(frozen=True)
class ParsedProgram:
    code: str
    ok: bool


@dataclass(frozen=True)
class ParsedTest:
    test: TestCase
    ok: bool


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every complete ```fenced``` block, in order; also the inline form
    ```like this```. Linear scan."""
    out = []
    i = 0
    while True:
        a = text.find("```", i)
        if a < 0:
            return out
        b = text.find("```", a + 3)
        if b < 0:
            return out
        inner = text[a + 3:b]
        nl = inner.find("\n")
        head = inner[:nl] if nl >= 0 else ""
        if nl >= 0 and head.strip() and " " not in head.strip() and len(head.strip()) <= 20:
            lang, body = head.strip().lower(), inner[nl + 1:]
        elif nl >= 0 and not head.strip():
            lang, body = "", inner[nl + 1:]
        else:
            lang, body = "", inner
        out.append((lang, body))
        i = b + 3


def _parse(code: str):
    """ast.parse, quietly (model text is full of invalid escape sequences); None if invalid."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return None


def _compiles(code: str) -> bool:
    return _parse(code) is not None


def _defines(code: str, name: str) -> bool:
    tree = _parse(code)
    if tree is None:
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                node.name == name:
            return True
    return False


def parse_program(completion: str, task: Task) -> ParsedProgram:
    """The program in a coder completion: the last ```python block (or the last fenced block,
    or the whole text if it is Python). For a functional task whose completion does not define
    the entry point, the completion is appended to the task's program prefix (HumanEval-style
    body completion)."""
    try:
        if not isinstance(completion, str):
            return ParsedProgram(FAILED_PROGRAM, False)
        blocks = fenced_blocks(completion)
        py = [b for lang, b in blocks if lang in ("python", "py", "python3")]
        candidates = py[::-1] + [b for lang, b in blocks[::-1] if lang == ""]
        if not blocks:
            candidates = [completion]
        prefix = task.program_prefix if task.kind == "functional" else ""
        code = next((c for c in candidates if c.strip() and (
            _compiles(c) or (prefix and _compiles(prefix + c)))), None)
        if code is None:
            return ParsedProgram(FAILED_PROGRAM, False)
        if task.kind == "functional" and task.entry_point:
            class_based = "class Solution" in (task.starter_code or "")
            target = "Solution" if class_based else task.entry_point
            # a top-level function answers a class-based task too (LiveCodeBench's grader calls
            # it when the program has no class Solution)
            if not _defines(code, target) and not (class_based and
                                                   _defines(code, task.entry_point)):
                if task.program_prefix and _compiles(task.program_prefix + code):
                    code = task.program_prefix + code
                else:
                    return ParsedProgram(FAILED_PROGRAM, False)
        return ParsedProgram(code, True)
    except Exception:  # noqa: BLE001 - a parser never raises
        return ParsedProgram(FAILED_PROGRAM, False)


def _after(text: str, marker: str) -> str | None:
    """The first fenced block after the last ``marker`` (markdown bold optional)."""
    at = text.rfind(marker)
    if at < 0:
        return None
    blocks = fenced_blocks(text[at + len(marker):])
    return blocks[0][1] if blocks else None


def parse_test(completion: str, task: Task) -> ParsedTest:
    """The test in a tester completion. Stdio: the fenced blocks after the last
    ``**Test Input:**`` and ``**Test Output:**``. Functional: the last ``assert`` statement in the
    last python block (or the text) that calls the entry point, accepted only as an
    input/output pair (:func:`io_test`); any other assert is an invalid test (``ok=False``),
    rewarded and counted as one that could not be parsed."""
    try:
        if not isinstance(completion, str):
            raise ValueError
        if task.kind == "stdio":
            inp = _after(completion, "**Test Input:**")
            if inp is None:
                inp = _after(completion, "Test Input:")
            out = _after(completion, "**Test Output:**")
            if out is None:
                out = _after(completion, "Test Output:")
            if inp is None or out is None or not out.strip() or \
                    unrunnable_text(inp) is not None or unrunnable_text(out) is not None:
                return ParsedTest(FAILED_STDIO_TEST, False)  # (a lone surrogate: no bytes)
            inp = inp.strip("\n")
            return ParsedTest(TestCase(input=inp + "\n" if inp else "", output=out.strip()), True)
        blocks = fenced_blocks(completion)
        py = [b for lang, b in blocks if lang in ("python", "py", "python3", "")]
        class_based = "class Solution" in (task.starter_code or "")
        for source in py[::-1] + [completion]:
            stmt = _last_assert(source, task.entry_point)
            if stmt and unrunnable_text(stmt) is not None:
                return ParsedTest(FAILED_FUNCTIONAL_TEST, False)
            if stmt:
                pair = io_test(stmt, task.entry_point, class_based)
                if pair is None:  # a test that tests nothing, or more than an input/output pair
                    return ParsedTest(FAILED_FUNCTIONAL_TEST, False)
                return ParsedTest(TestCase(code=pair), True)
        return ParsedTest(FAILED_FUNCTIONAL_TEST, False)
    except Exception:  # noqa: BLE001 - a parser never raises
        return ParsedTest(FAILED_STDIO_TEST if getattr(task, "kind", "") == "stdio"
                          else FAILED_FUNCTIONAL_TEST, False)


def _last_assert(source: str, entry: str | None) -> str | None:
    lines = source.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i].strip()
        if not line.startswith("assert"):
            continue
        # an assert may continue on the following lines: take the shortest span that parses
        for j in range(i + 1, min(len(lines), i + 30) + 1):
            stmt = "\n".join(x.strip() if k == 0 else x for k, x in enumerate(lines[i:j]))
            tree = _parse(stmt)
            if tree is None:
                continue
            if len(tree.body) == 1 and isinstance(tree.body[0], ast.Assert) and (
                    not entry or any(isinstance(n, ast.Name) and n.id == entry
                                     or isinstance(n, ast.Attribute) and n.attr == entry
                                     for n in ast.walk(tree))):
                return stmt
            break
    return None


def _literal(node) -> bool:
    """Whether ``node`` is a literal value (what ``ast.literal_eval`` accepts: constants,
    containers of literals, signed numbers, ``set()``)."""
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _entry_call(node, entry: str | None, class_based: bool) -> bool:
    """Whether ``node`` calls the entry point the way the task does, on literal arguments:
    ``entry(...)``, or ``Solution().entry(...)`` for a LeetCode-style task."""
    if not isinstance(node, ast.Call) or not entry:
        return False
    f = node.func
    if class_based:
        if not (isinstance(f, ast.Attribute) and f.attr == entry
                and isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name)
                and f.value.func.id == "Solution" and not f.value.args
                and not f.value.keywords):
            return False
    elif not (isinstance(f, ast.Name) and f.id == entry):
        return False
    return (all(not isinstance(a, ast.Starred) and _literal(a) for a in node.args)
            and all(k.arg is not None and _literal(k.value) for k in node.keywords))


def io_test(code: str, entry: str | None, class_based: bool = False,
            probe: bool = False) -> str | None:
    """A generated functional test as an input/output pair, or None when it is not one.

    Accepted: one statement ``assert CALL == EXPECTED`` (an assert message is dropped), or
    ``assert CALL is X`` with X the literal True, False or None (a bool or None answer), where
    CALL calls the entry point as the task calls it (``entry(...)``, or ``Solution().entry(...)``
    when ``class_based``) on literal arguments and EXPECTED is a literal; with ``probe``, also the
    bare ``CALL`` (the form the label-free vote runs). Everything else is refused: a comparison of
    the function with itself (``f(1) == f(1)``), ``== 99 or True``, ``f is not None``,
    try/except, loops, rebinding the function, computed arguments or expectations. Returns the
    accepted test's text (the call and the expectation as written)."""
    tree = _parse(code)
    if tree is None or len(tree.body) != 1:
        return None
    node = tree.body[0]
    try:
        if probe and isinstance(node, ast.Expr) and _entry_call(node.value, entry, class_based):
            return _as_written(ast.get_source_segment(code, node.value), node.value,
                               "{}", "({})")
        if not isinstance(node, ast.Assert):
            return None
        cmp = node.test
        if not (isinstance(cmp, ast.Compare) and len(cmp.ops) == 1
                and isinstance(cmp.ops[0], (ast.Eq, ast.Is))):
            return None
        call, expected = cmp.left, cmp.comparators[0]
        if not _entry_call(call, entry, class_based) or not _literal(expected):
            return None
        op = "=="
        if isinstance(cmp.ops[0], ast.Is):  # ``is`` only against the literal True, False, None
            if not (isinstance(expected, ast.Constant)
                    and type(expected.value) in (bool, type(None))):
                return None
            op = "is"
        a, b = ast.get_source_segment(code, call), ast.get_source_segment(code, expected)
    except (ValueError, TypeError, RecursionError, MemoryError):
        return None
    if a is None or b is None:
        return None
    return _as_written((a, b), cmp, "assert {} %s {}" % op, "assert ({}) %s ({})" % op)


def _as_written(parts, node, *forms) -> str | None:
    """The first of ``forms`` filled with the source segments ``parts`` that parses back to one
    statement holding exactly ``node`` (a segment leaves out the parentheses around it:
    ``("a"\n"b")`` is ``"a"\n"b"``, two statements once put on an assert line); else None."""
    parts = parts if isinstance(parts, tuple) else (parts,)
    want = ast.dump(node)
    for form in forms:
        text = form.format(*parts)
        tree = _parse(text)
        if tree is None or len(tree.body) != 1:
            continue
        got = tree.body[0]
        got = got.test if isinstance(got, ast.Assert) else getattr(got, "value", None)
        if got is not None and ast.dump(got) == want:
            return text
    return None


def parse_failure_rate(parsed: Iterable) -> float:
    """Share of parsed programs or tests flagged ``ok=False`` (NaN for none)."""
    items = list(parsed)
    if not items:
        return float("nan")
    return sum(not p.ok for p in items) / len(items)
