"""What `pr` reads from a patch's diff for the submission material: the test classes of the files it adds, and the
fields and properties it adds to the class a checkpoint saves ([targets.<target>.saved_state]).

Read from the added and context lines of the diff, by indentation (a Python class body is indented by four
spaces), without importing or running the target's code.
"""

import re
from dataclasses import dataclass

from . import patchfile
from .manifest import Target
from .patchfile import FileDiff


TOP = re.compile(r"^(class|def|async def)\s+(\w+)")
CLASS = re.compile(r"^class\s+(\w+)")
TEST_METHOD = re.compile(r"^\s+def (test\w*)\(")
FIELD = re.compile(r"^    (\w+)\s*:\s*[^=]+?(?:=.*)?$")
PROPERTY = re.compile(r"^    @property\s*$")
METHOD = re.compile(r"^    def (\w+)\(")
SELF_CALL = re.compile(r"\bself\.(\w+)\(")


def test_classes(diff: FileDiff) -> list[str]:
    """The classes of an added test file that hold a test method (`def test...`), in order: helpers (a
    callback, a dataset) go with them."""
    found: list[str] = []
    current: str | None = None
    for hunk in diff.hunks:
        for line in hunk.lines:
            if not line.startswith("+"):
                continue
            text = line[1:]
            match = CLASS.match(text)
            if match:
                current = match.group(1)
            elif TOP.match(text):
                current = None
            elif current and TEST_METHOD.match(text) and current not in found:
                found.append(current)
    return found


@dataclass
class Member:
    """A field or property a patch adds to the saved class."""

    kind: str  # "field" or "property"
    name: str
    text: str  # its added lines, from its definition to the next member of the class
    kept_in: bool = False  # a property whose value is kept in the saved_state's `kept_in` attribute
    saved_when_set: bool = False  # a field saved only when it is set


def _class_lines(diff: FileDiff, cls: str) -> list[list[str]]:
    """The runs of lines (with their +, - or space prefixes, removed lines left out) of each hunk that lie inside
    class `cls`: the hunk's section header names the class the hunk starts in (git's default function-name
    heading: the last unindented line before it)."""
    runs: list[list[str]] = []
    for hunk in diff.hunks:
        section = hunk.header.split("@@", 2)[-1].strip()
        header = CLASS.match(section)
        inside = bool(header) and header is not None and header.group(1) == cls
        run: list[str] = []
        for line in hunk.lines:
            if line.startswith("-") or line.startswith("\\"):
                continue
            text = line[1:]
            top = TOP.match(text)
            if top:
                if run:
                    runs.append(run)
                    run = []
                inside = top.group(1) == "class" and top.group(2) == cls
                continue
            if inside:
                run.append(line)
        if run:
            runs.append(run)
    return runs


def _members(runs: list[list[str]], *, added_only: bool) -> list[Member]:
    """The fields, properties and methods defined in the runs (only by added lines when `added_only`)."""
    members: list[Member] = []
    current: Member | None = None
    for run in runs:
        pending_property = False
        for line in run:
            added, text = line.startswith("+"), line[1:]
            if text.startswith("    ") and not text.startswith("     ") and text.strip():
                # a line of the class body itself: a new member, a decorator, or the end of the last one
                current = None
                if added_only and not added:
                    pending_property = False
                    continue
                if PROPERTY.match(text):
                    pending_property = True
                    continue
                method = METHOD.match(text)
                if method:
                    kind = "property" if pending_property else "method"
                    current = Member(kind, method.group(1), text + "\n")
                    if not any(m.kind == kind and m.name == current.name for m in members):
                        members.append(current)
                    else:
                        current = next(m for m in members if m.kind == kind and m.name == current.name)
                elif text.strip().startswith("@"):
                    continue  # another decorator (a property's setter is a method of the same name)
                else:
                    field = FIELD.match(text)
                    if field and not text.strip().startswith(("#", '"', "'")):
                        current = Member("field", field.group(1), text + "\n")
                        members.append(current)
                pending_property = False
            elif current is not None and (added or not added_only):
                current.text += text + "\n"
    return members


def state_additions(target: Target, name: str) -> list[Member] | None:
    """The fields and properties patch `name` adds to the saved class ([targets.<target>.saved_state]); None when
    the target declares no such class. A property counts as kept in `kept_in` when its code mentions it, or calls a
    method of the class (added by this patch or an earlier one) that does."""
    saved = target.saved_state
    if not saved:
        return None
    path, cls = saved["file"], saved["class"]
    methods: dict[str, str] = {}
    ours: list[Member] = []
    for patch in target.patches[: target.patches.index(name) + 1]:
        diff = patchfile.read(target.patch_path(patch)).file(path)
        if diff is None:
            continue
        runs = _class_lines(diff, cls)
        for member in _members(runs, added_only=True):
            if member.kind != "field":
                methods[member.name] = methods.get(member.name, "") + member.text
        if patch == name:
            ours = [m for m in _members(runs, added_only=True) if m.kind in ("field", "property")]
    kept_in = saved.get("kept_in")
    marker = saved.get("saved_when_set")
    for member in ours:
        if member.kind == "field":
            member.saved_when_set = marker is not None and marker != "" and marker in member.text
        elif kept_in:
            code = member.text + methods.get(member.name, "")
            called = SELF_CALL.findall(code)
            member.kept_in = kept_in in code or any(kept_in in methods.get(call, "") for call in called)
    return ours
