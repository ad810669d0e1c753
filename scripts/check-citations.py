#!/usr/bin/env python3
"""Checks that every citation in the repository points into the repository.

Citation syntax (the only one used in code comments and documents):

    docs/NAME.md                 the whole document
    docs/NAME.md §8.4            a numbered section: a heading of docs/NAME.md that starts
                                 with "8.4" ("### 8.4 Reading ..." or "## 8. Client ...")
    docs/NAME.md §1 and §8.5     several sections of one document (",", "and", "or" between)
    docs/NAME.md "Title"         an unnumbered section: a heading whose text is exactly Title
    docs/NAME.md#anchor          a Markdown link target: the GitHub anchor of a heading

NAME.md is a path from the repository root (SECURITY.md and README.md sit at the root and are
named without "docs/"). Inside a document, its own sections are cited by number alone, "(8.6)".

The check fails (exit 1, one "file:line: problem" per finding) on:
- any reference to the design notes, the service specification or the ledger notes that the
  project started from, which are not part of the repository: the words DESIGN and SPEC in
  capitals, "shared/" paths and "ledger-protocol";
- a citation of a docs/NAME.md that does not exist, or whose section number, title or anchor
  is not a heading of that file;
- a citation in another form: "docs/NAME.md section 5" or "docs/NAME.md 6" (write
  "docs/NAME.md §5"), "PROTOCOL 8.3" or "PROTOCOL.md 8.3" without "docs/", and a citation
  whose section numbers wrap onto the next line (a comment line starting with "§").

It also checks the code that README.md, SECURITY.md and docs/*.md name in backticks: every
file path, crate path and type must exist (scripts/doc_code_paths.py says which forms).

It scans the files git knows of (tracked, or untracked and not ignored; every file under the
root when git is not available) ending in .rs, .md, .js, .mjs, .ts, .sh or .toml, outside
target/ and node_modules/. A line that must keep such a word (code, not a citation) carries the
comment "check-citations: ignore" itself, or "check-citations: ignore-next-line" on the line
before it.

Usage: python3 scripts/check-citations.py [ROOT]   (ROOT defaults to the repository root)
       python3 scripts/check-citations.py --self-test (the code-path check on a small tree
       with three names that do not exist: it must find exactly those three)
Python 3 standard library only.
"""

import os
import re
import subprocess
import sys

EXTENSIONS = (".rs", ".md", ".js", ".mjs", ".ts", ".sh", ".toml")
SKIP_DIRS = {"target", "node_modules", ".git"}

OUTSIDE = [
    (re.compile(r"\bDESIGN\b"), "cites the design notes, which are not in the repository"),
    (re.compile(r"\bSPEC\b"), "cites the service specification, which is not in the repository"),
    (re.compile(r"shared/"), "names a file outside the repository (shared/)"),
    (re.compile(r"ledger-protocol"), "cites the ledger notes, which are not in the repository"),
]

SECTION_NUMBER = r"\d+(?:\.\d+)*"
# docs/NAME.md, then what follows it on the line.
CITATION = re.compile(r"\bdocs/([A-Za-z0-9_.-]+?\.md)")
ANCHOR = re.compile(r"#([A-Za-z0-9_-]+)")
FIRST_SECTION = re.compile(r"\s*§\s*(" + SECTION_NUMBER + r")")
MORE_SECTIONS = re.compile(r"\s*(?:,|;|\band\b|\bor\b)?\s*§\s*(" + SECTION_NUMBER + r")")
TITLE = re.compile(r"\s+\"([^\"]+)\"")
SECTION_WORD = re.compile(r",?\s*section\s+(" + SECTION_NUMBER + r")\b")
BARE_NUMBER = re.compile(r",?\s+(" + SECTION_NUMBER + r")(?=[\s),;:.]|$)")
SPLIT = re.compile(r"^\s*(?://[/!]?|\*|#+)?\s*§")
BARE_PROTOCOL = re.compile(r"(?<![/\w])PROTOCOL(?:\.md)?\s+(?:§\s*)?(\d|\")")

IGNORE = "check-citations: ignore"
IGNORE_NEXT = "check-citations: ignore-next-line"

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def repo_root():
    if len(sys.argv) > 1:
        return os.path.abspath(sys.argv[1])
    return os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def candidate_files(root):
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            check=True,
            capture_output=True,
        ).stdout.decode("utf-8", "replace")
        paths = sorted(set(p for p in out.split("\0") if p))
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
            for f in files:
                paths.append(os.path.relpath(os.path.join(d, f), root))
        paths.sort()
    for p in paths:
        parts = p.split("/")
        if any(x in SKIP_DIRS for x in parts[:-1]):
            continue
        if p.endswith(EXTENSIONS) and os.path.isfile(os.path.join(root, p)):
            yield p


def github_anchor(text):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"`", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


class Document:
    def __init__(self, path):
        self.numbers = set()
        self.titles = set()
        self.anchors = set()
        seen = {}
        in_fence = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.lstrip().startswith("```"):
                    in_fence = not in_fence
                    continue
                m = None if in_fence else HEADING.match(line)
                if not m:
                    continue
                text = m.group(2)
                self.titles.add(text)
                n = re.match(r"(" + SECTION_NUMBER + r")\.?(?:\s|$)", text)
                if n:
                    self.numbers.add(n.group(1))
                anchor = github_anchor(text)
                count = seen.get(anchor, 0)
                seen[anchor] = count + 1
                self.anchors.add(anchor if count == 0 else f"{anchor}-{count}")


def self_test():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import doc_code_paths

    problems = doc_code_paths.self_test()
    wanted = ["gone.rs", "Missing", "NoSuchType"]
    if len(problems) != 3 or not all(any(w in p for p in problems) for w in wanted):
        print("check-citations self-test FAILED:", *problems, sep="\n  ")
        return 1
    print("check-citations self-test: the code-path check finds the 3 missing names")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = repo_root()
    documents = {}

    def document(name):
        if name not in documents:
            path = os.path.join(root, "docs", name)
            documents[name] = Document(path) if os.path.isfile(path) else None
        return documents[name]

    problems = []
    files = 0
    citations = 0
    for rel in candidate_files(root):
        files += 1
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                lines = f.read().split("\n")
        except UnicodeDecodeError:
            continue
        skip_next = False
        for number, line in enumerate(lines, 1):
            if skip_next:
                skip_next = False
                continue
            if IGNORE_NEXT in line:
                skip_next = True
                continue
            if IGNORE in line:
                continue
            where = f"{rel}:{number}"
            for pattern, message in OUTSIDE:
                if pattern.search(line):
                    problems.append(f"{where}: {message}: {line.strip()[:120]}")
            if SPLIT.match(line):
                problems.append(f"{where}: keep the citation and its section on one line: {line.strip()[:120]}")
            if BARE_PROTOCOL.search(line):
                problems.append(f"{where}: write the citation as docs/PROTOCOL.md §N: {line.strip()[:120]}")
            for m in CITATION.finditer(line):
                citations += 1
                name = m.group(1)
                cited = f"docs/{name}"
                doc = document(name)
                if doc is None:
                    problems.append(f"{where}: {cited} does not exist")
                    continue
                rest = line[m.end():]
                a = ANCHOR.match(rest)
                if a:
                    if a.group(1) not in doc.anchors:
                        problems.append(f"{where}: {cited}#{a.group(1)} is not a heading of {cited}")
                    continue
                s = FIRST_SECTION.match(rest)
                if s:
                    sections = [s.group(1)]
                    pos = s.end()
                    while True:
                        more = MORE_SECTIONS.match(rest, pos)
                        if not more:
                            break
                        sections.append(more.group(1))
                        pos = more.end()
                    for n in sections:
                        if n not in doc.numbers:
                            problems.append(f"{where}: {cited} has no section {n}")
                    continue
                t = TITLE.match(rest)
                if t:
                    if t.group(1) not in doc.titles:
                        problems.append(f'{where}: {cited} has no heading "{t.group(1)}"')
                    continue
                w = SECTION_WORD.match(rest) or BARE_NUMBER.match(rest)
                if w:
                    n = w.group(1)
                    problems.append(f"{where}: write {cited} §{n}, not {rest[:w.end()].strip()!r}")
                    if n not in doc.numbers:
                        problems.append(f"{where}: {cited} has no section {n}")

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import doc_code_paths

    names = list(candidate_files(root))
    code_problems, names_checked = doc_code_paths.check(root, names, IGNORE, IGNORE_NEXT)
    problems.extend(code_problems)
    if problems:
        for p in problems:
            print(p)
        print(f"check-citations: {len(problems)} problem(s) in {files} files", file=sys.stderr)
        return 1
    print(f"check-citations: {citations} citations in {files} files point into the repository; {names_checked} code names in the documents exist")
    return 0


if __name__ == "__main__":
    sys.exit(main())
