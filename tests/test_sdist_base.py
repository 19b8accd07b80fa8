"""`--base sdist:VERSION`: the sdist of any release as a base, in one command (checkout, verify). Another release than
the pin is a moved base, as `path:` and `git:` are; the pinned version is the plain `sdist`. pip finds the fake
releases in a folder (`Fake.release`, `Fake.links_env`): no network."""

import json

import pytest
from seriesfixtures import GOOD, git, one_error_line, read_patch_list, sha256


# 1.1 changed a line in the context of GOOD's hunk: the patch goes in with a 3-way merge (the pinned sdist's blobs).
MOVED_CONTEXT = {"src/fakepkg/core.py": ("def mul(a, b):", "def mul(a, b):  # a times b")}


def _left_behind(fake):
    """What a failed run may not leave: scratch and checkout folders, cache folders, recorded hashes."""
    downloads = fake.work / "downloads"
    return {
        "verify": sorted(p.name for p in (fake.work / "verify").iterdir()) if (fake.work / "verify").is_dir() else [],
        "checkouts": sorted(p.name for p in (fake.work / "checkouts").iterdir()),
        "downloads": sorted(p.name for p in downloads.iterdir()) if downloads.is_dir() else [],
    }


@pytest.mark.quick
def test_checkout_of_another_release_records_its_hash_on_first_use(fake):
    fake.build_series(GOOD)
    sdist = fake.release("1.1", MOVED_CONTEXT)
    sha = sha256(sdist)
    recorded = fake.work / "downloads" / "recorded.json"
    proc = fake.ok("checkout", "--base", "sdist:1.1", "--dir", str(fake.root / "co"), env=fake.links_env())
    assert f"series: sdist fakepkg==1.1: sha256 {sha} (not in the manifest; recorded in {recorded})" in proc.stderr
    assert "series: placed 0001-core-make-add-add.patch: 3-way" in proc.stderr
    assert proc.stdout.startswith(f"{fake.root / 'co'}: fakepkg 1.1 sdist (sha256 {sha[:12]}...) (tag series/base = ")
    assert json.loads(recorded.read_text(encoding="utf-8")) == {"fakepkg==1.1": sha}
    assert (fake.work / "downloads" / sha / "fakepkg-1.1.tar.gz").is_file()
    base = git(fake.root / "co", "rev-parse", "series/base")
    assert git(fake.root / "co", "log", "-1", "--format=%B", base) == f"fakepkg 1.1\n\nsdist sha256 {sha}"
    # Again, without the index: from the cache, checked against the recorded hash; the same base commit.
    proc = fake.ok("checkout", "--base", "sdist:1.1", "--dir", str(fake.root / "co"), "--replace")
    assert "downloading" not in proc.stderr and "recorded in" not in proc.stderr
    assert git(fake.root / "co", "rev-parse", "series/base") == base


def test_the_pinned_version_is_the_plain_sdist(fake, test_python):
    fake.build_series(GOOD)
    plain = fake.ok("checkout", "--dir", str(fake.root / "plain"))
    pinned = fake.ok("checkout", "--base", "sdist:1.0", "--dir", str(fake.root / "pinned"))
    assert pinned.stdout.replace(f"{fake.root / 'pinned'}:", f"{fake.root / 'plain'}:") == plain.stdout
    assert git(fake.root / "pinned", "rev-parse", "series/base") == git(
        fake.root / "plain", "rev-parse", "series/base"
    )
    report = fake.root / "report.json"
    proc = fake.ok("verify", "--python", test_python, "--target", "fake", "--base", "sdist:1.0", "--json", str(report))
    # not a moved base: the first line names the pinned sdist, no commit of a moved base
    assert proc.stdout.startswith("verify: fake on fakepkg 1.0 sdist (sha256 ") and ", commit " not in proc.stdout
    base = json.loads(report.read_text(encoding="utf-8"))["targets"][0]["base"]
    assert (base["spec"], base["version"], base["sha256"], base["older_than_pin"]) == ("sdist", "1.0", fake.sha, False)
    assert not (fake.work / "downloads" / "recorded.json").exists()


def test_verify_on_another_release_is_a_moved_base(fake, test_python):
    fake.build_series(GOOD)
    sha = sha256(fake.release("1.1", MOVED_CONTEXT))
    report, summary = fake.root / "report.json", fake.root / "summary.md"
    options = ["--json", str(report), "--summary", str(summary)]
    proc = fake.run(
        "verify", "--python", test_python, "--target", "fake", "--base", "sdist:1.1", *options, env=fake.links_env()
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    base_commit = git(fake.work / "verify" / "fake", "rev-parse", "series/base")
    first = f"verify: fake on fakepkg 1.1 sdist (sha256 {sha[:12]}...), commit {base_commit} (fakepkg 1.1)"
    assert proc.stdout.splitlines()[0].startswith(first + ", torch ")
    data = json.loads(report.read_text(encoding="utf-8"))
    base = data["targets"][0]["base"]
    assert (base["spec"], base["version"], base["sha256"], base["commit"]) == ("sdist:1.1", "1.1", sha, base_commit)
    assert [(p["base_status"], p["verdict"]) for p in data["patches"]] == [("3-way", "ok")]
    assert summary.read_text(encoding="utf-8").startswith(
        f"### Patch series verify: OK on fake fakepkg 1.1 sdist (sha256 {sha[:12]}...) at `{base_commit}`"
    )
    # An older release than the pin says so, as a fork's older base does.
    fake.release("0.9")
    proc = fake.run(
        "verify", "--python", test_python, "--target", "fake", "--base", "sdist:0.9", *options, env=fake.links_env()
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[1].startswith("note: the base is fakepkg 0.9, older than the pinned 1.0")
    assert json.loads(report.read_text(encoding="utf-8"))["targets"][0]["base"]["older_than_pin"] is True
    # Each release's hash is recorded, once.
    recorded = json.loads((fake.work / "downloads" / "recorded.json").read_text(encoding="utf-8"))
    assert sorted(recorded) == ["fakepkg==0.9", "fakepkg==1.1"]


def test_a_release_the_manifest_lists_is_hash_checked(fake):
    fake.build_series(GOOD)
    sha = sha256(fake.release("1.1", MOVED_CONTEXT))
    manifest = fake.manifest.read_text(encoding="utf-8")
    fake.manifest.write_text(manifest + f'\n[targets.fake.releases]\n"1.1" = "{"0" * 64}"\n', encoding="utf-8")
    line = one_error_line(
        fake.run("checkout", "--base", "sdist:1.1", "--dir", str(fake.root / "co"), env=fake.links_env())
    )
    assert line == (
        f"series: error: sha256 mismatch for the fakepkg==1.1 sdist from the package index: got {sha}, expected "
        f"{'0' * 64} ([targets.fake.releases] of the manifest); nothing was extracted"
    )
    assert not (fake.root / "co").exists()
    fake.manifest.write_text(manifest + f'\n[targets.fake.releases]\n"1.1" = "{sha}"\n', encoding="utf-8")
    proc = fake.ok("checkout", "--base", "sdist:1.1", "--dir", str(fake.root / "co"), env=fake.links_env())
    assert "recorded in" not in proc.stderr and not (fake.work / "downloads" / "recorded.json").exists()


def test_a_changed_release_is_refused_after_its_first_use(fake):
    fake.build_series(GOOD)
    sha = sha256(fake.release("1.1", MOVED_CONTEXT))
    fake.ok("checkout", "--base", "sdist:1.1", "--dir", str(fake.root / "co"), env=fake.links_env())
    recorded = fake.work / "downloads" / "recorded.json"
    before = recorded.read_text(encoding="utf-8")
    # The index serves other bytes as 1.1 now, and the cache is gone: refused, the record kept.
    other = sha256(fake.release("1.1", {"README.md": "# fakepkg\n\nRepublished.\n"}))
    (fake.work / "downloads" / sha / "fakepkg-1.1.tar.gz").unlink()
    (fake.work / "downloads" / sha).rmdir()
    line = one_error_line(
        fake.run("checkout", "--base", "sdist:1.1", "--dir", str(fake.root / "new"), env=fake.links_env())
    )
    assert line == (
        f"series: error: sha256 mismatch for the fakepkg==1.1 sdist from the package index: got {other}, expected "
        f"{sha} (recorded on first use in {recorded}); nothing was extracted"
    )
    assert recorded.read_text(encoding="utf-8") == before and not (fake.root / "new").exists()
    assert not (fake.work / "downloads" / other).exists()


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("sdist:", "bad base 'sdist:': use sdist, sdist:VERSION, path:DIR or git:URL@REF"),
        (
            "sdist:not-a-version",
            "bad base 'sdist:not-a-version': 'not-a-version' is not a release version of fakepkg "
            "(sdist:VERSION, e.g. sdist:1.0)",
        ),
        ("sdist:99.0.0", "no fakepkg==99.0.0 sdist on the package index (it has 1.0, 1.1)"),
    ],
)
def test_a_bad_version_is_one_error_line_and_leaves_nothing(fake, test_python, spec, error):
    fake.build_series(GOOD)
    fake.release("1.1")
    before = _left_behind(fake)
    for command in (["checkout", "--dir", str(fake.root / "co")], ["verify", "--python", test_python]):
        line = one_error_line(fake.run(*command, "--target", "fake", "--base", spec, env=fake.links_env()))
        assert line == f"series: error: {error}", command
        assert _left_behind(fake) == before and not (fake.root / "co").exists(), command
    # upstream's tests come from a tree with tests/: no sdist, of any version
    fake.write_manifest(read_patch_list(fake.manifest), extra='upstream_tests = ["tests/test_smoke.py"]\n')
    line = one_error_line(fake.run("verify", "--python", test_python, "--upstream-tests", "sdist:1.1"))
    assert "bad --upstream-tests 'sdist:1.1': use path:DIR (a tree with tests/) or git:URL@REF" in line
