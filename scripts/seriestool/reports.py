"""What `verify` leaves behind besides its exit status: the last report per target, a markdown summary."""

import json
import os
from pathlib import Path


APPLIES = {
    "clean": "yes",
    "3-way": "3-way merge",
    "conflict": "**conflict**",
    "already-upstream": "already upstream",
    "fixed-differently": "fixed upstream differently",
}


def last_path(work, target):
    return Path(work) / "reports" / f"verify-{target}.json"


def save_last(work, report):
    """Keep the report of each target verified in `<work>/reports/verify-<target>.json` (for `pr`)."""
    for target in report["targets"]:
        part = dict(report, targets=[target], patches=[p for p in report["patches"] if p["target"] == target["name"]])
        part["upstream_tests"] = [u for u in report.get("upstream_tests", []) if u["target"] == target["name"]]
        part["ok"] = all(p["verdict"] != "fail" for p in part["patches"]) and all(
            u["ok"] for u in part["upstream_tests"]
        )
        path = last_path(work, target["name"])
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(part, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)


def load_last(work, target):
    """The last report `verify` wrote for `target`, or None."""
    try:
        return json.loads(last_path(work, target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _red(patch):
    run = patch.get("red")
    if not run:
        return "-"
    if run["status"] == "red":
        return f"yes, {run['failed']} of {run['total']} fail"
    return f"{'passes' if run['status'] == 'not-red' else run['status']} ({run['failed']} of {run['total']} fail)"


def _green(patch):
    run = patch.get("green")
    if not run:
        return "-"
    skipped = f", {run['skipped']} skipped" if run["skipped"] else ""
    if run["status"] == "green":
        return f"yes, {run['passed']} pass{skipped}"
    return f"**{run['status']}** ({run['passed']} pass, {run['failed']} fail{skipped})"


def _style(patch):
    if patch.get("style") is None:
        return "-"
    return "clean" if patch["style_clean"] else "**not clean**"


def markdown(report):
    """The report as markdown, for a CI job summary ($GITHUB_STEP_SUMMARY) or a comment."""
    lines = [f"### Patch series verify: {'OK' if report['ok'] else 'FAILED'}", ""]
    tools = report.get("tools") or {}
    lines += ["| target | base | commit |", "|---|---|---|"]
    for target in report["targets"]:
        base = target["base"]
        lines.append(f"| {target['name']} | {_cell(base['describe'])} | `{(base.get('commit') or '')[:12]}` |")
    lines += [
        "",
        f"Device `{report['device']}`, torch {tools.get('torch')}, Python {tools.get('python')}, "
        f"{report['duration_s']:.0f} s.",
        "",
    ]
    if report["patches"]:
        lines += [
            "| patch | applies | red without the fix | green with it | style | verdict |",
            "|---|---|---|---|---|---|",
        ]
        for patch in report["patches"]:
            verdict = "**FAIL**" if patch["verdict"] == "fail" else patch["verdict"]
            cells = [
                f"`{patch['target']}/{patch['name']}`",
                APPLIES.get(patch.get("base_status"), "-"),
                _red(patch),
                _green(patch),
                _style(patch),
                verdict,
            ]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
    problems = [(p, text) for p in report["patches"] for text in p["problems"]]
    if problems:
        lines += ["**Needs a maintainer:**", ""]
        lines += [f"- `{p['target']}/{p['name']}`: {_cell(text)}" for p, text in problems]
        lines.append("")
    notes = [(t["name"], text) for t in report["targets"] for text in t.get("notes", [])]
    notes += [(f"{p['target']}/{p['name']}", text) for p in report["patches"] for text in p.get("notes", [])]
    if notes:
        lines += ["**Notes:**", ""]
        lines += [f"- `{where}`: {_cell(text)}" for where, text in notes]
        lines.append("")
    for part in report.get("upstream_tests", []):
        lines += [
            f"**Upstream tests of {part['target']}** ({len(part['files'])} file(s) from `{_cell(part['spec'])}`): "
            + ("no regression" if part["ok"] else f"**{len(part['regressions'])} regression(s)**"),
            "",
            "| tree | passed | failed | skipped | error | time |",
            "|---|---|---|---|---|---|",
        ]
        for state, c in part["states"].items():
            cells = [state, *(str(c[name]) for name in ("passed", "failed", "skipped", "error"))]
            lines.append("| " + " | ".join(cells) + f" | {c['duration_s']:.0f} s |")
        lines.append("")
        lines += [
            f"- regression `{_cell(r['id'])}`: {r['base']} on the base, {r['series']} with the series"
            for r in part["regressions"]
        ]
        lines += [f"- {_cell(problem)}" for problem in part["problems"]]
        if part["regressions"] or part["problems"]:
            lines.append("")
    if not report["patches"]:
        lines += ["No patches to verify.", ""]
    return "\n".join(lines)


def append_markdown(path, report):
    """Append the markdown summary to `path` (appending is what $GITHUB_STEP_SUMMARY expects)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(markdown(report) + "\n")
