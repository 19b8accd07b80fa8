"""Read a `git format-patch` file: its commit message and its per-file hunks (project-agnostic)."""

import email
import email.policy
import os
import re
from dataclasses import dataclass, field
from pathlib import Path


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_SUBJECT_PREFIX = re.compile(r"^\[PATCH[^\]]*\]\s*")


@dataclass
class Hunk:
    header: str  # the whole `@@ -a,b +c,d @@ section` line
    old_start: int
    old_count: int
    lines: list[str] = field(default_factory=list)  # body lines with their ' ', '+', '-', '\' prefixes
    complete: bool = True  # False when the file ended before the line counts of the header were reached


@dataclass
class FileDiff:
    old_path: str | None  # None for a new file
    new_path: str | None  # None for a deleted file
    header: list[str] = field(default_factory=list)  # from `diff --git` to `+++`
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str | None:
        return self.new_path or self.old_path

    @property
    def status(self) -> str:
        if self.old_path is None:
            return "A"
        return "D" if self.new_path is None else "M"

    def one_hunk_patch(self, hunk: Hunk) -> str:
        """A patch holding only this file's header and `hunk`, for checking hunks one by one."""
        return "\n".join([*self.header, hunk.header, *hunk.lines]) + "\n"


@dataclass
class PatchFile:
    subject: str
    author: str
    body: str  # the commit message after the subject, up to the `---` line
    files: list[FileDiff] = field(default_factory=list)

    def file(self, path: str) -> FileDiff | None:
        return next((f for f in self.files if path in (f.new_path, f.old_path)), None)

    def added(self, prefix: str = "") -> list[str]:
        """The paths of the files it adds below `prefix`, in order."""
        return [f.new_path for f in self.files if f.status == "A" and f.new_path and f.new_path.startswith(prefix)]

    def paths(self) -> list[str]:
        """Every path the patch reads or writes, in order, without repeats."""
        seen: list[str] = []
        for f in self.files:
            for path in (f.old_path, f.new_path):
                if path is not None and path not in seen:
                    seen.append(path)
        return seen


def _unquote(path: str) -> str:
    """Undo git's C-style quoting of a path (core.quotePath)."""
    if not (path.startswith('"') and path.endswith('"')):
        return path
    raw = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    return raw.encode("latin-1").decode("utf-8", "replace")


def _side(line: str, prefix: str) -> str | None:
    value = _unquote(line[4:].rstrip("\t"))
    if value == "/dev/null":
        return None
    return value[len(prefix) :] if value.startswith(prefix) else value


def parse_diff(lines: list[str]) -> list[FileDiff]:
    """Split the diff part of a patch into FileDiffs."""
    files: list[FileDiff] = []
    current: FileDiff | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("diff --git "):
            current = FileDiff(old_path=None, new_path=None, header=[line])
            files.append(current)
            index += 1
            sides: dict[str, str | None] = {}
            while index < len(lines) and not lines[index].startswith(("@@ ", "diff --git ")):
                head = lines[index]
                current.header.append(head)
                if head.startswith("--- "):
                    sides["old"] = _side(head, "a/")
                elif head.startswith("+++ "):
                    sides["new"] = _side(head, "b/")
                index += 1
            if sides:
                current.old_path, current.new_path = sides.get("old"), sides.get("new")
            else:  # no ---/+++ (mode change, binary): take the names from the `diff --git` line
                match = re.match(r"^diff --git a/(.+) b/(.+)$", line)
                if match:
                    current.old_path, current.new_path = match.group(1), match.group(2)
            continue
        match = _HUNK.match(line)
        if match and current is not None:
            old_count = int(match.group(2) or "1")
            new_count = int(match.group(4) or "1")
            hunk = Hunk(header=line, old_start=int(match.group(1)), old_count=old_count)
            index += 1
            while index < len(lines) and (old_count > 0 or new_count > 0):
                body = lines[index]
                tag = body[:1]
                if tag in (" ", ""):
                    old_count, new_count = old_count - 1, new_count - 1
                elif tag == "-":
                    old_count -= 1
                elif tag == "+":
                    new_count -= 1
                elif tag != "\\":
                    break
                hunk.lines.append(body)
                index += 1
            hunk.complete = old_count <= 0 and new_count <= 0
            while index < len(lines) and lines[index].startswith("\\"):
                hunk.lines.append(lines[index])
                index += 1
            current.hunks.append(hunk)
            continue
        index += 1
    return files


def problems(patch: PatchFile) -> list[str]:
    """Why a parsed patch is not whole (truncated, cut in a file header), or an empty list."""
    found: list[str] = []
    if not patch.files:
        found.append("it holds no diff")
    for diff in patch.files:
        has_old = any(line.startswith("--- ") for line in diff.header)
        has_new = any(line.startswith("+++ ") for line in diff.header)
        if has_old != has_new or (has_old and not diff.hunks):
            found.append(f"the header of {diff.path or diff.header[0]} is cut short")
        for number, hunk in enumerate(diff.hunks, start=1):
            if not hunk.complete:
                found.append(f"hunk {number} of {diff.path} ({hunk.header}) is cut short")
    return found


def read(path: str | os.PathLike[str]) -> PatchFile:
    """Parse the format-patch file `path`."""
    text = Path(path).read_text(encoding="utf-8")
    head, sep, rest = text.partition("\n\n")
    message = email.message_from_string(head + "\n\n", policy=email.policy.default)
    subject = _SUBJECT_PREFIX.sub("", " ".join(str(message.get("Subject", "")).split()))
    lines = rest.split("\n") if sep else []
    if lines and lines[-1] == "":
        lines.pop()  # the end of the last line, not an empty context line
    body: list[str] = []
    index = 0
    while index < len(lines) and lines[index] != "---" and not lines[index].startswith("diff --git "):
        body.append(lines[index])
        index += 1
    return PatchFile(
        subject=subject,
        author=str(message.get("From", "")),
        body="\n".join(body).strip("\n"),
        files=parse_diff(lines[index:]),
    )


def without_index_lines(text: str) -> str:
    """A format-patch file's text without its `index <blob>..<blob>` header lines: they name the blobs before and
    after the patch, which change whenever an earlier patch changes the same file, while the patch does not."""
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("index "))
