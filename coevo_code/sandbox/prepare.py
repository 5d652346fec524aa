"""A test as the judge prepares it, once per judge for every unit that runs it: its syntax tree,
whether it imports a heavy module, its code (compiled by the judge when short), whether it is a
literal call the judge decides itself; and the hash-flood scan of long sources (many distinct
constants of one hash make compiling them, or evaluating their literals, quadratic)."""

import ast

from .cell import binds_program_object, value_tree


def uses_modules(code, roots, nested=True):
    """Whether compiled code may import one of the top-level modules ``roots`` (import statements
    put the module name in co_names; ``__import__("x")`` and importlib leave it in co_consts);
    with ``nested=False``, only its own top level, not the functions it defines."""
    stack = [code]
    while stack:
        c = stack.pop()
        for name in c.co_names:
            if name.split(".")[0] in roots:
                return True
        for k in c.co_consts:
            if isinstance(k, str):
                if k.split(".")[0] in roots:
                    return True
            elif nested and hasattr(k, "co_names"):
                stack.append(k)
    return False


def parse_test(src):
    """A functional test's syntax tree, or None where it does not parse (the test's process then
    compiles it and fails on its own)."""
    try:
        return ast.parse(src, "test.py")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


def judge_compiled_test(src, tree):
    """A short functional test compiled by the judge, once per unit, for every cell that runs it
    (``cell.value_tree`` applied to its syntax tree ``tree``, which it changes); the source
    itself where the judge leaves compiling to the test's own process: a long source (past FLOOD_SCAN_BYTES, where colliding constants could
    cost the compiler quadratic time), or one that fails to parse or compile here (a 1,500-level
    expression's RecursionError): that test then fails in its own cell, with its own error, and
    no other test or program of the unit is touched. A short source's compile is bounded by its
    length (CPython folds constants only up to small fixed sizes)."""
    if tree is None or len(src) > FLOOD_SCAN_BYTES:
        return src
    try:
        return compile(value_tree(tree), "test.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return src


def tree_uses_modules(tree, roots):
    """``uses_modules`` on a syntax tree: names, attributes, imports and string constants."""
    for node in ast.walk(tree):
        t = type(node)
        if t is ast.Name:
            name = node.id
        elif t is ast.Import or t is ast.ImportFrom:
            if t is ast.ImportFrom and node.module and node.module.split(".")[0] in roots:
                return True
            if any(a.name.split(".")[0] in roots for a in node.names):
                return True
            continue
        elif t is ast.Constant and type(node.value) is str:
            name = node.value
        else:
            continue
        if name.split(".")[0] in roots:
            return True
    return False


FLOOD_SCAN_BYTES = 8 << 10  # sources past this are scanned for colliding constants
FLOOD_DISTINCT = 64  # distinct constants of one hash that make a source a hash flood


def hash_flood(src, tree=None):
    """Whether a source holds many distinct constants of one hash (20,000 ints that collide mod
    2**61 - 1): compiling it, or evaluating its literals, costs quadratic time. Linear: hash
    values hash to themselves, and each is compared with at most FLOOD_DISTINCT others. Short
    sources are not scanned (a flood needs long numbers: a few hundred cost milliseconds)."""
    if len(src) <= FLOOD_SCAN_BYTES:
        return False
    if tree is None:
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return False
    seen = {}
    for node in ast.walk(tree):
        if type(node) is not ast.Constant:
            continue
        v = node.value
        if type(v) not in (int, float, complex, str, bytes):
            continue
        h = hash(v)
        values = seen.get(h)
        if values is None:
            seen[h] = [v]
        elif not any(type(w) is type(v) and w == v for w in values):
            values.append(v)
            if len(values) > FLOOD_DISTINCT:
                return True
    return False


_NO_VALUE = object()


def literal_call(tree, entry, setup_code):
    """``(name, args, kwargs, expected)`` when a test is exactly ``assert NAME(literals) ==
    literal`` (expected) or ``NAME(literals)`` (a probe: expected is ``_NO_VALUE``), with NAME
    a global of the program the test process would bind (not a builtin's or a standard module's
    name unless it is the entry point, not one the setup defines); else None. Such a test needs
    no code of its own: the judge calls the program and compares the answer itself, with the
    same exact-type values and the same ``==`` the test process would use."""
    if tree is None or len(tree.body) != 1:
        return None
    node = tree.body[0]
    if (isinstance(node, ast.Assert) and node.msg is None and isinstance(node.test, ast.Compare)
            and len(node.test.ops) == 1 and isinstance(node.test.ops[0], ast.Eq)):
        call, exp = node.test.left, node.test.comparators[0]
    elif isinstance(node, ast.Expr):
        call, exp = node.value, None
    else:
        return None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        return None
    name = call.func.id
    if name in setup_code.co_names or not binds_program_object(name, entry):
        return None
    try:
        args = tuple(ast.literal_eval(a) for a in call.args if not isinstance(a, ast.Starred))
        if len(args) != len(call.args) or any(k.arg is None for k in call.keywords):
            return None
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        expected = _NO_VALUE if exp is None else ast.literal_eval(exp)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return name, args, kwargs, expected
