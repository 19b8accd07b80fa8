"""Helpers for the tool's tests: a fake target package with a real sdist, manifest and work folder."""

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path


REPO_ROOT = Path(__file__).resolve().parents[1]
SERIES = REPO_ROOT / "scripts" / "series.py"
if str(REPO_ROOT / "scripts") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "scripts"))

from seriestool.digests import sha256_file  # noqa: E402


GIT_ID = ["-c", "user.name=Test Author", "-c", "user.email=author@example.com", "-c", "commit.gpgSign=false"]

BACKEND = '''\
"""In-tree build backend: lets pip prepare metadata for the fake sdist without any download."""

import os


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    folder = os.path.join(metadata_directory, "fakepkg-1.0.dist-info")
    os.makedirs(folder)
    with open(os.path.join(folder, "METADATA"), "w", encoding="utf-8") as fh:
        fh.write("Metadata-Version: 2.1\\nName: fakepkg\\nVersion: 1.0\\n")
    return "fakepkg-1.0.dist-info"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise NotImplementedError
'''

BASE_FILES = {
    "PKG-INFO": "Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.0\n",
    "README.md": "# fakepkg\n\nA fake upstream package for the series tool's tests.\n",
    "pyproject.toml": textwrap.dedent(
        """\
        [build-system]
        requires = []
        build-backend = "_backend"
        backend-path = ["."]

        [tool.ruff]
        line-length = 119

        [tool.ruff.lint]
        select = ["E", "F", "W", "I"]
        """
    ),
    "_backend.py": BACKEND,
    "src/fakepkg/__init__.py": '"""A fake package."""\n',
    "src/fakepkg/core.py": textwrap.dedent(
        '''\
        """Arithmetic with a bug."""


        def add(a, b):
            """Add two numbers."""
            return a - b


        def mul(a, b):
            """Multiply two numbers."""
            return a * b
        '''
    ),
    "tests/test_smoke.py": "def test_smoke():\n    assert True\n",
}

# Fixture patches: (subject, {path: new content or None to delete, or a (old, new) replacement}).
GOOD = (
    "core: make add() add",
    {
        "src/fakepkg/core.py": ("return a - b", "return a + b"),
        "tests/regress/test_add.py": textwrap.dedent(
            """\
            from fakepkg.core import add


            def test_add():
                assert add(2, 3) == 5


            def test_add_zero():
                assert add(0, 0) == 0
            """
        ),
    },
)
NOT_RED = (
    "core: document mul()",
    {
        "src/fakepkg/core.py": ('"""Multiply two numbers."""', '"""Multiply two numbers (a times b)."""'),
        "tests/regress/test_mul.py": "from fakepkg.core import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
    },
)
# Rewrites the line GOOD adds (its context holds GOOD's `return a + b`): once both landed, GOOD alone no
# longer reverse-applies on the base.
TRUNCATE = (
    "core: truncate add()",
    {
        "src/fakepkg/core.py": ("return a + b", "return int(a + b)"),
        "tests/regress/test_truncate.py": (
            "from fakepkg.core import add\n\n\ndef test_truncate():\n    assert add(2.5, 0) == 2\n"
        ),
    },
)
# Another file: independent of the others.
VERSION = (
    "fakepkg: add __version__",
    {
        "src/fakepkg/__init__.py": ('"""A fake package."""\n', '"""A fake package."""\n\n__version__ = "1.0"\n'),
        "tests/regress/test_version.py": (
            'import fakepkg\n\n\ndef test_version():\n    assert getattr(fakepkg, "__version__", None) == "1.0"\n'
        ),
    },
)
STYLE = (
    "core: add sub()",
    {
        "src/fakepkg/core.py": ('"""Arithmetic with a bug."""\n', '"""Arithmetic with a bug."""\nimport os\n'),
        "src/fakepkg/extra.py": "def sub(a,b):\n    return a-b\n",
        "tests/regress/test_sub.py": textwrap.dedent(
            """\
            import importlib.util


            def test_sub():
                assert importlib.util.find_spec("fakepkg.extra") is not None
                from fakepkg.extra import sub

                assert sub(3, 1) == 2
            """
        ),
    },
)
COLLECT_ERROR = (
    "core: add div()",
    {
        "src/fakepkg/div.py": "def div(a, b):\n    return a / b\n",
        "tests/regress/test_div.py": "from fakepkg.div import div\n\n\ndef test_div():\n    assert div(6, 3) == 2\n",
    },
)
IMPORT_ONLY = (
    "core: add neg()",
    {
        "src/fakepkg/neg.py": "def neg(a):\n    return -a\n",
        "tests/regress/test_neg.py": "def test_neg():\n    from fakepkg.neg import neg\n\n    assert neg(1) == -1\n",
    },
)
NO_TESTS = ("docs: reword the README", {"README.md": ("A fake upstream", "A pretend upstream")})
ALL_SKIPPED = (
    "core: add pow2()",
    {
        "src/fakepkg/pow2.py": "def pow2(a):\n    return a * a\n",
        "tests/regress/test_pow2.py": textwrap.dedent(
            """\
            import pytest


            @pytest.mark.skip(reason="needs a GPU")
            def test_pow2():
                from fakepkg.pow2 import pow2

                assert pow2(3) == 9
            """
        ),
    },
)


def counted(counter, fail_on=()):
    """GOOD with a second test that counts the runs of its file in `counter` and fails on the runs numbered in
    `fail_on` (the red run without the fix is run 1): a deliberately flaky test when `fail_on` holds some of
    the green runs, a steady one otherwise."""
    test = textwrap.dedent(
        f"""\
        from pathlib import Path

        from fakepkg.core import add

        COUNTER = Path({json.dumps(str(counter))})
        FAIL_ON = {tuple(fail_on)!r}


        def test_add():
            assert add(2, 3) == 5


        def test_counted():
            with COUNTER.open("a", encoding="utf-8") as fh:
                fh.write("x")
            run = len(COUNTER.read_text(encoding="utf-8"))
            assert run not in FAIL_ON, f"fails on run {{run}}"
        """
    )
    return (
        "core: make add() add, with a counted test",
        {"src/fakepkg/core.py": ("return a - b", "return a + b"), "tests/regress/test_counted.py": test},
    )


def git(cwd, *args, env=None, check=True):
    full_env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0", **(env or {}))
    proc = subprocess.run(
        ["git", *GIT_ID, *args], cwd=cwd, env=full_env, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {args} failed: {proc.stderr}")
    return proc.stdout.strip()


def sha256(path):
    """The sha256 a manifest pins for the file: the tool's own file hash (pinned by tests/unit/test_digests.py)."""
    return sha256_file(path)


def make_tarball(path, top, files, extra_members=()):
    """A .tar.gz with `files` under `top/`, plus raw (TarInfo, bytes-or-None) members."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 1_600_000_000
            tar.addfile(info, io.BytesIO(data))
        for info, data in extra_members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def release_files(version, changes=None, base=None):
    """The fake package's files (`base`, default BASE_FILES) as its release `version` (its PKG-INFO and the metadata
    its build backend gives pip say so), with `changes` ({path: (old, new)} or new text)."""
    files = dict(base or BASE_FILES)
    files["PKG-INFO"] = files["PKG-INFO"].replace("Version: 1.0", f"Version: {version}")
    files["_backend.py"] = BACKEND.replace("1.0", version)
    for rel, change in (changes or {}).items():
        if isinstance(change, tuple):
            assert change[0] in files[rel], (rel, change[0])
            files[rel] = files[rel].replace(change[0], change[1], 1)
        else:
            files[rel] = change
    return files


def manifest_text(sha, patches=(), *, tests="tests/regress/", name="fake", extra=""):
    items = "".join(f'    "{p}",\n' for p in patches)
    listing = f"[\n{items}]" if patches else "[]"
    return (
        textwrap.dedent(
            f"""\
        # Fixture manifest.
        schema = 1

        [targets.{name}]
        package = "fakepkg"
        version = "1.0"
        sha256 = "{sha}"
        git_url = "https://example.invalid/fakepkg.git"
        source_dir = "src"
        tests = "{tests}"
        """
        )
        + f"patches = {listing}\n"
        + extra
    )


def apply_changes(tree, changes):
    for rel, change in changes.items():
        path = Path(tree) / rel
        if change is None:
            path.unlink()
        elif isinstance(change, tuple):
            old, new = change
            text = path.read_text(encoding="utf-8")
            assert old in text, (rel, old)
            path.write_text(text.replace(old, new, 1), encoding="utf-8")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(change, encoding="utf-8")


class Fake:
    """A fake target in a temporary folder: sdist, manifest, work folder, download cache."""

    def __init__(self, root):
        self.root = Path(root)
        self.sdist = make_tarball(self.root / "links" / "fakepkg-1.0.tar.gz", "fakepkg-1.0", BASE_FILES)
        self.sha = sha256(self.sdist)
        self.patches_dir = self.root / "patches"
        self.manifest = self.patches_dir / "series.toml"
        self.work = self.root / "work"
        self.empty_links = self.root / "no-links"
        self.empty_links.mkdir()
        self.write_manifest()

    # -- setup -----------------------------------------------------------------------------------

    def write_manifest(self, patches=(), **kwargs):
        self.patches_dir.mkdir(parents=True, exist_ok=True)
        (self.patches_dir / "fake").mkdir(exist_ok=True)
        self.manifest.write_text(manifest_text(kwargs.pop("sha", self.sha), patches, **kwargs), encoding="utf-8")

    def seed_cache(self, data=None):
        """Put the sdist (or other bytes) in the download cache slot of the pinned hash."""
        slot = self.work / "downloads" / self.sha
        slot.mkdir(parents=True, exist_ok=True)
        target = slot / self.sdist.name
        target.write_bytes(self.sdist.read_bytes() if data is None else data)
        return target

    def release(self, version, changes=None, base=None):
        """The sdist of another release of the fake package, beside the pinned one in the folder `links_env`'s pip
        finds them in; returns its path."""
        files = release_files(version, changes, base)
        return make_tarball(self.root / "links" / f"fakepkg-{version}.tar.gz", f"fakepkg-{version}", files)

    def links_env(self, **extra):
        """`env` with pip finding the sdists in <root>/links (the pinned one, those `release` made): a package index
        without a network."""
        return self.env(PIP_FIND_LINKS=str(self.root / "links"), **extra)

    def env(self, **extra):
        """No package index and no pip config: tests never touch the network by accident."""
        env = dict(os.environ)
        env.update(
            PIP_CONFIG_FILE=os.devnull,
            PIP_NO_INDEX="1",
            PIP_FIND_LINKS=str(self.empty_links),
            PIP_NO_CACHE_DIR="1",
            PIP_DISABLE_PIP_VERSION_CHECK="1",
        )
        for key in ("SERIES_WORK", "SERIES_MANIFEST", "SERIES_DOWNLOADS"):
            env.pop(key, None)
        env.update(extra)
        return env

    def run(self, *args, env=None, cwd=None):
        cmd = [sys.executable, str(SERIES), "--work", str(self.work), "--manifest", str(self.manifest), *args]
        return subprocess.run(
            cmd, cwd=cwd or self.root, env=env or self.env(), capture_output=True, text=True, stdin=subprocess.DEVNULL
        )

    def ok(self, *args, **kwargs):
        proc = self.run(*args, **kwargs)
        assert proc.returncode == 0, f"series {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        return proc

    @property
    def checkout_dir(self):
        return self.work / "checkouts" / "fake"

    def build_series(self, *patches, discard=False, **manifest):
        """Make the fixture patches through the tool: checkout, one commit each, export.

        A patch is (subject, changes) or (subject, changes, message body). `discard`: the checkout may hold
        commits of an earlier series that are not exported any more; start over anyway.
        """
        self.write_manifest(**manifest)
        self.seed_cache()
        self.ok("checkout", "--replace", *(["--discard-unexported"] if discard else []))
        for subject, changes, *body in patches:
            apply_changes(self.checkout_dir, changes)
            git(self.checkout_dir, "add", "--all")
            message = f"{subject}\n\n{body[0] if body else 'Why and how.'}"
            git(self.checkout_dir, "commit", "--quiet", "-m", message, env=_fixed_dates())
        self.ok("export")
        return read_patch_list(self.manifest)

    def upstream_repo(self, path):
        """A git repository holding the sdist's files (a fork to apply to, or a git base)."""
        path = Path(path)
        path.mkdir(parents=True)
        for rel, text in BASE_FILES.items():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_text(text, encoding="utf-8")
        git(path, "init", "--quiet", "--initial-branch=main")
        # its user, whom `branches` commits as (whatever the machine's global git config holds)
        git(path, "config", "user.name", "Clone User")
        git(path, "config", "user.email", "clone.user@example.com")
        git(path, "add", "--all")
        git(path, "commit", "--quiet", "-m", "upstream 1.0", env=_fixed_dates())
        return path


_DATE = {"n": 0}


def _fixed_dates():
    _DATE["n"] += 1
    date = f"2026-01-01T00:{_DATE['n'] % 60:02d}:00+0000"
    return {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}


def read_patch_list(manifest):
    import tomllib

    data = tomllib.loads(Path(manifest).read_text(encoding="utf-8"))
    return data["targets"]["fake"]["patches"]


def repo_state(path):
    """Everything `apply` promises to leave alone."""
    return {
        "head": git(path, "rev-parse", "HEAD"),
        "branch": git(path, "symbolic-ref", "--quiet", "--short", "HEAD", check=False),
        "branches": git(path, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads"),
        "status": git(path, "status", "--porcelain=v1", "--untracked-files=all", "--ignored"),
        "stash": git(path, "stash", "list"),
        "files": {
            str(p.relative_to(path)): p.read_bytes()
            for p in sorted(Path(path).rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(path).parts
        },
    }


def copy_tree(src, dst):
    shutil.copytree(src, dst, symlinks=True)
    return Path(dst)


def one_error_line(proc):
    """Bad input: exit status 2 and exactly one `series: error:` line on stderr."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("series: error: ")]
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert len(errors) == 1 and errors[0] == lines[-1], proc.stderr
    return errors[0]


def problem_items(stdout):
    """The problem and note lines under verify's table, each unwrapped to one line (as before wrapping)."""
    items = []
    for line in stdout.splitlines():
        if line.startswith("      ") and items:
            items[-1] += " " + line.strip()
        elif line.startswith("  ") and not line.startswith("   "):
            items.append(line)
    return items


def table_rows(stdout):
    """The rows of verify's console table as {column: cell}, columns cut where the dashes line has gaps."""
    lines = stdout.splitlines()
    dashes = next(i for i, line in enumerate(lines) if line.startswith("---"))
    spans, start = [], 0
    rule = lines[dashes]
    while start < len(rule):
        end = rule.find("  ", start)
        end = len(rule) if end < 0 else end
        spans.append((start, end))
        start = end + 2
    head = [lines[dashes - 1][a:b].strip() for a, b in spans]
    rows = []
    for line in lines[dashes + 1 :]:
        if not line or line.startswith(" ") or any(line[b : b + 2] != "  " for _, b in spans[:-1]):
            break  # the problem lines and the summary after the table
        cells = [line[a : b if i < len(spans) - 1 else None].strip() for i, (a, b) in enumerate(spans)]
        rows.append(dict(zip(head, cells, strict=True)))
    return rows
