"""A pull request's cut ([targets.<t>.cuts]): `checkout --cut` stops where the patch needs the rest of the series,
`export --cut` writes the resolved cut, `verify` holds it to the series patch (red/green on the bare base), and
`branches` cuts the pull request's branch from it (no other patch's commit under it)."""

import json

from seriesfixtures import git


ONE = (
    "core: add one()",
    {
        "src/fakepkg/core.py": ("return a * b\n", "return a * b\n\n\ndef one():\n    return 1\n"),
        "tests/regress/test_one.py": (
            'import fakepkg.core\n\n\ndef test_one():\n    assert getattr(fakepkg.core, "one", lambda: 0)() == 1\n'
        ),
    },
)
# Appended after ONE's function: in the series it applies only on top of ONE (lines side by side), though it
# needs none of ONE's code
TWO = (
    "core: add two()",
    {
        "src/fakepkg/core.py": ("    return 1\n", "    return 1\n\n\ndef two():\n    return 2\n"),
        "tests/regress/test_two.py": (
            'import fakepkg.core\n\n\ndef test_two():\n    assert getattr(fakepkg.core, "two", lambda: 0)() == 2\n'
        ),
    },
)


def test_a_cut_makes_a_pull_request_of_a_patch_that_only_sits_next_to_another(fake, test_python):
    names = fake.build_series(ONE, TWO)
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write(f'\n[targets.fake.depends]\n"{names[1]}" = ["{names[0]}"]\n')
        fh.write(f'\n[targets.fake.cuts]\n"{names[1]}" = {{ needs = [], reason = "it follows one() (textual)" }}\n')
    # verify without the cut's file: the patch fails, saying how to make it
    proc = fake.run("verify", "--python", test_python)
    assert proc.returncode == 1 and "its cut cuts/0002-core-add-two.patch does not exist" in proc.stdout

    proc = fake.run("checkout", "--cut", "0002")
    assert proc.returncode == 1 and "git am stopped at 0002-core-add-two.patch" in proc.stdout, proc.stderr
    cut_dir = fake.work / "checkouts" / "fake-cut-0002"
    core = cut_dir / "src/fakepkg/core.py"
    text = core.read_text(encoding="utf-8")
    resolved = text[: text.index("<<<<<<<")] + "\n\ndef two():\n    return 2\n"
    core.write_text(resolved, encoding="utf-8")
    git(cut_dir, "add", "--all")
    git(cut_dir, "am", "--continue")
    fake.ok("export", "--cut", "0002")
    cut = fake.patches_dir / "fake" / "cuts" / names[1]
    assert "+def two():" in cut.read_text(encoding="utf-8") and "one" not in cut.read_text(encoding="utf-8")

    report = fake.root / "report.json"
    proc = fake.run("verify", "--python", test_python, "--json", str(report))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    second = json.loads(report.read_text(encoding="utf-8"))["patches"][1]
    assert second["applies_alone"] is False  # the series patch needs 0001 to apply; its cut does not
    assert second["cut"]["ok"] and second["cut"]["applies"] and second["cut"]["needs"] == []
    assert second["cut"]["red"].startswith("red") and second["cut"]["green"].startswith("green")
    assert "its pull request's cut (cuts/0002-core-add-two.patch) goes in on the pinned base alone" in proc.stdout
    # its pull request's notes quote the run of the cut, the branch, and do not say the branch holds 0001
    notes = " ".join(fake.ok("pr", "0002").stdout.split())
    assert "Its cut, the branch, in the same run on" in notes and "alone: without the code change red" in notes
    assert "it depends on (its branch holds them)" not in notes

    # a cut that drifts from its patch (here: it adds a line the patch does not) fails the patch
    cut.write_text(cut.read_text(encoding="utf-8").replace("+    return 2\n", "+    return 2  # two\n"), "utf-8")
    proc = fake.run("verify", "--python", test_python)
    assert proc.returncode == 1 and "its cut lacks a line of the patch" in proc.stdout
    # unless the manifest declares those lines the cut's own; a declared line that is no difference fails it
    entry = f'"{names[1]}" = {{ needs = [], reason = "it follows one() (textual)" }}'
    manifest = fake.manifest.read_text(encoding="utf-8")
    own = ["src/fakepkg/core.py: +    return 2", "src/fakepkg/core.py: +    return 2  # two"]
    for lines, status, said in ((own, 0, "2 line(s) of its own"), (own + own[:1], 1, "declares a line its own")):
        declared = entry[:-2] + f', own = {{ lines = {json.dumps(lines)}, reason = "a comment" }} }}'
        fake.manifest.write_text(manifest.replace(entry, declared), encoding="utf-8")
        proc = fake.run("verify", "--python", test_python, "--patch", "0002")
        assert proc.returncode == status and said in proc.stdout, proc.stdout
    fake.manifest.write_text(manifest, encoding="utf-8")
    fake.ok("checkout", "--cut", "0002", "--replace", "--discard-unexported")
    git(cut_dir, "reset", "--quiet", "--hard", "refs/series/cut-base")
    core.write_text(resolved, encoding="utf-8")
    git(cut_dir, "commit", "--quiet", "-am", "core: add two()\n\nWhy and how.")
    fake.ok("export", "--cut", "0002")

    repo = fake.upstream_repo(fake.root / "fork")
    fake.ok("branches", "--repo", str(repo))
    branch = "trainer-series/core-add-two"
    assert git(repo, "rev-list", "--count", f"main..{branch}") == "1"  # its commit only: no 0001 under it
    assert "def one" not in git(repo, "show", f"{branch}:src/fakepkg/core.py")
    body = fake.ok("pr", "0002").stdout
    assert "The pull request is the cut of the patch" in " ".join(body.split())
