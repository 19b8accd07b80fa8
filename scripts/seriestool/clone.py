"""A user's clone the tool changes (`apply`, `branches`): checked before anything is touched."""

import re
from pathlib import Path

from .errors import SeriesError
from .git import Repo


def open_clean_clone(path: str | Path, command: str) -> Repo:
    """The clone at `path` (its top folder), or bad input: not a folder, not a git repository, bare, without
    commits, in the middle of an am/rebase/merge, or with uncommitted changes or untracked files."""
    path = Path(path).expanduser().resolve()
    if not path.is_dir():
        raise SeriesError(f"{path} is not a folder")
    repo = Repo(path)
    if repo.is_bare():
        raise SeriesError(f"{path} is a bare git repository (no work tree); {command} needs a clone with a work tree")
    if not repo.is_work_tree():
        raise SeriesError(f"{path} is not a git repository")
    repo = Repo(repo.toplevel())
    if repo.head() is None:
        raise SeriesError(f"{repo.path} has no commits")
    busy = repo.operation_in_progress()
    if busy:
        raise SeriesError(f"{repo.path} has an unfinished {busy}; finish or abort it first")
    dirty = repo.status()
    if dirty:
        raise SeriesError(
            f"{repo.path} has uncommitted changes or untracked files ({dirty[0][3:]}, {len(dirty)} in all); "
            "commit or stash them first"
        )
    return repo


def committer_identity(repo: Repo, fallback: tuple[str, str] | None = None) -> dict[str, str]:
    """{GIT_COMMITTER_NAME, GIT_COMMITTER_EMAIL} of the clone's user; when git has none, `fallback` (name, email),
    else bad input."""
    proc = repo.run("var", "GIT_COMMITTER_IDENT", check=False)
    ident = proc.stdout.strip()
    if proc.returncode != 0 or "<" not in ident:
        if fallback is not None:
            return {"GIT_COMMITTER_NAME": fallback[0], "GIT_COMMITTER_EMAIL": fallback[1]}
        raise SeriesError(f"git has no committer identity in {repo.path}; set user.name and user.email")
    name, _, rest = ident.partition("<")
    return {"GIT_COMMITTER_NAME": name.strip(), "GIT_COMMITTER_EMAIL": rest.split(">", 1)[0]}


# `Name <email>`, as git writes an identity
IDENTITY = re.compile(r"^\s*([^<>\s](?:[^<>]*[^<>\s])?)\s*<([^<>\s]+)>\s*$")


def author_identity(repo: Repo, given: str | None) -> tuple[str, str]:
    """(name, email) of the submitter, whom the commits of `branches` are authored by (the patch files carry the
    series' own identity): `given` (`--author "Name <email>"`), else the clone's `git config user.name` and
    `user.email`; bad input when neither gives both."""
    if given is not None:
        match = IDENTITY.match(given)
        if match is None:
            raise SeriesError(f'--author {given!r} is not "Name <email>" (no branch was made or moved)')
        return match.group(1), match.group(2)
    name, email = repo.config("user.name"), repo.config("user.email")
    if not name or not email:
        unset = " and ".join(key for key, value in (("user.name", name), ("user.email", email)) if not value)
        raise SeriesError(
            f"no author for the commits: {unset} not set for {repo.path} (the patches carry the series' identity; "
            'your commits carry yours): `git config user.name "Name"` and `git config user.email you@example.com` '
            'there, or pass --author "Name <email>" (no branch was made or moved)'
        )
    return name, email


def reauthor(repo: Repo, author: tuple[str, str]) -> str:
    """Make HEAD (a commit `git am` made) authored by `author` (name, email): the same message, tree, parent and
    author date, and a committer date equal to the author date, as `placement.place` commits. So the same patch on
    the same base, by the same submitter and committer, is the same commit on every run. Returns the new HEAD."""
    date = repo.out("log", "-1", "--format=%ad", "--date=raw", "HEAD")
    repo.run(
        "commit",
        "--amend",
        "--quiet",
        "--no-edit",
        "--no-verify",
        "--allow-empty",
        "--cleanup=verbatim",
        f"--author={author[0]} <{author[1]}>",
        env={"GIT_COMMITTER_DATE": date},
    )
    return repo.out("rev-parse", "HEAD")


def blocking_branch(repo: Repo, branch: str) -> str | None:
    """The existing branch that keeps `branch` from being made, or None. git keeps branch names as paths, so
    `trainer-series` and `trainer-series/x` cannot both exist: without this check git fails late with `cannot
    lock ref ... exists`."""
    parts = branch.split("/")
    for end in range(1, len(parts)):
        above = "/".join(parts[:end])
        if repo.branch_exists(above):
            return above
    below = repo.out("for-each-ref", "--count=1", "--format=%(refname:short)", f"refs/heads/{branch}/")
    return below.strip() or None
