"""bundle.py without building a bundle: what the tests import, the pure packages' files, the sdist's metadata
and the archive itself (reproducible, every file's sha256 in bundle.json, nothing half-written)."""

import hashlib
import importlib.util
import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from seriestool import bundle, patchfile
from seriestool.errors import SeriesError

from .conftest import commit


ROOT = Path(__file__).resolve().parents[2]


TESTS = """\
import os
import numpy as np
from transformers import Trainer, TrainingArguments
from transformers.testing_utils import *
from . import helpers
from tests.utils import x
from __future__ import annotations

if os.environ.get("X"):
    import torch
else:
    import safetensors.torch
try:
    from accelerate import Accelerator
except ImportError:
    pass


def test_x():
    import inside_a_function
"""


def test_imported_modules():
    sources = [TESTS, "def broken(:\n", "import numpy\nfrom transformers import Trainer\nimport yaml\n"]
    assert bundle.imported_modules(sources) == [
        ["accelerate", ["Accelerator"]],
        ["numpy", []],
        ["safetensors.torch", []],
        ["torch", []],
        ["transformers", ["Trainer", "TrainingArguments"]],
        ["transformers.testing_utils", []],
        ["yaml", []],  # from the file after one that does not parse
    ]
    assert bundle.imported_modules([]) == []


def test_names_and_canonical_names():
    assert bundle._names(["b>=1", "a[x]==2", "a", "c ; python_version<'3.12'"]) == ["a", "b", "c"]
    assert bundle._canonical("Foo_Bar.baz") == "foo-bar-baz"
    assert bundle._canonical("a--b__c") == "a-b-c"


def test_dist_members(tmp_path):
    site = tmp_path / "site"
    for rel in ("pkg/__init__.py", "pkg/__pycache__/x.cpython-311.pyc", "pkg/old.pyc", "pkg-1.dist-info/RECORD"):
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text("", encoding="utf-8")
    (tmp_path / "outside.py").write_text("", encoding="utf-8")
    files = ["pkg/__init__.py", "pkg/missing.py", "pkg/__pycache__/x.cpython-311.pyc", "pkg/old.pyc"]
    files += ["pkg-1.dist-info/RECORD", "../outside.py", "../bin/script"]
    assert bundle.dist_members({"site": str(site), "files": files}) == [
        ("pkg/__init__.py", (site / "pkg/__init__.py").resolve()),
        ("pkg-1.dist-info/RECORD", (site / "pkg-1.dist-info/RECORD").resolve()),
    ]


def _sdist(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_sdist_metadata(tmp_path):
    pkg_info = "Metadata-Version: 2.1\nName: x\nRequires-Python: >=3.10\nRequires-Dist: a>=1\nRequires-Dist: b\n\n"
    sdist = _sdist(tmp_path / "x-1.0.tar.gz", {"x-1.0/sub/PKG-INFO": "Name: no\n", "x-1.0/PKG-INFO": pkg_info})
    assert bundle.sdist_metadata(sdist) == (["a>=1", "b"], ">=3.10")
    bare = _sdist(tmp_path / "y-1.0.tar.gz", {"y-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: y\n\n"})
    assert bundle.sdist_metadata(bare) == ([], "")
    none = _sdist(tmp_path / "z-1.0.tar.gz", {"z-1.0/setup.py": ""})
    with pytest.raises(SeriesError) as info:
        bundle.sdist_metadata(none)
    assert str(info.value) == "z-1.0.tar.gz has no PKG-INFO: cannot tell what it needs"


def test_modes_and_tool_state(repo, tmp_path):
    commit(repo, {"a.py": "A = 1\n", "run.sh": "echo\n"})
    (repo.path / "run.sh").chmod(0o755)
    head = commit(repo, {})
    assert bundle._modes(repo, head, ["a.py", "run.sh"]) == {"a.py": "100644", "run.sh": "100755"}
    assert bundle._modes(repo, head, []) == {}
    assert bundle.tool_state(repo.path) == (head, False)
    (repo.path / "new.txt").write_text("", encoding="utf-8")
    assert bundle.tool_state(repo.path) == (head, True)
    assert bundle.tool_state(tmp_path / "nowhere") == (None, None)


def test_the_archive_is_reproducible_and_lists_every_file(tmp_path):
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\x00data")
    files = {"b/run.py": (b"print()\n", True), "a.txt": (blob, False), "b/c/d.txt": (b"d", False), "b/e": (b"", False)}
    out = tmp_path / "bundle.tar.gz"
    size, contents = bundle.write(out, files, {"schema": bundle.SCHEMA})
    assert size == out.stat().st_size and oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    first = out.read_bytes()
    assert bundle.write(out, dict(reversed(list(files.items()))), {"schema": bundle.SCHEMA})[0] == size
    assert out.read_bytes() == first  # the same inputs, byte for byte the same archive
    with tarfile.open(out) as tar:
        members = {m.name: m for m in tar.getmembers()}
        names = [m.name for m in tar.getmembers()]
        assert names == [
            bundle.TOP,
            f"{bundle.TOP}/a.txt",
            f"{bundle.TOP}/b",
            f"{bundle.TOP}/b/c",
            f"{bundle.TOP}/b/c/d.txt",
            f"{bundle.TOP}/b/e",
            f"{bundle.TOP}/b/run.py",
            f"{bundle.TOP}/bundle.json",
        ]  # each folder once, before what it holds
        folders = [members[name] for name in (bundle.TOP, f"{bundle.TOP}/b", f"{bundle.TOP}/b/c")]
        assert all(m.isdir() and m.mode == 0o755 and m.size == 0 for m in folders)
        assert members[f"{bundle.TOP}/bundle.json"].mode == 0o644
        assert {m.mtime for m in members.values()} == {bundle.MTIME}
        assert {(m.uid, m.gid, m.uname, m.gname) for m in members.values()} == {(0, 0, "", "")}
        assert members[f"{bundle.TOP}/b/run.py"].mode == 0o755 and members[f"{bundle.TOP}/a.txt"].mode == 0o644
        assert members[f"{bundle.TOP}/b"].isdir() and members[f"{bundle.TOP}/b"].mode == 0o755
        text = tar.extractfile(f"{bundle.TOP}/bundle.json").read().decode()
    data = json.loads(text)
    assert list(data) == ["schema", "files"]  # in the order it was given
    assert text == json.dumps(data, indent=2) + "\n"
    assert first[4:8] == b"\0\0\0\0"  # the gzip header's date: none
    assert data == {
        "schema": bundle.SCHEMA,
        "files": {
            "a.txt": hashlib.sha256(b"\x00data").hexdigest(),
            "b/c/d.txt": hashlib.sha256(b"d").hexdigest(),
            "b/e": hashlib.sha256(b"").hexdigest(),
            "b/run.py": hashlib.sha256(b"print()\n").hexdigest(),
        },
    }
    assert contents["a.txt"] == (b"\x00data", False) and contents["b/run.py"] == (b"print()\n", True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob.bin", "bundle.tar.gz"]  # no temporary file left


def test_an_archive_that_cannot_be_written_leaves_nothing(tmp_path):
    out = tmp_path / "bundle.tar.gz"
    out.mkdir()  # os.replace onto a folder fails
    with pytest.raises(OSError):
        bundle.write(out, {"a.txt": (b"a", False)}, {})
    assert [p.name for p in tmp_path.iterdir()] == ["bundle.tar.gz"] and out.is_dir()


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _runner():
    """scripts/run_gpu_checks.py, loaded as the GPU machine runs it (a file on its own, not a package module)."""
    spec = importlib.util.spec_from_file_location("run_gpu_checks_unit", ROOT / "scripts" / "run_gpu_checks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_runner_lists_the_debug_launcher_test_of_accelerate_0002(tmp_path):
    # before: `multi_process: []` in gpu-checks.json (the 2-process test starts them with accelerate's
    # `debug_launcher`, which the runner did not recognise); after: it is listed, needing no GPU.
    runner = _runner()
    (patch_path,) = sorted((ROOT / "patches" / "accelerate").glob("0002-*.patch"))
    (rel,) = patchfile.read(patch_path).added("tests/")
    added = patch_path.read_text(encoding="utf-8").split(f"+++ b/{rel}\n", 1)[1].split("\ndiff --git ", 1)[0]
    source = "".join(line[1:] + "\n" for line in added.splitlines() if line.startswith("+"))
    (tmp_path / "stage" / rel).parent.mkdir(parents=True)
    (tmp_path / "stage" / rel).write_text(source, encoding="utf-8")
    patches = [{"name": patch_path.name, "stage": "stage", "test_files": [rel]}]
    found = runner.multi_process_tests(tmp_path, {"targets": [{"name": "accelerate", "patches": patches}]})
    listed = [(entry["test"], entry["needs_gpus"]) for entry in found]
    assert listed == [("test_two_processes_end_the_pass_together", 0)]
    assert not runner.MULTI_PROCESS.search("def test_x(self):\n    options = debug_launcher_options\n")
