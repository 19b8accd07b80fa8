"""placement.py: where a patch stands on a base (every base status), on small git repositories made here, and how
`Placing` judges a patch that does not go in, with a stub for the red pytest run."""

from types import SimpleNamespace

import pytest
from seriestool import placement, preimages
from seriestool.git import GitError, Repo
from seriestool.manifest import Target
from seriestool.placement import Conflict, Placing
from seriestool.results import PatchResult, PytestRun, is_test_file
from seriestool.statuses import BaseStatus, RunStatus, Verdict

from .conftest import commit, make_patch


LINES = [f"line {number}\n" for number in range(1, 21)]
BASE = {"src/core.py": "".join(LINES), "src/other.py": "x = 1\n", "README.md": "readme\n"}
DATE = "2001-01-01T00:00:00+0000"


def edit(number, text, lines=None):
    """src/core.py with line `number` replaced."""
    lines = list(lines or LINES)
    lines[number - 1] = text
    return "".join(lines)


# name: (subject, files); each made on the bare base (0002 on top of 0001)
PATCHES = {
    "0001": ("core: line 3", {"src/core.py": edit(3, "three\n"), "tests/test_three.py": "def test_3():\n    pass\n"}),
    "0002": ("core: line 3 again", {"src/core.py": edit(3, "THREE\n", edit(3, "three\n").splitlines(True))}),
    "0003": ("core: line 10", {"src/core.py": edit(10, "ten\n"), "tests/test_ten.py": "def test_10():\n    pass\n"}),
    "0004": ("other: x = 2", {"src/other.py": "x = 2\n", "tests/data/test_x.txt": "not a test\n"}),
    "0005": ("tests: add a helper", {"tests/helper.py": "H = 1\n"}),
}


@pytest.fixture(scope="module")
def patches(tmp_path_factory):
    """The patch files, named 0001-....patch and so on."""
    root = tmp_path_factory.mktemp("series")
    dev = Repo.init(root / "dev")
    base = commit(dev, BASE, "base")
    out = root / "patches"
    found = {}
    for number, (subject, files) in PATCHES.items():
        if number == "0002":
            dev.reset_hard(base)
            commit(dev, PATCHES["0001"][1], "0001")
        else:
            dev.reset_hard(base)
        path = make_patch(dev, files, subject, out / number)
        found[number] = path.rename(out / f"{number}-{path.name[5:]}")
    return found


@pytest.fixture
def fresh(tmp_path):
    """A repository holding the base, and its commit."""
    repo = Repo.init(tmp_path / "repo")
    return repo, commit(repo, BASE, "base")


def _tree(repo):
    return {path: (repo.path / path).read_text(encoding="utf-8") for path in repo.out("ls-files").splitlines()}


def _dates(repo):
    """The author and committer dates of HEAD: the same, so that the same patch gives the same commit."""
    author, committer = repo.out("log", "-1", "--format=%ad|%cd", "--date=raw").split("|")
    return author, committer


def _untouched(repo, head):
    assert repo.head() == head and repo.status() == [] and repo.operation_in_progress() is None


def test_clean(fresh, patches):
    repo, base = fresh
    calls = []
    assert placement.place(repo, patches["0003"], preimages=lambda: calls.append(1)).status == BaseStatus.CLEAN
    assert repo.parents(repo.head()) == [base] and repo.status() == [] and calls == []
    assert _tree(repo)["src/core.py"] == edit(10, "ten\n")
    author, committer = _dates(repo)
    assert author == committer == "978307200 +0000"


def test_three_way(fresh, patches):
    repo, base = fresh
    moved = commit(repo, {"src/core.py": edit(8, "eight\n")}, "upstream moved line 8")
    calls = []
    result = placement.place(repo, patches["0003"], preimages=lambda: calls.append(1))
    assert (result.status, result.conflicts) == (BaseStatus.THREE_WAY, [])
    assert calls == [1] and repo.parents(repo.head()) == [moved]
    author, committer = _dates(repo)
    assert author == committer == "978307200 +0000"
    assert _tree(repo)["src/core.py"] == edit(10, "ten\n", edit(8, "eight\n").splitlines(True))


def test_conflict(fresh, patches):
    repo, _ = fresh
    moved = commit(repo, {"src/core.py": edit(10, "TEN\n")}, "upstream changed line 10")
    result = placement.place(repo, patches["0003"])
    assert result.status == BaseStatus.CONFLICT
    assert result.conflicts == [
        Conflict(
            file="src/core.py",
            reason="content differs",
            hunks=[{"index": 1, "of": 1, "header": "@@ -7,7 +7,7 @@ line 6"}],
            regions=[[10, 10]],
        )
    ]
    _untouched(repo, moved)


def test_already_upstream(fresh, patches):
    repo, _ = fresh
    head = commit(repo, PATCHES["0003"][1], "upstream took it")
    assert placement.place(repo, patches["0003"]) == placement.Placement(BaseStatus.ALREADY_UPSTREAM)
    _untouched(repo, head)


def test_a_file_missing_in_the_base(fresh, patches):
    repo, _ = fresh
    head = commit(repo, {"src/other.py": None}, "upstream removed other.py")
    result = placement.place(repo, patches["0004"])
    assert result.status == BaseStatus.CONFLICT
    assert result.conflicts == [Conflict(file="src/other.py", reason="missing in the base")]
    _untouched(repo, head)


def test_a_new_file_that_already_exists_in_the_base(fresh, patches):
    repo, _ = fresh
    head = commit(repo, {"tests/helper.py": "H = 2\n"}, "upstream has its own helper")
    result = placement.place(repo, patches["0005"])
    assert result.status == BaseStatus.CONFLICT
    assert [(c.file, c.reason, c.hunks) for c in result.conflicts] == [
        ("tests/helper.py", "already exists in the base", [])
    ]
    _untouched(repo, head)


def test_landed_finds_a_stack(fresh, patches, tmp_path):
    repo, base = fresh
    series = [patches[n] for n in ("0001", "0002", "0003")]
    assert placement.landed(repo, base, series, tmp_path) == set()
    # 0002 rewrote the line 0001 added: 0001 alone no longer reverse-applies, but the stack is found.
    both = commit(repo, PATCHES["0002"][1] | {"tests/test_three.py": PATCHES["0001"][1]["tests/test_three.py"]})
    assert not repo.apply_check(patches["0001"], reverse=True)
    assert placement.landed(repo, both, series, tmp_path) == {patches["0001"], patches["0002"]}
    repo.reset_hard(base)
    only_last = commit(repo, PATCHES["0003"][1])
    assert placement.landed(repo, only_last, series, tmp_path) == {patches["0003"]}
    assert list(tmp_path.glob("index-*")) == []
    with pytest.raises(GitError, match="read-tree"):
        placement.landed(repo, "f" * 40, series, tmp_path)


def test_applies_with(fresh, patches, tmp_path):
    repo, base = fresh
    assert placement.applies_with(repo, base, patches["0002"], [patches["0001"]], tmp_path)
    assert not placement.applies_with(repo, base, patches["0002"], [], tmp_path)
    assert not placement.applies_with(repo, base, patches["0002"], [patches["0003"]], tmp_path)
    # a needed patch that does not apply
    assert not placement.applies_with(repo, base, patches["0003"], [patches["0002"]], tmp_path)
    assert list(tmp_path.glob("index-*")) == []
    with pytest.raises(GitError, match="read-tree"):
        placement.applies_with(repo, "f" * 40, patches["0002"], [], tmp_path)
    _untouched(repo, base)


def test_applies_with_goes_through_the_3_way_merge(fresh, patches, tmp_path):
    """A fork that changed a context line of 0001: plainly 0001 no longer applies, so a dependency check by `git
    apply` called 0002 (made on 0001) a hidden dependency. Through the engine of every command both go in, 0001 with a
    3-way merge (the blobs are loaded first, once)."""
    repo, _ = fresh
    fork = commit(repo, {"src/core.py": edit(5, "five\n")}, "fork: line 5")
    branch = repo.current_branch()
    assert not repo.apply_check(patches["0001"])
    loaded = []
    assert placement.applies_with(
        repo, fork, patches["0002"], [patches["0001"]], tmp_path, preimages=lambda: loaded.append(True)
    )
    assert loaded  # asked for before each 3-way merge (the loader loads once)
    assert placement.applies_with(repo, fork, patches["0001"], [], tmp_path)
    assert not placement.applies_with(repo, fork, patches["0002"], [], tmp_path)  # a true conflict on line 3
    # the work tree, HEAD and branch are as they were
    _untouched(repo, fork)
    assert repo.current_branch() == branch and list(tmp_path.glob("index-*")) == []


def test_goes_in_leaves_a_detached_head_detached(fresh, patches):
    repo, base = fresh
    repo.reset_hard(base)
    assert placement.goes_in(repo, base, [patches["0003"], patches["0001"]])
    assert not placement.goes_in(repo, base, [patches["0002"]])
    _untouched(repo, base)
    assert repo.current_branch() is None


REGIONS = {
    "none": ("a\nb\n", []),
    "merge_style": (
        "a\n<<<<<<< HEAD\nb\nc\n=======\nB\n>>>>>>> patch\nd\n<<<<<<< HEAD\ne\n=======\nE\n>>>>>>> p\n",
        [
            [2, 3],
            [5, 5],
        ],
    ),
    "diff3_style": ("a\nb\n<<<<<<< ours\nc\n||||||| base\nC\n=======\nCC\n>>>>>>> theirs\nd\n", [[3, 3]]),
    "empty_side": ("a\n<<<<<<< ours\n=======\nx\n>>>>>>> theirs\nb\n", [[2, 2]]),
    "long_theirs": (
        "<<<<<<< o\na\n=======\nx\ny\n>>>>>>> t\nb\n<<<<<<< o\nc\n=======\nz\n>>>>>>> t\n",
        [
            [1, 1],
            [3, 3],
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(REGIONS))
def test_conflict_regions(tmp_path, case):
    text, expected = REGIONS[case]
    (tmp_path / "f").write_text(text, encoding="utf-8")
    assert placement._conflict_regions(tmp_path / "f") == expected


def test_conflict_regions_of_a_missing_file(tmp_path):
    assert placement._conflict_regions(tmp_path / "missing") == []


def test_describe_a_conflict():
    hunk = {"index": 2, "of": 3, "header": "@@ -5,6 +5,7 @@"}
    assert Conflict("a.py", "missing in the base").describe() == "a.py: missing in the base"
    assert Conflict("a.py", "content differs", hunks=[hunk]).describe() == (
        "a.py: content differs; hunk 2/3 (@@ -5,6 +5,7 @@) does not apply"
    )
    many = Conflict("a.py", "content differs", hunks=[hunk, dict(hunk, index=3)], regions=[[4, 4], [9, 12]])
    assert many.describe() == (
        "a.py: content differs; hunks 2/3 (@@ -5,6 +5,7 @@), 3/3 (@@ -5,6 +5,7 @@) do not apply; "
        "3-way merge conflict at base line 4, 9-12"
    )


def test_added_files_and_putting_them_on_the_base(fresh, patches):
    repo, base = fresh
    assert placement.added_files(patches["0001"], "tests/") == ["tests/test_three.py"]
    assert placement.added_files(patches["0004"], "tests/") == ["tests/data/test_x.txt"]
    assert placement.added_files(patches["0004"], "src/") == []
    assert placement.added_files(patches["0002"], "") == []
    (repo.path / "tests").mkdir()
    (repo.path / "tests" / "test_three.py").write_text("stale\n", encoding="utf-8")
    assert placement.put_added_files(repo, patches["0001"], ["tests/test_three.py"])
    assert (repo.path / "tests" / "test_three.py").read_text(encoding="utf-8") == "def test_3():\n    pass\n"
    assert _tree(repo)["src/core.py"] == BASE["src/core.py"] and repo.head() == base
    assert not placement.put_added_files(repo, patches["0001"], ["src/core.py"])


# -- Placing: the statuses of a patch in the series, and what is done about one that does not go in -----------


class Stub:
    """The red runs `Placing` asks for: each returns the next status given."""

    def __init__(self, *statuses):
        self.statuses = list(statuses)
        self.calls = []

    def __call__(self, files, stem):
        self.calls.append((list(files), stem))
        return PytestRun(status=self.statuses.pop(0), passed=2, total=2)


def _placing(repo, patches, names, tmp_path, *statuses, notes=None, depends=None):
    target = Target(
        name="fake",
        package="fakepkg",
        version="1.0",
        sha256="0" * 64,
        git_url="",
        tests="tests/",
        source_dir="src",
        patches=[patches[n].name for n in names],
        patch_dir=patches[names[0]].parent,
        depends={patches[n].name: [patches[d].name for d in deps] for n, deps in (depends or {}).items()},
    )
    logs = []
    ctx = SimpleNamespace(downloads=tmp_path / "downloads", log=logs.append)
    stub = Stub(*statuses)
    placing = Placing(ctx, target, repo, moved=True, notes=notes, run_red=stub, is_test=is_test_file)
    return placing, stub, logs


def _result(patches, number, index):
    return PatchResult(name=patches[number].name, target="fake", index=index)


def test_placing_a_patch_that_goes_in(fresh, patches, tmp_path):
    repo, base = fresh
    placing, stub, _ = _placing(repo, patches, ["0003", "0004"], tmp_path)
    res = _result(patches, "0003", 1)
    assert placing.place(res, patches["0003"], checked=True, stem=tmp_path / "s") is True
    assert res.base_status == BaseStatus.CLEAN and res.conflicts == [] and res.conflict_files == []
    assert len(res.sha256) == 64 and res.skipped_before == [] and res.notes == [] and res.problems == []
    assert placing.left_out == [] and stub.calls == [] and repo.parents(repo.head()) == [base]


def test_placing_a_patch_the_base_holds(fresh, patches, tmp_path):
    repo, base = fresh
    placing, stub, _ = _placing(repo, patches, ["0003", "0004"], tmp_path)
    res = _result(patches, "0003", 1)
    assert placing.place(res, patches["0003"], checked=True, stem=tmp_path / "s", in_base=True) is False
    assert res.base_status == BaseStatus.ALREADY_UPSTREAM
    assert res.notes == ["already upstream (the base has the whole patch): drop it from the series"]
    assert res.problems == [] and placing.left_out == [] and stub.calls == []
    assert res.decide() == Verdict.UPSTREAM and Verdict(res.verdict).passed
    _untouched(repo, base)


# What `place` finds for 0003 on a base that changed its line 10 (test_conflict).
CONFLICT = placement.Placement(
    BaseStatus.CONFLICT,
    [
        Conflict(
            "src/core.py", "content differs", [{"index": 1, "of": 1, "header": "@@ -7,7 +7,7 @@ line 6"}], [[10, 10]]
        )
    ],
)


def _conflicting(fresh, patches, tmp_path, *statuses, checked=True, names=("0003", "0004"), monkeypatch=None):
    """0003 placed on a base that changed its line 10; with `monkeypatch`, `place`'s answer is given (faster)."""
    repo, _ = fresh
    if monkeypatch is None:
        commit(repo, {"src/core.py": edit(10, "TEN\n")}, "upstream changed line 10")
    else:
        monkeypatch.setattr(placement, "place", lambda *args, **kwargs: CONFLICT)
    placing, stub, logs = _placing(repo, patches, list(names), tmp_path, *statuses)
    res = _result(patches, "0003", 1)
    went_in = placing.place(res, patches["0003"], checked=checked, stem=tmp_path / "s")
    return res, placing, stub, went_in


WHERE = (
    "src/core.py: content differs; hunk 1/1 (@@ -7,7 +7,7 @@ line 6) does not apply; "
    "3-way merge conflict at base line 10"
)
LATER = "; left out, later patches tried without it"


def test_a_conflicting_patch_whose_tests_pass_without_it_is_fixed_differently(fresh, patches, tmp_path):
    res, placing, stub, went_in = _conflicting(fresh, patches, tmp_path, RunStatus.NOT_RED)
    assert went_in is False
    assert res.base_status == BaseStatus.FIXED_DIFFERENTLY
    assert res.test_files == ["tests/test_ten.py"]
    assert stub.calls == [(["tests/test_ten.py"], tmp_path / "s")]
    assert res.notes == [
        f"fixed upstream differently: it conflicts ({WHERE}) but its tests pass without it; "
        "drop it from the series once upstream's fix is checked"
    ]
    assert res.problems == [] and placing.left_out == [res.name]
    assert res.decide() == Verdict.UPSTREAM


NOT_FIXED = {
    RunStatus.RED: "its tests still fail without it",
    RunStatus.ERROR: "its tests are error",  # errors are not a pass: no false green
    RunStatus.IMPORT_ONLY: "its tests are import-only",
    RunStatus.SKIPPED: "its tests are skipped",
    RunStatus.TIMEOUT: "its tests are timeout",
    RunStatus.NO_TESTS: "its tests are no-tests",
    RunStatus.FAILED: "its tests are failed",
    RunStatus.GREEN: "its tests are green",
    RunStatus.FLAKY: "its tests are flaky",  # a red stage runs once; a flaky result is still not a pass
}


def test_every_run_status_is_judged():
    assert set(NOT_FIXED) | {RunStatus.NOT_RED} == set(RunStatus)


@pytest.mark.parametrize("status", sorted(NOT_FIXED))
def test_a_conflicting_patch_whose_tests_do_not_pass_without_it_fails(fresh, patches, tmp_path, status, monkeypatch):
    res, placing, stub, went_in = _conflicting(fresh, patches, tmp_path, status, monkeypatch=monkeypatch)
    assert went_in is False and res.base_status == BaseStatus.CONFLICT
    assert res.red.status == status and res.notes == []
    assert res.problems == [f"conflicts with the base: {WHERE}; {NOT_FIXED[status]}{LATER}"]
    assert res.conflict_files == ["src/core.py"] and placing.left_out == [res.name]
    assert res.decide() == Verdict.FAIL and not Verdict(res.verdict).passed


def test_the_last_patch_does_not_say_later_patches(fresh, patches, tmp_path, monkeypatch):
    res, _, _, _ = _conflicting(fresh, patches, tmp_path, RunStatus.RED, names=("0003",), monkeypatch=monkeypatch)
    assert res.problems == [f"conflicts with the base: {WHERE}; its tests still fail without it"]


def test_a_conflicting_patch_left_out_of_a_patch_run(fresh, patches, tmp_path, monkeypatch):
    res, _, stub, _ = _conflicting(fresh, patches, tmp_path, checked=False, monkeypatch=monkeypatch)
    assert stub.calls == [] and res.checked is False and res.red is None
    assert res.problems == [
        f"conflicts with the base: {WHERE}; not tested whether it is fixed upstream (--patch){LATER}"
    ]
    assert res.decide() == Verdict.FAIL


def test_a_conflicting_patch_without_tests(fresh, patches, tmp_path):
    repo, _ = fresh
    commit(repo, {"src/other.py": "x = 3\n"}, "upstream changed other.py")
    placing, stub, _ = _placing(repo, patches, ["0004", "0005"], tmp_path)
    res = _result(patches, "0004", 1)
    assert placing.place(res, patches["0004"], checked=True, stem=tmp_path / "s") is False
    assert stub.calls == [] and res.test_files == []
    assert res.problems == [
        "conflicts with the base: src/other.py: content differs; hunk 1/1 (@@ -1 +1 @@) does not apply; "
        f"3-way merge conflict at base line 1; it adds no test files under tests/{LATER}"
    ]


def test_test_files_that_cannot_be_put_on_the_base(fresh, patches, tmp_path, monkeypatch):
    monkeypatch.setattr(placement, "put_added_files", lambda repo, patch, paths: False)
    res, _, stub, _ = _conflicting(fresh, patches, tmp_path, RunStatus.NOT_RED, monkeypatch=monkeypatch)
    assert stub.calls == [] and res.base_status == BaseStatus.CONFLICT
    assert res.problems == [f"conflicts with the base: {WHERE}; its test files could not be put on the base{LATER}"]


def test_later_patches_are_placed_without_the_ones_left_out(fresh, patches, tmp_path):
    repo, _ = fresh
    commit(repo, {"src/core.py": edit(10, "TEN\n")}, "upstream changed line 10")
    placing, _, _ = _placing(repo, patches, ["0003", "0004"], tmp_path, RunStatus.RED)
    first = _result(patches, "0003", 1)
    placing.place(first, patches["0003"], checked=True, stem=tmp_path / "s")
    repo.reset_hard("HEAD")
    second = _result(patches, "0004", 2)
    assert placing.place(second, patches["0004"], checked=True, stem=tmp_path / "t") is True
    assert second.skipped_before == [first.name]
    assert second.notes == [f"checked without {first.name}, which did not go in"]


def test_the_blobs_for_a_3_way_merge_are_loaded_once(fresh, patches, tmp_path, monkeypatch):
    loads = []

    def load(repo, target, downloads, log):
        loads.append((target.name, downloads))
        return "no 3-way merges: the pinned sdist is not available"

    monkeypatch.setattr(preimages, "load_preimages", load)
    repo, _ = fresh
    commit(repo, {"src/core.py": edit(8, "eight\n", edit(6, "six\n").splitlines(True))}, "upstream moved")
    notes = []
    placing, _, logs = _placing(repo, patches, ["0001", "0003"], tmp_path, notes=notes)
    for index, number in enumerate(("0001", "0003"), start=1):
        res = _result(patches, number, index)
        assert placing.place(res, patches[number], checked=True, stem=tmp_path / number) is True
        assert res.base_status == BaseStatus.THREE_WAY
    assert loads == [("fake", tmp_path / "downloads")]
    assert logs == notes == ["no 3-way merges: the pinned sdist is not available"]


def test_the_blobs_are_not_loaded_for_a_patch_that_applies(fresh, patches, tmp_path, monkeypatch):
    monkeypatch.setattr(preimages, "load_preimages", lambda *args: pytest.fail("loaded"))
    repo, _ = fresh
    placing, _, _ = _placing(repo, patches, ["0003"], tmp_path)
    assert placing.place(_result(patches, "0003", 1), patches["0003"], checked=True, stem=tmp_path / "s")


@pytest.mark.parametrize("problem", [None, "no 3-way merges: x"])
def test_preimages_without_notes_to_add_to(fresh, patches, tmp_path, monkeypatch, problem):
    monkeypatch.setattr(preimages, "load_preimages", lambda *args: problem)
    repo, _ = fresh
    commit(repo, {"src/core.py": edit(8, "eight\n")}, "upstream moved line 8")
    placing, _, logs = _placing(repo, patches, ["0003"], tmp_path, notes=None)
    assert placing.place(_result(patches, "0003", 1), patches["0003"], checked=True, stem=tmp_path / "s")
    assert logs == ([] if problem is None else [problem])


def _red(failing):
    """A red run that fails `failing` (test ids) of three tests."""

    def run(files, stem):
        return PytestRun(status=RunStatus.RED, failed=len(failing), total=3, failing=list(failing))

    return run


@pytest.mark.parametrize(
    "release, here, fixed",
    [
        ({"t::a", "t::b"}, ["t::b"], True),  # upstream's fix passes a; b checks the patch's own warning text
        ({"t::a", "t::b"}, ["t::a", "t::b"], False),  # nothing fixed
        ({"t::a"}, ["t::a", "t::c"], False),  # a new failure is no fix
        (None, ["t::b"], False),  # no verify on the release to compare with
        (set(), ["t::b"], False),
    ],
    ids=["in-part", "not-fixed", "new-failure", "no-reference", "empty-reference"],
)
def test_a_conflict_whose_tests_pass_in_part_is_fixed_differently(
    fresh, patches, tmp_path, monkeypatch, release, here, fixed
):
    """Upstream fixed the bug its own way, with another warning text: the tests that failed on the release without
    the patch pass in part; those still failing failed there too."""
    repo, _ = fresh
    monkeypatch.setattr(placement, "place", lambda *args, **kwargs: CONFLICT)
    placing, _, _ = _placing(repo, patches, ["0003", "0004"], tmp_path)
    placing.run_red = _red(here)
    placing.on_release = lambda name: release
    res = _result(patches, "0003", 1)
    assert placing.place(res, patches["0003"], checked=True, stem=tmp_path / "s") is False
    if fixed:
        assert res.base_status == BaseStatus.FIXED_DIFFERENTLY and res.problems == []
        assert res.notes == [
            f"fixed upstream differently: it conflicts ({WHERE}), and 1 of the 2 tests that fail without it on the "
            "1.0 release pass here; the others (b) still fail: check that they assert only what the patch words its "
            "own way (a warning's text); drop it from the series once upstream's fix is checked"
        ]
        assert res.decide() == Verdict.UPSTREAM
    else:
        assert res.base_status == BaseStatus.CONFLICT and res.notes == []
        assert res.decide() == Verdict.FAIL


def _target(depends):
    names = ["0001-a.patch", "0002-b.patch", "0003-c.patch", "0004-d.patch"]
    full = {
        f"{n}-{'abcd'[int(n) - 1]}.patch": [f"{d}-{'abcd'[int(d) - 1]}.patch" for d in deps] for n, deps in depends
    }
    return Target("fake", "fakepkg", "1.0", "0" * 64, "", "tests/", "src", patches=names, depends=full)


C, X, U, F, B = "clean", "conflict", "already-upstream", "fixed-differently", "blocked"


@pytest.mark.parametrize(
    "depends, statuses, blockers",
    [
        ([("0003", ["0001"])], {"0001-a.patch": X, "0002-b.patch": C}, ["0001-a.patch"]),
        ([("0003", ["0001"])], {"0001-a.patch": C, "0002-b.patch": X}, []),  # no declared dependency on 0002
        ([("0003", ["0001"])], {"0001-a.patch": U}, []),  # its change is in the base: judged as usual
        ([("0003", ["0001"])], {"0001-a.patch": F}, []),
        ([("0003", ["0002"]), ("0002", ["0001"])], {"0001-a.patch": X, "0002-b.patch": B}, ["0001-a.patch"]),
        ([("0003", ["0002"])], {"0002-b.patch": B}, ["0002-b.patch"]),  # a partial map: the blocked one
        ([("0003", ["0001", "0002"])], {"0001-a.patch": X, "0002-b.patch": X}, ["0001-a.patch", "0002-b.patch"]),
        ([], {"0001-a.patch": X}, []),
    ],
    ids=[
        "conflict",
        "other-conflict",
        "upstream",
        "fixed-differently",
        "through-a-blocked-one",
        "partial",
        "two",
        "none",
    ],
)
def test_blocked_by(depends, statuses, blockers):
    assert placement.blocked_by(_target(depends), "0003-c.patch", statuses) == blockers


def test_blocked_text():
    assert placement.blocked_text(["0015-x.patch"], {"0015-x.patch": X}) == "blocked by 0015 (conflict)"
    assert placement.blocked_text(["0015-x.patch", "0016-y.patch"], {}) == "blocked by 0015, 0016 (conflict)"
    assert placement.blocked_text(["0016-y.patch"], {"0016-y.patch": B}) == "blocked by 0016 (blocked)"


def _place_after(placing, patches, first_status, tmp_path, in_base=False):
    """0003 (its line 10 changed upstream), then 0004, which depends on it and goes in without it textually."""
    first = _result(patches, "0003", 1)
    placing.place(first, patches["0003"], checked=True, stem=tmp_path / "s", in_base=in_base)
    assert first.base_status == first_status
    placing.repo.reset_hard("HEAD")
    second = _result(patches, "0004", 2)
    went_in = placing.place(second, patches["0004"], checked=True, stem=tmp_path / "t")
    return first, second, went_in


def test_a_patch_that_depends_on_a_conflicting_one_is_blocked(fresh, patches, tmp_path):
    repo, _ = fresh
    head = commit(repo, {"src/core.py": edit(10, "TEN\n")}, "upstream changed line 10")
    placing, stub, _ = _placing(repo, patches, ["0003", "0004"], tmp_path, RunStatus.RED, depends={"0004": ["0003"]})
    first, second, went_in = _place_after(placing, patches, BaseStatus.CONFLICT, tmp_path)
    # Not tried (it would go in: it changes another file) and not tested: blocked, by the conflict it needs.
    assert went_in is False and second.base_status == BaseStatus.BLOCKED and len(stub.calls) == 1
    assert second.blocked_by == [first.name] and second.skipped_before == [first.name]
    assert second.problems == [
        "blocked by 0003 (conflict): it needs 0003 ([targets.fake.depends]), which does not go in on this base; "
        "left out, its tests not run without it"
    ]
    assert (second.red, second.green, second.style, second.conflicts, second.notes) == (None, None, None, [], [])
    assert placing.left_out == [first.name, second.name] and placing.statuses[second.name] == BaseStatus.BLOCKED
    assert second.decide() == Verdict.BLOCKED and not Verdict(second.verdict).passed
    assert second.to_json()["blocked_by"] == [first.name]
    _untouched(repo, head)


@pytest.mark.parametrize("first_status", [BaseStatus.FIXED_DIFFERENTLY, BaseStatus.ALREADY_UPSTREAM])
def test_a_patch_whose_dependency_is_upstream_is_judged_as_usual(fresh, patches, tmp_path, first_status):
    repo, _ = fresh
    commit(repo, {"src/core.py": edit(10, "TEN\n")}, "upstream changed line 10")
    placing, _, _ = _placing(repo, patches, ["0003", "0004"], tmp_path, RunStatus.NOT_RED, depends={"0004": ["0003"]})
    in_base = first_status == BaseStatus.ALREADY_UPSTREAM
    _, second, went_in = _place_after(placing, patches, first_status, tmp_path, in_base=in_base)
    assert went_in is True and second.base_status == BaseStatus.CLEAN and second.blocked_by == []


def test_a_blocked_patch_the_base_holds_is_already_upstream(fresh, patches, tmp_path):
    repo, _ = fresh
    commit(repo, {"src/core.py": edit(10, "TEN\n")}, "upstream changed line 10")
    placing, _, _ = _placing(repo, patches, ["0003", "0004"], tmp_path, RunStatus.RED, depends={"0004": ["0003"]})
    placing.place(_result(patches, "0003", 1), patches["0003"], checked=True, stem=tmp_path / "s")
    repo.reset_hard("HEAD")
    second = _result(patches, "0004", 2)
    assert placing.place(second, patches["0004"], checked=True, stem=tmp_path / "t", in_base=True) is False
    assert second.base_status == BaseStatus.ALREADY_UPSTREAM and second.problems == []


def test_a_stack_that_goes_in_plainly_touches_no_work_tree(fresh, patches, tmp_path):
    repo, base = fresh
    calls = []
    placed = placement.stack(
        repo, base, [patches["0001"], patches["0003"]], tmp_path, preimages=lambda: calls.append(1)
    )
    assert {name[:4]: where.status for name, where in placed.items()} == {
        "0001": BaseStatus.CLEAN,
        "0003": BaseStatus.CLEAN,
    }
    assert calls == [] and list(tmp_path.glob("index-stack-*")) == []
    _untouched(repo, base)


def test_a_stack_names_the_patch_that_needs_one_left_out_and_goes_on_without_it(fresh, patches, tmp_path):
    """The upstream tier without the fork tier: 0002 was made on top of 0001; without 0001 under it, it conflicts,
    and 0003 is still placed (without 0002). The repository is left at the commit and branch it had."""
    repo, base = fresh
    repo.run("checkout", "--quiet", "-b", "work")
    placed = placement.stack(repo, base, [patches["0002"], patches["0003"]], tmp_path)
    assert placed[patches["0002"].name].status == BaseStatus.CONFLICT
    assert [c.file for c in placed[patches["0002"].name].conflicts] == ["src/core.py"]
    assert placed[patches["0003"].name].status == BaseStatus.CLEAN
    _untouched(repo, base)
    assert repo.current_branch() == "work"
