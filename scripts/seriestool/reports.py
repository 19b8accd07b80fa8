"""What `verify` leaves behind besides its exit status and its output: the last report per target (for `pr`), and
the last one per target and base (for `checkout` and `branches`, which judge a base by the verify made on it)."""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .digests import sha256_file
from .manifest import Target
from .statuses import BaseStatus, RunStatus, Verdict


def last_path(work: str | Path, target: str) -> Path:
    """The last report of `target`, on whatever base it was verified (`pr` reads it)."""
    return Path(work) / "reports" / f"verify-{target}.json"


def base_path(work: str | Path, target: str, commit: str) -> Path:
    """The last report of `target` verified on the base commit `commit` (the pinned sdist's tree, a fork's HEAD):
    a verify on another base leaves it alone."""
    return Path(work) / "reports" / "bases" / f"verify-{target}-{commit}.json"


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def save_last(work: str | Path, report: dict[str, Any]) -> None:
    """Keep the report of each target verified in `<work>/reports/verify-<target>.json` (for `pr`), and once more
    per base in `<work>/reports/bases/verify-<target>-<base commit>.json`, so that a verify on the sdist does not
    erase what one on a fork found (which `branches` and `checkout` read for that fork).

    A run that checked only some patches (`--patch`) keeps, for the others, the results of the saved report
    when they are for the same patch file, base, device and interpreter: `pr` still finds them."""
    for target in report["targets"]:
        part = dict(report, targets=[target], patches=[p for p in report["patches"] if p["target"] == target["name"]])
        part["upstream_tests"] = [u for u in report.get("upstream_tests", []) if u["target"] == target["name"]]
        commit = target.get("base", {}).get("commit")
        earlier = load_base(work, target["name"], commit) if commit else None
        part["patches"] = _keep_earlier_results(part, earlier or load_last(work, target["name"]))
        part["ok"] = all(Verdict(p["verdict"]).passed for p in part["patches"]) and all(
            u["ok"] for u in part["upstream_tests"]
        )
        _write(last_path(work, target["name"]), part)
        if commit:
            _write(base_path(work, target["name"], commit), part)


def _same_setup(new: dict[str, Any], old: Any) -> bool:
    if not old or not old.get("targets") or old.get("schema_version") != new.get("schema_version"):
        return False
    new_base, old_base = new["targets"][0]["base"], old["targets"][0]["base"]
    return (
        new_base.get("commit") is not None  # two reports that do not know their base may be for two bases
        and new_base.get("commit") == old_base.get("commit")
        and new.get("device") == old.get("device")
        and new.get("python") == old.get("python")
        and new.get("tools") == old.get("tools")
    )


def _keep_earlier_results(part: dict[str, Any], old: Any) -> list[dict[str, Any]]:
    """The patches of `part`, where one was not checked this time taking its checked result from `old`."""
    if not any(p["verdict"] == Verdict.NOT_CHECKED for p in part["patches"]) or not _same_setup(part, old):
        return part["patches"]
    # A patch's result depends on the patches before it too: keep it only while they are all the same files.
    earlier = {p["name"]: p for p in old["patches"]}
    merged, same_so_far = [], True
    for patch in part["patches"]:
        kept: Any = earlier.get(patch["name"])
        same_so_far = same_so_far and kept is not None and kept.get("sha256") == patch.get("sha256")
        if patch["verdict"] == Verdict.NOT_CHECKED and same_so_far and kept["verdict"] != Verdict.NOT_CHECKED:
            kept = dict(kept, checked_at=kept.get("checked_at") or old.get("date"))
            merged.append(kept)
        else:
            merged.append(patch)
    return merged


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def load_last(work: str | Path, target: str) -> Any:
    """The last report `verify` wrote for `target`, or None."""
    return _load(last_path(work, target))


def load_base(work: str | Path, target: str, commit: str) -> Any:
    """The last report `verify` wrote for `target` on the base `commit`, or None. A work folder from before reports
    were kept per base has only the last report: it is taken when it is for that base."""
    report = _load(base_path(work, target, commit))
    if report is None:
        last = load_last(work, target)
        if last and last.get("targets") and last["targets"][0].get("base", {}).get("commit") == commit:
            report = last
    return report


@dataclass
class Judgement:
    """What the last `verify` of a target said about one patch on one base (see `judged`)."""

    base_status: str  # statuses.BaseStatus
    verdict: str  # statuses.Verdict
    date: str  # when that verify ran
    problems: list
    red: str | None = None  # statuses.RunStatus of its tests without it (for a conflict: on the base), if they ran
    test_files: list[str] = field(default_factory=list)  # the test files it adds
    blocked_by: list[str] = field(default_factory=list)  # for a blocked patch: the conflicting ones it needs


def judged(work: str | Path, target: Target, base_commit: str) -> dict[str, "Judgement"]:
    """{patch name: Judgement} from the last verify report of `target` when it was made on the base
    `base_commit`, for the patches whose file is still the one it judged (and every earlier one too: a patch's
    placement depends on those before it). Empty when there is no such report (a verify on another base since,
    the pinned sdist or another fork, does not replace it)."""
    report = load_base(work, target.name, base_commit)
    if not report or not report.get("targets") or report["targets"][0]["base"].get("commit") != base_commit:
        return {}
    found: dict[str, Judgement] = {}
    for entry in report.get("patches", []):
        path = Path(target.patch_path(entry["name"]))
        if not path.is_file() or entry.get("sha256") != sha256_file(path):
            break
        if entry.get("base_status"):
            found[entry["name"]] = Judgement(
                base_status=entry["base_status"],
                verdict=entry["verdict"],
                date=entry.get("checked_at") or report.get("date") or "",
                problems=list(entry.get("problems", [])),
                red=(entry.get("red") or {}).get("status"),
                test_files=list(entry.get("test_files") or []),
                blocked_by=list(entry.get("blocked_by") or []),
            )
    return found


def conflict_advice(judgement: Judgement | None) -> str:
    """What to do about a patch that conflicts on a base, from what the last verify on that base found there: ""
    when that verify did not judge the conflict (none on that base, or it did not test the patch), and only then is
    running it the next step (it tells a fix upstream from a conflict). A verify that found the conflict and its
    tests still failing without it ruled a fix upstream out: resolve the conflict."""
    if judgement is None or judgement.base_status != BaseStatus.CONFLICT:
        return ""
    found = f"as the verify of {judgement.date} on this base found"
    if judgement.red == RunStatus.RED:
        return f"resolve it (its tests still fail on this base without it, {found})"
    if judgement.red is not None:
        return (
            f"resolve it, or read upstream's code (its tests are {judgement.red} on this base without it, {found}: "
            "they cannot tell whether upstream fixed it)"
        )
    if not judgement.test_files:
        return (
            f"resolve it, or read upstream's code (it adds no tests, so the verify of {judgement.date} could not tell)"
        )
    return ""


def conflict_hint(judged: dict[str, Judgement], names: list[str], verify: str, then: str) -> str:
    """What to do about the patches `names` that conflict on a base, as one phrase: for each one the last verify on
    that base judged, `conflict_advice`; for the others, the `verify` command that tells whether upstream fixed them
    its own way, after which the command does `then`."""
    parts, unjudged = [], []
    for name in names:
        advice = conflict_advice(judged.get(name))
        if advice:
            parts.append(f"{name[:4]} conflicts: {advice}")
        else:
            unjudged.append(name)
    if unjudged:
        which = "it" if len(unjudged) == len(names) == 1 else ", ".join(name[:4] for name in unjudged)
        parts.append(f"if upstream fixed {which} in another way, `{verify}` finds out, and {then}")
    return "; ".join(parts)


def _reports(work: str | Path, target: str) -> list[Any]:
    """Every kept report of `target`: the one per base, then the last one (a work folder from before bases)."""
    found = [_load(path) for path in sorted((Path(work) / "reports" / "bases").glob(f"verify-{target}-*.json"))]
    return [report for report in [*found, load_last(work, target)] if report and report.get("targets")]


def on_release(work: str | Path, target: Target) -> dict[str, set[str]]:
    """{patch name: the tests of it that failed without it} from the last verify on the pinned sdist (this
    version), for the patches whose file is still the one it judged. `verify` on another base compares with it: a
    conflicting patch whose tests partly pass there was fixed upstream in its own way."""
    for report in _reports(work, target.name):
        base = report["targets"][0]
        if base.get("base", {}).get("spec") != "sdist" or base.get("version") != target.version:
            continue
        found: dict[str, set[str]] = {}
        for entry in report.get("patches", []):
            path = Path(target.patch_path(entry["name"]))
            red = entry.get("red") or {}
            if path.is_file() and entry.get("sha256") == sha256_file(path) and red.get("status") == "red":
                found[entry["name"]] = set(red.get("failing") or [])
        return found
    return {}


def judged_on(work: str | Path, target: Target, commit: str, tree: str | None) -> tuple[Any, dict[str, Judgement]]:
    """(the report, its judgements) of the last verify on the base `commit`, or on another base with the same
    files (`tree`: a fork's commit of the release's files and the pinned sdist's commit): what `pr` quotes for a
    branch made on that base. (None, {}) when there is none."""
    found = judged(work, target, commit)
    if found:
        return load_base(work, target.name, commit), found
    if tree:
        for report in _reports(work, target.name):
            base = report["targets"][0].get("base", {})
            if base.get("tree") == tree and base.get("commit"):
                found = judged(work, target, base["commit"])
                if found:
                    return load_base(work, target.name, base["commit"]), found
    return None, {}


def branches_path(work: str | Path, target: str) -> Path:
    """What the last `branches` of `target` made: the clone, the base and each patch's branch (`pr` reads it)."""
    return Path(work) / "reports" / f"branches-{target}.json"


def save_branches(work: str | Path, target: str, data: dict[str, Any]) -> None:
    _write(branches_path(work, target), data)


def load_branches(work: str | Path, target: str) -> Any:
    return _load(branches_path(work, target))
