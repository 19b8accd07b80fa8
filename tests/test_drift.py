"""The drift suite: the series on bases that moved away from the pinned one, as a fork or upstream main does, and
the status every command reports there against the truth.

Built in seconds from the pinned fixture base (a git repository of the pinned sdist's files, changed the way
upstream changes code): a comment and a blank line moved in a patch's context, a local variable renamed next to a
hunk, a reordered import block, a patch squash-merged upstream, the bug fixed upstream with other code and another
warning text, a dependency bump that breaks the import, a base older than the pin. For each, `verify`, `checkout
--base`, `apply` and `branches` must report the true status of every patch (`clean`, `3-way`, `conflict`,
`already-upstream`, `fixed-differently`, `blocked`): no false failure, no false `clean`. A patch that depends on
one that conflicts there is `blocked` by it: left out with it, never judged (nor given a branch) without it.

`SERIES_DRIFT_TABLE=FILE` writes the table (case x command x status x truth) to FILE; `-s` prints it.
"""

import json
import os
import re
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from seriesfixtures import (
    Fake,
    apply_changes,
    git,
    make_tarball,
    one_error_line,
    problem_items,
    sha256,
    table_rows,
)


CORE = textwrap.dedent(
    '''\
    """Arithmetic with bugs."""

    import math
    import os
    import sys

    PLATFORM = sys.platform
    SEP = os.sep


    def add(a, b):
        """Add two numbers."""
        # the sum of a and b,
        # kept in a local
        total = a - b
        return total


    def root(x):
        """The square root."""
        return math.sqrt(x)


    def scale(values, factor):
        """Scale every value."""
        items = list(values)
        assert len(items) >= 0
        # one pass over the values
        result = [v * factor for v in values]
        return result[:-1]
    '''
)
FILES = {
    "PKG-INFO": "Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.0\n",
    "README.md": "# fakepkg\n",
    "pyproject.toml": '[tool.ruff]\nline-length = 119\n\n[tool.ruff.lint]\nselect = ["E", "F", "W", "I"]\n',
    "src/fakepkg/__init__.py": '"""A fake package."""\n',
    "src/fakepkg/core.py": CORE,
    "tests/test_smoke.py": "def test_smoke():\n    assert True\n",
}

# 0001: fixes add() and warns about b=None, with its own words; 0002 needs it; 0003 stands alone.
FIX_ADD = (
    "core: make add() add, and warn about b=None",
    {
        "src/fakepkg/core.py": ("import sys\n", "import sys\nimport warnings\n"),
        "tests/regress/test_fix_add.py": textwrap.dedent(
            """\
            import pytest

            from fakepkg.core import add


            def test_add():
                assert add(2, 3) == 5


            def test_add_none_warns():
                with pytest.warns(UserWarning, match="b is None, counted as 0"):
                    assert add(2, None) == 2


            def test_add_zero():
                assert add(0, 0) == 0
            """
        ),
    },
)
FIX_ADD_BODY = (
    "    total = a - b\n",
    '    if b is None:\n        warnings.warn("add(): b is None, counted as 0")\n        b = 0\n    total = a + b\n',
)
ROUND = (
    "core: round the sum of add()",
    {
        "src/fakepkg/core.py": ("    return total\n", "    return round(total, 9)\n"),
        "tests/regress/test_round.py": (
            "from fakepkg.core import add\n\n\ndef test_add_floats():\n    assert add(0.1, 0.2) == 0.3\n"
        ),
    },
)
SCALE = (
    "core: scale() keeps the last value",
    {
        "src/fakepkg/core.py": ("    return result[:-1]\n", "    return result\n"),
        "tests/regress/test_scale.py": (
            "from fakepkg.core import scale\n\n\ndef test_scale():\n    assert scale([1, 2], 2) == [2, 4]\n"
        ),
    },
)

C, W, X, U, F, B = "clean", "3-way", "conflict", "already-upstream", "fixed-differently", "blocked"
NO_IMPORT = "base does not import"


def _core(old, new):
    return {"src/fakepkg/core.py": (old, new)}


# case: (what upstream did to the pinned base, the true status of 0001, 0002, 0003)
CASES = {
    "pinned": ({}, (C, C, C)),
    "comment": (_core("# the sum of a and b,", "# a plus b,"), (W, C, C)),
    "blank-line": (_core("    assert len(items) >= 0\n", "    assert len(items) >= 0\n\n"), (C, C, W)),
    "renamed-local": (
        _core("    items = list(values)\n    assert len(items)", "    copied = list(values)\n    assert len(copied)"),
        (C, C, W),
    ),
    "import-order": (_core("import math\nimport os\n", "import os\nimport math\n"), (W, C, C)),
    "squash-merged": ("squash", (C, C, U)),
    "fixed-differently": (
        {
            "src/fakepkg/core.py": (
                "import sys\n\nPLATFORM",
                "import sys\nimport warnings\n\nPLATFORM",
            )
        },
        (F, X, C),  # 0002 needs 0001, fixed upstream: it is judged (and conflicts) on its own
    ),
    # upstream added an import where 0001 adds one: 0001 conflicts and its tests still fail without it; 0002 needs it
    "dependency-conflicts": (_core("import sys\n\nPLATFORM", "import sys\nimport typing\n\nPLATFORM"), (X, B, C)),
    "import-breaks": (
        {
            "src/fakepkg/__init__.py": (
                '"""A fake package."""\n',
                '"""A fake package."""\n\nimport fakepkg_speedups  # noqa: F401  (new: fakepkg-speedups>=2)\n',
            )
        },
        (C, C, C),
    ),
    "older-than-pin": ({"PKG-INFO": ("Version: 1.0", "Version: 0.9")}, (C, C, C)),
}
UPSTREAM_FIX = (
    "    total = a - b\n",
    '    if b is None:\n        warnings.warn("add() got b=None; treating it as 0")\n    total = a + (b or 0)\n',
)


class DriftFake(Fake):
    """The fixture target with the drift suite's own base files."""

    def __init__(self, root):
        self.root = Path(root)
        self.sdist = make_tarball(self.root / "links" / "fakepkg-1.0.tar.gz", "fakepkg-1.0", FILES)
        self.sha = sha256(self.sdist)
        self.patches_dir = self.root / "patches"
        self.manifest = self.patches_dir / "series.toml"
        self.work = self.root / "work"
        self.empty_links = self.root / "no-links"
        self.empty_links.mkdir()
        self.write_manifest()

    def upstream_repo(self, path):
        path = Path(path)
        path.mkdir(parents=True)
        for rel, text in FILES.items():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_text(text, encoding="utf-8")
        git(path, "init", "--quiet", "--initial-branch=main")
        git(path, "add", "--all")
        git(path, "commit", "--quiet", "-m", "upstream 1.0")
        return path


TABLE: dict[str, dict[str, tuple[str, ...]]] = {}
TIMES: dict[str, float] = {}


@pytest.fixture(scope="module")
def drift(tmp_path_factory, test_python):
    """The series (0002 depends on 0001), verified once on the pinned sdist (the reference a partial fix upstream is
    judged against)."""
    started = time.monotonic()
    fake = DriftFake(tmp_path_factory.mktemp("drift"))
    fake.seed_cache()
    fake.ok("checkout", "--replace")
    for subject, *changes in ((FIX_ADD[0], FIX_ADD[1], {"src/fakepkg/core.py": FIX_ADD_BODY}), ROUND, SCALE):
        for change in changes:
            apply_changes(fake.checkout_dir, change)
        git(fake.checkout_dir, "add", "--all")
        git(fake.checkout_dir, "commit", "--quiet", "-m", f"{subject}\n\nWhy and how.")
    fake.ok("export")
    names = _patch_list(fake)
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write(f'\n[targets.fake.depends]\n"{names[1]}" = ["{names[0]}"]\n')
    proc = fake.run("verify", "--python", test_python)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    TIMES["build and verify on the pinned sdist"] = time.monotonic() - started
    return fake, names, test_python


def _patch_list(fake):
    import tomllib

    return tomllib.loads(fake.manifest.read_text(encoding="utf-8"))["targets"]["fake"]["patches"]


def _upstream(fake, names, case):
    """The pinned base, moved the way `case` says, as a clone's HEAD."""
    repo = fake.upstream_repo(fake.root / f"up-{case}")
    change, _ = CASES[case]
    if change == "squash":
        git(repo, "apply", "--index", str(fake.patches_dir / "fake" / names[2]))
        git(repo, "commit", "--quiet", "-m", "Keep the last value in scale() (#12)")
    elif change:
        apply_changes(repo, change)
        if case == "fixed-differently":
            apply_changes(repo, {"src/fakepkg/core.py": UPSTREAM_FIX})
        git(repo, "commit", "--quiet", "-am", f"upstream: {case}")
    git(repo, "config", "user.name", "Fork Owner")
    git(repo, "config", "user.email", "owner@example.com")
    return repo


APPLY = {"applied": C, "applied (3-way)": W, "already present": U, "conflict": X}
VERDICTS = {C: "ok", W: "ok", X: "fail", U: "upstream", F: "upstream", B: "blocked"}


def _verify(fake, python, repo, names):
    report = fake.root / f"verify-{repo.name}.json"
    proc = fake.run("verify", "--python", python, "--target", "fake", "--base", f"path:{repo}", "--json", str(report))
    if proc.returncode == 2:
        line = one_error_line(proc)
        assert "does not import with the packages of" in line and "--python PATH" in line, line
        assert "No module named 'fakepkg_speedups'" in line, line
        return (NO_IMPORT,) * len(names), {}
    data = json.loads(report.read_text(encoding="utf-8"))
    # A status whose verdict is not the one it implies (a false failure: `clean` but FAIL for a dependency the
    # manifest records, or an `error` on every patch) shows as such: `clean, but FAIL`.
    statuses = tuple(
        p["base_status"] if p["verdict"] == VERDICTS[p["base_status"]] else f"{p['base_status']}, but {p['verdict']}"
        for p in data["patches"]
    )
    failing = any(s == X for s in statuses)
    assert proc.returncode == (1 if failing else 0), proc.stdout + proc.stderr
    commit = git(repo, "rev-parse", "HEAD")
    assert proc.stdout.splitlines()[0].startswith(f"verify: fake on HEAD of {repo}, commit {commit} (fakepkg ")
    return statuses, data


def _checkout(fake, repo, names):
    proc = fake.run("checkout", "--dir", str(fake.root / f"co-{repo.name}"), "--base", f"path:{repo}")
    found = {}
    for line in proc.stderr.splitlines():
        if m := re.match(r"series: (placed|conflict|left out) (\S+?)(?::| \(|$)(.*)", line):
            what, name, rest = m.groups()
            if what == "placed":
                found[name] = rest.strip()
            elif what == "conflict":
                found[name] = X
            elif rest.strip().startswith("blocked by "):
                found[name] = B
            else:
                found[name] = U if "already upstream" in rest else F if "fixed upstream differently" in rest else rest
    statuses = tuple(found.get(name, "?") for name in names)
    assert proc.returncode == (2 if X in statuses else 0), proc.stdout + proc.stderr
    return statuses


def _apply(fake, repo, names):
    proc = fake.run("apply", "--repo", str(repo))
    found = {}
    for line in proc.stdout.splitlines():
        name, _, state = line.partition(" ")
        state = state.strip()
        if state.startswith("left out: fixed upstream differently"):
            found[name] = F
        elif state.startswith("blocked by "):
            found[name] = B
        elif state.startswith("conflict"):
            found[name] = X
        else:
            found[name] = APPLY.get(state, state)
    statuses = tuple(found.get(name, "?") for name in names)
    assert proc.returncode == (2 if X in statuses else 0), proc.stdout + proc.stderr
    if proc.returncode == 0:
        git(repo, "switch", "--quiet", "main")
        git(repo, "branch", "--quiet", "-D", "series/fake")
    return statuses


def _branches(fake, repo, names):
    proc = fake.run("branches", "--repo", str(repo))
    found = {}
    for line in proc.stdout.splitlines():
        if m := re.match(r"  (\d{4})   \S+\s+\d+\s+(\S+)", line):
            found[m.group(1)] = m.group(2)
        elif m := re.match(r"(left out|no branch for) (\d{4})\S*: (.*)", line):
            what, number, why = m.groups()
            if what == "no branch for":
                found[number] = B if why.startswith("blocked by ") else X
            else:
                found[number] = U if why.startswith("already upstream") else F
    statuses = tuple(found.get(name[:4], "?") for name in names)
    assert proc.returncode == (1 if X in statuses else 0), proc.stdout + proc.stderr
    return statuses


@pytest.mark.parametrize("case", list(CASES))
def test_every_command_reports_the_truth(drift, case):
    fake, names, python = drift
    started = time.monotonic()
    repo = _upstream(fake, names, case)
    truth = CASES[case][1]
    seen = {}
    seen["verify"], data = _verify(fake, python, repo, names)
    if case == "import-breaks":
        truth_verify = (NO_IMPORT,) * len(names)
    else:
        truth_verify = truth
    if case == "older-than-pin":
        assert data["targets"][0]["base"]["older_than_pin"] is True
        assert data["targets"][0]["notes"][0].startswith("the base is fakepkg 0.9, older than the pinned 1.0")
    if case == "fixed-differently":
        assert "1 of the 2 tests that fail without it on the 1.0 release pass here" in data["patches"][0]["notes"][0]
    seen["checkout"] = _checkout(fake, repo, names)
    seen["apply"] = _apply(fake, repo, names)
    seen["branches"] = _branches(fake, repo, names)
    TIMES[case] = time.monotonic() - started
    TABLE[case] = {**seen, "truth": truth}
    assert seen["verify"] == truth_verify, (case, seen)
    for command in ("checkout", "apply", "branches"):
        assert seen[command] == truth, (case, command, seen)


def test_the_table(drift):
    """The table, case x command x status x truth (run after the cases; `-s` shows it)."""
    if not TABLE:
        pytest.skip("no case ran")
    _, names, _ = drift
    rows = [("case", "command", *[name[:4] for name in names], "= truth")]
    for case, seen in TABLE.items():
        truth = seen["truth"]
        for command in ("verify", "checkout", "apply", "branches"):
            statuses = seen[command]
            expected = (NO_IMPORT,) * len(names) if (case, command) == ("import-breaks", "verify") else truth
            rows.append((case, command, *statuses, "yes" if statuses == expected else "NO"))
        rows.append((case, "truth", *truth, ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    total = sum(TIMES.values())
    lines.append(f"{len(TABLE)} cases, {total:.1f}s (" + ", ".join(f"{k} {v:.1f}s" for k, v in TIMES.items()) + ")")
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    if os.environ.get("SERIES_DRIFT_TABLE"):
        Path(os.environ["SERIES_DRIFT_TABLE"]).write_text(text, encoding="utf-8")
    assert all(row[-1] in ("yes", "") for row in rows[1:])


def test_a_fix_upstream_in_part_is_told_without_a_verify_on_the_release(drift):
    """The nightly job's work folder holds no verify on the pinned sdist: verify then runs the conflicting patch's
    tests on the release itself (a checkout under <work>/verify-release/) to compare with."""
    fake, names, python = drift
    repo = fake.root / "up-fixed-differently"
    if not repo.is_dir():
        repo = _upstream(fake, names, "fixed-differently")
    for path in [fake.work / "reports" / "verify-fake.json", *(fake.work / "reports" / "bases").glob("*.json")]:
        path.unlink()
    statuses, data = _verify(fake, python, repo, names)
    assert statuses == CASES["fixed-differently"][1]
    assert "1 of the 2 tests that fail without it on the 1.0 release pass here" in data["patches"][0]["notes"][0]
    assert (fake.work / "verify-release" / "fake" / ".git").is_dir()


def test_a_patch_that_needs_a_conflicting_one_is_blocked(drift, tmp_path):
    """0001 conflicts and its tests still fail on the base without it; 0002 declares it needs 0001. Before: 0002 was
    judged without it (a FAIL of its own, `not green`), `branches` made a draft pull request of it without 0001, and
    every command suggested the verify that had just ruled a fix upstream out. Now 0002 is blocked by 0001 (not a
    second failure, not tested), gets no branch, and the hints say what that verify found. A patch that would go in
    without the conflicting one (0003, once the manifest says it needs 0001) is blocked all the same."""
    fake, names, python = drift
    repo = fake.root / "up-dependency-conflicts"
    if not repo.is_dir():
        repo = _upstream(fake, names, "dependency-conflicts")
    report, junit = tmp_path / "verify.json", tmp_path / "verify.xml"
    base = ("--target", "fake", "--base", f"path:{repo}")
    proc = fake.run("verify", "--python", python, *base, "--json", str(report), "--junit", str(junit))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # 0001's conflict fails the run
    rows = table_rows(proc.stdout)
    assert [row["applies"] for row in rows] == ["CONFLICT", "blocked", "yes"]
    assert rows[1] == dict(rows[1], alone="needs 0001", **{"red fail/all": "-", "green pass/skip": "-"})
    assert (rows[1]["style"], rows[1]["verdict"]) == ("-", "blocked")
    items = problem_items(proc.stdout)
    assert (
        "  fake 0002: blocked by 0001 (conflict): it needs 0001 ([targets.fake.depends]), which does not go in on "
        "this base; left out, its tests not run without it"
    ) in items
    assert [item for item in items if item.startswith("  fake 0002")] == [items[1]]  # one line, naming the blocker
    data = json.loads(report.read_text(encoding="utf-8"))
    first, second, third = data["patches"]
    assert (first["base_status"], first["verdict"], first["red"]["status"]) == (X, "fail", "red")
    assert (second["base_status"], second["verdict"], second["blocked_by"]) == (B, "blocked", [names[0]])
    assert (second["red"], second["green"], second["style"]) == (None, None, None)  # nothing run for it
    assert third["verdict"] == "ok" and third["skipped_before"] == names[:2] and data["ok"] is False
    assert not list((fake.work / "logs" / "verify" / "fake").glob("0002-*"))
    cases = [c for c in ET.parse(junit).getroot().iter("testcase") if c.get("classname") == f"fake.{names[1]}"]
    assert [(c.find("failure"), c.find("skipped") is not None) for c in cases] == [(None, True)] * 5
    assert cases[0].find("skipped").get("message").startswith("blocked by 0001 (conflict)")

    found = f"its tests still fail on this base without it, as the verify of {data['date']} on this base found"
    proc = fake.run("branches", "--repo", str(repo))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert f"no branch for {names[1]}: blocked by 0001 (conflict)" in lines
    assert f"no branch for 0001 (conflict): resolve it ({found})" in lines
    assert "tells whether upstream fixed it differently" not in proc.stdout and "--draft" not in proc.stdout
    assert [line.split()[0] for line in lines if line.startswith("  000")] == ["0003"]  # the others are made

    proc = fake.run("apply", "--repo", str(repo))
    assert [line.split(None, 1) for line in proc.stdout.splitlines()][1] == [names[1], "blocked by 0001 (conflict)"]
    line = one_error_line(proc)
    assert line.endswith(f"; 0001 conflicts: resolve it ({found})") and "finds out" not in line
    line = one_error_line(fake.run("checkout", "--dir", str(tmp_path / "co"), "--base", f"path:{repo}"))
    assert line.endswith(f"; 0001 conflicts: resolve it ({found})"), line

    # 0003 goes in without 0001 (another function): once the manifest says it needs 0001, it is blocked too.
    manifest = fake.manifest.read_text(encoding="utf-8")
    try:
        fake.manifest.write_text(manifest + f'"{names[2]}" = ["{names[0]}"]\n', encoding="utf-8")
        proc = fake.run("verify", "--python", python, *base, "--json", str(report))
        assert proc.returncode == 1, proc.stdout + proc.stderr
        data = json.loads(report.read_text(encoding="utf-8"))
        assert [(p["base_status"], p["blocked_by"]) for p in data["patches"]] == [
            (X, []),
            (B, [names[0]]),
            (B, [names[0]]),
        ]
        proc = fake.run("branches", "--repo", str(repo))
        assert proc.returncode == 1 and f"no branch for {names[2]}: blocked by 0001 (conflict)" in proc.stdout
        assert "nothing was pushed" not in proc.stdout  # no branch at all
    finally:
        fake.manifest.write_text(manifest, encoding="utf-8")
