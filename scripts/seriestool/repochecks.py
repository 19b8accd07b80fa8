"""Upstream's repository checks: the lines that run a patch's `utils/check_*.py` script where upstream runs its
repository checks, declared in [targets.<t>.repo_checks]: a recipe line of a target of its root Makefile
(`check-repo`, which runs them for a contributor, `-` prefixed: make goes on after a failure) and a step of its CI's
repository-consistency job (`.circleci/config.yml`, `- run: python utils/check_*.py`: the gate that fails a pull
request).

The patches apply to the release's sdist, which has neither file, so no patch can carry those lines: `branches` adds
them to the pull request's commit on a clone that has them (`place`, `place_ci`), and `pr` names them, or the lines to
add by hand.
"""

import re
from dataclasses import dataclass


MAKEFILE = "Makefile"
CI_CONFIG = ".circleci/config.yml"
# A step of the CI config that runs one of upstream's repository checks (`- run: python utils/check_repo.py`)
_CI_CHECK = re.compile(r"^(\s*)- run: python utils/check_[\w.-]*\.py\b.*$")
# The prefix of the line `pr` asks for by hand, where no Makefile shows its neighbours: upstream's check-repo recipe
# runs each of its `python utils/check_*.py` scripts as `-python ...` (make goes on after a failure)
DEFAULT_PREFIX = "-"
# A recipe line: a tab, make's prefix characters (`-` ignore errors, `@` silent, `+` always run), the command
_RECIPE = re.compile(r"^\t([-@+]*)\s*(.*?)\s*$")
# A recipe line that runs one of upstream's repository checks (`-python utils/check_repo.py`)
_CHECK = re.compile(r"\butils/check_[\w.-]*\.py\b")


@dataclass(frozen=True)
class Placed:
    """Where the line of one check goes in a Makefile."""

    line: str  # the recipe line without its tab (`-python utils/check_x.py`): added, already there, or to add
    text: str | None = None  # the Makefile with the line added; None when it is already there or cannot be placed
    after: str = ""  # the recipe line it follows (without its tab), "" when it opens the recipe
    present: bool = False  # the target already runs the command
    why: str = ""  # why it cannot be placed ("" when it is placed or present)

    @property
    def placed(self) -> bool:
        return self.text is not None or self.present


def recipe_line(command: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The recipe line (without its tab) that runs `command`, with make's `prefix`."""
    return f"{prefix}{command.strip()}"


def _rule_names(line: str) -> list[str]:
    """The targets a rule line names (`check-repo: deps` -> [check-repo]); [] for any other line (a recipe line, a
    variable assignment such as `dirs := a b`, a comment)."""
    if not line or line[0] in "\t#" or ":" not in line:
        return []
    head, rest = line.split(":", 1)
    if rest.startswith(("=", ":=", ":::=")) or "=" in head:
        return []
    return head.split()


def _recipe(lines: list[str], rule: int) -> list[tuple[int, int]]:
    """The recipe of the rule on line `rule`: [(first, end)] per command, line indices, `end` past its last line (a
    command continues on the next line after a backslash). Blank and comment lines among the commands are skipped; the
    recipe ends at the first other line."""
    commands: list[tuple[int, int]] = []
    index = rule + 1
    while index < len(lines):
        line = lines[index].rstrip("\r\n")
        if line.startswith("\t"):
            first = index
            while lines[index].rstrip("\r\n").endswith("\\") and index + 1 < len(lines):
                index += 1
            commands.append((first, index + 1))
        elif line.strip() and not line.lstrip().startswith("#"):
            break
        index += 1
    return commands


def place(text: str | None, make_target: str, command: str) -> Placed:
    """The Makefile `text` (None: the clone has none) with a recipe line running `command` in `make_target`: after the
    last recipe line of the target that runs a `utils/check_*.py` script, with its prefix (`-`), else after the
    target's last recipe line, with that line's prefix. Nothing to add when the target already runs `command` (with
    any prefix); `why` when there is no Makefile or it has no such target."""
    if text is None:
        return Placed(recipe_line(command), why=f"the clone has no {MAKEFILE} at its root")
    lines = text.splitlines(keepends=True)
    rule = next((i for i, line in enumerate(lines) if make_target in _rule_names(line.rstrip("\r\n"))), None)
    if rule is None:
        return Placed(recipe_line(command), why=f"its {MAKEFILE} has no `{make_target}:` target")
    commands = _recipe(lines, rule)
    wanted = command.strip()
    for first, _ in commands:
        found = _RECIPE.match(lines[first].rstrip("\r\n"))
        if found and found.group(2) == wanted:
            return Placed(lines[first].strip(), present=True)
    checks = [(first, end) for first, end in commands if _CHECK.search(lines[first])]
    if checks or commands:
        first, end = (checks or commands)[-1]
        neighbour = lines[first].rstrip("\r\n")
        found = _RECIPE.match(neighbour)
        line = recipe_line(command, found.group(1) if found else "")
        after = neighbour.strip()
    else:
        end, line, after = rule + 1, recipe_line(command, ""), ""
    newline = "\r\n" if lines[end - 1].endswith("\r\n") else "\n"
    if not lines[end - 1].endswith("\n"):
        lines[end - 1] += newline
    lines.insert(end, f"\t{line}{newline}")
    return Placed(line, text="".join(lines), after=after)


def ci_step(command: str) -> str:
    """The CI config's step (without its indentation) that runs `command`."""
    return f"- run: {command.strip()}"


def place_ci(text: str | None, command: str) -> Placed:
    """The CI config `text` (None: the clone has none) with a step running `command` after its last step that runs a
    `utils/check_*.py` script, indented as that step. Nothing to add when a step already runs `command`; `why` when
    there is no config or no such step."""
    step = ci_step(command)
    if text is None:
        return Placed(step, why=f"the clone has no {CI_CONFIG}")
    lines = text.splitlines(keepends=True)
    for line in lines:
        if line.strip() == step:
            return Placed(step, present=True)
    checks = [(i, m) for i, line in enumerate(lines) if (m := _CI_CHECK.match(line.rstrip("\r\n")))]
    if not checks:
        return Placed(step, why=f"its {CI_CONFIG} has no `- run: python utils/check_*.py` step")
    last, match = checks[-1]
    neighbour = lines[last].rstrip("\r\n")
    indent = match.group(1)
    newline = "\r\n" if lines[last].endswith("\r\n") else "\n"
    if not lines[last].endswith("\n"):
        lines[last] += newline
    lines.insert(last + 1, f"{indent}{step}{newline}")
    return Placed(step, text="".join(lines), after=neighbour.strip())
