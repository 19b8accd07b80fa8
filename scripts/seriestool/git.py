"""Project-agnostic helpers around the git command line.

Nothing here knows about targets, manifests or tests: it runs git with settings that make its
output independent of the user's configuration and wraps the few plumbing steps a patch-series
tool needs (am, format-patch, apply --check, status).
"""

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


StrPath = str | os.PathLike[str]


MIN_GIT = (2, 32)  # GIT_CONFIG_GLOBAL appeared in 2.32

# `-c` overrides for every command: user or repository config must not change what a patch looks
# like or how one is applied.
NEUTRAL_CONFIG = {
    "core.quotePath": "true",
    "core.abbrev": "12",
    "color.ui": "false",
    "diff.noprefix": "false",
    "diff.mnemonicPrefix": "false",
    "diff.srcPrefix": "a/",
    "diff.dstPrefix": "b/",
    "diff.renames": "false",
    "diff.algorithm": "histogram",
    "diff.indentHeuristic": "true",
    "diff.context": "3",
    "diff.interHunkContext": "0",
    "diff.suppressBlankEmpty": "false",
    "diff.relative": "false",
    "diff.submodule": "short",
    "diff.orderFile": os.devnull,
    "format.numbered": "false",
    "format.thread": "false",
    "format.suffix": ".patch",
    "format.subjectPrefix": "PATCH",
    "format.coverLetter": "false",
    "format.signOff": "false",
    "format.forceInBodyFrom": "false",
    "format.encodeEmailHeaders": "true",
    "format.filenameMaxLength": "64",
    "format.noprefix": "false",
    "format.mboxrd": "false",
    "format.useAutoBase": "false",
    "format.notes": "false",
    "i18n.commitEncoding": "UTF-8",
    "i18n.logOutputEncoding": "UTF-8",
    "log.showSignature": "false",
    "am.threeWay": "false",
    "am.keepcr": "false",
    "am.messageid": "false",
    "mailinfo.scissors": "false",
    "apply.whitespace": "nowarn",
    "advice.detachedHead": "false",
    "init.defaultBranch": "main",
    "gc.auto": "0",
    "maintenance.auto": "false",
}

# For repositories the tool owns: ignore global and system config and hooks entirely, commit as a
# fixed identity and never sign.
ISOLATED_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "series",
    "GIT_AUTHOR_EMAIL": "series@localhost",
    "GIT_COMMITTER_NAME": "series",
    "GIT_COMMITTER_EMAIL": "series@localhost",
    "GIT_TERMINAL_PROMPT": "0",
}
ISOLATED_CONFIG = {
    "core.hooksPath": os.devnull,
    "core.autocrlf": "false",
    "core.safecrlf": "false",
    "commit.gpgSign": "false",
    "tag.gpgSign": "false",
}

# Stable `git format-patch` arguments: byte-identical output for an unchanged commit.
FORMAT_PATCH_ARGS = [
    "--zero-commit",
    "--no-signature",
    "--full-index",
    "--diff-algorithm=histogram",
    "--no-renames",
    "--no-numbered",
    "--no-thread",
    "--no-cover-letter",
    "--no-to",
    "--no-cc",
    "--no-add-header",
    "--no-attach",
    "--no-from",
    "--no-base",
    "--no-notes",
    "--no-color",
    "--stat=80",
    "--stat-graph-width=40",
    "--start-number=1",
    "--encode-email-headers",
    # whole subjects in file names (the default cuts them at 64 characters)
    "--filename-max-length=100",
]


class GitError(Exception):
    """A git command failed."""

    def __init__(self, args: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        self.args_ = list(args)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        detail = message_of(stderr or stdout or "") or "no output"
        super().__init__(f"git {' '.join(self.args_[:3])} failed (exit {returncode}): {detail}")


_PREFIXES = ("fatal: ", "error: ", "warning: ")


def message_of(output: str, limit: int = 600) -> str:
    """git's whole message on one line: its `fatal:`/`error:` lines and the sentences that continue them, without
    hints, joined with "; " (the last line alone is often only the end of a sentence)."""
    items: list[str] = []
    continued = False
    for raw in output.splitlines():
        line = raw.strip()
        if not line:
            continued = False
            continue
        if line.startswith("hint:"):
            continue
        if line.startswith(_PREFIXES):
            items.append(line.split(": ", 1)[1].rstrip("."))
            continued = False
        elif continued and items:
            items[-1] += " " + line.rstrip(".")
        else:
            items.append(line.rstrip("."))
            continued = True
    text = "; ".join(dict.fromkeys(item for item in items if item))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def git_version() -> tuple[int, ...] | None:
    """Return git's version as a tuple of ints, or None when git is not on PATH."""
    exe = shutil.which("git")
    if exe is None:
        return None
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False).stdout
    parts: list[int] = []
    for piece in out.split()[-1].split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


@dataclass
class Change:
    """One path changed by a commit (`git diff --name-status`)."""

    status: str  # A, M, D, T (renames are disabled)
    path: str


class Repo:
    """A git work tree. `isolated=True` is for repositories the tool creates and owns."""

    def __init__(self, path: StrPath, *, isolated: bool = False, env: Mapping[str, str] | None = None) -> None:
        self.path = Path(path)
        self.isolated = isolated
        self.extra_env = dict(env or {})  # for every command, e.g. the committer to commit as

    # -- running -------------------------------------------------------------------------------

    def _command(self, args: Iterable[str]) -> list[str]:
        config = dict(NEUTRAL_CONFIG)
        if self.isolated:
            config.update(ISOLATED_CONFIG)
        cmd = ["git"]
        for key, value in config.items():
            cmd += ["-c", f"{key}={value}"]
        return cmd + list(args)

    def _env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
            env.pop(key, None)
        env["LC_ALL"] = "C"
        env["GIT_TERMINAL_PROMPT"] = "0"
        if self.isolated:
            env.update(ISOLATED_ENV)
        env.update(self.extra_env)
        if extra:
            env.update(extra)
        return env

    def run(
        self, *args: str, check: bool = True, env: Mapping[str, str] | None = None, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            self._command(args),
            cwd=self.path,
            env=self._env(env),
            input=input,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            stdin=None if input is not None else subprocess.DEVNULL,
            check=False,
        )
        if check and proc.returncode != 0:
            raise GitError(args, proc.returncode, proc.stdout, proc.stderr)
        return proc

    def out(self, *args: str, env: Mapping[str, str] | None = None, input: str | None = None) -> str:
        return self.run(*args, env=env, input=input).stdout.strip()

    def ok(self, *args: str, env: Mapping[str, str] | None = None, input: str | None = None) -> bool:
        return self.run(*args, check=False, env=env, input=input).returncode == 0

    # -- queries -------------------------------------------------------------------------------

    def is_work_tree(self) -> bool:
        if not self.path.is_dir():
            return False
        proc = self.run("rev-parse", "--is-inside-work-tree", check=False)
        return proc.returncode == 0 and proc.stdout.strip() == "true"

    def is_bare(self) -> bool:
        """Whether the folder is a bare repository (a git directory without a work tree)."""
        if not self.path.is_dir():
            return False
        proc = self.run("rev-parse", "--is-bare-repository", check=False)
        return proc.returncode == 0 and proc.stdout.strip() == "true"

    def toplevel(self) -> Path:
        return Path(self.out("rev-parse", "--show-toplevel"))

    def git_dir(self) -> Path:
        return Path(self.out("rev-parse", "--absolute-git-dir"))

    def rev(self, ref: str) -> str | None:
        """Commit id of `ref`, or None when it does not resolve."""
        proc = self.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        return proc.stdout.strip() or None

    def head(self) -> str | None:
        return self.rev("HEAD")

    def current_branch(self) -> str | None:
        """Short branch name, or None on a detached HEAD."""
        proc = self.run("symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        return proc.stdout.strip() or None

    def branch_exists(self, name: str) -> bool:
        return self.ok("show-ref", "--verify", "--quiet", f"refs/heads/{name}")

    def status(self) -> list[str]:
        """`git status --porcelain` lines, untracked files included, ignored files not."""
        out = self.run("status", "--porcelain=v1", "--untracked-files=all", "--ignore-submodules=none").stdout
        return [line for line in out.splitlines() if line]

    def operation_in_progress(self) -> str | None:
        """Name of an unfinished am/rebase/merge/cherry-pick/revert, or None."""
        gd = self.git_dir()
        markers = {
            "rebase-apply": "git am or rebase",
            "rebase-merge": "rebase",
            "MERGE_HEAD": "merge",
            "CHERRY_PICK_HEAD": "cherry-pick",
            "REVERT_HEAD": "revert",
        }
        for name, what in markers.items():
            if (gd / name).exists():
                return what
        return None

    def config(self, key: str) -> str:
        """A config value, or "" when unset."""
        return self.run("config", "--get", key, check=False).stdout.strip()

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.ok("merge-base", "--is-ancestor", older, newer)

    def commits(self, rev_range: str) -> list[str]:
        """Commit ids in `rev_range`, oldest first."""
        out = self.out("rev-list", "--reverse", rev_range)
        return out.split() if out else []

    def parents(self, commit: str) -> list[str]:
        return self.out("rev-list", "--parents", "-n", "1", commit).split()[1:]

    def changes(self, old: str, new: str) -> list[Change]:
        out = self.out("diff", "--name-status", "--no-renames", "-z", old, new)
        fields = out.split("\0") if out else []
        return [Change(fields[i], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]

    def unmerged_paths(self) -> list[str]:
        out = self.out("diff", "--name-only", "--diff-filter=U")
        return sorted(set(out.splitlines())) if out else []

    # -- changes -------------------------------------------------------------------------------

    @classmethod
    def init(cls, path: StrPath, *, isolated: bool = True) -> "Repo":
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        repo = cls(path, isolated=isolated)
        repo.run("init", "--quiet", "--initial-branch=main")
        return repo

    def commit_all(self, message: str, *, date: str | None = None) -> str:
        """Stage every file (ignored ones too) and commit."""
        self.run("add", "--all", "--force", ".")
        env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else None
        self.run("commit", "--quiet", "--no-verify", "--allow-empty", "-m", message, env=env)
        return self.out("rev-parse", "HEAD")

    def reset_hard(self, ref: str) -> None:
        """Make HEAD, index and work tree `ref` (detached) and drop untracked files."""
        self.run("checkout", "--quiet", "--force", "--detach", ref)
        self.run("reset", "--quiet", "--hard", ref)
        self.run("clean", "-ffdq")

    def am(
        self, patch_files: Iterable[StrPath], *, three_way: bool = False, committer_date_is_author_date: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Run `git am`; returns the CompletedProcess (never raises on a failed apply)."""
        args = ["am", "--quiet", "--whitespace=nowarn", "--no-message-id", "--no-scissors"]
        args.append("--3way" if three_way else "--no-3way")
        if committer_date_is_author_date:
            args.append("--committer-date-is-author-date")
        return self.run(*args, *[str(Path(p).resolve()) for p in patch_files], check=False)

    def am_abort(self) -> None:
        self.run("am", "--abort", check=False)

    def apply_check(self, patch_file: StrPath, *, reverse: bool = False) -> bool:
        """Whether `patch_file` applies to the work tree (reverse: whether it is already applied)."""
        args = ["apply", "--check"]
        if reverse:
            args.append("--reverse")
        return self.ok(*args, str(Path(patch_file).resolve()))

    def failing_paths(self, patch_file: StrPath) -> list[str]:
        """Paths of `patch_file` that do not apply to the work tree, each checked on its own."""
        patch = str(Path(patch_file).resolve())
        proc = self.run("apply", "--numstat", patch, check=False)
        paths = [line.split("\t", 2)[2] for line in proc.stdout.splitlines() if line.count("\t") >= 2]
        return [p for p in paths if not self.ok("apply", "--check", f"--include={p}", patch)]

    def apply_check_on(self, commit: str, patch_file: StrPath, scratch_dir: StrPath) -> bool:
        """Whether `patch_file` applies to the tree of `commit`, leaving index and work tree alone."""
        index = Path(scratch_dir) / f"index-{os.getpid()}"
        try:
            env = {"GIT_INDEX_FILE": str(index)}
            self.run("read-tree", commit, env=env)
            return self.ok("apply", "--check", "--cached", str(Path(patch_file).resolve()), env=env)
        finally:
            index.unlink(missing_ok=True)

    def format_patch(self, rev_range: str, out_dir: StrPath) -> list[Path]:
        """Write one stable patch per commit of `rev_range` into `out_dir`; return the paths."""
        out = self.out("format-patch", *FORMAT_PATCH_ARGS, "-o", str(out_dir), rev_range)
        return [Path(line) for line in out.splitlines() if line]

    def switch(self, ref: str) -> None:
        """Check out a branch name, or a commit as a detached HEAD."""
        if self.branch_exists(ref):
            self.run("checkout", "--quiet", ref)
        else:
            self.run("checkout", "--quiet", "--detach", ref)

    def delete_branch(self, name: str) -> None:
        self.run("branch", "--quiet", "-D", name)
