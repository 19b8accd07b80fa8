"""`checkout`: base from the sdist (cached or via pip), a clone or a git ref; one commit per patch."""

import shutil
import subprocess

import pytest
from seriesfixtures import BASE_FILES, GOOD, NOT_RED, git, make_tarball, one_error_line, sha256


def test_checkout_of_the_sdist(fake):
    fake.seed_cache()
    proc = fake.ok("checkout")
    repo = fake.checkout_dir
    assert "0 patch(es)" in proc.stdout
    assert git(repo, "rev-parse", "series/base") == git(repo, "rev-parse", "HEAD")
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "patches"
    assert sorted(git(repo, "ls-files").splitlines()) == sorted(BASE_FILES)
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert (repo / ".git/info/exclude").read_text(encoding="utf-8") == "__pycache__/\n*.pyc\n.pytest_cache/\n"
    # Same sdist, same base commit id: the base commit has a fixed identity and date.
    fake.ok("checkout", "--dir", str(fake.root / "again"))
    assert git(fake.root / "again", "rev-parse", "series/base") == git(repo, "rev-parse", "series/base")


@pytest.mark.quick
def test_checkout_applies_one_commit_per_patch(fake):
    names = fake.build_series(GOOD, NOT_RED)
    assert names == ["0001-core-make-add-add.patch", "0002-core-document-mul.patch"]
    fake.ok("checkout", "--dir", str(fake.root / "co"))
    log = git(fake.root / "co", "log", "--format=%s", "series/base..HEAD").splitlines()
    assert log == ["core: document mul()", "core: make add() add"]
    assert "return a + b" in (fake.root / "co/src/fakepkg/core.py").read_text(encoding="utf-8")


def test_existing_non_empty_dir_needs_replace(fake):
    fake.seed_cache()
    dest = fake.root / "busy"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine", encoding="utf-8")
    line = one_error_line(fake.run("checkout", "--dir", str(dest)))
    assert "not empty" in line and "--replace" in line
    assert [p.name for p in dest.iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in fake.root.iterdir() if p.name.startswith(".")) == []
    fake.ok("checkout", "--dir", str(dest), "--replace")
    assert not (dest / "keep.txt").exists() and (dest / "src/fakepkg/core.py").is_file()
    assert sorted(p.name for p in fake.root.iterdir() if p.name.startswith(".")) == []


def test_existing_empty_dir_is_fine(fake):
    fake.seed_cache()
    (fake.root / "empty").mkdir()
    fake.ok("checkout", "--dir", str(fake.root / "empty"))


def test_bad_cached_file_is_an_error_and_nothing_is_extracted(fake):
    cached = fake.seed_cache(b"not the sdist")
    line = one_error_line(fake.run("checkout"))
    assert f"cached sdist {cached} has sha256" in line and fake.sha in line
    assert not fake.checkout_dir.exists()
    assert list((fake.work / "checkouts").iterdir()) == []
    assert cached.read_bytes() == b"not the sdist"  # kept for inspection, never extracted


def test_download_with_pip_then_reuse_the_cache(fake):
    links = fake.root / "links"
    proc = fake.ok("checkout", env=fake.env(PIP_FIND_LINKS=str(links)))
    assert "downloading fakepkg==1.0 sdist with pip" in proc.stderr
    cached = fake.work / "downloads" / fake.sha / "fakepkg-1.0.tar.gz"
    assert sha256(cached) == fake.sha
    assert [p.name for p in (fake.work / "downloads").iterdir()] == [fake.sha]  # no temp folders left
    shutil.rmtree(links)  # the second checkout must not need the index
    proc = fake.ok("checkout", "--replace")
    assert "downloading" not in proc.stderr


def test_hash_mismatch_from_the_index_extracts_nothing(fake):
    fake.write_manifest(sha="0" * 64)
    proc = fake.run("checkout", env=fake.env(PIP_FIND_LINKS=str(fake.root / "links")))
    line = one_error_line(proc)
    assert "sha256 mismatch for the fakepkg==1.0 sdist" in line and fake.sha in line
    assert not fake.checkout_dir.exists()
    assert list((fake.work / "checkouts").iterdir()) == []
    assert list((fake.work / "downloads").iterdir()) == []


def test_unreachable_registry_says_what_could_not_be_fetched(fake):
    env = fake.env(
        PIP_INDEX_URL="http://127.0.0.1:9/simple",
        PIP_FIND_LINKS="",
        PIP_RETRIES="0",
        PIP_TIMEOUT="2",
    )
    env.pop("PIP_NO_INDEX")
    line = one_error_line(fake.run("checkout", env=env))
    assert "could not fetch the fakepkg==1.0 sdist with pip from http://127.0.0.1:9/simple" in line
    assert not fake.checkout_dir.exists()


def test_unknown_target(fake):
    line = one_error_line(fake.run("checkout", "--target", "nope"))
    assert "unknown target 'nope'" in line and "fake" in line


def test_listed_patch_file_missing(fake):
    fake.write_manifest(["0001-missing.patch"])
    line = one_error_line(fake.run("checkout"))
    assert "0001-missing.patch" in line and "missing" in line


def test_patch_that_does_not_apply_leaves_no_checkout(fake):
    fake.build_series(GOOD)
    # Same patch, different base: an sdist whose core.py lost the line the patch changes.
    files = dict(BASE_FILES, **{"src/fakepkg/core.py": "def add(a, b):\n    return 0\n"})
    other = make_tarball(fake.root / "other" / "fakepkg-1.0.tar.gz", "fakepkg-1.0", files)
    fake.sha = sha256(other)
    fake.write_manifest(["0001-core-make-add-add.patch"])
    fake.seed_cache(other.read_bytes())
    dest = fake.root / "co"
    line = one_error_line(fake.run("checkout", "--dir", str(dest)))
    assert "patch 0001-core-make-add-add.patch does not apply" in line and "src/fakepkg/core.py" in line
    assert not dest.exists()
    assert sorted(p.name for p in fake.root.iterdir() if p.name.startswith(".")) == []


def test_base_from_a_clone_and_from_a_git_ref(fake):
    fake.build_series(GOOD)
    upstream = fake.upstream_repo(fake.root / "upstream")
    git(upstream, "tag", "v1.0")
    fake.ok("checkout", "--dir", str(fake.root / "from-path"), "--base", f"path:{upstream}")
    fake.ok("checkout", "--dir", str(fake.root / "from-git"), "--base", f"git:{upstream.as_uri()}@v1.0")
    for name in ("from-path", "from-git"):
        repo = fake.root / name
        assert git(repo, "rev-parse", "series/base") == git(upstream, "rev-parse", "HEAD")
        assert git(repo, "log", "--format=%s", "-1") == "core: make add() add"


def test_bad_base_spec_and_non_git_path(fake):
    assert "bad base" in one_error_line(fake.run("checkout", "--base", "ftp:somewhere"))
    line = one_error_line(fake.run("checkout", "--base", f"path:{fake.root / 'links'}"))
    assert "is not a git repository" in line
    assert not (fake.work / "checkouts").exists()  # refused before anything is made


def test_git_missing(fake):
    env = fake.env(PATH=str(fake.root / "no-such-bin"))
    line = one_error_line(fake.run("checkout", env=env))
    assert "git is not installed" in line


def test_stop_at_conflict_keeps_the_checkout_for_a_manual_fix(fake):
    fake.build_series(GOOD, NOT_RED)
    # A new base where the second patch's context changed (like moving the pin to a new release).
    core = BASE_FILES["src/fakepkg/core.py"].replace("Multiply two numbers.", "Product of two numbers.")
    other = make_tarball(
        fake.root / "other" / "fakepkg-1.0.tar.gz", "fakepkg-1.0", dict(BASE_FILES, **{"src/fakepkg/core.py": core})
    )
    fake.sha = sha256(other)
    fake.write_manifest(["0001-core-make-add-add.patch", "0002-core-document-mul.patch"])
    fake.seed_cache(other.read_bytes())
    proc = fake.run("checkout", "--replace", "--stop-at-conflict")
    assert proc.returncode == 1, proc.stderr
    assert "git am stopped at 0002-core-document-mul.patch (src/fakepkg/core.py), with conflict markers" in proc.stdout
    repo = fake.checkout_dir
    assert (repo / ".git" / "rebase-apply").is_dir()
    # The earlier pin's sdist (in the download cache) gave the 3-way merge the blobs it needs: markers.
    assert "3-way merges use the blobs of fakepkg-1.0.tar.gz" in proc.stderr
    merged = (repo / "src/fakepkg/core.py").read_text(encoding="utf-8")
    assert "<<<<<<< " in merged and "Multiply two numbers (a times b)." in merged
    assert git(repo, "log", "--format=%s", "series/base..HEAD") == "core: make add() add"
    # Resolve by hand, continue, export: the series now applies to the new base.
    fixed = core.replace("return a - b", "return a + b").replace("Product of two numbers.", "Product (a times b).")
    (repo / "src/fakepkg/core.py").write_text(fixed, encoding="utf-8")
    git(repo, "add", "src/fakepkg/core.py")
    git(repo, "am", "--continue")
    fake.ok("export")
    fake.ok("checkout", "--replace")
    assert (repo / "src/fakepkg/core.py").read_text(encoding="utf-8") == fixed


def test_leftovers_of_an_interrupted_replace_are_cleaned_up(fake):
    fake.build_series(GOOD)
    parent = fake.checkout_dir.parent
    (parent / ".fake.old.abcd1234" / "old").mkdir(parents=True)
    (parent / ".fake.zyxw9876" / "repo").mkdir(parents=True)
    (parent / ".fake.notmine").mkdir()  # not a name the tool makes: left alone
    proc = fake.ok("checkout", "--replace")
    assert sorted(p.name for p in parent.iterdir()) == [".fake.notmine", "fake"]
    assert proc.stderr.count("left beside") == 2

    # Interrupted between moving the old checkout aside and moving the new one in: the old one is put back.
    (fake.checkout_dir / "mine.txt").write_text("kept", encoding="utf-8")
    aside = parent / ".fake.old.qwer5678"
    aside.mkdir()
    fake.checkout_dir.rename(aside / "old")
    proc = fake.run("checkout")
    assert "exists and is not empty" in one_error_line(proc)
    assert "put back" in proc.stderr
    assert (fake.checkout_dir / "mine.txt").read_text(encoding="utf-8") == "kept" and not aside.exists()


def test_stop_at_conflict_without_the_old_blobs_prints_the_next_command(fake):
    fake.build_series(GOOD, NOT_RED)
    core = BASE_FILES["src/fakepkg/core.py"].replace("Multiply two numbers.", "Product of two numbers.")
    other = make_tarball(
        fake.root / "other" / "fakepkg-1.0.tar.gz", "fakepkg-1.0", dict(BASE_FILES, **{"src/fakepkg/core.py": core})
    )
    shutil.rmtree(fake.work / "downloads" / fake.sha)  # the earlier pin's sdist is gone
    fake.sha = sha256(other)
    fake.write_manifest(["0001-core-make-add-add.patch", "0002-core-document-mul.patch"])
    fake.seed_cache(other.read_bytes())
    proc = fake.run("checkout", "--replace", "--stop-at-conflict")
    assert proc.returncode == 1, proc.stderr
    assert "git am stopped at 0002-core-document-mul.patch (src/fakepkg/core.py), without conflict markers" in (
        proc.stdout
    )
    command = next(line.strip() for line in proc.stdout.splitlines() if "git apply --reject" in line)
    assert command.startswith(f"cd {fake.checkout_dir} && git am --show-current-patch=diff | git apply --reject")
    subprocess.run(command, shell=True, capture_output=True, check=False)
    assert (fake.checkout_dir / "src/fakepkg/core.py.rej").is_file()
