"""What `verify` shows: the console table, the JUnit XML report and the markdown summary, with one set of
labels (statuses.py); and how the tool shows a path on the console."""

import os
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .errors import SeriesError
from .manifest import FORK_TIER
from .results import PatchResult, UpstreamTestsResult
from .statuses import BaseStatus, RunStatus, Verdict


JSON = dict[str, Any]  # a patch of the JSON report, or the report


# the problem line of an upstream-tier patch that goes in only on top of a fork-tier one (verification.py)
STACK_PROBLEM = "does not go in on the base with only the upstream-tier patches before it"
WIDTH = 120  # the console table fits in this many columns
MIN_PATCH = 20  # the patch column is never narrower than this


def shown_path(path: str | os.PathLike[str]) -> str:
    """`path` relative to the current folder when it is below it (shorter on the console), else as it is."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel == ".." or rel.startswith(".." + os.sep) else rel


def red_cell(run: JSON | None) -> str:
    """A red run (without the fix), as in both tables: `yes failed/total` or `NO: status failed/total`."""
    if not run:
        return "-"
    if run["status"] == RunStatus.RED:
        return f"yes {run['failed']}/{run['total']}"
    if run["total"]:
        return f"NO: {run['status']} {run['failed']}/{run['total']}"
    return f"NO: {run['status']}"


def green_cell(run: JSON | None) -> str:
    """A green run (with the fix): `yes passed/skipped` or `NO: status passed/skipped`; run N times
    (--repeat), ` xN` after it, and a flaky one `FLAKY: green/N runs`."""
    if not run:
        return "-"
    runs = run.get("runs", 1)
    if run["status"] == RunStatus.FLAKY:
        return f"FLAKY: {run['run_statuses'].count(RunStatus.GREEN)}/{runs} runs"
    times = f" x{runs}" if runs > 1 else ""
    if run["status"] == RunStatus.GREEN:
        return f"yes {run['passed']}/{run['skipped']}{times}"
    return f"NO: {run['status']} {run['passed']}/{run['skipped']}{times}"


def style_cell(patch: JSON) -> str:
    if patch.get("style") is None:
        return "-"
    return "clean" if patch["style_clean"] else "NOT CLEAN"


def applies_cell(patch: JSON) -> str:
    status = patch.get("base_status")
    return BaseStatus(status).label if status else "-"


def _numbers(names: Sequence[str]) -> str:
    """`0005-0008` for a run of consecutive patch numbers, `0002,0004` otherwise."""
    numbers = [name[:4] for name in names]
    if len(numbers) > 2 and all(n.isdigit() for n in numbers):
        values = [int(n) for n in numbers]
        if values == list(range(values[0], values[0] + len(values))):
            return f"{numbers[0]}-{numbers[-1]}"
    return ",".join(numbers)


def alone_cell(patch: JSON) -> str:
    if patch.get("depends_on"):
        return "needs " + _numbers(patch["depends_on"])
    alone = patch.get("applies_alone")
    return "-" if alone is None else ("yes" if alone else "no")


def short_name(patch: JSON) -> str:
    """`<target> <number>`: how the console names a patch (the JSON report keeps the file name)."""
    return f"{patch['target']} {patch['name'][:4]}"


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 0)].rstrip() + "..."


def tier_cell(patch: JSON) -> str:
    """`upstream` (a pull request) or `fork` (carried for forks); `-` in a report that does not say."""
    return str(patch.get("tier") or "-")


def tier_mark(patch: JSON) -> str:
    """How the console table shows a patch's tier, after its number: ` (fork)` for the fork tier, nothing for the
    upstream tier (every patch not in [targets.<t>.fork]). A column of its own would not fit in 120 columns."""
    return f" ({FORK_TIER})" if patch.get("tier") == FORK_TIER else ""


def check_cells(patch: JSON) -> tuple[str, ...]:
    """The cells of a patch's checks (JSON form), as the console table and the markdown summary show them."""
    return (
        applies_cell(patch),
        alone_cell(patch),
        red_cell(patch.get("red")),
        green_cell(patch.get("green")),
        style_cell(patch),
        Verdict(patch["verdict"]).label,
    )


def table(patches: Sequence[JSON], width: int = WIDTH) -> str:
    """The console table of the patches (JSON form), at most `width` columns wide when the patch column can
    shrink to fit: `<target> <number> <subject>`, the subject cut to what is left."""
    head = ("patch", "applies", "alone", "red fail/all", "green pass/skip", "style", "verdict")
    rest = [check_cells(p) for p in patches]
    widths = [max(len(row[i]) for row in [head[1:], *rest]) for i in range(len(head) - 1)]
    room = max(width - sum(widths) - 2 * len(widths), MIN_PATCH)
    names = []
    for p in patches:
        subject = p.get("subject") or p["name"][5:].removesuffix(".patch")
        names.append(_fit(f"{short_name(p)}{tier_mark(p)} {subject}", room))
    first = max(len(name) for name in [head[0], *names])
    rows = [head, *[(name, *cells) for name, cells in zip(names, rest, strict=True)]]
    widths = [first, *widths]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def wrap(text: str, width: int = WIDTH, indent: str = "  ", hang: str = "      ") -> list[str]:
    """`text` as lines of at most `width` columns (a single word longer than that, a path, stays whole)."""
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=indent,
        subsequent_indent=hang,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent.rstrip()]


def problem_lines(patches: Iterable[JSON], width: int = WIDTH) -> list[str]:
    """The problems and notes under the table, each wrapped to the table's width, continuation lines indented."""
    lines = []
    for p in patches:
        for problem in p["problems"]:
            lines += wrap(f"{short_name(p)}: {problem}", width)
        for note in p.get("notes", []):
            lines += wrap(f"{short_name(p)}: note: {note}", width)
    return lines


def _junit_outcome(
    res: PatchResult, check: str, passed: bool | None, required: bool, detail: object
) -> tuple[str, str, str] | None:
    """None when the check passed, else ("failure" or "skipped", message, text)."""
    if res.verdict == Verdict.BACKPORT:
        # declared: it needs a backport to this older release (or needs one that does); not a failure
        return "skipped", res.notes[0] if res.notes else "needs a backport", ""
    if res.base_status == BaseStatus.BLOCKED:
        # Not a failure of its own (the conflict that blocks it is one): skipped, saying by which patch.
        if check == "applies":
            return "skipped", res.problems[0] if res.problems else str(res.base_status), ""
        return "skipped", f"not run: blocked by {', '.join(dep[:4] for dep in res.blocked_by)}", ""
    if res.base_status is not None and BaseStatus(res.base_status).informational:
        if check == "applies":
            return "skipped", f"{res.base_status}: {res.notes[0] if res.notes else ''}", ""
        return "skipped", f"not run: {res.base_status}", ""
    if not res.applies:
        if check == "applies":
            return "failure", "applies failed", "\n".join(res.problems)
        if check == "red_without_fix" and res.red is not None:
            return None if passed else ("skipped", f"without the patch: {res.red.status}", "")
        return "skipped", "not run: the patch does not apply", ""
    if passed:
        return None
    if not res.checked and check not in ("applies", "applies_alone", "upstream_stack"):
        return "skipped", "not checked (--patch)", ""
    if check == "green_with_fix" and res.green is not None and res.green.status == RunStatus.FLAKY:
        flaky = ", ".join(f"{f['test']} failed in {f['failed']} of {res.green.runs} runs" for f in res.green.flaky)
        green = res.green.run_statuses.count(RunStatus.GREEN)
        return "flaky", f"green_with_fix flaky: green in {green} of {res.green.runs} runs", flaky
    if required:
        return "failure", f"{check} failed", str(detail or "")
    return "skipped", str(detail), ""


def _junit_upstream(suite: ET.Element, part: UpstreamTestsResult, counts: dict[str, int]) -> None:
    """The cases of one target's upstream tests (class name `<target>.upstream_tests`): `runs` (a failure when a
    run could not be judged), one failure per undeclared regression and per stale declaration, and one passing
    case per declared regression, which says which patch declares it and why."""
    classname = f"{part.target}.upstream_tests"

    def case(name: str, out: str = "", failure: str = "", text: str = "") -> None:
        element = ET.SubElement(suite, "testcase", classname=classname, name=name)
        counts["tests"] += 1
        if out:
            ET.SubElement(element, "system-out").text = out
        if failure:
            ET.SubElement(element, "failure", message=failure).text = text or None
            counts["failures"] += 1

    states = "; ".join(
        f"{name}: {state.passed} passed, {state.failed} failed, {state.skipped} skipped, {state.error} error"
        for name, state in part.states.items()
    )
    problems = "\n".join(part.problems)
    case(
        "runs",
        out=f"{len(part.files)} file(s) from {part.spec}; {states}",
        failure=problems and "runs failed",
        text=problems,
    )
    for reg in part.regressions:
        case(reg.id, failure=f"regression: {reg.base} on the base, {reg.series} with the series", text=reg.log or "")
    for change in part.declared:
        case(
            change.id,
            out=f"declared by {change.patch} ({change.base} on the base, {change.series} with the series): "
            f"{change.reason}",
        )
    for change in part.stale:
        case(
            f"stale declaration {change.test}",
            failure=f"stale declaration by {change.patch}: {change.why}",
            text=f"{change.base} on the base, {change.series} with the series; reason given: {change.reason}",
        )


def write_junit(
    path: str | os.PathLike[str],
    results: Sequence[PatchResult],
    duration: float,
    upstream: Sequence[UpstreamTestsResult] = (),
) -> None:
    suite = ET.Element("testsuite", name="series-verify", time=f"{duration:.2f}")
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    tiered = {res.target for res in results if res.tier == FORK_TIER}  # targets whose upstream tier is checked alone
    for res in results:
        checks = [
            ("applies", res.applies, True, None),
            (
                "applies_alone",
                res.applies_alone,
                res.hidden_dependency,
                "; ".join(res.problems) if res.hidden_dependency else "does not apply alone on the bare base",
            ),
            ("red_without_fix", res.red_without_fix, True, res.red and res.red.status),
            ("green_with_fix", res.green_with_fix, True, res.green and res.green.status),
            (
                "style_clean",
                res.style_clean,
                True,
                res.style and f"{res.style.check_output}\n{res.style.format_output}",
            ),
        ]
        if res.target in tiered and res.tier != FORK_TIER:
            stack = [problem for problem in res.problems if problem.startswith(STACK_PROBLEM)]
            checks.append(("upstream_stack", res.upstream_stack, True, "; ".join(stack)))
        for check, passed, required, detail in checks:
            case = ET.SubElement(suite, "testcase", classname=f"{res.target}.{res.name}", name=check)
            counts["tests"] += 1
            properties = ET.SubElement(case, "properties")  # the patch's tier: upstream (a pull request) or fork
            ET.SubElement(properties, "property", name="tier", value=res.tier)
            if check == "applies" and res.base_status == BaseStatus.THREE_WAY:
                ET.SubElement(case, "system-out").text = "applies with a 3-way merge"
            outcome = _junit_outcome(res, check, passed, required, detail)
            if outcome is None:
                continue
            kind, message, text = outcome
            # A flaky check is a failure of type "flaky": it fails the run, and says what it is.
            attributes = {"message": message, "type": "flaky"} if kind == "flaky" else {"message": message}
            element = ET.SubElement(case, "failure" if kind == "flaky" else kind, attributes)
            if text:
                element.text = text
            counts["skipped" if kind == "skipped" else "failures"] += 1
    for part in upstream:
        _junit_upstream(suite, part, counts)
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("errors", "0")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    Path(path).write_text(ET.tostring(root, encoding="unicode") + "\n", encoding="utf-8")


# -- the markdown summary ----------------------------------------------------------------------------


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(report: JSON) -> str:
    """The report as markdown, for a CI job summary ($GITHUB_STEP_SUMMARY) or a comment."""
    head = f"### Patch series verify: {'OK' if report['ok'] else 'FAILED'}"
    # On another base than the pinned sdist (the nightly job's upstream main), the first line says what was judged.
    moved = [t for t in report["targets"] if t.get("base", {}).get("spec") not in (None, "sdist")]
    if moved:
        head += " on " + ", ".join(f"{t['name']} {t['base']['describe']} at `{t['base']['commit']}`" for t in moved)
    lines = [head, ""]
    tools = report.get("tools") or {}
    lines += ["| target | base | commit | judged with |", "|---|---|---|---|"]
    for target in report["targets"]:
        base = target["base"]
        companions = ", ".join(
            f"{other['name']} {other['version']} (released{' and patched' if other.get('patched') else ''})"
            for other in target.get("with", [])
        )
        lines.append(
            f"| {target['name']} | {_cell(base['describe'])} | `{(base.get('commit') or '')[:12]}` "
            f"| {_cell(companions or '-')} |"
        )
    lines += [
        "",
        f"Device `{report['device']}`, torch {tools.get('torch')}, Python {tools.get('python')}, "
        f"{report['duration_s']:.0f} s"
        + (f", each green stage run {report['repeat']} times." if report.get("repeat", 1) > 1 else "."),
        "",
    ]
    if report["patches"]:
        lines += [
            "| patch | tier | applies | alone | red without the fix (failed/total) | green with it (passed/skipped) "
            "| style | verdict |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for patch in report["patches"]:
            cells = [f"`{patch['target']}/{patch['name']}`", tier_cell(patch), *check_cells(patch)]
            loud = ("FAIL", "FLAKY", "NOT CLEAN", "CONFLICT")
            cells = [f"**{c}**" if c in loud or c.startswith(("NO:", "FLAKY:")) else c for c in cells]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
    problems = [
        (f"{p['target']}/{p['name']}", text)
        for p in report["patches"]
        if p["verdict"] != Verdict.BLOCKED
        for text in p["problems"]
    ]
    blocked = [
        (f"{p['target']}/{p['name']}", text)
        for p in report["patches"]
        if p["verdict"] == Verdict.BLOCKED
        for text in p["problems"]
    ]
    for companion in report.get("companions", []):
        if not companion["green"]:
            run = companion["run"]
            what = "flaky" if run["status"] == RunStatus.FLAKY else f"{run['status']}, not green"
            if run.get("runs", 1) > 1:
                what += f" (green in {run['run_statuses'].count(RunStatus.GREEN)} of {run['runs']} runs)"
            problems.append((companion["label"], f"all the tests: {what}"))
    if problems:
        lines += ["**Needs a maintainer:**", ""]
        lines += [f"- `{where}`: {_cell(text)}" for where, text in problems]
        lines.append("")
    if blocked:
        lines += ["**Blocked** (left out with a patch they need; judged once it goes in):", ""]
        lines += [f"- `{where}`: {_cell(text)}" for where, text in blocked]
        lines.append("")
    notes = [(t["name"], text) for t in report["targets"] for text in t.get("notes", [])]
    notes += [(f"{p['target']}/{p['name']}", text) for p in report["patches"] for text in p.get("notes", [])]
    if notes:
        lines += ["**Notes:**", ""]
        lines += [f"- `{where}`: {_cell(text)}" for where, text in notes]
        lines.append("")
    for part in report.get("upstream_tests", []):
        declared = part.get("declared", [])
        names = list(dict.fromkeys(f"{d['test'].rsplit('::', 1)[-1]} by {d['patch'][:4]}" for d in declared))
        verdict = f"no undeclared regression ({len(names)} declared: {', '.join(names)})" if names else "no regression"
        if not part["ok"]:
            verdict = f"**{len(part['regressions'])} regression(s)**"
            if part.get("stale"):
                verdict += f", **{len(part['stale'])} stale declaration(s)**"
        lines += [
            f"**Upstream tests of {part['target']}** ({len(part['files'])} file(s) from `{_cell(part['spec'])}`): "
            + verdict,
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
        lines += [
            f"- declared by `{d['patch'][:4]}` `{_cell(d['id'])}`: {d['base']} on the base, {d['series']} with the "
            f"series; its pull request updates the test: {_cell(d['reason'])}"
            + (
                f" (updated by `{Path(d['diff']).name}`: {d['updated'].get('base', 'not run')} on the base, "
                f"{d['updated'].get('series', 'not run')} with the series)"
                if d.get("diff")
                else ""
            )
            for d in declared
        ]
        lines += [
            f"- **stale declaration** by `{d['patch'][:4]}` of `{_cell(d['test'])}`: {_cell(d['why'])}"
            for d in part.get("stale", [])
        ]
        lines += [f"- {_cell(problem)}" for problem in part["problems"]]
        if part["regressions"] or part["problems"] or declared or part.get("stale"):
            lines.append("")
    if not report["patches"]:
        lines += ["No patches to verify.", ""]
    return "\n".join(lines)


def append_markdown(path: str | os.PathLike[str], report: JSON) -> None:
    """Append the markdown summary to `path` (appending is what $GITHUB_STEP_SUMMARY expects)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(markdown(report) + "\n")


def check_writable(path: str | Path, option: str) -> None:
    """Bad input, before the run, when the report file `path` cannot be written: a run of many minutes must not
    end in an error. An existing file is opened for appending (its content is not changed); a new one is made and
    removed again."""
    path = Path(path)
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "is a folder", str(path))
        if path.exists():
            with open(path, "a", encoding="utf-8"):
                pass
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            os.unlink(path)
    except OSError as exc:
        raise SeriesError(f"{option} {path}: cannot write it ({exc.strerror or exc})") from None
