"""`bundle`'s archive: what `run_gpu_checks.py` needs to replay `verify`'s checks on a GPU machine offline.

One folder, `series-gpu-checks/`, packed as a reproducible .tar.gz (same inputs, same bytes):

- `run_gpu_checks.py` (scripts/run_gpu_checks.py: standard library only, Python 3.10+) and `README.txt`;
- `sdists/`: each target's pinned sdist, as downloaded (sha256 as in the manifest): the release sources;
- `patches/<target>/`: the patch files, for reference;
- `stages/<target>/<NNNN>/`: every file each patch adds or changes, as it is after that patch, put on the
  pinned base plus the earlier patches here (`git am`, a 3-way merge where `verify` needs one). The runner
  replays the series from the sdist with these, so it needs no git and no patch program;
- `deps/site/`: the pure-Python distributions the targets and their tests need, copied from the pinned venv
  (the versions `verify` uses, with their licence files); torch and the compiled ones are the machine's;
- `checks/skipped_steps_natural.py`: seed 000's reproduction (repro/), when a target is transformers;
- `bundle.json`: what the runner reads: targets, patches, stages, the packages, and the sha256 of every file.
"""

import ast
import email.parser
import gzip
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from . import patchfile, placement
from .base import SDIST
from .context import REPO_ROOT, Context
from .digests import sha256_file, sha256_of
from .errors import SeriesError
from .fetch import fetch_sdist
from .git import Repo, StrPath
from .manifest import Target
from .preimages import loader
from .results import is_test_file
from .scratch import prepare_scratch


SCHEMA = 1
TOP = "series-gpu-checks"
RUNNER = REPO_ROOT / "scripts" / "run_gpu_checks.py"
SEED = REPO_ROOT / "repro" / "skipped_steps_natural.py"
LIMIT_BYTES = 60 * 1000 * 1000  # what the bundle must stay under
# Beside the targets' own requirements: what their regression tests import.
TEST_REQUIREMENTS = ("pytest", "parameterized")
# The machine's own (the CUDA build): never bundled, nor what only it needs. `kernels` (required from transformers
# 5.25.0) fetches hub kernels for the machine's accelerator: the offline runner asks for none (USE_HUB_KERNELS=NO).
MACHINE_OWN = ("torch", "kernels")
MTIME = 946684800  # 2000-01-01, every member's date: the same inputs make the same archive

README = """\
The patch series' checks for a GPU machine without network (made by `series.py bundle`).

    python3 run_gpu_checks.py                   # every check on CUDA, with this Python's torch (2.6 or newer)
    python3 run_gpu_checks.py --python /path/to/python   # the Python that has the CUDA torch
    python3 run_gpu_checks.py --cpu             # the same on CPU: tests the runner, not a GPU verdict

It needs the Python the pinned releases need (python_requires in bundle.json), a CUDA build of
torch and the compiled packages the targets use (numpy, tokenizers, safetensors, regex, PyYAML,
psutil: it names the missing ones); the pure-Python ones are in deps/. It prints a table like
`series.py verify`, writes work/report.json and exits 0 (all checks passed), 1 (a check failed)
or 2 (environment: no GPU, no torch, a missing package, Python older than the releases need).

"""

# Runs in the pinned venv: the pure-Python closure of the requirements, read from the installed distributions.
DEPS_PROBE = r"""
import importlib.metadata as md, json, sys
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

args = json.loads(sys.argv[1])
installed = {}
for dist in md.distributions():
    installed.setdefault(canonicalize_name(dist.metadata["Name"]), dist)
exclude = {canonicalize_name(name) for name in args["exclude"]}


def oldest(specs):
    # The oldest Python 3.10-3.14 that every `Requires-Python` admits.
    for minor in range(10, 15):
        if all(not s or SpecifierSet(s).contains(f"3.{minor}", prereleases=True) for s in specs):
            return minor
    sys.exit("no Python from 3.10 to 3.14 satisfies " + "; ".join(s for s in specs if s))


def closure(minor):
    # Linux machines with that Python or newer: a requirement counts when its marker holds on any of them.
    envs = [
        {"python_version": f"3.{m}", "python_full_version": f"3.{m}.0", "sys_platform": "linux",
         "platform_system": "Linux", "platform_machine": machine, "os_name": "posix", "implementation_name": "cpython",
         "platform_python_implementation": "CPython", "extra": ""}
        for m in range(minor, 15) for machine in ("x86_64", "aarch64")
    ]
    def applies(req):
        return req.marker is None or any(req.marker.evaluate(env) for env in envs)
    direct = {canonicalize_name(Requirement(r).name) for r in args["direct"] if applies(Requirement(r))}
    todo = [Requirement(r) for r in args["roots"]]
    seen, missing = {}, []
    while todo:
        req = todo.pop(0)
        name = canonicalize_name(req.name)
        if not applies(req) or name in exclude or name in seen:
            continue
        dist = installed.get(name)
        if dist is None:
            missing.append(str(req))
            continue
        seen[name] = dist
        todo += [Requirement(r) for r in dist.requires or []]
    return seen, missing, direct


# The targets' Python, raised to what the packages that go in need (their markers depend on it), and past
# the Pythons whose backports (exceptiongroup, tomli on 3.10) this environment does not hold.
minor, raised_for = oldest(args["requires_python"]), []
while True:
    seen, missing, direct = closure(minor)
    if missing and minor < 14:
        raised_for, minor = sorted(set(raised_for + missing)), minor + 1
        continue
    needed = oldest(args["requires_python"] + [d.metadata.get("Requires-Python") or "" for d in seen.values()])
    if needed <= minor:
        break
    minor = needed
out = []
for name, dist in sorted(seen.items()):
    wheel = dist.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    pure = "Root-Is-Purelib: true" in wheel and bool(tags) and all(
        tag.split("-", 1)[0] in ("py2", "py3", "py2.py3") and tag.endswith("-none-any") for tag in tags
    )
    meta = dist.metadata
    licence = meta.get("License-Expression") or (meta.get("License") or "").split("\n")[0].strip()
    if not licence or len(licence) > 60:
        classifiers = meta.get_all("Classifier") or []
        classifiers = [c.rsplit("::", 1)[-1].strip() for c in classifiers if c.startswith("License ::")]
        licence = ", ".join(classifiers) or licence[:60] or "unknown"
    requires_python = meta.get("Requires-Python") or ""
    files = [str(f) for f in dist.files or []]
    top = set()
    if dist.read_text("top_level.txt"):
        top.update(line.strip() for line in dist.read_text("top_level.txt").splitlines() if line.strip())
    else:
        for f in files:
            first = f.split("/")[0]
            if first in ("..", "") or first.endswith((".dist-info", ".data")) or first == "__pycache__":
                continue
            top.add(first.split(".")[0] if "/" not in f else first)
    out.append({
        "name": meta["Name"], "key": name, "version": dist.version, "pure": pure, "tags": tags, "license": licence,
        "requires_python": requires_python, "direct": name in direct,
        "site": str(dist.locate_file("")), "files": files, "modules": sorted(top),
    })
print(json.dumps({"dists": out, "missing": missing, "python": f"3.{minor}", "raised_for": raised_for,
                  "installed": {name: dist.version for name, dist in installed.items()}}))
"""


Files = dict[str, tuple[bytes | Path, bool]]  # archive path -> (bytes, or the file holding them; executable)


def sdist_metadata(sdist: Path) -> tuple[list[str], str]:
    """(`Requires-Dist` lines, `Requires-Python`) of an sdist's top-level PKG-INFO."""
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if len(parts) == 2 and parts[1] == "PKG-INFO" and member.isreg():
                fh = tar.extractfile(member)
                text = fh.read().decode("utf-8", errors="replace") if fh else ""
                message = email.parser.Parser().parsestr(text, headersonly=True)
                return message.get_all("Requires-Dist") or [], message.get("Requires-Python") or ""
    raise SeriesError(f"{sdist.name} has no PKG-INFO: cannot tell what it needs")


def collect_deps(
    python: StrPath, roots: Iterable[str], *, direct: Iterable[str], exclude: Iterable[str], requires_python: list[str]
) -> dict[str, Any]:
    """The closure of `roots` in `python`'s environment, for Linux and the oldest Python the targets and those
    packages admit: {"pure": [...], "compiled": [...], "installed": {name: version}, "python": "3.N"}."""
    args = json.dumps(
        {"roots": list(roots), "direct": list(direct), "exclude": list(exclude), "requires_python": requires_python}
    )
    try:
        proc = subprocess.run(
            [str(python), "-c", DEPS_PROBE, args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SeriesError(f"cannot run {python}: {exc}") from None
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise SeriesError(f"cannot read the packages of {python}: {lines[-1] if lines else 'no output'}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    if data["missing"]:
        names = _names(data["missing"])
        raise SeriesError(
            f"{python} lacks {', '.join(names)}, which the targets or their tests need: pin them in "
            "scripts/requirements-test.txt"
        )
    data["raised_for"] = _names(data["raised_for"])
    data["pure"] = [d for d in data["dists"] if d["pure"]]
    data["compiled"] = [d for d in data["dists"] if not d["pure"]]
    return data


def _names(requirements: Iterable[str]) -> list[str]:
    return sorted({re.split(r"[^A-Za-z0-9._-]", req, maxsplit=1)[0] for req in requirements})


def dist_members(dist: dict[str, Any]) -> list[tuple[str, Path]]:
    """(archive path below deps/site, file) of an installed pure distribution, without bytecode and scripts."""
    site = Path(dist["site"]).resolve()
    members: list[tuple[str, Path]] = []
    for rel in dist["files"]:
        path = (site / rel).resolve()
        if not path.is_relative_to(site) or "__pycache__" in Path(rel).parts or rel.endswith(".pyc"):
            continue
        if not path.is_file():
            continue
        members.append((path.relative_to(site).as_posix(), path))
    return members


def imported_modules(sources: Iterable[str]) -> list[list[Any]]:
    """(module, [names]) the test files import at module level (also under a module-level `if`), not the
    standard library's or the tests' own: what the runner imports once before the checks."""
    wanted: dict[str, set[str]] = {}
    stdlib = set(getattr(sys, "stdlib_module_names", ()))

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    wanted.setdefault(alias.name, set())
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                wanted.setdefault(node.module, set()).update(alias.name for alias in node.names if alias.name != "*")
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(getattr(node, "orelse", []))

    for source in sources:
        try:
            visit(ast.parse(source).body)
        except SyntaxError:
            continue
    return [
        [module, sorted(names)]
        for module, names in sorted(wanted.items())
        if module.split(".")[0] not in stdlib and module.split(".")[0] not in ("tests", "__future__")
    ]


def build_stages(ctx: Context, target: Target) -> tuple[Path, str, list[dict[str, Any]], Files]:
    """Put `target`'s patches on its pinned sdist in `<work>/bundle/<target>`.

    Returns (sdist file, the patches' entries for bundle.json, {archive path: (bytes, executable)})."""
    sdist = fetch_sdist(target.package, target.version, target.sha256, ctx.downloads, log=ctx.log)
    repo, base = prepare_scratch(ctx, target, SDIST, folder="bundle")
    patches: list[dict[str, Any]] = []
    files: Files = {}
    prev = base
    load = loader(repo, target, ctx.downloads, ctx.log)

    for index, name in enumerate(target.patches, start=1):
        patch = target.patch_path(name)
        placed = placement.place(repo, patch, preimages=load)
        if not placed.status.went_in:
            where = "; ".join(c.describe() for c in placed.conflicts)
            raise SeriesError(
                f"{target.name} {name} does not go onto the pinned base plus the earlier patches ({placed.status}"
                f"{': ' + where if where else ''}): `verify` says more; no bundle was written"
            )
        commit = repo.out("rev-parse", "HEAD")
        changes = repo.changes(prev, commit)
        kept = [c.path for c in changes if c.status != "D"]
        modes = _modes(repo, commit, kept)
        stage = f"stages/{target.name}/{name[:4]}"
        changed: list[dict[str, Any]] = []
        for path in kept:
            mode = modes.get(path)
            if mode not in ("100644", "100755"):
                raise SeriesError(f"{target.name} {name}: {path} is not a plain file (mode {mode}); cannot bundle it")
            files[f"{stage}/{path}"] = ((repo.path / path).read_bytes(), mode == "100755")
            changed.append({"path": path, "executable": mode == "100755"})
        support = [c.path for c in changes if c.status == "A" and c.path.startswith(target.tests)]
        patches.append(
            {
                "name": name,
                "index": index,
                "sha256": sha256_file(patch),
                "subject": patchfile.read(patch).subject,
                "tier": target.tier(name),
                "base_status": str(placed.status),
                "applies_alone": repo.apply_check_on(base, patch, ctx.work),
                "depends_on": target.depends.get(name, []),
                "file": f"patches/{target.name}/{name}",
                "stage": stage,
                "changed": changed,
                "deleted": [c.path for c in changes if c.status == "D"],
                "support": support,
                "test_files": [path for path in support if is_test_file(path)],
            }
        )
        files[f"patches/{target.name}/{name}"] = (patch.read_bytes(), False)
        prev = commit
    return sdist, base, patches, files


def _modes(repo: Repo, commit: str, paths: Sequence[str]) -> dict[str, str]:
    if not paths:
        return {}
    out = repo.run("ls-tree", "-z", commit, "--", *paths).stdout
    modes: dict[str, str] = {}
    for record in out.split("\0"):
        if record:
            meta, path = record.split("\t", 1)
            modes[path] = meta.split()[0]
    return modes


def tool_state(root: StrPath) -> tuple[str | None, bool | None]:
    """The tool's commit, and whether its work tree has changes (the bundle says what made it)."""
    repo = Repo(root)
    if not repo.is_work_tree():
        return None, None
    return repo.head(), bool(repo.status())


def build(ctx: Context, targets: list[Target], python: StrPath) -> tuple[Files, dict[str, Any]]:
    """Everything the archive holds: {archive path: (bytes or Path, executable)} and bundle.json's data."""
    files: Files = {}
    entries: list[dict[str, Any]] = []
    sdists: dict[str, Path] = {}
    tests: list[str] = []
    for target in targets:
        ctx.log(f"{target.name}: {len(target.patches)} patch(es) on the pinned sdist")
        sdist, base, patches, staged = build_stages(ctx, target)
        files.update(staged)
        sdists[target.name] = sdist
        files[f"sdists/{sdist.name}"] = (sdist, False)
        for patch in patches:
            tests += [
                _read(staged[f"{patch['stage']}/{path}"][0]).decode("utf-8", "replace") for path in patch["test_files"]
            ]
        entries.append(
            {
                "name": target.name,
                "package": target.package,
                "version": target.version,
                "sha256": target.sha256,
                "sdist": f"sdists/{sdist.name}",
                "base_commit": base,
                "source_dir": target.source_dir,
                "tests": target.tests,
                "verify_with": [name for name in target.verify_with if name in {t.name for t in targets}],
                "patches": patches,
            }
        )

    metadata = {target.name: sdist_metadata(sdists[target.name]) for target in targets}
    direct = [req for requires, _ in metadata.values() for req in requires]
    deps = collect_deps(
        python,
        [*direct, *TEST_REQUIREMENTS],
        direct=direct,
        exclude=[*MACHINE_OWN, *(target.package for target in targets)],
        requires_python=[spec for _, spec in metadata.values()],
    )
    pure, compiled, installed = deps["pure"], deps["compiled"], deps["installed"]
    if deps["raised_for"]:
        ctx.log(
            f"the checks need Python {deps['python']}+: {', '.join(deps['raised_for'])} (for older Pythons) "
            f"are not in {python}"
        )
    # The other targets `verify`'s environment holds at their pinned version (accelerate 1.15.0 for transformers):
    # the runner puts their releases on the path, as the venv has them.
    for entry, target in zip(entries, targets, strict=True):
        entry["environment"] = [
            other.name
            for other in targets
            if other is not target and installed.get(_canonical(other.package)) == other.version
        ]
    site = "deps/site"
    packages = []
    for dist in pure:
        members = dist_members(dist)
        for rel, path in members:
            files[f"{site}/{rel}"] = (path, False)
        packages.append(
            {
                "name": dist["name"],
                "version": dist["version"],
                "license": dist["license"],
                "requires_python": dist["requires_python"],
                "files": len(members),
                "bytes": sum(path.stat().st_size for _, path in members),
            }
        )
    needed = [
        {
            "name": dist["name"],
            "version": dist["version"],
            "modules": dist["modules"],
            "required": dist["direct"],  # a target requires it itself (else one of the packages in deps/)
        }
        for dist in compiled
    ]
    files["run_gpu_checks.py"] = (RUNNER, True)
    files["README.txt"] = (README.encode(), False)
    seed = None
    if any(target.package == "transformers" for target in targets):
        files["checks/skipped_steps_natural.py"] = (SEED, False)
        seed = {"script": "checks/skipped_steps_natural.py", "issue": "seed 000 (../shared/seeds/000_*.txt)"}
    commit, dirty = tool_state(ctx.repo_root)
    bundle = {
        "schema": SCHEMA,
        "tool_commit": commit,
        "tool_dirty": dirty,
        "manifest_sha256": sha256_file(ctx.manifest.path),
        "python_requires": deps["python"],  # the oldest Python the targets and the packages in deps/ admit
        "torch_requires": ">=2.6",
        "targets": entries,
        "deps": {"site": site, "packages": packages, "compiled": needed},
        "imports": imported_modules(tests),
        "seed": seed,
    }
    return files, bundle


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _read(data: bytes | Path) -> bytes:
    return data.read_bytes() if isinstance(data, Path) else data


def write(out: Path, files: Files, bundle: dict[str, Any]) -> tuple[int, dict[str, tuple[bytes, bool]]]:
    """Write the archive to `out` through a temporary file beside it (nothing half-written); returns its size."""
    digests: dict[str, str] = {}
    contents: dict[str, tuple[bytes, bool]] = {}
    for rel in sorted(files):
        data, executable = files[rel]
        blob = _read(data)
        contents[rel] = (blob, executable)
        digests[rel] = sha256_of(blob)
    bundle = dict(bundle, files=digests)
    contents["bundle.json"] = ((json.dumps(bundle, indent=2, sort_keys=False) + "\n").encode(), False)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                tar.addfile(_info(TOP, 0, tarfile.DIRTYPE, 0o755))
                folders = set()
                for rel in sorted(contents):
                    parts = rel.split("/")
                    for depth in range(1, len(parts)):
                        folder = "/".join(parts[:depth])
                        if folder not in folders:
                            folders.add(folder)
                            tar.addfile(_info(f"{TOP}/{folder}", 0, tarfile.DIRTYPE, 0o755))
                    blob, executable = contents[rel]
                    tar.addfile(
                        _info(f"{TOP}/{rel}", len(blob), tarfile.REGTYPE, 0o755 if executable else 0o644),
                        io.BytesIO(blob),
                    )
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp made it private; an archive to copy is as any new file
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out.stat().st_size, contents


def _info(name: str, size: int, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.type = kind
    info.mode = mode
    info.mtime = MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info
