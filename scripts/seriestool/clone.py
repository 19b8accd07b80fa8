"""A user's clone the tool changes (`apply`, `branches`): checked before anything is touched."""

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


def committer_identity(repo: Repo) -> dict[str, str]:
    """{GIT_COMMITTER_NAME, GIT_COMMITTER_EMAIL} of the clone's user, or bad input when git has none."""
    proc = repo.run("var", "GIT_COMMITTER_IDENT", check=False)
    ident = proc.stdout.strip()
    if proc.returncode != 0 or "<" not in ident:
        raise SeriesError(f"git has no committer identity in {repo.path}; set user.name and user.email")
    name, _, rest = ident.partition("<")
    return {"GIT_COMMITTER_NAME": name.strip(), "GIT_COMMITTER_EMAIL": rest.split(">", 1)[0]}


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
