#!/usr/bin/env python3
"""Print which modules of a crate import which, and any import cycle among them.

    python3 scripts/module-graph.py [SRC_DIR]        (default: client-core/src)

A module is a source file (`a/b.rs` and `a/b/mod.rs` are `a/b`; `lib.rs` is left out). An
edge is any `crate::…` path outside comments and outside the `#[cfg(test)] mod tests` at a
file's end, resolved to the longest module it names. Exits 1 when there is a cycle, so CI
keeps the layering of docs/ARCHITECTURE.md true.
"""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "client-core/src"


def module_of(path):
    parts = os.path.relpath(path, root)[:-3].split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    return "/".join(parts)


files = {}
for d, _, names in os.walk(root):
    for n in names:
        if n.endswith(".rs"):
            files[module_of(os.path.join(d, n))] = os.path.join(d, n)
files.pop("lib", None)
modules = set(files)


def resolve(segments):
    for n in range(len(segments), 0, -1):
        candidate = "/".join(segments[:n])
        if candidate in modules:
            return candidate
    return None


def expand(prefix, rest):
    """`a::{b, c::{d, e}}` -> ["a::b", "a::c::d", "a::c::e"]."""
    m = re.match(r"^([^{]*)\{(.*)\}$", rest)
    if not m:
        return [prefix + rest]
    head, inner = m.groups()
    parts, depth, cur = [], 0, ""
    for ch in inner:
        depth += (ch == "{") - (ch == "}")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p for part in parts if part for p in expand(prefix + head, part)]


edges = {}
for module, path in files.items():
    with open(path) as f:
        src = f.read()
    src = re.split(r"#\[cfg\(test\)\]\s*mod tests\b", src)[0]
    src = re.sub(r"//[^\n]*", "", src)
    targets = set()
    for body in re.findall(r"\buse\s+crate::([^;]+);", src, re.S):
        for full in expand("", re.sub(r"\s+", "", body)):
            t = resolve([s for s in full.split("::") if s and s != "self"])
            if t:
                targets.add(t)
    for full in re.findall(r"\bcrate::([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)", src):
        t = resolve(full.split("::"))
        if t:
            targets.add(t)
    targets.discard(module)
    edges[module] = sorted(targets)

for module in sorted(edges):
    if edges[module]:
        print(f"{module} -> {', '.join(edges[module])}")

# Tarjan's strongly connected components: any with more than one module is a cycle.
index, low, stack, on_stack, cycles = {}, {}, [], set(), []


def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in edges.get(v, []):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on_stack:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        component = []
        while True:
            w = stack.pop()
            on_stack.discard(w)
            component.append(w)
            if w == v:
                break
        if len(component) > 1:
            cycles.append(sorted(component))


for v in sorted(edges):
    if v not in index:
        visit(v)
print()
for c in cycles:
    print(f"cycle among {len(c)} modules: {', '.join(c)}")
if cycles:
    sys.exit(1)
print(f"{len(edges)} modules, no cycle")
