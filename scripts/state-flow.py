#!/usr/bin/env python3
"""How far a state type travels through the relayer's code (issue 34's figure, counted from
the source text, not with a compiler).

    scripts/state-flow.py ROOT_MODULE::ROOT_FN TYPE [TYPE ...]

A function *takes* a type when one of its parameters names it (`&RelayerState`,
`Arc<RelayerState>`, `State<Arc<RelayerState>>`), or when it is a method with `self` in an
`impl` of it. Prints:
- takes: how many functions of crates/privsvc-relayer/src take one of the types whole;
- modules: how many modules (files) the types reach from the root, following calls from one
  such function to another by name;
- comes back: how many of those calls cross from one module into another (each one hands the
  whole state to another module, which hands it back when it returns).
"""
import pathlib
import re
import sys

SRC = pathlib.Path(__file__).resolve().parent.parent / "crates/privsvc-relayer/src"


def blocks(text, start):
    """Index just after the brace block opening at or after `start`."""
    i = text.index("{", start)
    depth = 0
    while True:
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1


def functions(types):
    fns = {}
    for path in sorted(SRC.rglob("*.rs")):
        module = str(path.relative_to(SRC))[:-3].replace("/mod", "")
        text = path.read_text()
        impls = []
        for m in re.finditer(r"\nimpl(?:<[^>]*>)?\s+(?:[\w:<>']+\s+for\s+)?(\w+)[^{;]*\{", text):
            impls.append((m.start(), blocks(text, m.start()), m.group(1)))
        for m in re.finditer(r"\bfn\s+(\w+)\s*(?:<[^(]*>)?\s*\(", text):
            depth, i = 1, m.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            params = text[m.end() : i - 1]
            try:
                end = blocks(text, i)
            except ValueError:
                continue
            if text.find(";", i) != -1 and text.find(";", i) < text.find("{", i):
                continue  # a declaration without a body
            owner = next((t for s, e, t in impls if s < m.start() < e), None)
            takes = any(re.search(rf"\b{t}\b", params) for t in types) or (
                owner in types and re.search(r"\bself\b", params)
            )
            fns.setdefault((module, m.group(1)), []).append((takes, text[i:end]))
    return fns


def main():
    root_module, root_fn = sys.argv[1].split("::")
    types = sys.argv[2:]
    fns = functions(types)
    taking = {k for k, v in fns.items() if any(t for t, _ in v)}
    names = {}
    for module, name in taking:
        names.setdefault(name, []).append((module, name))
    edges = {}
    for key in taking:
        body = " ".join(b for t, b in fns[key] if t)
        callees = set()
        for name in set(re.findall(r"\b(\w+)\s*\(", body)):
            for target in names.get(name, []):
                # A name shared by several modules: calls in the same module, or qualified.
                if len(names[name]) > 1 and target[0] != key[0] and f"{target[0].split('/')[-1]}::{name}" not in body:
                    continue
                if target != key:
                    callees.add(target)
        edges[key] = sorted(callees)
    root = (root_module, root_fn)
    seen_modules, seen_edges, comes_back = {root_module}, set(), set()

    def walk(node, path_modules, path):
        for target in edges.get(node, []):
            edge = (node, target)
            if target[0] != node[0]:
                comes_back.add(edge)
            if edge in seen_edges or target in path:
                continue
            seen_edges.add(edge)
            seen_modules.add(target[0])
            walk(target, path_modules | {target[0]}, path | {target})

    walk(root, {root_module}, {root})
    print(f"types: {', '.join(types)}")
    print(f"takes: {len(taking)} functions take one of them whole")
    print(f"modules: {len(seen_modules)} modules reached from {sys.argv[1]}")
    print(f"comes back: {len(comes_back)} calls hand it to another module")


if __name__ == "__main__":
    main()
