"""End to end on the real pinned sdists: pip download, hash check, checkout, export with no diff.

Needs the package index once per machine: the sdists are cached in <repo>/.work/downloads, shared with
`series.py verify`. Deselect with `-m "not network"`.
"""

import os
import shutil
import subprocess
import sys
import tomllib

import pytest
from seriesfixtures import REPO_ROOT, SERIES, git, sha256


MANIFEST = tomllib.loads((REPO_ROOT / "patches" / "series.toml").read_text(encoding="utf-8"))


@pytest.mark.network
@pytest.mark.parametrize("target", sorted(MANIFEST["targets"]))
def test_pinned_sdist_checkout_then_export_is_byte_stable(tmp_path, target):
    pin = MANIFEST["targets"][target]
    patches = shutil.copytree(REPO_ROOT / "patches", tmp_path / "patches")
    git(patches, "init", "--quiet")
    git(patches, "add", "--all")
    git(patches, "commit", "--quiet", "-m", "as committed")
    downloads = REPO_ROOT / ".work" / "downloads"
    env = dict(os.environ, SERIES_DOWNLOADS=str(downloads))
    env.pop("SERIES_WORK", None)
    base = [sys.executable, str(SERIES), "--work", str(tmp_path / "work"), "--manifest", str(patches / "series.toml")]

    proc = subprocess.run([*base, "checkout", "--target", target], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    cached = list((downloads / pin["sha256"]).iterdir())
    assert [p.name for p in cached] == [f"{pin['package']}-{pin['version']}.tar.gz"]
    assert sha256(cached[0]) == pin["sha256"]

    checkout = tmp_path / "work" / "checkouts" / target
    assert (checkout / "src" / pin["package"] / "__init__.py").is_file()
    assert git(checkout, "log", "-1", "--format=%s", "series/base") == f"{pin['package']} {pin['version']}"
    assert git(checkout, "rev-list", "--count", "series/base..HEAD") == str(len(pin["patches"]))
    assert git(checkout, "status", "--porcelain", "--untracked-files=all") == ""

    proc = subprocess.run([*base, "export", "--target", target], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert subprocess.run(["git", "diff", "--exit-code"], cwd=patches, capture_output=True).returncode == 0
    assert git(patches, "status", "--porcelain", "--untracked-files=all") == ""
