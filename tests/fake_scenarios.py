"""A stand-in for scripts/downstream_scenarios.py in the tool's tests: the same command line, no torch.

Its scenarios read the fake target package (`fakepkg`, from the tree on PYTHONPATH) and the fake downstream
package (`fakedown`, from the install), so that each fixture patch changes some outcomes and not others.
`fake/crash` dies without an outcome when the file named by $FAKE_CRASH exists, and fails to train (an
outcome with an error) when the file named by $FAKE_ERROR does.
"""

import argparse
import hashlib
import importlib.metadata
import json
import os
import sys


SCENARIOS = [
    {"name": "fake/add", "package": "fakedown", "layer": None, "fp16": None},
    {"name": "fake/mul", "package": "fakedown", "layer": None, "fp16": None},
    {"name": "fake/version", "package": "fakedown", "layer": None, "fp16": None},
    {"name": "fake/crash", "package": "fakedown", "layer": None, "fp16": None},
    {"name": "fake-0.9/add", "package": "fakedown", "layer": "fakedown-0.9", "fp16": None},
]


def outcome(name):
    import fakedown
    import fakepkg
    from fakepkg.core import add, mul

    if name == "fake/crash" and os.path.exists(os.environ.get("FAKE_CRASH", "/nonexistent")):
        os._exit(3)
    failed = name == "fake/crash" and os.path.exists(os.environ.get("FAKE_ERROR", "/nonexistent"))
    value = add(2, 3) if name.endswith("/add") else mul(2, 3)
    version = getattr(fakepkg, "__version__", None) if name == "fake/version" else None
    weights = [float(value), abs(float(value)) + 1.0]
    return {
        "name": name,
        "package": "fakedown",
        "error": "RuntimeError: the trainer broke" if failed else None,
        "global_step": value + (fakedown.OFFSET if name.startswith("fake-0.9") else 0),
        "updates": value,
        "scheduler_steps": value,
        "events": {"on_step_end": value, "on_log": 1},
        "log_history": [{"loss": value / 10, "step": 1, "version": version}],
        "weights": {
            "sha256": hashlib.sha256(json.dumps(weights).encode()).hexdigest(),
            "tensors": 1,
            "fingerprint": [weights],
        },
        "nonfinite_grads": 0,
        "modules": {"fakepkg": os.path.dirname(fakepkg.__file__)},
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--check", nargs="*")
    parser.add_argument("--run", nargs="*")
    parser.add_argument("--result-fd", type=int)
    parser.add_argument("--timeout", type=float)
    parser.add_argument("--log-dir")
    args = parser.parse_args()
    if args.list:
        print(json.dumps(SCENARIOS))
    elif args.check is not None:
        problems = []
        try:
            import fakedown  # noqa: F401
        except ImportError as exc:
            problems.append(f"import fakedown: {exc}")
        print(json.dumps({"problems": problems, "packages": {"fakedown": importlib.metadata.version("fakedown")}}))
    else:
        for name in args.run:
            with open(os.path.join(args.log_dir, name.replace("/", "__") + ".log"), "w", encoding="utf-8") as log:
                log.write(f"== {name}\n")
            os.write(args.result_fd, (json.dumps(outcome(name)) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
