"""tests/mutation_check.py: which mutants it makes, and that each is valid Python differing from the module."""

import ast

import mutation_check
import pytest


SOURCE = '''\
"""Module docstring: never mutated."""

LIMIT = 3


def f(a, b, flag=True):
    """Docstring."""
    if a == b and not flag:
        return a + 1
    for item in b:
        if item:
            break
    print(a)
    return None


def g(x):
    return x is None
'''


def _whats(source, only=None):
    tree = ast.parse(source)
    return [what for _, node in mutation_check._nodes(tree, only) for what, _ in mutation_check._mutations(node)]


def test_the_mutants_of_a_snippet():
    assert sorted(_whats(SOURCE)) == [
        "+ -> -",
        "1 -> 2",
        "3 -> 4",
        "== -> !=",
        "True -> False",
        "and -> or",
        "break -> continue",
        "call removed",  # print(a)
        "condition negated",  # if item: (the others are comparisons or boolean operators)
        "is -> is not",
        "not x -> x",
        "return None",  # return a + 1
        "return None",  # return x is None (an explicit `return None` is left alone)
    ]
    assert sorted(_whats(SOURCE, only={"g"})) == ["is -> is not", "return None"]


@pytest.mark.parametrize("module", sorted(mutation_check.MODULES))
def test_every_mutant_of_the_library_is_valid_python(module):
    only = mutation_check.MODULES[module][0]
    mutants = mutation_check.mutants_of(module, only)
    assert mutants
    original = ast.dump(ast.parse((mutation_check.ROOT / mutation_check.PACKAGE / module).read_text(encoding="utf-8")))
    for mutant in mutants[:: max(len(mutants) // 8, 1)]:  # a spread of them: all take about a minute
        mutated = ast.dump(ast.parse(mutation_check.mutated_source(mutant)))
        assert mutated != original, (mutant.line, mutant.what)
