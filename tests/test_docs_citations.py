"""Every citation of the documentation resolves: a `docs/<path>.md §X.Y` citation in the code,
tests, benchmarks, examples, README.md or docs/ names a file that exists and a numbered
section that file has (its headings start with their numbers: `## 2 ...`, `### 2.1 ...`), and
every Markdown link of README.md and docs/ into docs/ (or to an anchor of the same file)
names an existing file and heading anchor."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Where citations live: code comments and docstrings, benchmark notes, the documentation.
SCANNED = ("routectl", "policies", "native", "tests", "benchmarks", "examples", "docs")
SCANNED_FILES = ("README.md",)
SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".txt"}

SECTION = r"§[0-9A-Z]+(?:\.[0-9]+)*"
# A path under docs/ and its section list: "§2.1", "§5.1/§5.2", "§3.1, §3.5" (the list may
# wrap onto the next comment line), "§2-§4" (a range: both ends must exist).
SEPARATOR = r"(?:[ \t]*(?:,|/|-|and)?[ \t]*\n?[ \t]*(?:#[ \t]*)?)"
CITATION = re.compile(
    rf"(?<![\w/.-])(?P<path>docs/[\w./-]*?\w\.md)(?P<sections>(?:{SEPARATOR}{SECTION})*)"
)
HEADING = re.compile(r"^#{1,6}[ \t]+(?P<title>.+?)[ \t]*#*$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def _headings(text: str) -> list[str]:
    return HEADING.findall(FENCE.sub("", text))


def section_numbers(text: str) -> set[str]:
    """The numbers headings start with ("## 2 Linear ..." -> "2")."""
    return {title.split()[0] for title in _headings(text) if re.match(r"[0-9A-Z]", title)}


def anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, a
    repeated anchor numbered -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    for title in _headings(text):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def scanned_files(root: Path) -> list[Path]:
    files = [root / name for name in SCANNED_FILES if (root / name).is_file()]
    for folder in SCANNED:
        if (root / folder).is_dir():
            files += sorted(
                p
                for p in (root / folder).rglob("*")
                if p.suffix in SUFFIXES and p.is_file() and "__pycache__" not in p.parts
            )
    return files


def broken_citations(root: Path) -> list[str]:
    """`file:line: citation: what is wrong` for every citation that does not resolve."""
    broken = []
    for path in scanned_files(root):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(root)
        for match in CITATION.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            cited = " ".join(match.group(0).split())
            target = root / match.group("path")
            if not target.is_file():
                broken.append(f"{where}:{line}: {cited}: no file {match.group('path')}")
                continue
            numbers = section_numbers(target.read_text(encoding="utf-8"))
            for section in re.findall(SECTION, match.group("sections")):
                if section[1:] not in numbers:
                    missing = f"{match.group('path')} has no {section}"
                    broken.append(f"{where}:{line}: {cited}: {missing}")
        if path.suffix != ".md" or not (path.name == "README.md" or "docs" in where.parts):
            continue
        # Code blocks blanked (line breaks kept, so that line numbers stay right).
        prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for match in LINK.finditer(prose):
            target, _, anchor = match.group("target").partition("#")
            if "://" in target or target.startswith("mailto:"):
                continue
            file = (path.parent / target).resolve() if target else path
            docs = (root / "docs").resolve()
            if target and not file.is_relative_to(docs):
                continue  # outside docs/: not this test's business
            line = prose.count("\n", 0, match.start()) + 1
            if not file.is_file():
                broken.append(f"{where}:{line}: link {match.group('target')}: no such file")
            elif anchor and anchor not in anchors(file.read_text(encoding="utf-8")):
                broken.append(f"{where}:{line}: link {match.group('target')}: no such heading")
    return broken


def test_every_citation_and_docs_link_resolves():
    assert broken_citations(ROOT) == []


def test_the_code_cites_the_contracts_in_the_repository():
    # The citations this test exists for: the code's rules, cited by file and section.
    cited = [
        match
        for path in scanned_files(ROOT)
        if path.suffix == ".py"
        for match in CITATION.finditer(path.read_text(encoding="utf-8"))
        if match.group("path").startswith("docs/contracts/") and match.group("sections")
    ]
    assert len(cited) >= 60


# A tiny tree: a.md under docs/ has sections 1, 1.1 and 2, and headings to link to. The
# planted paths are spelled through D so that this file holds no citation of its own.
DOC = "# A\n\n## 1 First\n\n### 1.1 Inner\n\n```text\n## 7 in a code block\n```\n\n## 2 Last\n"
S = "\N{SECTION SIGN}"
D = "docs"


@pytest.mark.parametrize(
    ("planted", "named"),
    [
        (f"# {D}/a.md {S}1.1 and {S}2\n", None),
        (f"# ({D}/a.md {S}1.1, {S}2, {S}1)\n", None),
        (f"# {D}/a.md {S}1.2: no such section\n", f"{D}/a.md has no {S}1.2"),
        (f"# {D}/a.md {S}7\n", f"{D}/a.md has no {S}7"),  # a heading inside a code block
        (f"# {D}/a.md {S}1.1,\n# {S}3\n", f"{D}/a.md has no {S}3"),  # the list wraps
        (f"# {D}/a.md {S}1-{S}4\n", f"{D}/a.md has no {S}4"),
        (f"# {D}/b.md {S}1\n", f"no file {D}/b.md"),
        (f"# see {D}/b.md\n", f"no file {D}/b.md"),
    ],
)
def test_a_planted_citation_fails_naming_it(tmp_path, planted, named):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(DOC)
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "rules.py").write_text(f'"""Rules."""\n\n{planted}')
    broken = broken_citations(tmp_path)
    if named is None:
        assert broken == []
    else:
        assert len(broken) == 1 and named in broken[0], broken
        assert broken[0].startswith("policies/rules.py:3: ")


@pytest.mark.parametrize(
    ("link", "bad"),
    [
        (f"[a]({D}/a.md#1-first)", False),
        (f"[a]({D}/a.md#11-inner)", False),
        ("[a](#usage)", False),
        (f"[a]({D}/a.md#2-lats)", True),
        (f"[a]({D}/gone.md)", True),
        ("[a](#nowhere)", True),
        ("[out](CONTRIBUTING.md)", False),  # outside docs/: another test's business
    ],
)
def test_a_planted_link_fails_naming_it(tmp_path, link, bad):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(DOC)
    (tmp_path / "README.md").write_text(f"# R\n\n## Usage\n\nSee {link}.\n")
    broken = broken_citations(tmp_path)
    assert {b.split(": ")[0] for b in broken} == ({"README.md:5"} if bad else set())
