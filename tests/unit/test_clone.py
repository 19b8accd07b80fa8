"""clone.py: a user's clone is checked before the tool changes it, and its committer is known."""

import pytest
from seriestool import clone
from seriestool.errors import SeriesError
from seriestool.git import Repo

from .conftest import commit


def _refused(path):
    with pytest.raises(SeriesError) as info:
        clone.open_clean_clone(path, "apply")
    return str(info.value)


def test_a_clean_clone_is_opened_at_its_top(repo):
    commit(repo, {"a.py": "A = 1\n", "sub/b.py": "B = 1\n"})
    opened = clone.open_clean_clone(repo.path / "sub", "apply")
    assert opened.path == repo.path.resolve() and opened.head() == repo.head()
    assert opened.isolated is False  # the user's own config counts


def test_what_is_refused(tmp_path, repo):
    assert _refused(tmp_path / "missing") == f"{tmp_path / 'missing'} is not a folder"
    (tmp_path / "file").write_text("", encoding="utf-8")
    assert _refused(tmp_path / "file") == f"{tmp_path / 'file'} is not a folder"
    (tmp_path / "plain").mkdir()
    assert _refused(tmp_path / "plain") == f"{tmp_path / 'plain'} is not a git repository"
    Repo(tmp_path).run("init", "--quiet", "--bare", "bare.git")
    assert _refused(tmp_path / "bare.git") == (
        f"{tmp_path / 'bare.git'} is a bare git repository (no work tree); apply needs a clone with a work tree"
    )
    assert _refused(repo.path) == f"{repo.path} has no commits"
    commit(repo, {"a.py": "A = 1\n"})
    (repo.path / "a.py").write_text("A = 2\n", encoding="utf-8")
    (repo.path / "new.py").write_text("", encoding="utf-8")
    assert _refused(repo.path) == (
        f"{repo.path} has uncommitted changes or untracked files (a.py, 2 in all); commit or stash them first"
    )
    repo.reset_hard("HEAD")
    (repo.git_dir() / "MERGE_HEAD").write_text(repo.head() + "\n", encoding="utf-8")
    assert _refused(repo.path) == f"{repo.path} has an unfinished merge; finish or abort it first"


def test_the_committer_identity(repo, monkeypatch):
    commit(repo, {"a.py": "A = 1\n"})
    user = Repo(repo.path, env={"GIT_COMMITTER_NAME": " Ada Lovelace ", "GIT_COMMITTER_EMAIL": "ada@example.com"})
    assert clone.committer_identity(user) == {
        "GIT_COMMITTER_NAME": "Ada Lovelace",
        "GIT_COMMITTER_EMAIL": "ada@example.com",
    }
    nobody = Repo(repo.path, env={"GIT_COMMITTER_NAME": "", "GIT_COMMITTER_EMAIL": "", "GIT_CONFIG_NOSYSTEM": "1"})
    monkeypatch.setenv("HOME", str(repo.path.parent / "home"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.delenv("EMAIL", raising=False)
    with pytest.raises(SeriesError) as info:
        clone.committer_identity(nobody)
    assert str(info.value) == f"git has no committer identity in {repo.path}; set user.name and user.email"


def test_the_author_is_given_or_the_clones_user(repo, monkeypatch):
    commit(repo, {"a.py": "A = 1\n"})
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    user = Repo(repo.path)  # the user's own config counts (not isolated)
    assert clone.author_identity(user, " Ada  Lovelace <ada@example.com> ") == ("Ada  Lovelace", "ada@example.com")
    for bad in ("Ada", "<ada@example.com>", "Ada <>", "Ada <a b@x>", "Ada <ada@example.com> x"):
        with pytest.raises(SeriesError) as info:
            clone.author_identity(user, bad)
        assert str(info.value) == f'--author {bad!r} is not "Name <email>" (no branch was made or moved)'
    with pytest.raises(SeriesError) as info:
        clone.author_identity(user, None)
    assert str(info.value).startswith(f"no author for the commits: user.name and user.email not set for {repo.path}")
    user.run("config", "user.name", "Grace Hopper")
    with pytest.raises(SeriesError, match="^no author for the commits: user.email not set"):
        clone.author_identity(user, None)
    user.run("config", "user.email", "grace@example.com")
    assert clone.author_identity(user, None) == ("Grace Hopper", "grace@example.com")
    assert clone.author_identity(user, "Ada <ada@example.com>") == ("Ada", "ada@example.com")  # --author first


def test_without_a_committer_the_given_author_commits(repo, monkeypatch):
    commit(repo, {"a.py": "A = 1\n"})
    nobody = Repo(repo.path, env={"GIT_COMMITTER_NAME": "", "GIT_COMMITTER_EMAIL": "", "GIT_CONFIG_NOSYSTEM": "1"})
    monkeypatch.setenv("HOME", str(repo.path.parent / "home"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.delenv("EMAIL", raising=False)
    assert clone.committer_identity(nobody, fallback=("Ada", "ada@example.com")) == {
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@example.com",
    }


def test_reauthor_keeps_all_but_the_author_and_is_the_same_commit_each_time(repo):
    commit(repo, {"a.py": "A = 1\n"})
    tip = commit(repo, {"a.py": "A = 2\n"}, "core: two\n\n\n  body  \n\n")  # whitespace kept as git am made it
    message = repo.out("log", "-1", "--format=%B", tip)
    first = clone.reauthor(repo, ("Ada Lovelace", "ada@example.com"))
    assert repo.out("log", "-1", "--format=%an <%ae>|%ad|%cd|%T|%P", "--date=raw", first) == (
        f"Ada Lovelace <ada@example.com>|978307200 +0000|978307200 +0000|{repo.out('rev-parse', tip + '^{tree}')}|"
        f"{repo.out('rev-parse', tip + '^')}"
    )
    assert repo.out("log", "-1", "--format=%B", first) == message
    repo.reset_hard(tip)
    assert clone.reauthor(repo, ("Ada Lovelace", "ada@example.com")) == first
