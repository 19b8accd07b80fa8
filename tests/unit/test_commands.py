"""Helpers of the command modules that decide before any work is done: bad input as one line, nothing made."""

import argparse
import json
import os
from types import SimpleNamespace

import pytest
from seriestool import reports
from seriestool.commands import apply, checkout, export, pr
from seriestool.context import Context
from seriestool.digests import sha256_file
from seriestool.errors import SeriesError
from seriestool.git import Repo
from seriestool.manifest import Manifest, Target

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
    assert out.rstrip().endswith("branch series/fake: 1 applied, 0 already present, 1 left out (named above)")
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


NAN = "tests/trainer/test_trainer.py::TrainerLoggingTest::test_logging_inf_nan_filter"
NAN_ID = "tests.trainer.test_trainer.TrainerLoggingTest::test_logging_inf_nan_filter"
NAN_REASON = "when every window of an interval was non-finite the log shows NaN: 0.0 hides a destroyed model"


def _pr_setup(repo, tmp_path, declared):
    """A target of one patch (0001, adding a test file) that declares `declared` upstream test changes, and a
    context whose work folder has no report yet."""
    commit(repo, {"src/core.py": "A = 1\n"})
    patch = make_patch(
        repo,
        {"src/core.py": "A = 2\n", "tests/trainer/test_core.py": "def test_a():\n    assert True\n"},
        "Trainer: log NaN when every window was non-finite",
        tmp_path / "patches" / "transformers",
    )
    target = Target(
        name="transformers",
        package="transformers",
        version="1.0",
        sha256="a" * 64,
        git_url="https://github.com/huggingface/transformers.git",
        tests="tests/trainer/",
        source_dir="src",
        patches=[patch.name],
        patch_dir=patch.parent,
        reviewers=["@SunMarc"],
        upstream_tests=["tests/trainer/test_trainer.py"],
        upstream_tests_changed={patch.name: declared} if declared else {},
    )
    logged: list[str] = []
    ctx = SimpleNamespace(
        work=tmp_path / "work",
        log=logged.append,
        manifest=Manifest(path=tmp_path / "patches" / "series.toml", targets={"transformers": target}),
    )
    return ctx, target, patch


def test_pr_says_which_upstream_test_the_pull_request_must_update(repo, tmp_path):
    ctx, target, patch = _pr_setup(repo, tmp_path, [{"test": NAN, "reason": NAN_REASON}])
    lines = pr.upstream_tests_lines(ctx, target, patch.name)
    assert lines == [
        "It changes a behaviour that an existing upstream test asserts ([targets.transformers.upstream_tests_changed]",
        "in series.toml). The pull request must update that test: change it in the pull request's branch and say in "
        "the",
        "description why the old assertion no longer holds:",
        f"- {NAN}: {NAN_REASON}",
        "Check it with `python3 scripts/series.py verify --target transformers --upstream-tests SPEC`: the test must",
        "pass on the base and fail with the series.",
    ]
    body = pr.render(ctx, target, patch.name)
    notes = body[body.index("<!--") : body.index("-->")]
    section = notes[notes.index("Upstream tests the pull request must update:") :]
    assert section.splitlines()[1:5] == ["  " + line for line in lines[:4]]
    # What the last `verify --upstream-tests` found for this version of the patch.
    declared = {"patch": patch.name, "test": NAN, "id": NAN_ID, "reason": NAN_REASON, "base": "passed"}
    declared.update(series="failed", why="")
    stale = dict(declared, test=NAN + "2", series="passed", why="it passes with the series")
    report = {
        "date": "2026-12-01T15:00:00Z",
        "targets": [{"name": "transformers", "base": {"commit": "c0"}}],
        "patches": [{"name": patch.name, "target": "transformers", "sha256": sha256_file(patch), "verdict": "ok"}],
        "upstream_tests": [{"target": "transformers", "spec": "path:up", "ok": False, "declared": [declared],
                            "stale": [stale]}],
    }  # fmt: skip
    reports.last_path(ctx.work, "transformers").parent.mkdir(parents=True)
    reports.last_path(ctx.work, "transformers").write_text(json.dumps(report), encoding="utf-8")
    assert pr.upstream_tests_lines(ctx, target, patch.name)[4:] == [
        f"The last `verify --upstream-tests path:up` (2026-12-01T15:00:00Z): {NAN_ID} passed on the base, failed "
        "with the series, as declared.",
        f"The last `verify --upstream-tests path:up` (2026-12-01T15:00:00Z) found the declaration of {NAN}2 STALE (it "
        "passes with the series): fix the declaration before you submit.",
    ]
    # A report on another version of the patch says nothing about this one.
    report["patches"][0]["sha256"] = "0" * 64
    reports.last_path(ctx.work, "transformers").write_text(json.dumps(report), encoding="utf-8")
    assert pr.upstream_tests_lines(ctx, target, patch.name)[4].startswith("Check it with")


def test_pr_of_a_patch_that_changes_no_upstream_test(repo, tmp_path):
    ctx, target, patch = _pr_setup(repo, tmp_path, [])
    assert pr.upstream_tests_lines(ctx, target, patch.name) == []
    assert "Upstream tests the pull request must update" not in pr.render(ctx, target, patch.name)


@pytest.mark.parametrize(
    ("base", "phrase"),
    [
        ({"spec": "sdist", "version": "1.0", "sha256": "ab" * 32}, "the fakepkg 1.0 release"),
        ({"spec": "sdist", "version": "1.0"}, "the fakepkg 1.0 release"),  # a report from before sha256
        ({"spec": "sdist:1.1", "version": "1.1", "sha256": "cd" * 32}, "the fakepkg 1.1 release"),
        # the pin moved to the release a report judged as another one: the report's release still
        ({"spec": "sdist:1.2", "version": "1.2", "sha256": "ef" * 32}, "the fakepkg 1.2 release"),
        ({"spec": "path:/x", "commit": "c" * 40, "version": "1.3.dev0"}, f"commit {'c' * 12}"),
    ],
)
def test_pr_names_the_sdist_a_verify_judged(base, phrase):
    target = SimpleNamespace(name="fake", package="fakepkg", version="1.2", sha256="ab" * 32, releases={})
    assert pr._base_phrase(target, {"version": "1.0", "base": base}) == phrase
