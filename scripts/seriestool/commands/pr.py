"""`pr`: the title and body of an upstream pull request for one patch, in the upstream PR template.

Built from the patch's commit message (what it does, `Fixes` lines), the test files it adds, the last
`verify` report in the work folder and the manifest (repository, reviewers). Prints the title, a blank
line, then the markdown body.
"""

import re
import textwrap

from .. import base as base_mod
from .. import downstream, patchfile, reports
from ..archive import sha256_file
from ..errors import SeriesError
from ..manifest import find_patch
from ..results import is_test_file


NAME = "pr"
HELP = "print the title and body of an upstream pull request for one patch"
DESCRIPTION = f"""\
{HELP}.

The first line is the title (the commit subject), then a blank line, then the markdown body in the
upstream PR template: the commit message, `Fixes` lines, the test files the patch adds and how to run
them, the result of the last `verify` of that patch (when it passed, for this version of the patch),
what the last `downstream` run measured for it (TRL, sentence-transformers, ...: the scenarios it
changes and why), the "Before submitting" checklist and the target's reviewers.

example:
  python3 scripts/series.py pr 0001 --target transformers > /tmp/pr-0001.md

exit status: 0 printed; 2 unknown target or patch."""
NEEDS_GIT = False
NEEDS_WORK = False


def add_arguments(p):
    p.add_argument("name", metavar="NAME", help="the patch: its number (0001), file name, or name without .patch")
    p.add_argument("--target", help="target in the manifest (default: the first)")


FIXES = re.compile(r"^(?:fixes|closes|resolves):?\s+(\S+)\s*$", re.IGNORECASE)
GITHUB = re.compile(r"^(?:https://|git@|ssh://git@)github\.com[:/]([\w.-]+)/([\w.-]+?)(?:\.git)?/?$")
LIST_ITEM = re.compile(r"^(?:[-*+]|\d+[.)])\s")


def github_repo(url):
    """`owner/name` of a GitHub URL, or None."""
    match = GITHUB.match(url)
    return f"{match.group(1)}/{match.group(2)}" if match else None


def split_fixes(body):
    """The message body without its `Fixes ...` lines, and the references they name."""
    kept, fixes = [], []
    for line in body.splitlines():
        match = FIXES.match(line.strip())
        if match:
            fixes.append(match.group(1))
        else:
            kept.append(line)
    return "\n".join(kept).strip("\n"), fixes


def _unwrap(block):
    """Join a hard-wrapped paragraph or list into one line per paragraph or item.

    GitHub shows every newline of a pull request body as a line break, so text wrapped at 72
    columns for git would read as ragged short lines.
    """
    out = []
    for line in block.split("\n"):
        if not out or LIST_ITEM.match(line.lstrip()) and len(line) - len(line.lstrip()) < 4:
            out.append(line.rstrip())
        else:
            out[-1] += " " + line.strip()
    return "\n".join(out)


def to_markdown(text, links):
    """A 72-column commit message body as markdown: paragraphs and list items are unwrapped, indented
    blocks (tables, commands) are fenced as they are.

    `links` maps short repository names to `owner/name`, so that `accelerate#4242` becomes a link
    (`huggingface/accelerate#4242`) in another repository's pull request.
    """
    for short, full in links.items():
        text = re.sub(rf"(?<![\w./-]){re.escape(short)}#(\d+)\b", rf"{full}#\1", text)
    blocks = []
    for block in re.split(r"\n[ \t]*\n", text.strip("\n")):
        lines = block.split("\n")
        indented = all(line.startswith("  ") for line in lines if line.strip())
        if indented and not LIST_ITEM.match(lines[0].lstrip()):
            blocks.append("```\n" + textwrap.dedent(block) + "\n```")
        else:
            blocks.append(_unwrap(block))
    return "\n\n".join(blocks)


def _base_phrase(target, report_target):
    base = report_target["base"]
    commit = (base.get("commit") or "")[:12]
    spec = base_mod.parse_spec(None if base["spec"] == "sdist" else base["spec"])
    if spec.kind == "sdist":
        return f"the {target.package} {report_target['version']} release"
    if spec.kind == "git":
        where = github_repo(spec.location) or spec.location
        return f"`{spec.ref}` of {where} (`{commit}`)"
    return f"commit `{commit}`"


def _count(number, word):
    return f"{number} {word}{'' if number == 1 else 's'}"


def verify_sentence(ctx, target, name, patch_path):
    """One paragraph on the last verify result of the patch, or None (with a note on stderr)."""
    report = reports.load_last(ctx.work, target.name)
    entry = next((p for p in (report or {}).get("patches", []) if p["name"] == name), None)
    where = reports.last_path(ctx.work, target.name)
    if entry is None or not report.get("targets"):
        ctx.log(f"note: no verify result for {name} in {where}; run `series.py verify --target {target.name}`")
        return None
    if entry.get("sha256") != sha256_file(patch_path):
        ctx.log(f"note: the last verify result for {name} is for another version of the patch; run verify again")
        return None
    if entry["verdict"] == "not checked":
        ctx.log(f"note: the last verify run did not check {name} (--patch); run verify again")
        return None
    if entry["verdict"] != "ok":
        why = "; ".join(entry["problems"] + entry.get("notes", [])) or entry["verdict"]
        ctx.log(f"warning: the last verify of {name} did not pass ({why}); its result is left out")
        return None
    tools = report.get("tools") or {}
    device = "CPU" if report["device"] == "cpu" else "CUDA"
    red, green = entry["red"], entry["green"]
    parts = [f"without the code change {red['failed']} of {_count(red['total'], 'new test')} fail"]
    skipped = f" ({green['skipped']} skipped)" if green["skipped"] else ""
    parts.append(f"with it {green['passed']} pass{skipped}")
    parts.append("`ruff check` and `ruff format --check` are clean on the changed files")
    context = f"Checked on {_base_phrase(target, report['targets'][0])}, {device}, torch {tools.get('torch')}"
    return f"{context}: " + "; ".join(parts) + "."


def render(ctx, target, name):
    path = target.patch_path(name)
    if not path.is_file():
        raise SeriesError(f"patch {name} of {target.name} is listed but {path} is missing")
    patch = patchfile.read(path)
    links = {}
    for other in ctx.manifest.targets.values():
        full = github_repo(other.git_url)
        if full and other.name != target.name:
            links[full.split("/", 1)[1]] = full
    body, fixes = split_fixes(patch.body)
    tests = [
        f.path for f in patch.files if f.status == "A" and f.path.startswith(target.tests) and is_test_file(f.path)
    ]
    repo = github_repo(target.git_url)
    web = f"https://github.com/{repo}" if repo else target.git_url.removesuffix(".git")

    out = [patch.subject, "", "# What does this PR do?", "", to_markdown(body, links), ""]
    if fixes:
        out += [*(f"Fixes {ref}" for ref in fixes), ""]
    for dep in target.depends.get(name, []):
        # Upstream PR numbers are not known here: name the patch, by number and subject.
        dep_path = target.patch_path(dep)
        subject = patchfile.read(dep_path).subject if dep_path.is_file() else dep.removesuffix(".patch")[5:]
        out += [f'Depends on the PR for {dep[:4]} "{subject}" (apply it first).', ""]
    if tests:
        out += ["## Tests", ""]
        out += ["New test file" + ("s" if len(tests) > 1 else "") + ": " + ", ".join(f"`{t}`" for t in tests), ""]
        out += ["```bash", "python -m pytest -v " + " ".join(tests), "```", ""]
        sentence = verify_sentence(ctx, target, name, path)
        if sentence:
            out += [sentence, ""]
    lines = downstream.pr_lines(ctx, target, name)
    if lines:
        out += ["## Downstream", "", *lines, ""]
    check = {True: "[x]", False: "[ ]"}
    out += [
        "## Before submitting",
        "",
        "- [ ] This PR fixes a typo or improves the docs (you can dismiss the other checks if that's the case).",
        f"- [ ] Did you read the [contributor guideline]({web}/blob/main/CONTRIBUTING.md), Pull Request section?",
        f"- {check[bool(fixes)]} Was this discussed/approved via a GitHub issue or the "
        "[forum](https://discuss.huggingface.co/)? Please add a link to it if that's the case.",
        "- [ ] Did you make sure to update the documentation with your changes? Here are the "
        f"[documentation guidelines]({web}/tree/main/docs).",
        f"- {check[bool(tests)]} Did you write any new necessary tests?",
        "",
    ]
    if target.reviewers:
        out += ["## Who can review?", "", " ".join(target.reviewers), ""]
    return "\n".join(out).rstrip("\n")


def run(args, ctx):
    target = ctx.manifest.default_target(args.target)
    name = find_patch(target, args.name)
    ctx.out(render(ctx, target, name))
    return 0
