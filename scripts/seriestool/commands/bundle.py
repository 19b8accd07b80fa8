"""`bundle`: one archive that runs the series' checks on a GPU machine without network."""

import argparse
import os
import tempfile
from pathlib import Path

from .. import bundle as bundle_mod
from .. import pyenv
from ..am import check_patches
from ..context import Context
from ..errors import SeriesError


NAME = "bundle"
HELP = "pack the series' checks into one archive for an offline GPU machine (run_gpu_checks.py inside)"
DESCRIPTION = f"""\
{HELP}.

The archive (.tar.gz, one folder series-gpu-checks/) holds the pinned sdists, every file each patch adds
or changes as it is after that patch (put on the pinned base plus the earlier patches here), the
patches, the pure-Python packages the tests need (from the pinned venv, or --python's environment), seed
000's reproduction, bundle.json (contents and sha256 of every file) and run_gpu_checks.py (standard
library only). No torch: on the GPU machine, unpack it and run, with the Python of the machine's CUDA
torch (2.6 or newer; the Python the pinned releases need: 3.11+ for transformers 5.24.0),

  python3 run_gpu_checks.py

which replays each patch red/green on CUDA, the companion run, the multi-process tests and seed 000,
prints verify's table and writes a JSON report (docs/reviewer-ci.md, "GPU checks on a borrowed machine").

example:
  python3 scripts/series.py bundle --out /tmp/series-gpu-checks.tar.gz

exit status: 0 written; 2 bad input (--out not writable, a patch that does not apply, a package
missing from the venv): nothing is written."""
NEEDS_GIT = True
NEEDS_WORK = True
LOCKS_WORK = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, metavar="FILE", help="the archive to write (.tar.gz or .tgz)")
    p.add_argument(
        "--python", metavar="PATH", help="take the pure-Python packages from this interpreter instead of the venv"
    )


def check_out(out: Path) -> None:
    """Refuse an output that cannot be written before anything is built: one error line, nothing on disk."""
    if out.is_dir():
        raise SeriesError(f"--out {out} is a folder; name the archive file")
    if not out.name.endswith((".tar.gz", ".tgz")):
        raise SeriesError(f"--out {out} must end in .tar.gz or .tgz (the bundle is a gzip-compressed tar)")
    if not out.parent.is_dir():
        why = "is not a folder" if out.parent.exists() else "does not exist"
        raise SeriesError(f"--out {out}: {out.parent} {why}")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".probe", dir=out.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise SeriesError(f"--out {out}: cannot write in {out.parent} ({exc.strerror or exc})") from None


def _size(count: int) -> str:
    return f"{count / 1e6:.1f} MB" if count >= 100_000 else f"{count / 1e3:.0f} kB"


def run(args: argparse.Namespace, ctx: Context) -> int:
    out = Path(args.out).expanduser().resolve()
    check_out(out)
    targets = ctx.manifest.select()
    for target in targets:
        check_patches(target)
    if not any(target.patches for target in targets):
        raise SeriesError(f"{ctx.manifest.path.name} lists no patches: nothing to bundle")
    python = pyenv.interpreter(ctx.work, ctx.requirements, args.python, log=ctx.log)
    files, bundle = bundle_mod.build(ctx, targets, python)
    size, contents = bundle_mod.write(out, files, bundle)

    tops: dict = {}
    for rel, (blob, _) in contents.items():
        top = rel.split("/", 1)[0] if "/" in rel else rel
        count, total = tops.get(top, (0, 0))
        tops[top] = (count + 1, total + len(blob))
    ctx.out(
        f"{out}: {_size(size)} ({size} bytes), {len(contents)} files, {_size(sum(t for _, t in tops.values()))} "
        "unpacked"
    )
    for top, (count, total) in sorted(tops.items()):
        ctx.out(f"  {bundle_mod.TOP}/{top:<24} {count:>5} file(s) {_size(total):>9}")
    patches = sum(len(t["patches"]) for t in bundle["targets"])
    tests = sum(len(p["test_files"]) for t in bundle["targets"] for p in t["patches"])
    ctx.out(
        f"{len(bundle['targets'])} target(s), {patches} patch(es), {tests} test file(s), "
        f"{len(bundle['deps']['packages'])} pure-Python package(s); needed on the machine: torch>=2.6, "
        + ", ".join(dep["name"] for dep in bundle["deps"]["compiled"] if dep["required"])
    )
    if size > bundle_mod.LIMIT_BYTES:
        ctx.out(f"warning: the bundle is over {_size(bundle_mod.LIMIT_BYTES)}")
    ctx.out(f"on the GPU machine: tar xzf {out.name} && cd {bundle_mod.TOP} && python3 run_gpu_checks.py")
    return 0
