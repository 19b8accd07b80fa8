"""`pr`: the text of an upstream pull request for one patch, in the target repository's current template, with
notes for the submitter to write the description from.

Upstream closes pull requests whose description is AI-written (transformers' Code Agent Policy), and the
policy box is the submitter's statement. So the body is the template's form with nothing ticked and no
description: under "What does this PR do?" an HTML comment holds the material (what the patch changes, the
measured before/after and the behaviour change from its commit message, its tests with the red/green result
of the last `verify`, the threads it names, the PRs it depends on by title and branch), which the submitter
reads, writes the description from in their own words, and deletes. An HTML comment never shows on GitHub,
so a body submitted unedited shows no text in anyone's name.

Another section of notes is one call in `render`: `notes.add(heading, lines)`.
"""

import argparse
import re
import shlex
import textwrap
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from .. import base as base_mod
from .. import downstream, patchfile, prtemplate, repochecks, reports, submission
from ..am import check_patch
from ..context import Context
from ..digests import sha256_file
from ..errors import SeriesError
from ..manifest import FORK_TIER, Target, find_patch
from ..patchfile import PatchFile
from ..results import is_test_file
from ..statuses import Verdict


NAME = "pr"
HELP = "print the title and body of an upstream pull request for one patch, with notes for the submitter"
DESCRIPTION = f"""\
{HELP}.

The first line is the title (the commit subject), then a blank line, then the markdown body in the target
repository's current pull request template. It holds no description: the submitter writes it, from the
notes in the HTML comment under "What does this PR do?" (what the patch changes, the before/after its
message measured, its tests with the red/green result of the last `verify`, the threads it names, the PRs
it depends on by title and branch, the upstream tests its pull request must update and why
([targets.<target>.upstream_tests_changed]), what the last `downstream` run measured for it in TRL,
sentence-transformers, setfit and PEFT), then deletes the comment. No checkbox is ticked: they are the
submitter's statements, the Code Agent Policy box above all. `Fixes #N` appears only where the commit
message says so.

A fork-tier patch ([targets.<target>.fork]: carried for forks, not submitted as a pull request) gets the text
of the issue that proposes it upstream instead (what --issue prints), and one line on stderr saying why.

example:
  python3 scripts/series.py pr 0001 --target transformers > /tmp/pr-0001.md

exit status: 0 printed; 2 unknown target or patch, or a patch file that is not a whole patch."""
NEEDS_GIT = True
NEEDS_WORK = False
LOCKS_WORK = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", metavar="NAME", help="the patch: its number (0001), file name, or name without .patch")
    p.add_argument("--target", help="target in the manifest (default: the first)")
    p.add_argument(
        "--issue",
        action="store_true",
        help="print the text of the issue to open before the pull request ([targets.<target>.issues] text) instead",
    )


# `Fixes #1`, `Closes: org/repo#2`, `fixes https://github.com/org/repo/issues/3`: anywhere in the message.
FIXES = re.compile(
    r"\b(?:fixes|closes|resolves):?\s+((?:[\w.-]+/[\w.-]+)?#\d+|https://github\.com/[\w.-]+/[\w.-]+/issues/\d+)",
    re.IGNORECASE,
)
THREAD = re.compile(r"(?<![\w/#])((?:[\w.-]+/[\w.-]+|[A-Za-z][\w.-]*)?#\d+)\b")
MEASURED = re.compile(r"\bmeasured\b", re.IGNORECASE)
BEFORE_AFTER = re.compile(r"\bwith this change\b|\bbefore\b[:,]|\bafter\b[:,]", re.IGNORECASE)
FAILING_SHOWN = 6
NOTES_WIDTH = 110


def github_repo(url: str) -> str | None:
    """`owner/name` of a GitHub URL, or None."""
    return prtemplate.github_repo(url)


def fixes(body: str) -> list[str]:
    """The references the message says it fixes (`Fixes #N`, also mid-sentence), in order, without repeats."""
    found: list[str] = []
    for ref in FIXES.findall(body):
        if ref not in found:
            found.append(ref)
    return found


def threads(body: str) -> list[str]:
    """Every issue or PR reference (`#N`, `owner/name#N`, `name#N`) the message names, in order."""
    found: list[str] = []
    for ref in THREAD.findall(body):
        if ref not in found:
            found.append(ref)
    return found


def link_refs(text: str, links: dict[str, str]) -> str:
    """`accelerate#4242` -> `huggingface/accelerate#4242`, so that it links from another repository's PR;
    `links` maps short repository names to `owner/name`."""
    for short, full in links.items():
        text = re.sub(rf"(?<![\w./-]){re.escape(short)}#(\d+)\b", rf"{full}#\1", text)
    return text


def paragraphs(body: str) -> list[str]:
    return [block.strip("\n") for block in re.split(r"\n[ \t]*\n", body.strip("\n")) if block.strip()]


def measured(body: str) -> list[str]:
    """The paragraphs of the message with its measurement: those that say `Measured`, else those with a
    before/after; an indented block (a table) right after one of them comes with it."""
    blocks = paragraphs(body)
    for pattern in (MEASURED, BEFORE_AFTER):
        picked: list[str] = []
        for index, block in enumerate(blocks):
            if pattern.search(block):
                picked.append(block)
                nxt = blocks[index + 1] if index + 1 < len(blocks) else ""
                if nxt.startswith("  ") and nxt not in picked:
                    picked.append(nxt)
        if picked:
            return picked
    return []


def behaviour_change(body: str) -> list[str]:
    return [block for block in paragraphs(body) if block.startswith(("Behaviour change:", "Behavior change:"))]


def diffstat(
    patch: PatchFile,
    moved: dict[str, str] | None = None,
    makefile: int = 0,
    ci_steps: int = 0,
    existing: Collection[str] | None = None,
    on_branch: dict[str, list[int]] | None = None,
) -> list[str]:
    """One line per file: path (new/deleted), lines added and removed; a new test file `branches` moves into an
    upstream topic file (`moved`: path -> home) is named as the branch holds it: appended to a home upstream has
    (`existing`, the target's `upstream_tests`; None: every home), else a new file there, with the lines the branch's
    commit adds there (`on_branch`: path -> [added, removed], what `branches` recorded) where known; `makefile`: the
    lines of its repository checks the pull request adds to upstream's Makefile, `ci_steps` those it adds to its CI
    config, which the patch file cannot carry."""
    rows = []
    for diff in patch.files:
        added = sum(1 for h in diff.hunks for line in h.lines if line.startswith("+"))
        removed = sum(1 for h in diff.hunks for line in h.lines if line.startswith("-"))
        state = {"A": " (new)", "D": " (deleted)"}.get(diff.status, "")
        if moved and diff.path in moved:
            home = moved[diff.path]
            where = "appended on the branch" if existing is None or home in existing else "a new file on the branch"
            if on_branch and home in on_branch:
                added, removed = on_branch[home]
            rows.append((f"{home} (its tests, {where})", f"+{added} -{removed}"))
            continue
        rows.append((f"{diff.path}{state}", f"+{added} -{removed}"))
    if makefile:
        rows.append((f"{repochecks.MAKEFILE} (its repository checks: see below)", f"+{makefile}"))
    if ci_steps:
        rows.append((f"{repochecks.CI_CONFIG} (its repository checks: see below)", f"+{ci_steps}"))
    width = max((len(path) for path, _ in rows), default=0)
    return [f"{path:<{width}}  {counts}" for path, counts in rows]


def _branch_counts(ctx: Context, target: Target, name: str) -> dict[str, list[int]] | None:
    """The lines per file of the patch's commit on its branch, as the last `branches` recorded them (None: no branch,
    or one recorded before it counted them)."""
    record = reports.load_branches(ctx.work, target.name) or {}
    return ((record.get("branches") or {}).get(name) or {}).get("numstat")


def _base_phrase(target: Target, report_target: dict[str, Any]) -> str:
    base = report_target["base"]
    commit = (base.get("commit") or "")[:12]
    spec = base_mod.parse_spec(base["spec"], target)
    if spec.kind == "sdist":  # the report names the sdist's release (since it has its sha256)
        version = base["version"] if base.get("sha256") else spec.version or report_target["version"]
        return f"the {target.package} {version} release"
    if spec.kind == "git":
        where = github_repo(spec.location) or spec.location
        return f"{spec.ref} of {where} ({commit})"
    return f"commit {commit}"


def _count(number: int, word: str) -> str:
    plural = "es" if word.endswith(("s", "ch")) else "s"
    return f"{number} {word}{'' if number == 1 else plural}"


def verify_result(ctx: Context, target: Target, name: str, patch_path: Path) -> tuple[list[str], bool]:
    """(lines for the notes, whether the last verify passed the patch); a note on stderr when it did not.

    The result quoted is the one for the base the patch's branch is on, when `branches` made one (the verify on that
    commit, or on another with the same files); else the last verify of the target, whatever its base."""
    record = reports.load_branches(ctx.work, target.name) or {}
    branch = (record.get("branches") or {}).get(name)
    if branch and record.get("base"):
        report, _ = reports.judged_on(ctx.work, target, record["base"], record.get("tree"))
        made_on = f"{record.get('ref')} of {record.get('repo')}, commit {record['base'][:12]}"
        branch_base = f"the base of its branch {branch['branch']} ({made_on})"
        if report is None:
            ctx.log(
                f"note: no verify result on {branch_base}; run `python3 scripts/series.py verify --target "
                f"{target.name} --base path:{record.get('repo')}` with that commit checked out, then pr again"
            )
            return [f"No verify result on {branch_base}: the tests' red/green result there is missing."], False
        where: Path | str = branch_base
    else:
        report = reports.load_last(ctx.work, target.name)
        where = reports.last_path(ctx.work, target.name)
    entry = next((p for p in (report or {}).get("patches", []) if p["name"] == name), None)
    spec = f" --base path:{record.get('repo')}" if branch and record.get("base") else ""
    rerun = f"run `python3 scripts/series.py verify --target {target.name}{spec}`, then pr again"
    if entry is None or not report.get("targets"):
        ctx.log(f"note: no verify result for {name} in {where}; {rerun}")
        return ["No verify result for this patch yet: the tests' red/green result is missing."], False
    if entry.get("sha256") != sha256_file(patch_path):
        ctx.log(f"note: the last verify result for {name} is for another version of the patch; {rerun}")
        return ["The last verify checked another version of this patch: its result is left out."], False
    if entry["verdict"] == Verdict.NOT_CHECKED:
        ctx.log(f"note: the last verify run did not check {name} (--patch); {rerun}")
        return ["The last verify run did not check this patch: no red/green result."], False
    when = entry.get("checked_at") or report.get("date") or "?"
    tools = report.get("tools") or {}
    device = "CPU" if report["device"] == "cpu" else "CUDA"
    under = _under(report, entry)
    base_phrase = _base_phrase(target, report["targets"][0])
    tree = f"{base_phrase} plus {_count(len(under), 'earlier patch')} of the series" if under else ""
    tree = tree or f"{base_phrase} alone"
    on = f"verify of {when} on {tree}, {device}, torch {tools.get('torch')}"
    if entry["verdict"] != Verdict.OK:
        why = "; ".join(entry["problems"] + entry.get("notes", [])) or entry["verdict"]
        ctx.log(f"warning: the last verify of {name} did not pass ({why}); do not submit it as it is")
        return [f"The {on} did NOT pass this patch: {why}", "Do not submit it before it does."], False
    red, green = entry["red"], entry["green"]
    lines = [f"Result of the {on}:"]
    base = report["targets"][0].get("base", {})
    if base.get("older_than_pin"):
        older = f"{target.package} {base.get('version')}, older than the pinned {target.version}"
        ctx.log(f"warning: the verify quoted for {name} ran on {older}")
        lines.append(f"  (that base is {older}: verify on the release or a newer base before you submit)")
    failing = red.get("failing") or []
    shown = ", ".join(test.rsplit("::", 1)[-1] for test in failing[:FAILING_SHOWN])
    more = f" and {len(failing) - FAILING_SHOWN} more" if len(failing) > FAILING_SHOWN else ""
    lines.append(
        f"  without the code change (red): {red['failed']} of {_count(red['total'], 'test')} fail"
        + (f" ({shown}{more})" if shown else "")
    )
    skipped = f", {green['skipped']} skipped" if green["skipped"] else ""
    lines.append(f"  with it (green): {green['passed']} pass{skipped}")
    lines.append("  ruff check and ruff format --check: clean on the files it changes")
    lines += _under_lines(target, name, under)
    cut = entry.get("cut") or {}
    if name in target.cuts and cut.get("red") and cut.get("green"):
        needs = target.pr_needs(name)
        on_cut = f"{base_phrase} and {_count(len(needs), 'patch')} it needs" if needs else f"{base_phrase} alone"
        lines += textwrap.wrap(
            f"  Its cut, the branch, in the same run on {on_cut}: without the code change {cut['red']}, with it "
            f"{cut['green']}",
            NOTES_WIDTH,
            subsequent_indent="    ",
        )
    return lines, True


def _under(report: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    """The patches of the same target that were under `entry` when the verify of `report` ran its tests: the
    earlier ones that went in (verify runs each patch's tests on the series up to it)."""
    return [
        other["name"]
        for other in report.get("patches", [])
        if other.get("target") == entry.get("target") and other["index"] < entry["index"] and other.get("applies")
    ]


def _under_lines(target: Target, name: str, under: list[str]) -> list[str]:
    """Which patches were under it in that run, by title, and which of them its branch does not hold."""
    if not under:
        return []
    deps = set(target.pr_needs(name))  # its cut's needs where it has one: what its branch holds
    held = [patch for patch in under if patch in deps]
    others = [patch for patch in under if patch not in deps]
    lines = []
    if held:
        lines += textwrap.wrap(
            f"  Under it in that run, the {_count(len(held), 'patch')} it depends on (its branch holds them): "
            + _titles(target, held),
            NOTES_WIDTH,
            subsequent_indent="    ",
        )
    if others:
        lines += textwrap.wrap(
            f"  and {_count(len(others), 'patch')} its branch does not hold (the tests ran on the series up to it): "
            + _titles(target, others),
            NOTES_WIDTH,
            subsequent_indent="    ",
        )
    return lines


def _titles(target: Target, names: list[str]) -> str:
    return ", ".join(f'"{patchfile.read(target.patch_path(patch)).subject}"' for patch in names)


def upstream_tests_lines(ctx: Context, target: Target, name: str) -> list[str]:
    """The notes on the upstream tests that assert the behaviour the patch changes
    ([targets.<target>.upstream_tests_changed]): the pull request must update them, and why; what the last
    `verify --upstream-tests` found for them when it verified this version of the patch."""
    declared = target.upstream_tests_changed.get(name, [])
    if not declared:
        return []
    what = "an existing upstream test asserts" if len(declared) == 1 else "existing upstream tests assert"
    which = "that test" if len(declared) == 1 else "those tests"
    lines = textwrap.wrap(
        f"It changes a behaviour that {what} ([targets.{target.name}.upstream_tests_changed] in "
        f"{ctx.manifest.path.name}). The pull request must update {which}: "
        + (
            "`series.py branches` applies the change below to the branch (on a clone that holds upstream's tests); "
            if any(entry.get("diff") for entry in declared)
            else "change it in the pull request's branch and "
        )
        + "say in the description why the old assertion no longer holds:",
        NOTES_WIDTH,
    )
    lines += [f"- {entry['test']}: {entry['reason']}" for entry in declared]
    for entry in declared:
        if "diff" not in entry:
            continue
        diff = ctx.manifest.path.parent / entry["diff"]
        lines += [""] + textwrap.wrap(
            f"The change to {entry['test'].split('::')[0]} for {entry['test'].split('::')[-1]} ({entry['diff']} below "
            f"{ctx.manifest.path.parent.name}/; on a branch made otherwise, apply it with `git apply {diff}`, then "
            "run the test with the patch):",
            NOTES_WIDTH,
            break_on_hyphens=False,
        )
        lines += ["", *diff.read_text(encoding="utf-8").rstrip("\n").splitlines(), ""]
    report = reports.load_last(ctx.work, target.name) or {}
    verified: dict[str, Any] = next((p for p in report.get("patches", []) if p["name"] == name), {})
    parts = report.get("upstream_tests", [])
    if not parts or not verified or verified.get("sha256") != sha256_file(target.patch_path(name)):
        lines += textwrap.wrap(
            f"Check it with `python3 scripts/series.py verify --target {target.name} --upstream-tests SPEC`: the test "
            "must pass on the base and fail with the series.",
            NOTES_WIDTH,
        )
        return lines
    for part in parts:
        when = f"The last `verify --upstream-tests {part['spec']}` ({report.get('date') or '?'})"
        for change in part.get("declared", []):
            if change["patch"] == name:
                updated = change.get("updated") or {}
                lines.append(
                    f"{when}: {change['id']} {change['base']} on the base, {change['series']} with the series, as "
                    "declared"
                    + (
                        f"; with the change above, {updated.get('base', 'not run')} on the base and "
                        f"{updated.get('series', 'not run')} with the series."
                        if change.get("diff")
                        else "."
                    )
                )
        for change in part.get("stale", []):
            if change["patch"] == name:
                lines.append(
                    f"{when} found the declaration of {change['test']} STALE ({change['why']}): fix the declaration "
                    "before you submit."
                )
    return lines


def repo_checks_done(
    ctx: Context, target: Target, name: str
) -> tuple[dict[str, Any], list[tuple[dict[str, str], dict[str, Any]]]]:
    """The record of the patch's branch from the last `branches` ({} when it made none) and, per repository check the
    patch declares ([targets.<target>.repo_checks]), what that run recorded of its line ({} when nothing)."""
    declared = target.repo_checks.get(name, [])
    if not declared:
        return {}, []
    record = reports.load_branches(ctx.work, target.name) or {}
    branch = (record.get("branches") or {}).get(name) or {}
    made = {(c.get("make_target"), c.get("command")): c for c in branch.get("repo_checks") or []}
    return branch, [(check, made.get((check["make_target"], check["command"])) or {}) for check in declared]


def repo_check_lines(ctx: Context, target: Target, name: str) -> list[str]:
    """The notes on the lines that run the repository checks the patch adds where upstream runs them
    ([targets.<target>.repo_checks]: a target of upstream's root Makefile, `check-repo`): the line its branch adds, as
    the last `branches` recorded it, or the line to add by hand and where, when it could not (no Makefile, no such
    target) or made no branch for it."""
    branch, checks = repo_checks_done(ctx, target, name)
    lines: list[str] = []
    for check, done in checks:
        make_target, command = check["make_target"], check["command"]
        line = done.get("line") or repochecks.recipe_line(command)
        where = f"the `{make_target}` target of the {repochecks.MAKEFILE}"
        if done.get("added"):
            after = f'after "{done["after"]}"' if done.get("after") else "as the first line of its recipe"
            text = (
                f"Branch {branch['branch']} (`series.py branches`) adds the line `{line}` to {where} ({after}), where "
                "upstream runs its repository checks: its commit carries that hunk (the patch file cannot: the sdist "
                "has no Makefile)."
            )
            lines += ([""] if lines else []) + textwrap.wrap(text, NOTES_WIDTH, break_on_hyphens=False)
            continue
        if done.get("present"):
            text = f"{where[0].upper()}{where[1:]} on the base of branch {branch['branch']} already runs `{line}`."
            lines += ([""] if lines else []) + textwrap.wrap(text, NOTES_WIDTH, break_on_hyphens=False)
            continue
        if done:
            why = f"`series.py branches` could not add it to branch {branch['branch']}: {done.get('why')}"
        elif branch:
            why = (
                f"`series.py branches` made branch {branch['branch']} before this check was declared (run it again to "
                "have it added)"
            )
        else:
            why = "`series.py branches` has made no branch for it"
        text = (
            f"Upstream runs its repository checks from {where}; the patch file cannot carry that line (the sdist has "
            f"no Makefile) and {why}. Add it to the pull request's commit by hand: in the {repochecks.MAKEFILE} at "
            f"the repository root, in the recipe of `{make_target}:`, after its last `python utils/check_*.py` line "
            "and in their style (upstream's start with `-`), this line (a tab, then the command):"
        )
        lines += ([""] if lines else []) + textwrap.wrap(text, NOTES_WIDTH, break_on_hyphens=False)
        lines += [f"  {line}", f"then `git add {repochecks.MAKEFILE} && git commit --amend --no-edit` on the branch."]
    for check, done in checks:
        ci = done.get("ci") or {}
        step = ci.get("line") or repochecks.ci_step(check["command"])
        where = f"the CI's repository-consistency job ({repochecks.CI_CONFIG})"
        if ci.get("added"):
            text = (
                f'Branch {branch["branch"]} also adds the step `{step}` to {where}, after "{ci["after"]}": the '
                "gate that fails a pull request (the Makefile's check lines start with `-`, so `make check-repo` "
                "goes on after a failure)."
            )
        elif ci.get("present"):
            text = f"{where[0].upper()}{where[1:]} on the base of branch {branch['branch']} already runs `{step}`."
        else:
            text = (
                f"The gate that fails a pull request is {where} (the Makefile's check lines start with `-`: make goes "
                f"on after a failure); the patch file cannot carry it (the sdist has no {repochecks.CI_CONFIG})"
                + (f" and `series.py branches` could not add it: {ci['why']}" if ci.get("why") else "")
                + f". Add by hand, after its last `- run: python utils/check_*.py` step, at its indentation: `{step}`."
            )
        lines += ([""] if lines else []) + textwrap.wrap(text, NOTES_WIDTH, break_on_hyphens=False)
    return lines


def issue_lines(
    ctx: Context, target: Target, name: str, fixed: list[str], changes: bool, body: str = ""
) -> tuple[list[str], str]:
    """The notes on the issue the pull request answers, and the issue reference to name ("" when none is open):
    the `Fixes` of its message, else [targets.<target>.issues] (a pull request whose message says `Part of #N` or
    `Related to #N` only links it: it does not close it); a warning when a patch that changes behaviour names none."""
    table = f"[targets.{target.name}.issues]"
    entry = target.issues.get(name, {})
    if fixed:
        return [], fixed[0]
    if entry.get("issue"):
        ref = entry["issue"]
        said = next((words for words in ("Part of", "Related to") if f"{words} {ref}" in " ".join(body.split())), "")
        if said:
            return textwrap.wrap(
                f"It answers {ref} in part ({table} in {ctx.manifest.path.name}; its message says `{said} {ref}`): "
                f"write `{said} {ref}` in the description, not `Fixes`: the pull request does not close it.",
                NOTES_WIDTH,
            ), ref
        return textwrap.wrap(
            f"It answers {ref} ({table} in {ctx.manifest.path.name}): link it in the description (`Fixes {ref}` "
            "when the pull request closes it).",
            NOTES_WIDTH,
        ), ref
    if entry.get("text"):
        sharing = [
            patch
            for patch in target.patches
            if patch != name and target.issues.get(patch, {}).get("text") == entry["text"]
        ]
        others = [patchfile.read(target.patch_path(p)).subject for p in sharing if target.tier(p) != FORK_TIER]
        carried = [patchfile.read(target.patch_path(p)).subject for p in sharing if target.tier(p) == FORK_TIER]
        lines = textwrap.wrap(
            f"No upstream issue asks for this change yet: open one first. `python3 scripts/series.py pr {name[:4]} "
            f"--target {target.name} --issue` prints a text for it ({entry['text']} below "
            f"{ctx.manifest.path.parent.name}/: the problem and its measured before/after); read it, make it yours, "
            f'open the issue, then record its number in {table} (issue = "#N") and link it in the description.',
            NOTES_WIDTH,
        )
        if others:
            lines += textwrap.wrap(
                "The same issue is answered by the pull requests of: " + ", ".join(f'"{t}"' for t in others),
                NOTES_WIDTH,
            )
        if carried:
            lines += textwrap.wrap(
                "It also proposes the fork-tier patches (carried for forks, no pull request yet): "
                + ", ".join(f'"{t}"' for t in carried),
                NOTES_WIDTH,
            )
        return lines, ""
    if changes:
        ctx.log(
            f"warning: {name} states a behaviour change but names no issue it answers: no `Fixes #N` in its message "
            f"and no entry in {table}"
        )
        return textwrap.wrap(
            f"Its message states a behaviour change but names no issue it answers ({table} has no entry for it): "
            "find or open the issue first; a maintainer asks which one.",
            NOTES_WIDTH,
        ), ""
    return [], ""


def issue_text(ctx: Context, target: Target, name: str) -> str:
    """The text of the issue to open for patch `name` ([targets.<target>.issues] text)."""
    text = target.issues.get(name, {}).get("text")
    if not text:
        raise SeriesError(
            f"{name} of {target.name} has no issue text to open ([targets.{target.name}.issues] in "
            f"{ctx.manifest.path.name} gives it none)"
        )
    return (ctx.manifest.path.parent / text).read_text(encoding="utf-8").rstrip("\n")


def _homes(target: Target, patch: PatchFile, tests: list[str]) -> dict[str, list[str]] | None:
    """home file -> the new test classes `branches` moves into it ([targets.<target>.test_homes]); None when a test
    file or class has no home (its branch keeps the new files)."""
    homes: dict[str, list[str]] = {}
    for path in tests:
        diff = patch.file(path)
        classes = submission.test_classes(diff) if diff else []
        if not classes:
            return None
        for cls in classes:
            home = target.test_homes.get(f"{path}::{cls}") or target.test_homes.get(path)
            if home is None:
                return None
            homes.setdefault(home, []).append(cls)
    return homes


def as_on_branch(body: str, moved: dict[str, str]) -> str:
    """The commit message as its branch holds it: `branches` names each moved test file's home (`moved`: path ->
    home) in the message, so the notes quote that, not the new file the branch does not have."""
    for path, home in moved.items():
        body = body.replace(path, home)
    return body


def _moves_to(patch: PatchFile, path: str, classes: list[str]) -> bool:
    """Whether the new test file `path` holds one of `classes` (the classes `branches` moves into one home)."""
    diff = patch.file(path)
    return diff is not None and bool(set(submission.test_classes(diff)) & set(classes))


def branch_test_lines(homes: dict[str, list[str]]) -> list[str]:
    """Where the tests are on the branch `branches` makes in a clone of upstream (which holds upstream's tests), and
    the command that runs them there."""
    lines = textwrap.wrap(
        "`series.py branches`, run on a clone of upstream (which holds upstream's tests), moves each new test class "
        "into upstream's topic file, ruff-formatted (the patch file keeps them as new files):",
        NOTES_WIDTH,
    )
    lines += [f"- {home}: {', '.join(classes)}" for home, classes in homes.items()]
    selected = " or ".join(cls for classes in homes.values() for cls in classes)
    lines += ["run them on the branch, from the repository root:"]
    lines += [f"  python -m pytest -v {' '.join(homes)} -k {shlex.quote(selected)}"]
    return lines


def test_home_lines(ctx: Context, target: Target, patch: PatchFile, tests: list[str], name: str = "NNNN") -> list[str]:
    """Where upstream keeps the tests of each new test class ([targets.<target>.test_homes])."""
    if not target.test_homes or not tests:
        return []
    lines = ["Upstream keeps its tests in topic files: move each new test class into the file named, as a class of"]
    lines += ["its own (keep its helpers with it), before you submit:"]
    missing = []
    for path in tests:
        diff = patch.file(path)
        classes = submission.test_classes(diff) if diff else []
        for cls in classes or ["(its tests)"]:
            home = target.test_homes.get(f"{path}::{cls}") or target.test_homes.get(path)
            if home is None:
                missing.append(path)
                home = f"not mapped: add it to [targets.{target.name}.test_homes]"
            lines.append(f"- {path}::{cls} -> {home}")
    if missing:
        files = ", ".join(dict.fromkeys(missing))
        ctx.log(f"warning: {files}: no upstream test file in [targets.{target.name}.test_homes]")
    else:
        lines.append(
            f"`python3 scripts/series.py homes {name[:4]} --target {target.name} --upstream-tests SPEC` writes"
        )
        lines.append(
            "that move as a diff to `git apply` in your clone, checked green with the patch and red without it."
        )
    return lines


def saved_state_lines(target: Target, name: str) -> list[str]:
    """The fields and properties the patch adds to the class a checkpoint saves, and whether the release it is made
    on loads its checkpoints ([targets.<target>.saved_state])."""
    added = submission.state_additions(target, name)
    if added is None:
        return []
    saved = target.saved_state
    cls, release = saved["class"], f"{target.package} {target.version}"
    if not added:
        return [f"It adds no field or property to {cls} ({saved['file']})."]
    kept_in = saved.get("kept_in", "")
    lines = [f"Read from the patch: it adds to {cls} ({saved['file']}):"]
    always, when_set, kept, computed = [], [], [], []
    for member in added:
        if member.kind == "field" and member.saved_when_set:
            when_set.append(member.name)
            lines.append(f"- field `{member.name}`: saved in a checkpoint only when it is set")
        elif member.kind == "field":
            always.append(member.name)
            lines.append(f"- field `{member.name}`: saved in every checkpoint")
        elif member.kept_in:
            kept.append(member.name)
            lines.append(f"- property `{member.name}`: kept in `{kept_in}`, not a field of its own")
        else:
            computed.append(member.name)
            lines.append(f"- property `{member.name}`: not saved")
    unknown = saved.get("unknown_field", "does not load it")
    if always:
        verdict = f"Its checkpoints do NOT load in {release}: it {unknown} on {', '.join(f'`{n}`' for n in always)}."
        loaded_by = saved.get("loaded_by", "")
        if loaded_by and loaded_by != name:
            first = loaded_by.removesuffix(".patch")
            verdict += f" With the pull request of {first} merged first, they load there (the new keys dropped)."
    elif when_set:
        verdict = (
            f"A run that leaves {' and '.join(f'`{n}`' for n in when_set)} at the default saves the keys of "
            f"{release}: its checkpoints load there and in earlier releases. A checkpoint that holds one does not: "
            f"{release} {unknown}, as on any state saved with a field it lacks."
        )
        loaded_by = saved.get("loaded_by", "")
        if loaded_by and loaded_by != name:
            verdict += f" A version with the pull request of {loaded_by.removesuffix('.patch')} drops such a key."
    else:
        verdict = f"Its checkpoints load in {release}."
    if kept:
        names = " and ".join(f"`{n}`" for n in kept)
        verdict += f" For {names} in `{kept_in}`: {release} {saved.get('kept_in_loads', f'loads {kept_in}')}."
    lines += textwrap.wrap(verdict + " Say so in the description.", NOTES_WIDTH)
    return lines


class Notes:
    """The notes for the submitter: headed sections of plain lines, shown in one HTML comment."""

    def __init__(self) -> None:
        self.sections: list[tuple[str, list[str]]] = []

    def add(self, heading: str, lines: Iterable[str]) -> None:
        """Append a section (nothing when `lines` is empty)."""
        lines = [line.rstrip() for line in lines]
        if any(lines):
            self.sections.append((heading, lines))

    def comment(self, intro: Iterable[str]) -> str:
        """The notes as one HTML comment, `intro` first; nothing inside can end the comment early."""
        lines = list(intro)
        for heading, body in self.sections:
            lines += ["", f"{heading}:", *(f"  {line}" if line else "" for line in body)]
        safe = [line.replace("-->", "- ->").replace("<!--", "<! --") for line in lines]
        return "\n".join(["<!--", *safe, "-->"])


def _blocks(blocks: Iterable[str]) -> list[str]:
    """Paragraphs as lines, a blank line between two."""
    lines: list[str] = []
    for block in blocks:
        lines += ([""] if lines else []) + block.splitlines()
    return lines


def render(ctx: Context, target: Target, name: str) -> str:
    path = target.patch_path(name)
    check_patch(target, name)  # a truncated or garbage file is bad input, not an empty PR
    cut = target.cut_path(name) if name in target.cuts and target.cut_path(name).is_file() else None
    # the pull request is its cut where it has one: the diff, the files and the tests of its branch
    patch = patchfile.read(cut or path)
    template = prtemplate.for_target(target)
    links: dict[str, str] = {}
    for other in ctx.manifest.targets.values():
        full = github_repo(other.git_url)
        if full and other.name != target.name:
            links[full.split("/", 1)[1]] = full
    body = link_refs(patch.body, links)
    fixed = fixes(body)
    branches = prtemplate.branches_of(target)
    tests = [path for path in patch.added(target.tests) if is_test_file(path)]

    notes = Notes()
    homes = _homes(target, patch, tests) if tests and target.tier(name) != FORK_TIER else None
    moved = {
        path: home for path in tests for home, classes in (homes or {}).items() if _moves_to(patch, path, classes)
    }
    body = as_on_branch(body, moved)
    makefile = sum(1 for _, done in repo_checks_done(ctx, target, name)[1] if not done.get("present"))
    ci_steps = sum(
        1 for _, done in repo_checks_done(ctx, target, name)[1] if not (done.get("ci") or {}).get("present")
    )
    notes.add(
        "What the pull request changes (lines added and removed per file)",
        diffstat(
            patch,
            moved,
            makefile,
            ci_steps,
            existing=target.upstream_tests,
            on_branch=_branch_counts(ctx, target, name),
        ),
    )
    shown = measured(body) + behaviour_change(body)
    notes.add("The before/after its commit message measured", _blocks(measured(body)))
    notes.add("The behaviour change its commit message states", _blocks(behaviour_change(body)))
    if tests:
        result, _ = verify_result(ctx, target, name, path)
        if homes:
            notes.add("Its tests, on the branch as pushed", [*branch_test_lines(homes), *result])
        else:
            run_them = ["run them from the repository root:", "  python -m pytest -v " + " ".join(tests)]
            notes.add("Its tests (new files)", [*tests, *run_them, *result])
            notes.add("Where its tests go upstream", test_home_lines(ctx, target, patch, tests, name))
    else:
        notes.add("Its tests", [f"It adds no test file under {target.tests}."])
    notes.add("Upstream tests the pull request must update", upstream_tests_lines(ctx, target, name))
    notes.add(
        f"Upstream's repository checks (its {repochecks.MAKEFILE} and {repochecks.CI_CONFIG})",
        repo_check_lines(ctx, target, name),
    )
    notes.add(f"The saved state ({target.saved_state.get('class', '')})", saved_state_lines(target, name))
    said = [f"It says it fixes {', '.join(fixed)} (the `Fixes` line below)."] if fixed else []
    refs = threads(body)
    notes.add("Issues and pull requests its commit message names", said + ([", ".join(refs)] if refs else []))
    answers, issue = issue_lines(ctx, target, name, fixed, bool(behaviour_change(body)), body)
    notes.add("The issue it answers", answers)
    if name in target.cuts:
        left = [dep[:4] for dep in target.depends_on(name) if dep not in target.pr_needs(name)]
        notes.add(
            "Its cut",
            textwrap.wrap(
                f"The pull request is the cut of the patch ({target.patch_dir.name}/cuts/{name}): the same change on "
                f"{'the release alone' if not target.pr_needs(name) else 'the release and the patches below'}, "
                f"without {', '.join(left) or 'nothing'} of the series under it "
                f"({target.cuts[name]['reason']}). Where it overlaps an open pull request, the second one to merge "
                "resolves it."
                + (
                    "" if cut else f" Its file is missing: `series.py checkout --cut {name[:4]}`, then `export --cut`."
                ),
                NOTES_WIDTH,
            ),
        )
    deps = target.pr_needs(name)
    if deps:
        lines = ["The pull requests of these patches go first; name them by title in the description:"]
        for dep in deps:
            lines.append(f'"{patchfile.read(target.patch_path(dep)).subject}" (branch {branches[dep]})')
        lines += [
            f"Branch {branches[name]} (`series.py branches`) holds them under this patch:",
            "until they are merged, its pull request shows their commits too: open it as a draft (`gh pr create",
            "--draft`, as `branches` prints it) that names them, and mark it ready once they are merged.",
        ]
        notes.add("Dependencies", lines)
    else:
        notes.add("Branch", [f"{branches[name]} (`series.py branches`): this patch alone on the base."])
    facts = []
    if fixed:
        facts.append("the message names the issue it fixes: the item on a GitHub issue or forum thread")
    elif issue:
        facts.append(f"it answers {issue}: the item on a GitHub issue or forum thread")
    if tests:
        homes_of = sorted(home for home in set(moved.values()) if home in target.upstream_tests)
        kept = [path for path in tests if path not in moved or moved[path] not in target.upstream_tests]
        facts.append(
            "it adds tests"
            + (f" to {_count(len(homes_of), 'existing test file')}" if homes_of else "")
            + (" and" if homes_of and kept else "")
            + (f" in {_count(len(kept), 'new test file')}" if kept else "")
            + ": the tests item"
        )
    notes.add("For the checklist (tick an item only when it is true for you)", facts)
    notes.add("Downstream (the last `series.py downstream` run)", downstream.pr_lines(ctx, target, name))
    notes.add(
        "The rest of its commit message (for reference: not to be pasted as the description)",
        _blocks([block for block in paragraphs(body) if block not in shown]),
    )

    intro = [
        "NOTES FOR THE SUBMITTER, from `series.py pr`: material to write the description from, not a description."
    ]
    if template.policy:
        policy = (
            f"The pull request template of {template.repo} has a {template.policy[0]} (below): "
            f"{template.policy_summary}"
        )
        intro += textwrap.wrap(policy, NOTES_WIDTH)
    intro += textwrap.wrap(
        "Read the diff and run the tests yourself. Then write the description above this comment, in your own "
        "words: what the pull request changes and why, what you measured, how it is tested, what it depends on. "
        "Delete this comment before you submit.",
        NOTES_WIDTH,
    )

    out = [patch.subject, "", "# What does this PR do?", "", notes.comment(intro), ""]
    out += [*(f"Fixes {ref}" for ref in fixed), ""] if fixed else []
    if template.policy:
        heading, box = template.policy
        out += [
            f"## {heading}",
            "",
            f"<!-- The policy is the {heading} section of the pull request template of {template.repo}. Tick the box "
            "yourself, and only if it is true. -->",
            "",
            f"- [ ] {box}",
            "",
        ]
    if template.checklist:
        out += ["## Before submitting", *(f"- [ ] {item}" for item in template.checklist), ""]
    reviewers = list(target.reviewers)
    if reviewers or template.reviewers:
        if template.reviewers and reviewers and tuple(reviewers) != template.reviewers:
            ctx.log(
                f"warning: {ctx.manifest.path.name} names {' '.join(reviewers)} as reviewers of {target.name}; its "
                f"template names {template.review_area}: {' '.join(template.reviewers)}"
            )
        handles = " ".join(reviewers or template.reviewers)
        line = f"{template.review_area}: {handles}" if template.review_area else handles
        out += ["## Who can review?", "", line, ""]
    return "\n".join(out).rstrip("\n")


def run(args: argparse.Namespace, ctx: Context) -> int:
    target = ctx.manifest.default_target(args.target)
    name = find_patch(target, args.name)
    if target.tier(name) == FORK_TIER and not args.issue:
        # Carried for forks, not submitted as a pull request: what goes upstream is the issue that proposes it.
        check_patch(target, name)
        ctx.out(issue_text(ctx, target, name))
        ctx.log(
            f"note: {name[:4]} is fork tier (carried for forks; propose it upstream as an issue first): "
            f"{target.fork[name]}. Above is its issue text, not a pull request body"
        )
        return 0
    if args.issue:
        ctx.out(issue_text(ctx, target, name))
        ctx.log("note: the issue is yours to open: read it, make it yours, and post it only if you stand by it")
        return 0
    ctx.out(render(ctx, target, name))
    ctx.log(
        "note: the description is yours to write: the notes in the HTML comment are material, and no box is ticked"
    )
    return 0
