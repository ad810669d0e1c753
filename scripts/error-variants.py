#!/usr/bin/env python3
"""Counts error variants, and those that carry a String, in every crate of the workspace.

The rule: every variant of a `pub enum` whose name contains "Error" or "Reason", in the .rs
files under crates/*/src, is an error variant; it carries a String when its fields (the tuple
or the struct part, not its attributes, doc comments or message) name the type `String`.
A String is the right field only where the text is the whole information (a peer's error
message, a setting's value named in a message); a cause is kept as a typed source
(docs/ARCHITECTURE.md §5).

Usage: python3 scripts/error-variants.py [--max N] [--list] [ROOT]
  prints one row per crate (variants, String-carrying) and the total; with --max N it exits 1
  when more than N variants carry a String; --list names each String-carrying variant
  (file:line Enum::Variant). ROOT defaults to the repository root.
       python3 scripts/error-variants.py --self-test
  counts a small Rust file whose messages, doc comments and attributes mention String and
  hold braces and commas: it must find exactly the variants it names.
Python 3 standard library only.
"""

import argparse
import re
import sys
from pathlib import Path

ENUM_RE = re.compile(r"\bpub\s+enum\s+(\w*(?:Error|Reason)\w*)\b[^{;]*\{")
STRING_RE = re.compile(r"\bString\b")
IDENT_RE = re.compile(r"[A-Za-z_]\w*")


def blank_literals(src):
    """The source with comments, string and char literals blanked out (kept the same length,
    newlines kept), so that braces and commas inside them do not count."""
    out = list(src)
    i, n = 0, len(src)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 300]) and not (i and (src[i - 1].isalnum() or src[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', src[i:]).group(1)
            end = src.find('"' + hashes, i + len(hashes) + 2)
            j = n if end < 0 else end + 1 + len(hashes)
            blank(i + 1, j - 1)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(i + 1, j)
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{1F600}'), or a lifetime ('a, 'static).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", src[i:i + 12])
            if m:
                blank(i + 1, i + len(m.group(0)) - 1)
                i += len(m.group(0))
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


def split_top_level(body):
    """Pieces of an enum body between commas outside any (), [], {} or <>; with the offset of
    each piece."""
    pieces, depth, start = [], 0, 0
    for k, c in enumerate(body):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "<":
            depth += 1
        elif c == ">" and k and body[k - 1] not in "-=":
            depth -= 1
        elif c == "," and depth == 0:
            pieces.append((start, body[start:k]))
            start = k + 1
    pieces.append((start, body[start:]))
    return pieces


def strip_attributes(piece):
    """The piece without its #[...] attributes (balanced brackets)."""
    out, i = [], 0
    while i < len(piece):
        if piece.startswith("#[", i) or piece.startswith("#![", i):
            j = piece.index("[", i)
            depth = 0
            while j < len(piece):
                if piece[j] == "[":
                    depth += 1
                elif piece[j] == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            i = j + 1
        else:
            out.append(piece[i])
            i += 1
    return "".join(out)


def enum_variants(path):
    """(enum, variant, line, carries_string) for every error variant in one file."""
    src = path.read_text(encoding="utf-8")
    clean = blank_literals(src)
    found = []
    for m in ENUM_RE.finditer(clean):
        open_at = m.end() - 1
        depth, j = 0, open_at
        while j < len(clean):
            if clean[j] == "{":
                depth += 1
            elif clean[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        body = clean[open_at + 1:j]
        for offset, piece in split_top_level(body):
            rest = strip_attributes(piece)
            name = IDENT_RE.search(rest)
            if not name:
                continue
            fields = rest[name.end():]
            # The offset of the name in the file, for its line number.
            lead = len(piece) - len(piece.lstrip())
            at = open_at + 1 + offset + piece.find(name.group(0), lead)
            line = clean.count("\n", 0, at) + 1
            found.append((m.group(1), name.group(0), line, bool(STRING_RE.search(fields))))
    return found


SELF_TEST = r'''
/// An enum that is not an error: not counted (String).
pub enum Shape { Circle(String), Square }

/// Counted: 5 variants, 3 with a String.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SampleError {
    /// A doc comment that says String, with {braces}, and commas.
    #[error("bad {name}, {reason:?} (String)")]
    Named { name: &'static str, reason: Vec<String> },
    #[error(transparent)]
    Boxed(#[source] Box<dyn std::error::Error + Send + Sync>),
    // A comment: String, {, }
    Map(std::collections::HashMap<String, u8>, u16),
    #[error("{0}")]
    Text(String),
    /// Not a String, though its doc and message say String.
    #[error("no String here, {0}")]
    Unit,
}

pub(crate) enum HiddenError { Text(String) }

pub enum RefuseReason<'a> { Said(&'a str), Owned { text: std::string::String }, Char(char) }
'''


def self_test():
    """The counter on SELF_TEST: SampleError has 5 variants, 3 with a String (Named, Map,
    Text); RefuseReason 3, 1 with a String; Shape and the pub(crate) enum are not counted."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sample.rs"
        path.write_text(SELF_TEST, encoding="utf-8")
        found = enum_variants(path)
    got = [(e, v, c) for e, v, _, c in found]
    want = [
        ("SampleError", "Named", True),
        ("SampleError", "Boxed", False),
        ("SampleError", "Map", True),
        ("SampleError", "Text", True),
        ("SampleError", "Unit", False),
        ("RefuseReason", "Said", False),
        ("RefuseReason", "Owned", True),
        ("RefuseReason", "Char", False),
    ]
    if got != want:
        print(f"error-variants self-test: found {got}, expected {want}", file=sys.stderr)
        return 1
    print("error-variants self-test: 8 variants, 4 with a String, as expected")
    return 0


def main():
    parser = argparse.ArgumentParser(description="Counts error variants that carry a String.")
    parser.add_argument("--max", type=int, help="exit 1 when more than MAX carry a String")
    parser.add_argument("--list", action="store_true", help="name each String-carrying variant")
    parser.add_argument("--self-test", action="store_true", help="check the counter on a sample")
    parser.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parent.parent))
    args = parser.parse_args()
    if args.self_test:
        return self_test()

    root = Path(args.root)
    rows, listed = [], []
    for crate in sorted(p for p in (root / "crates").iterdir() if (p / "src").is_dir()):
        variants = strings = 0
        for path in sorted((crate / "src").rglob("*.rs")):
            for enum, variant, line, carries in enum_variants(path):
                variants += 1
                if carries:
                    strings += 1
                    listed.append(f"{path.relative_to(root)}:{line}: {enum}::{variant}")
        if variants:
            rows.append((crate.name, variants, strings))

    width = max([len("crate")] + [len(r[0]) for r in rows])
    print(f"{'crate':<{width}}  variants  with String")
    for name, variants, strings in rows:
        print(f"{name:<{width}}  {variants:>8}  {strings:>11}")
    total_v = sum(r[1] for r in rows)
    total_s = sum(r[2] for r in rows)
    print(f"{'total':<{width}}  {total_v:>8}  {total_s:>11}")
    if args.list:
        print()
        print("\n".join(listed))
    if args.max is not None and total_s > args.max:
        print(f"error-variants: {total_s} error variants carry a String, more than {args.max}: "
              "keep the cause as a typed source (docs/ARCHITECTURE.md §5)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
