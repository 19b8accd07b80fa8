"""The tool's layers: a library (seriestool/*.py), one module per command (seriestool/commands/) and the CLI.

Only cli.py imports the command modules, no command module imports another, the library imports neither,
and there is no import cycle. Every command module has its arguments, long help and run function.
"""

import ast
from pathlib import Path


PACKAGE = Path(__file__).resolve().parents[2] / "scripts" / "seriestool"


def _module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module, node):
    """The seriestool modules an import statement of `module` names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.split(".")[0] == "seriestool"]
    package = module.split(".")
    if not (PACKAGE / "/".join(package[1:]) / "__init__.py").is_file():
        package = package[:-1]  # a plain module: its package
    if node.level:
        base = package[: len(package) - (node.level - 1)]
    else:
        base = []
        if (node.module or "").split(".")[0] != "seriestool":
            return []
    prefix = ".".join(base + ([node.module] if node.module else []))
    found = []
    for alias in node.names:
        candidate = f"{prefix}.{alias.name}"
        found.append(candidate if candidate in GRAPH_MODULES else prefix)
    return found


GRAPH_MODULES = {_module_name(path) for path in PACKAGE.rglob("*.py")}


def import_graph():
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = set()
        for node in ast.walk(tree):  # nested (function-level) imports count too
            if isinstance(node, ast.Import | ast.ImportFrom):
                names.update(n for n in _resolve(module, node) if n in GRAPH_MODULES and n != module)
        graph[module] = names
    return graph


def _cycle(graph):
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _is_command(module):
    return module.startswith("seriestool.commands.")


def test_the_graph_is_read():
    graph = import_graph()
    assert "seriestool.commands.verify" in graph["seriestool.cli"]
    assert "seriestool.placement" in graph["seriestool.commands.checkout"]
    assert "seriestool.git" in graph["seriestool.placement"] or "seriestool.am" in graph["seriestool.placement"]


def test_no_import_cycle():
    assert _cycle(import_graph()) is None


def test_commands_are_imported_only_by_the_cli():
    graph = import_graph()
    for module, imports in graph.items():
        commands = sorted(name for name in imports if _is_command(name))
        if module != "seriestool.cli":
            assert not commands, f"{module} imports the command module(s) {commands}"
        assert "seriestool.cli" not in imports, f"{module} imports the CLI"


def test_every_command_module_is_registered_and_complete():
    from seriestool import cli

    files = {path.stem for path in (PACKAGE / "commands").glob("*.py") if path.stem != "__init__"}
    assert {module.NAME for module in cli.COMMANDS} == files
    for module in cli.COMMANDS:
        assert callable(module.add_arguments) and callable(module.run)
        assert "example" in module.DESCRIPTION and "exit status" in module.DESCRIPTION, module.NAME
        assert isinstance(module.NEEDS_GIT, bool) and isinstance(module.NEEDS_WORK, bool)
        assert isinstance(module.LOCKS_WORK, bool) and (module.NEEDS_WORK or not module.LOCKS_WORK), module.NAME


def test_the_cycle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
