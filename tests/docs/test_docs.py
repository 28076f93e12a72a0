"""The user's documentation (README.md and docs/) speaks to the user: it links only files (and headings) that are in the
repository, and names no developer notes, issue numbers or project history that a reader cannot see."""
import os
import pathlib
import re

import pytest

SRC = pathlib.Path(os.environ.get("GPUSCALE_SRC", pathlib.Path(__file__).resolve().parents[2]))

# Pages whose rewrite is under way elsewhere: checked again once they are rewritten. Keep this list short.
PENDING = set()

# What a reader of the repository cannot follow: developer-only files, and the project's own history.
FORBIDDEN = [
    (re.compile(r"\bDESIGN\.md\b"), "names DESIGN.md, which is not in the repository"),
    (re.compile(r"\.\./shared\b|(?<![\w.-])shared/"), "names a shared/ directory outside the repository"),
    (re.compile(r"\bissues? #?\d+", re.I), "names an issue number"),
    (re.compile(r"\bthe issue(?:'s)?\b", re.I), "speaks of 'the issue' (project history)"),
    # "the seed's profile", "the seed reference": the project's history; a random seed (--seed) is not
    (re.compile(r"\bthe seed's\b|\bseed(?:'s)? (?:reference|project|scaler|profiles?|defaults?|"
                r"design|version)\b|\bseeded\b", re.I), "speaks of the seed (project history)"),
]

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def pages():
    out = [SRC / "README.md"] + sorted((SRC / "docs").rglob("*.md"))
    return [p for p in out if str(p.relative_to(SRC)) not in PENDING]


def rel(p):
    return str(p.relative_to(SRC))


@pytest.mark.parametrize("page", pages(), ids=rel)
def test_no_history_or_missing_files(page):
    bad = []
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        for rx, why in FORBIDDEN:
            m = rx.search(line)
            if m:
                bad.append(f"{rel(page)}:{n}: {why}: {m.group(0)!r}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("page", pages(), ids=rel)
def test_relative_links_resolve(page):
    bad = []
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists():
                bad.append(f"{rel(page)}:{n}: links {target}, which is not in the repository")
    assert not bad, "\n".join(bad)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")


def anchors(page):
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", page.read_text(encoding="utf-8"), re.M)}


@pytest.mark.parametrize("page", pages(), ids=rel)
def test_anchors_resolve(page):
    bad = []
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or "#" not in target:
                continue
            path, frag = target.split("#", 1)
            dest = page.parent / path if path else page
            if dest.suffix == ".md" and dest.exists() and frag not in anchors(dest):
                bad.append(f"{rel(page)}:{n}: links {target}, but {dest.name} has no heading #{frag}")
    assert not bad, "\n".join(bad)


def test_slug_is_githubs():
    assert slug("Speed at 64 in flight, memory and threads") == "speed-at-64-in-flight-memory-and-threads"
    assert slug("`gpuscale lint`: check it") == "gpuscale-lint-check-it"
    assert slug("Partial failure: never a silently low value") == "partial-failure-never-a-silently-low-value"


def test_pending_pages_exist():
    # A page removed or renamed must leave the list too, or it would hide nothing and mislead.
    for p in PENDING:
        assert (SRC / p).exists(), f"{p} is in PENDING but not in the repository"


def test_the_check_finds_what_it_looks_for(tmp_path):
    # Each pattern matches the wording it is meant for, and not the ordinary words beside it.
    hits = {
        "see DESIGN.md": 0, "copy ../shared beside": 1, "(issue 24)": 2, "Issue #7": 2,
        "the issue's example": 3, "the seed's DCGM path": 4, "the seed reference scaler": 4,
    }
    for text, i in hits.items():
        assert FORBIDDEN[i][0].search(text), text
    for text in ["shared GPUs", "test_shared_gpus.py", "an issue with the driver", "seconds",
                 "five arrival draws from `--seed`", "the same seed gives the same run"]:
        assert not any(rx.search(text) for rx, _ in FORBIDDEN), text
