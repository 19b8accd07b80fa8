"""The pull request templates of the upstream repositories, as `pr` fills them in, and where a patch's PR
branch is (`branches` makes it, `pr` names it).

Each template is the repository's `.github/PULL_REQUEST_TEMPLATE.md` at the commit in `source`, kept to
what a submitter fills in: its sections, its checkboxes (never ticked here: they are the submitter's
statements) and the line of its reviewer guide for the part of the library the series changes. The guidance
it gives in HTML comments is not repeated. When upstream changes its template, update the entry and `source`.
"""

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from . import patchfile
from .manifest import Target


@dataclass(frozen=True)
class Template:
    repo: str  # owner/name on GitHub
    source: str  # the commit of its `.github/PULL_REQUEST_TEMPLATE.md` this follows
    # the policy section a submitter must confirm: (heading, checkbox text); None when the template has none
    policy: tuple | None = None
    policy_summary: str = ""  # what the policy asks, for the notes to the submitter
    checklist: tuple = ()  # the "Before submitting" items, markdown, unticked
    review_area: str = ""  # the reviewer guide's line for the part the series changes ("trainer")
    reviewers: tuple = ()  # the handles the guide names there


TEMPLATES = {
    "huggingface/transformers": Template(
        repo="huggingface/transformers",
        source="0610602df4a9898394649af05d94221503df6885",
        policy=("Code Agent Policy", "I confirm that this is not a pure code agent PR."),
        policy_summary=(
            "pull requests that look fully agent-written are closed, and so are those whose description is "
            "AI-written; new users are asked not to submit pure code agent PRs."
        ),
        checklist=(
            "This PR fixes a typo or improves the docs (you can dismiss the other checks if that's the case).",
            "Did you read the [contributor guideline](https://huggingface.co/docs/transformers/contributing) and "
            "the [Pull Request](https://huggingface.co/docs/transformers/pr_checks) checks?",
            "Was this discussed/approved via a Github issue or the [forum](https://discuss.huggingface.co/)? "
            "Please add a link to it if that's the case.",
            "Did you make sure to update the documentation with your changes according to the "
            "[guidelines](https://github.com/huggingface/transformers/tree/main/docs)?",
            "Did you write any new necessary [tests](https://huggingface.co/docs/transformers/testing)?",
        ),
        review_area="trainer",
        reviewers=("@SunMarc",),
    ),
    "huggingface/accelerate": Template(
        repo="huggingface/accelerate",
        source="1d57b830a07f07f655fc298f2096de09c2998083",
        checklist=(
            "This PR fixes a typo or improves the docs (you can dismiss the other checks if that's the case).",
            "Did you read the [contributor guideline](https://github.com/huggingface/accelerate/blob/main/"
            "CONTRIBUTING.md#submitting-a-pull-request-pr), Pull Request section?",
            "Was this discussed/approved via a Github issue or the [forum](https://discuss.huggingface.co/)? "
            "Please add a link to it if that's the case.",
            "Did you make sure to update the documentation with your changes? Here are the "
            "[documentation guidelines](https://github.com/huggingface/accelerate/tree/main/docs), and "
            "[here are tips on formatting docstrings](https://github.com/huggingface/accelerate/tree/main/"
            "docs#writing-documentation---specification).",
            "Did you write any new necessary tests?",
        ),
        review_area="Core parts of the library",
        reviewers=("@BenjaminBossan", "@SunMarc"),
    ),
}
# Another repository: the sections every Hugging Face template has, without links.
GENERIC = Template(
    repo="",
    source="",
    checklist=("Did you update the documentation with your changes?", "Did you write any new necessary tests?"),
)

GITHUB = re.compile(r"^(?:https://|git@|ssh://git@)github\.com[:/]([\w.-]+)/([\w.-]+?)(?:\.git)?/?$")


def github_repo(url: str) -> str | None:
    """`owner/name` of a GitHub URL, or None."""
    match = GITHUB.match(url)
    return f"{match.group(1)}/{match.group(2)}" if match else None


def for_target(target: Target) -> "Template":
    """The template of the target's upstream repository (GENERIC when it is not known)."""
    return TEMPLATES.get(github_repo(target.git_url) or "", GENERIC)


# -- branch names --------------------------------------------------------------------------------------

BRANCH_PREFIX = "trainer-series/"
# the branches of fork-tier patches ([targets.<target>.fork]): carried for forks, proposed upstream as an issue
FORK_BRANCH_PREFIX = BRANCH_PREFIX + "fork-only/"
SLUG_MAX = 60


def slug(subject: str, limit: int = SLUG_MAX) -> str:
    """A git-valid, stable branch name part from a commit subject: lowercase words joined by `-`, cut at a word
    boundary to at most `limit` characters."""
    words = re.findall(r"[a-z0-9]+", subject.lower().replace("'", "").replace("\u2019", ""))
    out = ""
    for word in words:
        longer = f"{out}-{word}" if out else word
        if len(longer) > limit:
            break
        out = longer
    return out or (words[0][:limit] if words else "patch")


def branch_names(subjects: Iterable[tuple[str, str]], fork: Collection[str] = ()) -> dict[str, str]:
    """{patch name: branch}, for (patch name, subject) pairs in series order; a name taken earlier gets -2, -3. A patch
    in `fork` (the fork tier) gets a `trainer-series/fork-only/` branch."""
    names: dict[str, str] = {}
    # git keeps branches as paths: a branch `trainer-series/fork-only` would keep the fork-only ones from being made
    taken: set[str] = {FORK_BRANCH_PREFIX.rstrip("/")}
    for patch, subject in subjects:
        base = (FORK_BRANCH_PREFIX if patch in fork else BRANCH_PREFIX) + slug(subject)
        name, number = base, 1
        while name in taken:
            number += 1
            name = f"{base}-{number}"
        taken.add(name)
        names[patch] = name
    return names


def branches_of(target: Target) -> dict[str, str]:
    """{patch name: branch} of the target's patches, named from their subjects (and their tier)."""
    subjects = ((name, patchfile.read(target.patch_path(name)).subject) for name in target.patches)
    return branch_names(subjects, target.fork)
