"""The two tiers: upstream (a pull request we submit) and fork (carried for forks, proposed upstream as an issue
first, [targets.<target>.fork]): the manifest's rules, the tier in verify's reports and the upstream tier checked
alone, `pr` of a fork-tier patch, and `branches` (fork-only branches, `gh issue create`, the submitter as author)."""

import json
import xml.etree.ElementTree as ET

import pytest
from seriesfixtures import GOOD, TRUNCATE, VERSION, git, one_error_line, problem_items, repo_state, table_rows


ISSUE = "Trainer: a title with 'quotes'\n\nThe body: what we measured.\n"
REASON = "a new public knob: upstream agrees to it in an issue first"


def _tables(fake, fork, *, depends=None, issues=None):
    """Append the hand-edited tables: `fork` ({patch: reason}), `depends` and `issues` ({patch: issue text file}; by
    default every fork-tier patch gets issues/knob.md)."""
    (fake.patches_dir / "issues").mkdir(exist_ok=True)
    (fake.patches_dir / "issues" / "knob.md").write_text(ISSUE, encoding="utf-8")
    issues = dict.fromkeys(fork, "issues/knob.md") if issues is None else issues
    text = ""
    if depends:
        text += "\n[targets.fake.depends]\n" + "".join(f'"{p}" = {json.dumps(n)}\n' for p, n in depends.items())
    if issues:
        text += "\n[targets.fake.issues]\n" + "".join(f'"{p}" = {{ text = "{t}" }}\n' for p, t in issues.items())
    text += "\n[targets.fake.fork]\n" + "".join(f'"{p}" = "{why}"\n' for p, why in fork.items())
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write(text)


def _fork(fake):
    """A fork of the fake upstream whose user has an identity of their own."""
    repo = fake.upstream_repo(fake.root / "fork")
    git(repo, "config", "user.name", "Fork Owner")
    git(repo, "config", "user.email", "owner@example.com")
    return repo


@pytest.mark.quick
@pytest.mark.parametrize(
    ("fork", "options", "message"),
    [
        ("0009-nope.patch", {"issues": {}}, "[targets.fake.fork]: '0009-nope.patch' is not in the patches list"),
        ("A", {"issues": {}}, "has no issue text in [targets.fake.issues]: a fork-tier patch is proposed upstream"),
        ("A", {"depends": {"B": ["A"]}}, "is upstream tier but needs '0001-core-make-add-add.patch', which is fork"),
    ],
    ids=["unknown-patch", "no-issue", "upstream-needs-fork"],
)
def test_bad_tiers_are_one_error_line_and_change_nothing(fake, fork, options, message):
    names = fake.build_series(GOOD, TRUNCATE)
    named = {"A": names[0], "B": names[1]}
    depends = {named[k]: [named[v] for v in vs] for k, vs in options.get("depends", {}).items()}
    _tables(fake, {named.get(fork, fork): REASON}, depends=depends, issues=options.get("issues"))
    before = fake.manifest.read_bytes()
    fork_repo = _fork(fake)
    state = repo_state(fork_repo)
    for args in (("pr", "0001"), ("export",), ("branches", "--repo", str(fork_repo))):
        line = one_error_line(fake.run(*args))
        assert message in line, line
    assert fake.manifest.read_bytes() == before and repo_state(fork_repo) == state


@pytest.mark.quick
def test_pr_of_a_fork_tier_patch_prints_its_issue_text(fake):
    names = fake.build_series(GOOD, VERSION)
    _tables(fake, {names[1]: REASON}, issues=dict.fromkeys(names, "issues/knob.md"))
    # Before: every patch got a pull request body. A fork-tier one gets the issue that proposes it upstream instead.
    proc = fake.ok("pr", "0002")
    assert proc.stdout == ISSUE == fake.ok("pr", "0002", "--issue").stdout
    lines = proc.stderr.splitlines()
    assert lines == [
        "series: note: 0002 is fork tier (carried for forks; propose it upstream as an issue first): "
        f"{REASON}. Above is its issue text, not a pull request body"
    ]
    # An upstream-tier patch is unchanged: title, then the template's body.
    first = fake.ok("pr", "0001").stdout
    assert first.startswith("core: make add() add\n\n# What does this PR do?\n")
    # Its notes say that the issue it shares also proposes the fork-tier patch, which has no pull request.
    words = " ".join(first.split())
    assert 'It also proposes the fork-tier patches (carried for forks, no pull request yet): "fakepkg: add' in words
    assert "answered by the pull requests of" not in words


def test_export_keeps_the_fork_table_and_warns_when_it_goes_stale(fake):
    names = fake.build_series(GOOD, VERSION)
    _tables(fake, {names[1]: REASON})
    before = fake.manifest.read_text(encoding="utf-8")
    assert "warning" not in fake.ok("export").stderr
    assert fake.manifest.read_text(encoding="utf-8") == before
    git(fake.checkout_dir, "commit", "--quiet", "--amend", "-m", "fakepkg: give it a version")
    proc = fake.ok("export")
    assert f"[targets.fake.fork] in series.toml names patches export no longer produced ({names[1]})" in proc.stderr
    assert "[targets.fake.depends]" not in proc.stderr
    assert "is not in the patches list" in one_error_line(fake.run("pr", "0001"))


def test_verify_reports_each_patchs_tier_and_the_upstream_tier_alone(fake, test_python):
    names = fake.build_series(GOOD, VERSION)
    _tables(fake, {names[1]: REASON})
    report, junit, summary = fake.root / "r.json", fake.root / "r.xml", fake.root / "s.md"
    args = ("--json", str(report), "--junit", str(junit), "--summary", str(summary))
    proc = fake.run("verify", "--python", test_python, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["schema_version"] == 5
    assert [(p["tier"], p["upstream_stack"], p["verdict"]) for p in data["patches"]] == [
        ("upstream", True, "ok"),
        ("fork", None, "ok"),
    ]
    assert [row["patch"][:16] for row in table_rows(proc.stdout)] == ["fake 0001 core: ", "fake 0002 (fork)"]
    assert f"| `fake/{names[1]}` | fork | yes |" in summary.read_text(encoding="utf-8")
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    tiers = {c.get("classname"): c.find("properties/property[@name='tier']").get("value") for c in cases}
    assert tiers == {f"fake.{names[0]}": "upstream", f"fake.{names[1]}": "fork"}
    stack = [c for c in cases if c.get("name") == "upstream_stack"]
    assert [c.get("classname") for c in stack] == [f"fake.{names[0]}"] and stack[0].find("failure") is None


def test_an_upstream_tier_patch_that_needs_a_fork_tier_one_fails_by_name(fake, test_python):
    """TRUNCATE rewrites the line GOOD adds: it goes in only on top of GOOD. With GOOD fork tier and TRUNCATE
    upstream tier (the manifest records no dependency, or it would refuse it), the upstream tier alone does not go
    in: TRUNCATE fails, named, and so does the run."""
    names = fake.build_series(GOOD, TRUNCATE, VERSION)
    _tables(fake, {names[0]: REASON})
    report = fake.root / "r.json"
    proc = fake.run("verify", "--python", test_python, "--json", str(report))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads(report.read_text(encoding="utf-8"))
    second = data["patches"][1]
    assert (second["tier"], second["upstream_stack"], second["verdict"]) == ("upstream", False, "fail")
    assert second["red_without_fix"] and second["green_with_fix"]  # the patch itself is fine in the series
    stack = [p for p in second["problems"] if p.startswith("does not go in on the base with only the upstream-tier")]
    assert stack == [
        "does not go in on the base with only the upstream-tier patches before it, without the fork tier "
        "(src/fakepkg/core.py: content differs; hunk 1/1 (@@ -3,7 +3,7 @@) does not apply; 3-way merge conflict at "
        "base line 6): an upstream-tier "
        "patch must not need a fork-tier one ([targets.fake.fork])"
    ], second["problems"]
    assert [p["upstream_stack"] for p in data["patches"]] == [None, False, True]
    assert any(
        item.startswith("  fake 0002: does not go in on the base with only the upstream-tier")
        for item in problem_items(proc.stdout)
    )


def test_branches_of_a_fork_tier_patch_are_fork_only_and_propose_an_issue(fake):
    names = fake.build_series(GOOD, TRUNCATE, VERSION)
    _tables(fake, {names[1]: REASON}, depends={names[1]: [names[0]]})
    repo = _fork(fake)
    before = repo_state(repo)
    proc = fake.ok("branches", "--repo", str(repo))
    fork_branch = "trainer-series/fork-only/core-truncate-add"
    out = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/trainer-series")
    assert sorted(out.splitlines()) == sorted(
        ["trainer-series/core-make-add-add", fork_branch, "trainer-series/fakepkg-add-version"]
    )
    # It holds the patch on its depends, like any branch.
    assert git(repo, "log", "--format=%s", f"main..{fork_branch}").splitlines() == [
        "core: truncate add()",
        "core: make add() add",
    ]
    assert repo_state(repo)["head"] == before["head"]
    text = proc.stdout
    assert f"  0002   {fork_branch}  2 " in text
    assert f"push --force-with-lease origin trainer-series/core-make-add-add {fork_branch} " in text
    # Before: `gh pr create --draft` for it. Now its issue: the title and a body file, and no pull request.
    creates = [line for line in text.splitlines() if "gh pr create" in line]
    assert len(creates) == 2 and not any(fork_branch in line for line in creates)
    assert f"  # 0002 ({fork_branch}): {REASON}" in text
    assert "  python3 scripts/series.py pr 0002 --target fake --issue | tail -n +3 > /tmp/issue-fake-0002.md" in text
    title = "'Trainer: a title with '\"'\"'quotes'\"'\"''"  # shell-quoted
    assert (
        f"  gh issue create --repo https://example.invalid/fakepkg.git --title {title} --body-file /tmp/issue-" in text
    )
    assert "its pull request is opened as a draft" not in text


def _authors(repo):
    out = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/trainer-series")
    return {git(repo, "log", "-1", "--format=%an <%ae>|%cn", branch) for branch in out.splitlines()}


def test_branches_are_authored_by_the_submitter(fake, tmp_path):
    fake.build_series(GOOD, VERSION)
    repo = _fork(fake)
    # Before: the commits kept the patches' author (the series' identity). Now the clone's user authors them.
    fake.ok("branches", "--repo", str(repo))
    assert _authors(repo) == {"Fork Owner <owner@example.com>|Fork Owner"}
    # --author names another; the clone's user still commits. The author date is the patch's: a rerun is unchanged.
    proc = fake.ok("branches", "--repo", str(repo), "--author", "Ada Lovelace <ada@example.com>")
    assert proc.stdout.splitlines()[0].endswith(": 0 made, 2 moved, 0 unchanged")
    assert _authors(repo) == {"Ada Lovelace <ada@example.com>|Fork Owner"}
    again = fake.ok("branches", "--repo", str(repo), "--author", "Ada Lovelace <ada@example.com>")
    assert again.stdout.splitlines()[0].endswith(": 0 made, 0 moved, 2 unchanged")
    assert git(repo, "log", "-1", "--format=%ad", "--date=iso-strict", "trainer-series/core-make-add-add").startswith(
        "2026-01-01T00:"
    )


def test_branches_without_an_author_is_one_error_and_makes_nothing(fake, tmp_path):
    fake.build_series(GOOD)
    repo = fake.upstream_repo(fake.root / "fork")
    git(repo, "config", "--unset", "user.name")
    git(repo, "config", "--unset", "user.email")
    home = tmp_path / "home"
    home.mkdir()
    env = fake.env(HOME=str(home), GIT_CONFIG_GLOBAL=str(home / "none"), GIT_CONFIG_NOSYSTEM="1")
    before = repo_state(repo)
    line = one_error_line(fake.run("branches", "--repo", str(repo), env=env))
    assert "no author for the commits: user.name and user.email not set for" in line
    assert '--author "Name <email>" (no branch was made or moved)' in line
    line = one_error_line(fake.run("branches", "--repo", str(repo), "--author", "nobody", env=env))
    assert line.endswith("--author 'nobody' is not \"Name <email>\" (no branch was made or moved)")
    assert repo_state(repo) == before
    assert not (fake.work / "reports" / "branches-fake.json").exists()
    # --author alone is enough: it commits too when git has no committer identity.
    fake.ok("branches", "--repo", str(repo), "--author", "Ada Lovelace <ada@example.com>", env=env)
    assert _authors(repo) == {"Ada Lovelace <ada@example.com>|Ada Lovelace"}
