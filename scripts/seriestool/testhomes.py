"""`homes`: a patch's new test files moved into the upstream test files they belong in ([targets.<t>.test_homes]).

The sdist has no `tests/`, so each patch adds its regression tests as new files; upstream keeps them in topic files.
`move` appends each new file's test classes to its home file (upstream's, the preimage), with the module-level
helpers they bring (a class, function or assignment whose name the home file does not define yet) and the imports
the home file lacks (merged into its own: a name it already binds is skipped, a guarded `if is_torch_available():`
block gains the missing lines). Read with `ast`, by top-level statements and their line ranges; nothing is imported
or run. `unified_diff` turns the result into the diff a pull request carries, which `git apply` takes in a clone.
"""

import ast
import difflib
import io
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import tokenize
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import base as base_mod
from . import patchfile, upstream_tests
from .context import Context
from .errors import SeriesError
from .git import GitError, Repo, StrPath
from .manifest import FORK_TIER, Target
from .patchfile import FileDiff
from .placement import place
from .preimages import loader
from .results import PytestRun, Style, is_test_file
from .runners import run_pytest, run_style
from .scratch import prepare_scratch
from .statuses import RunStatus
from .upstream_tests import _copy_tests


LINE_LENGTH = 119  # transformers' ruff line length: a merged import longer than this is wrapped
TEST_METHOD = re.compile(r"^test")


@dataclass
class Moved:
    """What `move` did to one home file."""

    home: str
    source: str = ""  # the new test file moved
    classes: list[str] = field(default_factory=list)  # the test classes (and test functions) appended
    helpers: list[str] = field(default_factory=list)  # the module-level helpers appended
    kept: list[str] = field(default_factory=list)  # helpers the home file already defines the same way
    renamed: dict[str, str] = field(default_factory=dict)  # helpers the home defines differently -> their new names
    shadowed: list[str] = field(default_factory=list)  # names the new file imports and the home binds otherwise
    first_line: int = 1  # the first line of what it appended (1-based)
    imports: list[str] = field(default_factory=list)  # the import lines added
    new_file: bool = False
    shared: dict[str, str] = field(default_factory=dict)  # local helpers dropped -> the shared helpers used instead
    dropped: list[str] = field(default_factory=list)  # helpers and imported names only the replaced helpers used


def _parse(text: str, where: str) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError as exc:
        raise SeriesError(f"{where}: not Python ({exc.msg}, line {exc.lineno})") from None


def _start(node: ast.stmt) -> int:
    """The first line of a statement, its decorators included (1-based)."""
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno, *(d.lineno for d in decorators)])


def _with_comments(lines: list[str], start: int) -> int:
    """`start` moved up over the comment lines right above it (1-based)."""
    while start > 1 and lines[start - 2].lstrip().startswith("#"):
        start -= 1
    return start


def _source(lines: list[str], node: ast.stmt, *, comments: bool = True) -> str:
    start = _start(node)
    if comments:
        start = _with_comments(lines, start)
    end = node.end_lineno or node.lineno
    return "".join(lines[start - 1 : end])


def _docstring(tree: ast.Module) -> bool:
    first = tree.body[0] if tree.body else None
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)


def _head(text: str, where: str) -> str:
    """The head of a test file: its leading comment lines (the license) and its module docstring, as a new home file
    made from it starts."""
    tree = _parse(text, where)
    lines = text.splitlines(keepends=True)
    if _docstring(tree):
        end = tree.body[0].end_lineno or tree.body[0].lineno
    else:
        end = 0
        while end < len(lines) and lines[end].lstrip().startswith("#"):
            end += 1
    return "".join(lines[:end])


def _is_import(node: ast.stmt) -> bool:
    return isinstance(node, (ast.Import, ast.ImportFrom))


def _import_block(node: ast.stmt) -> bool:
    """An `if <test>:` holding only imports (transformers' `if is_torch_available(): import torch`)."""
    return isinstance(node, ast.If) and not node.orelse and bool(node.body) and all(_is_import(n) for n in node.body)


def _bound(node: ast.stmt, *, imports: bool = True) -> list[str]:
    """The names a top-level statement binds (`imports`: by its imports too)."""
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [_alias_name(node, alias) for alias in node.names] if imports else []
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, (ast.If, ast.Try, ast.With)):
        inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
        for handler in getattr(node, "handlers", []):
            inner += handler.body
        return [name for child in inner for name in _bound(child, imports=imports)]
    return []


def _defined(tree: ast.Module) -> dict[str, ast.stmt]:
    """Every name the module binds at top level (in guarded blocks too) -> the statement that binds it."""
    found: dict[str, ast.stmt] = {}
    for node in tree.body:
        for name in _bound(node):
            found.setdefault(name, node)
    return found


def test_classes(tree: ast.Module) -> list[str]:
    """The tests pytest collects at the top level of a module: the classes with a `test...` method, and the
    `test...` functions, in order."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(
            isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and TEST_METHOD.match(n.name) for n in node.body
        ):
            found.append(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and TEST_METHOD.match(node.name):
            found.append(node.name)
    return found


def _render_import(node: ast.Import | ast.ImportFrom, aliases: Sequence[ast.alias], indent: str) -> str:
    """One import statement for `aliases`, wrapped as ruff format does when it is too long."""
    names = [f"{a.name} as {a.asname}" if a.asname else a.name for a in aliases]
    if isinstance(node, ast.Import):
        return "".join(f"{indent}import {name}\n" for name in names)
    module = "." * node.level + (node.module or "")
    line = f"{indent}from {module} import {', '.join(names)}"
    if len(line) <= LINE_LENGTH:
        return line + "\n"
    inner = "".join(f"{indent}    {name},\n" for name in names)
    return f"{indent}from {module} import (\n{inner}{indent})\n"


def _alias_name(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> str:
    """The name an import binds."""
    if alias.asname:
        return alias.asname
    return alias.name.split(".")[0] if isinstance(node, ast.Import) else alias.name


def _is_main(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test)


def _same_from(
    home: ast.Module | ast.If, lines: list[str], node: ast.Import | ast.ImportFrom
) -> ast.ImportFrom | None:
    """The home file's top-level `from M import ...` (or its guarded block's, `home` that block) of the same module as
    `node`, when it holds no comment (it is rewritten with the new names)."""
    if not isinstance(node, ast.ImportFrom):
        return None
    for other in home.body:
        if isinstance(other, ast.ImportFrom) and (other.module, other.level) == (node.module, node.level):
            text = "".join(lines[other.lineno - 1 : other.end_lineno or other.lineno])
            if "#" not in text and not any(a.name == "*" for a in other.names):
                return other
    return None


def _isort_names(aliases: Sequence[ast.alias]) -> list[ast.alias]:
    """Names in ruff's isort order (order-by-type: CONSTANTS, Classes, functions), without repeats."""

    def key(alias: ast.alias) -> tuple[int, str]:
        name = alias.name
        kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
        return kind, name.lower()

    seen: dict[tuple[str, str | None], ast.alias] = {}
    for alias in aliases:
        seen.setdefault((alias.name, alias.asname), alias)
    return sorted(seen.values(), key=key)


def _isort_key(node: ast.Import | ast.ImportFrom, first_party: Sequence[str]) -> tuple[int, int, str]:
    """(section, `import` 0 / `from` 1, module): ruff's isort order (future, standard library, third party, first
    party: `first_party`, the target's package, local)."""
    if isinstance(node, ast.ImportFrom):
        module, kind = node.module or "", 1
        if node.level:
            return 4, kind, module
    else:
        module, kind = node.names[0].name, 0
    top = module.split(".")[0]
    if top == "__future__":
        section = 0
    elif top in sys.stdlib_module_names:
        section = 1
    elif top in first_party:
        section = 3
    else:
        section = 2
    return section, kind, module.lower()


def _isort_place(
    nodes: list[ast.stmt], lines: list[str], key: tuple[int, int, str], first_party: Sequence[str]
) -> tuple[int, str, str]:
    """Where a new import statement goes among the home file's top-level imports `nodes`: the line index to insert
    at, and the blank line to put before and after it (when it opens a section the home file lacks)."""
    keyed = [(_isort_key(n, first_party), n) for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))]
    later = [(k, n) for k, n in keyed if k > key]
    before = [k for k, n in keyed if k < key]
    if later:
        next_key, first = later[0]
        at = _with_comments(lines, _start(first)) - 1
        if next_key[0] == key[0]:
            return at, "", ""
        if before and before[-1][0] == key[0]:  # the last of its section: right after the one before it
            previous = [n for k, n in keyed if k < key][-1]
            return previous.end_lineno or previous.lineno, "", ""
        return at, "", "\n"
    last_key, last = keyed[-1]
    return last.end_lineno or last.lineno, ("" if last_key[0] == key[0] else "\n"), ""


def _plain_text(plain: list[tuple[tuple[int, int, str], str]]) -> str:
    out, section = "", None
    for key, text in sorted(plain):
        if section is not None and key[0] != section:
            out += "\n"
        out, section = out + text, key[0]
    return out


def _block_text(node: ast.If, lines: list[str], bound: set[str]) -> str:
    """A guarded block of helpers (`if is_torch_available():` with imports and classes) without the imports the
    home file already has."""
    text = _source(lines, node)
    if node.orelse:
        return text
    first = _with_comments(lines, _start(node))
    out = lines[first - 1 : node.end_lineno or node.lineno]
    for child in reversed(node.body):
        if not isinstance(child, (ast.Import, ast.ImportFrom)):
            continue
        aliases = _missing_aliases(child, bound)
        if len(aliases) == len(child.names):
            continue
        start, end = child.lineno - first, (child.end_lineno or child.lineno) - first + 1
        out[start:end] = [_render_import(child, aliases, " " * child.col_offset)] if aliases else []
    header = _start(node) - first + 1  # the lines up to the `if` line
    while header < len(out) and not out[header].strip():
        del out[header]  # the blank lines an import left at the top of the block
    if header < len(out) and out[header].lstrip().startswith(("class ", "def ", "async def ", "@")):
        out.insert(header, "\n")  # as ruff format keeps a definition that opens a block
    return "".join(out)


def _definition(node: ast.stmt, name: str) -> ast.stmt | None:
    """The statement of `node` (a guarded block searched too) that defines `name`, not by an import."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return None
    if isinstance(node, (ast.If, ast.Try, ast.With)):
        inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
        for handler in getattr(node, "handlers", []):
            inner += handler.body
        return next((found for child in inner if (found := _definition(child, name)) is not None), None)
    return node if name in _bound(node) else None


def _renames(new: ast.Module, have: dict[str, ast.stmt], source: str) -> dict[str, str]:
    """The helpers of `new` that the home file defines differently (another class or function of the same name):
    each gets a new name, suffixed with the last two words of the new file's topic, short as upstream's helper names
    are (`run_scenario` of test_trainer_logged_loss.py -> `run_scenario_logged_loss`; `RegressionModel` of
    test_trainer_skipped_optimizer_step_count.py -> `RegressionModelStepCount`), so that the moved tests keep their
    own."""
    stem = "_".join(Path(source).stem.removeprefix("test_").removeprefix("trainer_").split("_")[-2:])
    tests = set(test_classes(new))
    renames: dict[str, str] = {}
    taken = set(have) | {name for node in new.body for name in _bound(node)}
    for node in new.body:
        for name in _bound(node, imports=False):
            if name in tests or name not in have or name in renames:
                continue
            mine, theirs = _definition(node, name), _definition(have[name], name)
            if mine is not None and theirs is not None and ast.dump(mine) == ast.dump(theirs):
                continue
            if name[:1].isupper() and not name.isupper():
                new_name = name + "".join(part.capitalize() for part in stem.split("_"))
            elif name.isupper():
                new_name = f"{name}_{stem.upper()}"
            else:
                new_name = f"{name}_{stem}"
            while new_name in taken:
                new_name += "_"
            taken.add(new_name)
            renames[name] = new_name
    return renames


def _rename(text: str, renames: dict[str, str]) -> str:
    """`text` with every use of the names in `renames` renamed (a name token not after a `.`)."""
    lines = text.splitlines(keepends=True)
    spots: list[tuple[int, int, int, str]] = []
    previous = ""
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and tok.string in renames and previous != ".":
            spots.append((tok.start[0], tok.start[1], tok.end[1], renames[tok.string]))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            previous = tok.string
    for row, start, end, new in reversed(spots):
        line = lines[row - 1]
        lines[row - 1] = line[:start] + new + line[end:]
    return "".join(lines)


def _origins(node: ast.stmt) -> dict[str, str]:
    """name -> where an import statement (or a block of them) takes it from (`module.name`)."""
    found: dict[str, str] = {}
    for child in ast.walk(node):
        if isinstance(child, ast.Import):
            for alias in child.names:
                found[_alias_name(child, alias)] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(child, ast.ImportFrom):
            for alias in child.names:
                found[_alias_name(child, alias)] = f"{'.' * child.level}{child.module or ''}.{alias.name}"
    return found


def _shadowed(node: ast.stmt, have: dict[str, ast.stmt]) -> list[str]:
    """The names `node` imports that the home file binds to something else (another module's, or its own)."""
    return [name for name, origin in _origins(node).items() if name in have and not _same(origin, have[name], name)]


def _same(origin: str, home: ast.stmt, name: str) -> bool:
    """Whether the home's import of `name` takes the same object: the same package and name (a package re-exports
    its modules' names: `transformers.is_torch_available` is `transformers.utils.is_torch_available`)."""
    theirs = _origins(home).get(name)
    if theirs is None:
        return False
    return theirs == origin or (theirs.split(".")[0] == origin.split(".")[0] and theirs.split(".")[-1] == name)


def _missing_aliases(node: ast.Import | ast.ImportFrom, have: set[str]) -> list[ast.alias]:
    if isinstance(node, ast.Import):
        return [a for a in node.names if (a.asname or a.name.split(".")[0]) not in have]
    return [a for a in node.names if (a.asname or a.name) not in have]


def relative_module(home: str, module: str) -> str:
    """How `home` imports the module file `module` (both paths from the repository root), as upstream's topic files
    import their shared helpers: relatively (`tests/trainer/test_x.py`, `tests/trainer/trainer_test_utils.py` ->
    `.trainer_test_utils`; from `tests/trainer/distributed/` -> `..trainer_test_utils`)."""
    folder, parts = Path(home).parent.parts, Path(module).with_suffix("").parts
    common = 0
    while common < min(len(folder), len(parts) - 1) and folder[common] == parts[common]:
        common += 1
    return "." * (len(folder) - common + 1) + ".".join(parts[common:])


def _imports_from(tree: ast.Module, module: str) -> ast.stmt | None:
    """The home's statement that imports from `module` (a relative module name): a top-level `from` import, or the
    guarded block (`if is_torch_available():`) that holds one. None when it has none."""
    for node in tree.body:
        inner = node.body if isinstance(node, ast.If) and not node.orelse else [node]
        for child in inner:
            if isinstance(child, ast.ImportFrom) and "." * child.level + (child.module or "") == module:
                return node
    return None


def _without(text: str, source: str, names: set[str]) -> tuple[str, set[str]]:
    """`text` without the module-level definitions (in guarded blocks too) and the imported names of `names` (a
    guarded block left empty goes whole); returns it and the names the removed definitions use."""
    tree = _parse(text, source)
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []  # (first line, last line, new text), 1-based
    uses: set[str] = set()

    def removed(node: ast.stmt) -> bool:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep = [a for a in node.names if _alias_name(node, a) not in names]
            if keep and len(keep) < len(node.names):
                edits.append(
                    (node.lineno, node.end_lineno or node.lineno, _render_import(node, keep, " " * node.col_offset))
                )
            return not keep
        bound = _bound(node, imports=False)
        if bound and all(name in names for name in bound) and not isinstance(node, (ast.If, ast.Try, ast.With)):
            uses.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
            return True
        return False

    def span(node: ast.stmt) -> tuple[int, int, str]:
        last = node.end_lineno or node.lineno
        while last < len(lines) and not lines[last].strip():
            last += 1  # the blank lines after it
        return _with_comments(lines, _start(node)), last, ""

    for node in tree.body:
        if isinstance(node, ast.If) and not node.orelse:
            gone = [child for child in node.body if removed(child)]
            edits += [span(node)] if len(gone) == len(node.body) else [span(child) for child in gone]
        elif removed(node):
            edits.append(span(node))
    for first, last, new in sorted(edits, reverse=True):
        lines[first - 1 : last] = [new]
    return "".join(lines), uses


def replace_shared(
    new_text: str, replacements: dict[str, str], *, source: str, home: str, home_text: str | None, module: str
) -> tuple[str, list[str]]:
    """`new_text` with each local helper of `replacements` (local name -> shared name) replaced by the shared helper of
    upstream's module file `module`: the local definition dropped, with the helpers and imported names only it used
    (a guarded block left empty goes whole), every use renamed, and the shared name imported from `module` the way
    `home` imports from it (into its statement or its guarded block; a top-level `from .module import` when it has
    none). Returns the text and the leftovers dropped. A local name the file does not define, or a shared name the
    file or the home binds to something else, is a SeriesError."""
    if not replacements:
        return new_text, []
    tree = _parse(new_text, source)
    defined = _defined(tree)
    relative = relative_module(home, module)
    home_tree = _parse(home_text or "", home)
    home_names = _defined(home_tree)
    for local, shared in replacements.items():
        if not any(_definition(node, local) is not None for node in tree.body):
            raise SeriesError(f"{source} defines no {local} (declared replaced by {shared} of {module})")
        if shared != local and shared in defined:
            raise SeriesError(f"{source} binds {shared} itself: it cannot use {module}'s {shared} for {local}")
        if shared in home_names and _origins(home_names[shared]).get(shared) != f"{relative}.{shared}":
            raise SeriesError(f"{home} binds {shared} to something else than {module}'s: {local} cannot become it")
    text, names, uses, leftovers = new_text, set(replacements), set(), []
    tests = set(test_classes(tree))
    while names:
        text, used_by_them = _without(text, source, names)
        uses |= used_by_them
        tree = _parse(text, source)
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        bound = {name for node in tree.body for name in _bound(node)}
        names = {name for name in uses - used - tests if name in bound}
        leftovers += sorted(names)
    text = _rename(text, {local: shared for local, shared in replacements.items() if local != shared})
    # the import, the way the home imports from the module
    imported = ", ".join(sorted(set(replacements.values())))
    holder = _imports_from(home_tree, relative)
    if isinstance(holder, ast.If):
        statement = f"if {ast.unparse(holder.test)}:\n    from {relative} import {imported}\n"
    else:
        statement = f"from {relative} import {imported}\n"
    tree = _parse(text, source)
    lines = text.splitlines(keepends=True)
    imports = [n for n in tree.body if _is_import(n) or _import_block(n)]
    if imports:
        at = imports[-1].end_lineno or imports[-1].lineno
        statement = "\n" + statement
    elif _docstring(tree):
        at = tree.body[0].end_lineno or 0
        statement = "\n" + statement
    else:
        at = 0
    lines[at:at] = [statement]
    return "".join(lines), leftovers


def _imports_torch(tree: ast.Module) -> bool:
    """Whether a module imports torch at its top level, unguarded (`import torch`)."""
    return any(
        isinstance(node, ast.Import) and any(alias.name == "torch" and not alias.asname for alias in node.names)
        for node in tree.body
    )


def _unguard(text: str, source: str) -> str:
    """`text` with each top-level `if is_torch_available():` block (without `else`) replaced by its body at module
    level: in a home file that imports torch unguarded, such a block is a guard the file does not need (and upstream's
    reviewers ask to drop)."""
    tree = _parse(text, source)
    lines = text.splitlines(keepends=True)
    for node in reversed(tree.body):
        if not (isinstance(node, ast.If) and not node.orelse and ast.unparse(node.test) == "is_torch_available()"):
            continue
        body = lines[node.body[0].lineno - 1 : node.end_lineno or node.lineno]
        lines[node.lineno - 1 : node.end_lineno or node.lineno] = textwrap.dedent("".join(body)).splitlines(
            keepends=True
        )
    return "".join(lines)


def move(
    home_text: str | None,
    new_text: str,
    *,
    home: str,
    source: str,
    classes: Iterable[str] | None = None,
    first_party: Sequence[str] = ("transformers",),
    shared: dict[str, str] | None = None,
    shared_module: str = "",
) -> tuple[str, Moved]:
    """`home_text` (None: a new file) with the test classes of `new_text` (all, or `classes`) appended, with the
    module-level helpers and imports they need that the home file lacks (a new import statement in ruff's isort
    order, `first_party` the target's package). `shared` (local helper -> helper of upstream's `shared_module`) are
    replaced first (`replace_shared`). `home` and `source` name the files in messages. A test class the home file
    already defines is an error: moving it would replace upstream's."""
    moved = Moved(home=home, source=source, new_file=home_text is None)
    if home_text is None:
        # a new home file keeps the head of the file its tests come from: the license and the module docstring
        home_text = _head(new_text, source)
    if shared:
        new_text, moved.dropped = replace_shared(
            new_text, shared, source=source, home=home, home_text=home_text, module=shared_module
        )
        moved.shared = dict(shared)
    home_text = home_text or ""
    if home_text and not home_text.endswith("\n"):
        home_text += "\n"
    home_tree = _parse(home_text, home)
    if _imports_torch(home_tree):
        new_text = _unguard(new_text, source)
    new_tree = _parse(new_text, source)
    new_lines = new_text.splitlines(keepends=True)
    home_lines = home_text.splitlines(keepends=True)
    have = _defined(home_tree)
    tests = test_classes(new_tree)
    wanted = list(tests if classes is None else classes)
    unknown = [name for name in wanted if name not in tests]
    if unknown:
        raise SeriesError(f"{source}: no test class {', '.join(unknown)}")
    clash = [name for name in wanted if name in have]
    if clash:
        raise SeriesError(f"{home} already defines {', '.join(clash)}: rename it in {source} first")
    renames = _renames(new_tree, have, source)
    if renames:
        new_text = _rename(new_text, renames)
        new_tree = _parse(new_text, source)
        new_lines = new_text.splitlines(keepends=True)
        moved.renamed = renames
    bound: set[str] = set(have)
    carried: set[str] = set()  # the names the moved helpers bind

    # imports: plain ones after the home file's last top-level import, guarded ones into the home's block of the
    # same test (else as a new block after the plain ones)
    plain: list[tuple[tuple[int, int, str], str]] = []  # (isort key, text) of new plain import statements
    extended: dict[int, tuple[ast.ImportFrom, list[ast.alias]]] = {}  # a home `from M import` -> names it gains
    into_block: dict[int, list[str]] = {}  # line after which to insert (a home block's last line) -> lines
    new_blocks: list[str] = []
    home_blocks = {ast.unparse(n.test): n for n in home_tree.body if isinstance(n, ast.If) and _import_block(n)}
    body: list[str] = []  # helpers and classes, in the new file's order
    for node in new_tree.body:
        if _is_import(node) or _import_block(node):
            moved.shadowed += [n for n in _shadowed(node, have) if n not in moved.shadowed]
        if _is_import(node):
            assert isinstance(node, (ast.Import, ast.ImportFrom))
            aliases = _missing_aliases(node, bound)
            if not aliases:
                continue
            bound.update(_alias_name(node, a) for a in aliases)
            same = _same_from(home_tree, home_lines, node)
            if same is not None:
                extended.setdefault(id(same), (same, []))[1].extend(aliases)
                moved.imports.append(_render_import(node, aliases, "").strip())
                continue
            text = _render_import(node, aliases, "")
            plain.append((_isort_key(node, first_party), text))
            moved.imports.append(text.strip())
            continue
        if _import_block(node):
            assert isinstance(node, ast.If)
            test = ast.unparse(node.test)
            block = home_blocks.get(test)
            indent = " " * (block.body[0].col_offset if block is not None else 4)
            texts = []
            for child in node.body:
                assert isinstance(child, (ast.Import, ast.ImportFrom))
                aliases = _missing_aliases(child, bound)
                if aliases:
                    bound.update(_alias_name(child, a) for a in aliases)
                    same = _same_from(block, home_lines, child) if block is not None else None
                    if same is not None:  # the block's own import of that module gains the names
                        extended.setdefault(id(same), (same, []))[1].extend(aliases)
                        moved.imports.append(f"{test}: {_render_import(child, aliases, '').strip()}")
                        continue
                    texts.append(_render_import(child, aliases, indent))
            if not texts:
                continue
            moved.imports += [f"{test}: {t.strip()}" for t in texts]
            if block is not None:
                into_block.setdefault(block.end_lineno or block.lineno, []).extend(texts)
            else:
                new_blocks.append(f"if {test}:\n" + "".join(texts))
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue  # the module docstring
        names = _bound(node)
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in tests:
            if node.name in wanted:
                body.append(_source(new_lines, node))
                moved.classes.append(node.name)
                bound.add(node.name)
            continue
        if _is_main(node):  # a script's entry point (a multi-process test runs its file): one per file
            main = next((n for n in home_tree.body if _is_main(n)), None)
            if main is not None and ast.dump(main) != ast.dump(node):
                # the home's block would run for the moved tests too (a branch holding two such files ran one
                # scenario for both: a cold review found the second's 2-process test red on its branch)
                raise SeriesError(
                    f'{home} already has an `if __name__ == "__main__":` block that runs something else, which the '
                    f"tests of {source} would run instead of theirs: give {source} a home of its own"
                )
            if main is None:
                body.append(_source(new_lines, node))
                moved.helpers.append("__main__")
            continue
        # (a helper the file binds again, `X |= {...}`, is none the home has: `_renames` gave it a name of its own)
        if names and all(name in bound for name in names) and not any(name in carried for name in names):
            moved.kept += [name for name in _bound(node, imports=False) if name in have and name not in moved.kept]
            continue
        body.append(_block_text(node, new_lines, bound) if isinstance(node, ast.If) else _source(new_lines, node))
        defined = [name for name in _bound(node, imports=False) if name not in bound]
        moved.helpers += defined or [ast.unparse(node).split("\n")[0][:60]]
        bound.update(names)
        # a statement of the file that binds one of these names again (`X |= {...}`) goes with them
        carried.update(names)

    # put it together, from the end of the home file backwards so that line numbers hold
    out = list(home_lines)
    edits: list[tuple[int, int, str]] = []  # (first line index, end index, text) replacing out[first:end]
    for same, aliases in extended.values():
        first, end = _start(same) - 1, same.end_lineno or same.lineno
        indent = " " * same.col_offset
        edits.append((first, end, _render_import(same, _isort_names([*same.names, *aliases]), indent)))
    plain_nodes = [n for n in home_tree.body if _is_import(n)]
    block_at = [n.end_lineno or n.lineno for n in home_tree.body if _is_import(n) or _import_block(n)]
    blocks = "".join("\n" + b for b in new_blocks)
    inserts: dict[int, str] = {}
    if plain_nodes:
        groups: dict[int, tuple[list[tuple[tuple[int, int, str], str]], list[str]]] = {}
        for key, text in sorted(plain):
            at, sep_before, sep_after = _isort_place(plain_nodes, home_lines, key, first_party)
            entries, seps = groups.setdefault(at, ([], ["", ""]))
            entries.append((key, text))
            seps[0] = seps[0] or sep_before
            seps[1] = sep_after  # the last one's (the group is sorted): what follows it
        for at, (entries, seps) in groups.items():
            inserts[at] = seps[0] + _plain_text(entries) + seps[1]
        inserts[max(block_at)] = inserts.get(max(block_at), "") + blocks
    elif block_at:  # only guarded imports: the plain ones before the first block
        first = min(_with_comments(home_lines, _start(n)) for n in home_tree.body if _import_block(n))
        inserts[first - 1] = _plain_text(plain) + ("\n" if plain else "")
        inserts[max(block_at)] = blocks
    else:
        head = (_plain_text(plain) + blocks).lstrip("\n")
        if not head:
            pass
        elif not home_tree.body:
            inserts[len(out)] = head
        elif _docstring(home_tree):
            inserts[home_tree.body[0].end_lineno or 0] = "\n" + head
        else:
            inserts[_with_comments(home_lines, _start(home_tree.body[0])) - 1] = head + "\n\n"
    for after, texts in into_block.items():  # the home block's new lines before anything after the block
        inserts[after] = "".join(texts) + inserts.get(after, "")
    edits += [(after, after, text) for after, text in inserts.items() if text]
    for first, end, text in sorted(edits, key=lambda edit: (edit[0], edit[1]), reverse=True):
        out[first:end] = [text]
    text = "".join(out).rstrip("\n")
    # what is appended goes before the home's `if __name__ == "__main__":` block, when that ends the file: the
    # script it runs must find the moved helpers defined
    tail = ""
    last = _parse(text + "\n", home).body[-1:] if text else []
    if last and _is_main(last[0]):
        lines = text.splitlines(keepends=True)
        start = _with_comments(lines, _start(last[0])) - 1
        text, tail = "".join(lines[:start]).rstrip("\n"), "".join(lines[start:]).rstrip("\n")
    moved.first_line = text.count("\n") + 4 if text else 1
    chunks = [text] if text else []
    chunks += [chunk.rstrip("\n") for chunk in body]
    if tail:
        chunks.append(tail)
    return "\n\n\n".join(chunks) + "\n", moved


def _range(start: int, count: int) -> str:
    return f"{start},{count}" if count != 1 else f"{start}"


def unified_diff(path: str, before: str | None, after: str) -> str:
    """The git diff that turns `before` (None: no such file) into `after` at `path` (`git apply` takes it)."""
    old = (before or "").splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    head = [f"diff --git a/{path} b/{path}\n"]
    if before is None:
        head += ["new file mode 100644\n", "--- /dev/null\n", f"+++ b/{path}\n"]
    else:
        head += [f"--- a/{path}\n", f"+++ b/{path}\n"]
    body: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for group in matcher.get_grouped_opcodes(3):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        old_start = i1 + 1 if i2 > i1 else i1
        new_start = j1 + 1 if j2 > j1 else j1
        body.append(f"@@ -{_range(old_start, i2 - i1)} +{_range(new_start, j2 - j1)} @@\n")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                body += [" " + line for line in old[a1:a2]]
                continue
            body += ["-" + line for line in old[a1:a2]]
            body += ["+" + line for line in new[b1:b2]]
    if not body:
        return ""
    fixed = []
    for line in body:
        fixed.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(head + fixed)


# --- one patch: its moves, the diff, and the check on the pinned base ------------------------------------------


@dataclass
class Plan:
    """A patch's new test files moved home: per home file its text before (None: new) and after."""

    patch: str
    moves: list[Moved] = field(default_factory=list)
    before: dict[str, str | None] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)  # the patch's new test files
    depends: list[str] = field(default_factory=list)  # the patches whose moves the homes hold first
    appended_from: dict[str, int] = field(default_factory=dict)  # home -> first line of what this patch appended
    changes: list[str] = field(default_factory=list)  # the dependencies' test files it changes (their moved code too)

    def diff(self) -> str:
        return "".join(unified_diff(home, self.before[home], self.after[home]) for home in self.after)

    def node_ids(self) -> list[str]:
        return [f"{m.home}::{cls}" for m in self.moves for cls in m.classes]


def added_text(diff: FileDiff) -> str:
    """The text of a file a patch adds (its `+` lines)."""
    return "".join(line[1:] + "\n" for hunk in diff.hunks for line in hunk.lines if line.startswith("+"))


def plan(target: Target, name: str, root: Path) -> Plan:
    """The moves of patch `name`'s new test files into their homes ([targets.<t>.test_homes]), each home read from
    `root` (upstream's tests; a home not there is a new file) with the moves of the patches `name` depends on made
    first (its pull request's branch holds them). A change `name` makes to one of their test files is made to its
    moved code too (`Plan.changes`). Bad input (a fork-tier patch, no new test file, a class without a home, a class
    its home already defines) is a SeriesError."""
    if target.tier(name) == FORK_TIER:
        raise SeriesError(f"{name} is fork tier: it is no pull request, its tests have no upstream home")
    read = _reader(root)
    deps = [dep for dep in target.depends_on(name) if _new_test_files(target, dep)]
    state: dict[str, str | None] = {}
    for dep in deps:
        state.update(_plan_one(target, dep, read, state).after)
    texts = {f.path or "": added_text(f) for dep in deps for f in _new_test_files(target, dep)}
    changed = _changed_texts(target.patch_path(name), texts)
    if not changed:
        found = _plan_one(target, name, read, state)
    else:  # the dependencies' moves again, with the files as `name` leaves them, then its own
        texts.update(changed)
        after: dict[str, str | None] = {}
        for dep in deps:
            after.update(_plan_one(target, dep, read, after, now=texts.get).after)
        found = _plan_one(target, name, read, after)
        for home, text in after.items():
            found.after.setdefault(home, text or "")
        found.before = {home: state[home] if home in state else read(home) for home in found.after}
        found.changes = sorted(changed)
    if not found.sources:
        raise SeriesError(f"{name} adds no test file under {target.tests}")
    found.depends = deps
    return found


def _changed_texts(patch: Path, texts: dict[str, str]) -> dict[str, str]:
    """{path: text} of the files of `texts` (path -> text) that `patch` changes, as it leaves them (`git apply`)."""
    paths = [f.path for f in patchfile.read(patch).files if f.status == "M" and f.path in texts]
    if not paths:
        return {}
    with tempfile.TemporaryDirectory(prefix="homes-") as tmp:
        for path in paths:
            (Path(tmp) / path).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / path).write_text(texts[path or ""], encoding="utf-8")
        proc = subprocess.run(
            ["git", "apply", *(f"--include={path}" for path in paths), str(patch.resolve())],
            cwd=tmp,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise SeriesError(
                f"{patch.name}'s change to {', '.join(map(str, paths))} does not apply: {proc.stderr.strip()}"
            )
        return {path or "": (Path(tmp) / path).read_text(encoding="utf-8") for path in paths}


def _reader(root: Path) -> Callable[[str], str | None]:
    def read(path: str) -> str | None:
        file = root / path
        return file.read_text(encoding="utf-8") if file.is_file() else None

    return read


def plan_chain(
    target: Target, names: Sequence[str], base: Callable[[str], str | None], now: Callable[[str], str | None]
) -> Plan:
    """The moves of the new test files of `names` (a pull request's commits, in order) into their homes, each home's
    preimage read by `base` (path -> text in the branch's base, None: not there) and each new file's text by `now` (as
    the last commit leaves it: a later patch may change an earlier one's test file; a file it removed moves nothing).
    `branches` makes each commit's tree with it. Bad input is a SeriesError, as for `plan`."""
    state: dict[str, str | None] = {}
    found = Plan(patch=names[-1] if names else "")
    for name in names:
        one = _plan_one(target, name, base, state, now=now)
        state.update(one.after)
        for home, text in one.before.items():
            found.before.setdefault(home, text)
        found.after.update(one.after)
        for home, first in one.appended_from.items():
            found.appended_from.setdefault(home, first)
        found.moves += one.moves
        found.sources += one.sources
    return found


def _new_test_files(target: Target, name: str) -> list[FileDiff]:
    patch = patchfile.read(target.patch_path(name))
    files = [f for f in patch.files if f.status == "A" and f.path and f.path.startswith(target.tests)]
    return [f for f in files if is_test_file(f.path or "")]


def _plan_one(
    target: Target,
    name: str,
    read: Callable[[str], str | None],
    state: dict[str, str | None],
    *,
    now: Callable[[str], str | None] | None = None,
) -> Plan:
    """`name`'s moves on the homes as `state` holds them (home -> text after earlier moves), else as `read` gives
    them. `now`: where each new file's text is read (default: the text the patch adds)."""
    files = _new_test_files(target, name)
    found = Plan(patch=name)
    table = f"[targets.{target.name}.test_homes]"
    for diff in files:
        path = diff.path or ""
        text = added_text(diff) if now is None else now(path)
        if text is None:
            continue
        found.sources.append(path)
        shared = target.shared_helpers.get(path, {})
        if shared:
            _check_shared(target, path, shared, read)
        classes = test_classes(_parse(text, path))
        homes: dict[str, list[str]] = {}
        for cls in classes:
            home = target.test_homes.get(f"{path}::{cls}") or target.test_homes.get(path)
            if not home:
                raise SeriesError(f"{path}::{cls} ({name[:4]}) has no home in {table}")
            homes.setdefault(home, []).append(cls)
        for home, wanted in homes.items():
            if home not in found.after:
                found.before[home] = state[home] if home in state else read(home)
                found.after[home] = found.before[home] or ""
            current = found.after[home] or None
            merged, moved = move(
                current,
                text,
                home=home,
                source=path,
                classes=wanted,
                first_party=(target.package,),
                shared=shared,
                shared_module=target.shared_helpers_module,
            )
            moved.new_file = found.before[home] is None
            found.after[home] = merged
            found.appended_from.setdefault(home, moved.first_line)
            found.moves.append(moved)
    return found


def _check_shared(target: Target, path: str, shared: dict[str, str], read: Callable[[str], str | None]) -> None:
    """Bad input when upstream's module of shared helpers is not there or lacks a helper declared for `path`."""
    module = target.shared_helpers_module
    table = f"[targets.{target.name}.shared_helpers]"
    text = read(module)
    if text is None:
        raise SeriesError(f"{table}: upstream's tests have no {module}")
    have = _defined(_parse(text, module))
    missing = sorted(set(shared.values()) - set(have))
    if missing:
        raise SeriesError(f"{table}: {module} defines no {', '.join(missing)} (declared for {path})")


def format_moved(found: Plan, ruff: Sequence[StrPath], config_dir: StrPath) -> list[str]:
    """Format what `found` appends to each home with `ruff format --range` (the config of `config_dir`, the base's
    checkout): a renamed helper makes lines longer. First an import the moved tests brought that nothing uses any
    more (a name only their dropped `if is_torch_available():` block used) is removed and the imports are sorted as
    upstream's isort settings say, blank lines after them included (`ruff check --fix --select F401,I`; upstream's own
    lines pass ruff check, so only what the moved tests brought changes). Returns the problems (ruff failing on a
    home)."""
    problems = []
    for home, first in found.appended_from.items():

        def ruff_on(*args: str, home: str = home) -> subprocess.CompletedProcess[str]:
            command = [*map(str, ruff), *args, "--no-cache", "--stdin-filename", home, "-"]
            return subprocess.run(command, input=found.after[home], capture_output=True, text=True, cwd=config_dir)

        unused = ruff_on("check", "--fix", "--select", "F401,I")
        if unused.returncode == 0 and unused.stdout:
            found.after[home] = unused.stdout
        proc = ruff_on("format", f"--range={first}")
        if proc.returncode == 0 and proc.stdout:
            found.after[home] = proc.stdout
        else:
            problems.append(f"ruff format of {home}: {(proc.stderr or proc.stdout).strip()[:200]}")
    return problems


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class Check:
    """The moved classes run on the pinned base with the patch and its dependencies (green) and without the patch
    (red), and the patch's own new files on the red tree (what verify's red run finds failing)."""

    applied: bool = False
    green: PytestRun | None = None
    red: PytestRun | None = None
    reference: PytestRun | None = None  # the patch's new files, on the red tree
    style: Style | None = None  # ruff check and format --check of the homes, with the base's config
    missing_red: list[str] = field(default_factory=list)  # fail as new files, not once moved
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.applied and not self.problems


def _local(test_id: str, paths: Iterable[str]) -> str:
    """A JUnit id without its module (`tests.trainer.test_x.Class::test` -> `Class::test`, a function's
    `tests.trainer.test_x::test` -> `test`): the same test in another file has the same local id."""
    for path in paths:
        parts = path.removesuffix(".py").split("/")
        # pytest names a module from its rootdir, or from the first folder without __init__.py down
        for first in range(len(parts)):
            module = ".".join(parts[first:])
            for sep in (".", "::"):
                at = -1 if not test_id.startswith(module + sep) else 0
                if at < 0 and f".{module}{sep}" in test_id:
                    at = test_id.index(f".{module}{sep}") + 1
                if at >= 0:
                    return test_id[at + len(module) + len(sep) :]
    return test_id


@dataclass
class Trees:
    """The scratch checkout of the pinned base (`<work>/homes/<target>`) and its red and green commits for a
    patch: its dependencies, and them with the patch."""

    repo: Repo
    base: str
    red: str
    green: str


def trees(ctx: Context, target: Target, name: str) -> Trees:
    """The red and green trees of patch `name` on the pinned base, as `verify` places patches."""
    repo, base = prepare_scratch(ctx, target, base_mod.SDIST, folder="homes")
    preimages = loader(repo, target, ctx.downloads, ctx.log)
    red = base
    for patch in [*target.depends_on(name), name]:
        placed = place(repo, target.patch_path(patch), preimages=preimages)
        if not placed.status.went_in:
            repo.reset_hard(base)
            raise SeriesError(f"{patch} does not go in on the pinned base ({placed.status})")
        if patch != name:
            red = repo.out("rev-parse", "HEAD")
    return Trees(repo, base, red, repo.out("rev-parse", "HEAD"))


def check(
    ctx: Context,
    target: Target,
    found: Plan,
    diff_file: Path,
    root: Path,
    made: Trees,
    *,
    python: StrPath,
    extra_paths: Sequence[StrPath],
    timeout: float | None,
) -> Check:
    """Apply `diff_file` to upstream's tests (`root`) copied onto the red and green trees (`made`), and run the
    moved classes there."""
    result = Check()
    repo, base = made.repo, made.base
    commits = {"red": made.red, "green": made.green}
    tests_top = target.tests.split("/")[0]
    homes = [home for home in found.after if (root / home).is_file()]
    copied = sorted({str(Path(h).parent / "__init__.py") for h in homes} | set(homes))
    logs = ctx.work / "logs" / "homes" / target.name
    logs.mkdir(parents=True, exist_ok=True)
    stem = logs / found.patch.removesuffix(".patch")
    common: dict[str, Any] = {"python": python, "repo_dir": repo.path, "source_dir": target.source_dir}
    common.update(device="cpu", timeout=timeout, extra_paths=extra_paths, extra_env=upstream_tests.ENV)
    # the reference: the patch's new files as verify runs them, on the red tree
    repo.reset_hard(commits["red"])
    repo.run("checkout", commits["green"], "--", *found.sources)
    result.reference = run_pytest(
        files=found.sources, log_stem=Path(f"{stem}.reference"), expect=RunStatus.RED, say=ctx.log, **common
    )
    for state in ("green", "red"):
        repo.reset_hard(commits[state])
        repo.run("clean", "--quiet", "--force", "-d", "--", tests_top)  # what an earlier apply left
        for source in found.sources:
            (repo.path / source).unlink(missing_ok=True)  # the pull request moves them home
        _copy_tests(root, [h for h in copied if (root / h).is_file()], repo.path)
        for home, text in found.before.items():  # the homes as the dependencies' pull requests leave them
            if text is not None:
                (repo.path / home).parent.mkdir(parents=True, exist_ok=True)
                (repo.path / home).write_text(text, encoding="utf-8")
        if state == "green":  # what the diff changes is style-checked against this commit
            repo.run("add", "--all", "--", *{str(Path(h).parts[0]) for h in found.after})
            repo.run("commit", "--quiet", "--no-verify", "--allow-empty", "-m", "upstream's tests")
            before_diff = repo.out("rev-parse", "HEAD")
        try:
            repo.run("apply", str(diff_file))
        except GitError as exc:
            result.problems.append(f"the diff does not apply to upstream's tests on the {state} tree: {exc}")
            repo.reset_hard(commits["red"])
            return result
        result.applied = True
        run = run_pytest(
            files=found.node_ids(),
            log_stem=Path(f"{stem}.{state}"),
            expect=RunStatus.GREEN if state == "green" else RunStatus.RED,
            say=ctx.log,
            **common,
        )
        setattr(result, state, run)
        if state == "green":
            result.style = run_style(python, repo.path, list(found.after), base=before_diff)
    repo.reset_hard(base)
    repo.run("clean", "--quiet", "--force", "-d", "--", tests_top)
    green, red, ref = result.green, result.red, result.reference
    assert green is not None and red is not None and ref is not None
    if result.style is not None and not result.style.clean:
        output = result.style.check_output if result.style.check_exit else result.style.format_output
        first = output.splitlines()[0].strip() if output else ""
        result.problems.append(f"the homes are not ruff-clean with the base's config: {first}")
    if green.status != RunStatus.GREEN:
        result.problems.append(f"moved home, the tests are {green.status} with the patch (log {green.log})")
    failing_moved = {_local(t, found.after) for t in red.failing}
    result.missing_red = [_local(t, found.sources) for t in ref.failing]
    result.missing_red = [t for t in result.missing_red if t not in failing_moved]
    if result.missing_red:
        result.problems.append(
            f"{len(result.missing_red)} test(s) fail without the patch as new files but not moved home: "
            + ", ".join(result.missing_red[:5])
        )
    elif not red.failing:
        result.problems.append(f"moved home, no test fails without the patch (log {red.log})")
    return result


def _counts(run: PytestRun | None) -> str:
    if run is None:
        return "not run"
    return f"{run.passed} passed, {run.failed + run.errors} failed, {run.skipped} skipped ({run.status})"


def report_lines(found: Plan, result: Check) -> list[str]:
    """What `homes` prints about the check of one patch."""
    patch = found.patch[:4]
    lines = [
        f"{patch} applied to upstream's tests: {'yes' if result.applied else 'no'}",
        f"{patch} green (with the patch): {_counts(result.green)}",
        f"{patch} red (without it): {_counts(result.red)}; as new files there: {_counts(result.reference)}",
    ]
    if result.style is not None:
        lines.append(f"{patch} style (ruff check, format --check): {'clean' if result.style.clean else 'NOT CLEAN'}")
    lines += [f"{patch} problem: {problem}" for problem in result.problems]
    lines.append(f"{patch} tests moved home: {'ok' if result.ok else 'FAIL'}")
    return lines
