"""Helpers of the command modules that decide before any work is done: bad input as one line, nothing made."""

import argparse
import os

import pytest
from seriestool import reports
from seriestool.commands import apply, checkout, export
from seriestool.context import Context
from seriestool.digests import sha256_file
from seriestool.errors import SeriesError
from seriestool.git import Repo

from .conftest import commit, make_patch


def test_a_checkout_folder_that_cannot_be_made_is_one_line_not_an_errno(tmp_path):
    # before: `series: error: [Errno 20] Not a directory: ...` (or [Errno 13]/[Errno 30] in a read-only place)
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(SeriesError) as info:
        checkout.make_staging(blocker / "co")
    message = str(info.value)
    assert message.startswith(f"cannot make the checkout {blocker / 'co'}: ") and message.endswith(
        "pick another --dir"
    )
    assert "[Errno" not in message
    staging = checkout.make_staging(tmp_path / "sub" / "co")
    assert staging.parent == tmp_path / "sub" and staging.name.startswith(".co.")
    os.rmdir(staging)


def _apply_setup(tmp_path, monkeypatch):
    """A clone whose HEAD changed `core.py` its own way since the base two patches were made on (the second one
    conflicts there), a manifest listing them and a work folder."""
    for key, value in {"NAME": "T", "EMAIL": "t@example.invalid"}.items():
        monkeypatch.setenv(f"GIT_AUTHOR_{key}", value)
        monkeypatch.setenv(f"GIT_COMMITTER_{key}", value)
    clone = Repo.init(tmp_path / "clone")
    commit(clone, {"one.py": "one = 1\n", "core.py": "def add(a, b):\n    return 0\n"}, "base")
    folder = tmp_path / "patches" / "fake"
    folder.mkdir(parents=True)
    names = ["0001-one.patch", "0002-core.patch"]
    changes = [("one", {"one.py": "one = 11\n"}), ("core", {"core.py": "def add(a, b):\n    return a + b\n"})]
    for name, (subject, files) in zip(names, changes, strict=True):
        make_patch(clone, files, subject, tmp_path / "made").rename(folder / name)
    commit(clone, {"core.py": "def add(a, b):\n    return sum((a, b))\n"}, "upstream fixed add its own way")
    (tmp_path / "patches" / "series.toml").write_text(
        '[targets.fake]\npackage = "fakepkg"\nversion = "1.0"\nsha256 = "' + "a" * 64 + '"\n'
        'git_url = "https://example.invalid/fakepkg.git"\ntests = "tests/"\n'
        "patches = [" + ", ".join(f'"{name}"' for name in names) + "]\n",
        encoding="utf-8",
    )
    args = argparse.Namespace(
        repo=str(clone.path),
        branch=None,
        target=None,
        work=str(tmp_path / "work"),
        manifest=str(tmp_path / "patches" / "series.toml"),
    )
    return clone, folder, names, args


def test_apply_leaves_out_a_patch_the_last_verify_on_that_head_found_fixed_differently(tmp_path, monkeypatch, capsys):
    clone, folder, names, args = _apply_setup(tmp_path, monkeypatch)
    head = clone.head()
    with pytest.raises(SeriesError, match="patch 0002-core.patch does not apply"):
        apply.run(args, Context(args))
    assert clone.head() == head and not clone.branch_exists("series/fake")
    # `verify --base path:CLONE` found 0002 fixed upstream differently (its tests pass on the clone without it).
    patches = [
        {
            "name": name,
            "target": "fake",
            "verdict": verdict,
            "base_status": status,
            "sha256": sha256_file(folder / name),
        }
        for name, verdict, status in zip(names, ["ok", "upstream"], ["clean", "fixed-differently"], strict=True)
    ]
    reports.save_last(
        args.work,
        {
            "schema_version": 2,
            "date": "2026-01-01T00:00:00Z",
            "targets": [{"name": "fake", "base": {"commit": head}}],
            "patches": patches,
            "upstream_tests": [],
        },
    )
    capsys.readouterr()
    # before: the same `does not apply` as without the report (checkout and branches left 0002 out);
    # after: 0002 is left out, and named.
    assert apply.run(args, Context(args)) == 0
    out = capsys.readouterr().out
    assert "0002-core.patch  left out: fixed upstream differently, as the verify of 2026-01-01T00:00:00Z found" in out
    assert out.rstrip().endswith(
        "branch series/fake: 1 applied, 0 already present, 1 left out (fixed upstream differently)"
    )
    assert clone.out("log", "--format=%s %P", "-1", "series/fake") == f"one {head}"


def test_checkout_replace_refuses_to_throw_away_work_that_was_never_exported(tmp_path, monkeypatch, capsys):
    clone, folder, names, apply_args = _apply_setup(tmp_path, monkeypatch)
    clone.reset_hard(f"{clone.head()}^")  # the base the patches were made on
    dest = tmp_path / "co"
    args = argparse.Namespace(
        target=None,
        dir=str(dest),
        base=f"path:{clone.path}",
        replace=False,
        stop_at_conflict=False,
        discard_unexported=False,
        work=apply_args.work,
        manifest=apply_args.manifest,
    )
    assert checkout.run(args, Context(args)) == 0
    args.replace = True
    assert checkout.run(args, Context(args)) == 0  # nothing of the user's in it: replaced
    co = Repo(dest, isolated=True)
    commit(co, {"one.py": "one = 12\n"}, "mine, not exported")
    mine = co.head()
    # before: the checkout was rebuilt and `mine` was gone without a word; after: one line, nothing changed.
    with pytest.raises(SeriesError) as info:
        checkout.run(args, Context(args))
    message = str(info.value)
    assert f"(commit {mine[:12]} mine, not exported)" in message and "--discard-unexported" in message
    assert "\n" not in message and co.head() == mine
    # Exported (the same bytes in patches/fake/): nothing is lost, the checkout is replaced.
    (path,) = co.format_patch(f"{mine}^..{mine}", tmp_path / "export")
    path.rename(folder / "0003-mine.patch")
    assert checkout.unexported_work(dest, folder) == []
    (folder / "0003-mine.patch").unlink()
    # Uncommitted changes are work too; --discard-unexported throws it all away, and says so.
    (dest / "one.py").write_text("one = 13\n", encoding="utf-8")
    assert [line.split(" ", 2)[0] for line in checkout.unexported_work(dest, folder)] == ["commit", "uncommitted"]
    args.discard_unexported = True
    capsys.readouterr()
    assert checkout.run(args, Context(args)) == 0
    assert "--discard-unexported: throwing away commit" in capsys.readouterr().err
    assert Repo(dest, isolated=True).rev(mine) is None


def test_export_counts_the_patches_whose_index_lines_alone_changed(tmp_path, capsys):
    lines = [f"line{number} = {number}\n" for number in range(1, 31)]
    co = Repo.init(tmp_path / "co")
    co.run("tag", "series/base", commit(co, {"core.py": "".join(lines)}, "base"))

    def series(first):
        co.reset_hard("series/base")
        now = list(lines)
        for number, text in [(1, first), (12, "twelve = 12\n"), (24, "twenty_four = 24\n")]:
            now[number - 1] = text
            commit(co, {"core.py": "".join(now)}, f"change line {number}")

    series("one = 1\n")
    patches = tmp_path / "patches"
    (patches / "fake").mkdir(parents=True)
    (patches / "series.toml").write_text(
        '[targets.fake]\npackage = "fakepkg"\nversion = "1.0"\nsha256 = "' + "a" * 64 + '"\n'
        'git_url = "https://example.invalid/fakepkg.git"\ntests = "tests/"\npatches = []\n',
        encoding="utf-8",
    )
    args = argparse.Namespace(
        target=None, dir=str(co.path), work=str(tmp_path / "work"), manifest=str(patches / "series.toml")
    )
    assert export.run(args, Context(args)) == 0
    tracked = Repo.init(patches)
    tracked.commit_all("exported", date="2001-01-01T00:00:00+0000")
    capsys.readouterr()
    series("one = 'one'\n")  # a one-line edit of 0001; 0002 and 0003 apply to other blobs of core.py now
    assert export.run(args, Context(args)) == 0
    # before: "3 written, 0 unchanged": 3 files rewritten, two of them for their `index` lines alone, unexplained;
    # after: the output says which, and the diff it names shows exactly the edit.
    out = capsys.readouterr().out
    assert ": 3 written (2 of them only in their `index` lines: 0002, 0003 apply to blobs an earlier patch" in out
    shown = tracked.out("diff", "-I", "^index ")
    assert [line for line in shown.splitlines() if line.startswith("diff --git")] == [
        "diff --git a/fake/0001-change-line-1.patch b/fake/0001-change-line-1.patch"
    ]
    assert len(tracked.out("diff", "--name-only").split()) == 3
