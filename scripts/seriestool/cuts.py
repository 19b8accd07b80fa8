"""A pull request's cut ([targets.<target>.cuts]): an upstream-tier patch made again on the bare release and the
patches whose code it needs, without those it only sits next to in the series. Its branch is cut from it, so the
pull request holds no other one's commits; the second of two overlapping pull requests to merge resolves the
overlap. `verify` holds a cut to the series patch: the same lines added and removed, except lines of the patches it
leaves out that it carries as they are (what it needs of their code, e.g. 0007's `saved_when_set` for 0010), and
the removal of lines only those patches added, and the lines the manifest declares the cut's own (`own`: a line of the
series patch that acts only with a patch the cut leaves out, made without it)."""

from collections import Counter
from pathlib import Path

from .context import Context
from .manifest import Target


# The commit a cut checkout (`checkout --cut`) starts the cut from: the pinned base and the patches the cut needs.
CUT_BASE_REF = "refs/series/cut-base"


def cut_checkout_dir(ctx: Context, target: Target, name: str) -> Path:
    """Where `checkout --cut` puts the cut of `name` by default (`export --cut` reads it there)."""
    return ctx.checkout_dir(target).parent / f"{target.name}-cut-{name[:4]}"


def changed_lines(text: str) -> Counter[tuple[str, str]]:
    """(file, the line with its `+` or `-`) of each line a patch (or a `git show`) adds or removes."""
    counts: Counter[tuple[str, str]] = Counter()
    path = ""
    for line in text.splitlines():
        if line.startswith("diff --git "):
            path = line.split(" b/", 1)[-1]
        elif line.startswith(("--- ", "+++ ", "index ", "new file mode", "deleted file mode", "@@")):
            continue
        elif path and line[:1] in ("+", "-"):
            counts[(path, line)] += 1
    return counts


def left_out(target: Target, name: str) -> list[str]:
    """The patches `name` depends on in the series that its cut does not need (it only sits next to them, or
    carries what it needs of them)."""
    needs = set(target.pr_needs(name))
    return [dep for dep in target.depends_on(name) if dep not in needs]


def differences(patch: str, cut: str, others: dict[str, str]) -> tuple[list[str], list[str], list[str]]:
    """How the cut `cut` differs from the series patch `patch`, given the texts of the patches it leaves out
    (`others`, name -> text): (the patch's lines the cut lacks, the cut's lines that are not the patch's, and the
    patches whose lines explain the rest). A line the patch removes that only a left-out patch added may be missing
    from the cut; a line the cut adds besides the patch's must be one a left-out patch adds (carried as it is)."""
    want, got = changed_lines(patch), changed_lines(cut)
    missing, extra = want - got, got - want
    added_by = {other: changed_lines(text) for other, text in others.items()}
    used: list[str] = []
    unexplained_missing = []
    for (path, line), count in missing.items():
        source = next(
            (o for o, lines in added_by.items() if line.startswith("-") and lines[(path, "+" + line[1:])]), None
        )
        if source is None:
            unexplained_missing += [f"{path}: {line}"] * count
        elif source not in used:
            used.append(source)
    unexplained_extra = []
    for (path, line), count in extra.items():
        source = next((o for o, lines in added_by.items() if lines[(path, line)] >= count), None)
        if source is None:
            unexplained_extra += [f"{path}: {line}"] * count
        elif source not in used:
            used.append(source)
    return unexplained_missing, unexplained_extra, [o for o in others if o in used]


def own_lines(missing: list[str], extra: list[str], own: list[str]) -> tuple[list[str], list[str], list[str]]:
    """`differences`' unexplained lines less those the manifest declares the cut's own (each declared line explains
    one difference): (missing, extra, the declared lines that explain none: stale)."""
    left = Counter(own)
    kept: list[list[str]] = [[], []]
    for found, lines in zip(kept, (missing, extra), strict=True):
        for line in lines:
            if left[line] > 0:
                left[line] -= 1
            else:
                found.append(line)
    return kept[0], kept[1], list(left.elements())
