#!/usr/bin/env python3
"""Check that the modules of each crate import each other without a cycle.

A module is a source file reached from a crate root (`lib.rs`, `main.rs`, `bin/*.rs`,
`bin/*/main.rs`) through `mod` declarations; `#[cfg(test)]` modules and items are left out,
whether inline or in their own file. Module `a/b` is `a/b.rs` or `a/b/mod.rs`, named from the
root's folder; the root itself is `lib.rs` (or `main.rs`, ...).

Module A depends on module B when A's code names an item that B's file defines: through a
`crate::`, `self::`, `super::` (any depth) or child-module path, in a `use` or inline, outside
comments and string literals. Re-exports are followed to the file that defines the item, so a
`mod.rs` that only re-exports its children does not depend on them, and a sibling reached
through the parent's `pub use` counts as a dependency on that sibling.

A module's use of what its enclosing modules define (`super::Item`, `crate::Item` defined in
the root) is not counted unless `--strict`: the enclosing modules are its scope, and a parent
that uses its children while they use its types (an error enum and the causes it carries, each
holding the other) is one unit, not a cycle between layers. A cycle through a sibling or another
branch still counts.

Cycles are reported at two levels: among files, and among top-level modules (`a/b/c` counts as
`a`), since a layer is a top-level module (docs/ARCHITECTURE.md). Each cycle is printed with one
loop through it and, for every dependency inside it, the place that creates it.

With no SRC_DIR, every workspace member's `src/` is checked. Exit status: 0 no cycle, 1 a cycle,
2 a folder that is missing or holds no crate root.
"""
import argparse
import os
import re
import sys
import tomllib
from collections import defaultdict

ROOT_NAMES = ("lib.rs", "main.rs")
ITEM_KEYWORDS = {"fn", "struct", "enum", "trait", "type", "const", "static", "union"}


class Unusable(Exception):
    """A folder the checker cannot check; reported with exit status 2."""


# ---------------------------------------------------------------------------------------------
# Lexing: comments, strings and char literals become blanks (newlines kept for line numbers).


def blank_out(src):
    out = []
    i, n = 0, len(src)

    def blank(text):
        out.append(re.sub(r"[^\n]", " ", text))

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(src[i:j])
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
            blank(src[i:j])
            i = j
        elif c in "rb" and not (i and (src[i - 1].isalnum() or src[i - 1] == "_")) and (
            m := re.match(r"b?r(#*)\"", src[i:])
        ):
            end = src.find('"' + m.group(1), i + m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            blank(src[i:j])
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(src[i : j + 1])
            i = j + 1
        elif c == "'":
            if src.startswith("\\", i + 1):
                j = src.find("'", i + 3)
                j = n if j < 0 else j + 1
                blank(src[i:j])
                i = j
            elif i + 2 < n and src[i + 2] == "'":
                blank(src[i : i + 3])
                i += 3
            else:
                out.append(c)  # a lifetime
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


TOKEN = re.compile(r"\$?[A-Za-z_][A-Za-z0-9_]*|::|\n|\S")


def tokens(src):
    line = 1
    for m in TOKEN.finditer(blank_out(src)):
        t = m.group()
        if t == "\n":
            line += 1
        else:
            yield t, line


# ---------------------------------------------------------------------------------------------
# Parsing one file into scopes (the file's module and its inline modules).


class Scope:
    def __init__(self, path, file):
        self.path = path  # tuple of module names from the crate root
        self.file = file  # the node this scope's code belongs to
        self.defs = set()  # names of items defined here
        self.children = {}  # child module name -> source file or None (inline)
        self.aliases = {}  # name brought in by `use` -> the path as written
        self.globs = []  # (path as written, line, text) of each `use ...::*`
        self.uses = []  # (local name, line, text) of each `use`
        self.paths = []  # (segments as written, line) of each inline path
        self.words = set()  # identifiers in code outside `use` statements


def render(toks):
    """Tokens as source text, spaced the way rustfmt would."""
    text = ""
    for t, _ in toks:
        if text and not (t in ",;:)}" or t == "::" or text.endswith(("::", "{", "("))):
            text += " "
        text += t
    return text


def is_test_cfg(attr):
    attr = "".join(attr)
    return attr.startswith("cfg(test)") or attr.startswith("cfg(all(test,")


def skip_item(toks, i):
    """Index after the item (or field, or statement) starting at `i`: its `;` or `,`, or the
    `}` closing its body; never past the bracket that closes what encloses it."""
    depth = 0
    while i < len(toks):
        t = toks[i][0]
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
            if depth < 0:
                return i
            if depth == 0 and t == "}":
                return i + 1
        elif t in ";," and depth == 0:
            return i + 1
        i += 1
    return i


def parse_use_tree(toks, i, prefix, out, line):
    """Parse a use tree at toks[i]; append (segments, local name or '*') to out; return index."""
    segs = list(prefix)
    while i < len(toks):
        t = toks[i][0]
        if t == "::":
            i += 1
        elif t == "{":
            i += 1
            while i < len(toks) and toks[i][0] != "}":
                i = parse_use_tree(toks, i, segs, out, line)
                if i < len(toks) and toks[i][0] == ",":
                    i += 1
            return i + 1
        elif t == "*":
            out.append((segs, "*"))
            return i + 1
        elif re.match(r"\$?[A-Za-z_]", t):
            segs.append(t)
            i += 1
            if i + 1 < len(toks) and toks[i][0] == "as":
                out.append((segs, toks[i + 1][0]))
                return i + 2
            if i >= len(toks) or toks[i][0] != "::":
                if t == "self":
                    out.append((segs[:-1], segs[-2] if len(segs) > 1 else "self"))
                else:
                    out.append((segs, t))
                return i
        else:
            return i
    return i


def parse_file(crate, path, file_node, module_path, children_dir):
    with open(path, encoding="utf-8") as f:
        toks = list(tokens(f.read()))
    scope = crate.new_scope(module_path, file_node)
    stack = []  # one entry per open brace: the inline module's Scope, or None
    pending_test = False
    i = 0

    def current():
        for s in reversed(stack):
            if s is not None:
                return s
        return scope

    while i < len(toks):
        t, line = toks[i]
        if t == "#":
            j = i + 1
            if j < len(toks) and toks[j][0] == "!":
                j += 1
            if j < len(toks) and toks[j][0] == "[":
                end = j
                depth = 0
                while end < len(toks):
                    if toks[end][0] == "[":
                        depth += 1
                    elif toks[end][0] == "]":
                        depth -= 1
                        if depth == 0:
                            break
                    end += 1
                if toks[i + 1][0] != "!" and is_test_cfg([x for x, _ in toks[j + 1 : end]]):
                    pending_test = True
                i = end + 1
                continue
        if pending_test:
            pending_test = False
            i = skip_item(toks, i)
            continue
        here = current()
        if t == "{":
            stack.append(None)
        elif t == "}":
            if stack:
                stack.pop()
        elif t == "mod" and i + 1 < len(toks) and toks[i + 1][0].startswith("$"):
            # `mod $name;` in a macro: the modules are named where the macro is used, which
            # this reader does not expand; declare modules plainly to have them checked.
            i += 2
            continue
        elif t == "mod" and i + 1 < len(toks):
            name = toks[i + 1][0]
            after = toks[i + 2][0] if i + 2 < len(toks) else ";"
            here.defs.add(name)
            if after == ";":
                inline = here.path[len(module_path) :]
                here.children[name] = crate.child_file(children_dir, inline, name)
                i += 3
                continue
            if after == "{":
                inner = crate.new_scope(here.path + (name,), file_node)
                here.children[name] = None
                stack.append(inner)
                i += 3
                continue
        elif t == "use" and i + 1 < len(toks) and toks[i + 1][0] != "<":
            start = i
            found = []
            i = parse_use_tree(toks, i + 1, [], found, line)
            while i < len(toks) and toks[i][0] != ";":
                i += 1
            text = render(toks[start : i + 1])
            for segs, name in found:
                if name == "*":
                    here.globs.append((segs, line, text))
                else:
                    here.aliases[name] = segs
                    here.uses.append((name, line, text))
            i += 1
            continue
        elif t in ITEM_KEYWORDS and all(s is not None for s in stack) and i + 1 < len(toks):
            name = toks[i + 1][0]
            if re.match(r"[A-Za-z_]", name):
                here.defs.add(name)
        elif t == "macro_rules" and i + 2 < len(toks) and toks[i + 1][0] == "!":
            here.defs.add(toks[i + 2][0])
        elif re.match(r"\$?[A-Za-z_]", t):
            here.words.add(t)
            prev = toks[i - 1][0] if i else ""
            if prev not in ("::", ".") and i + 2 < len(toks) and toks[i + 1][0] == "::":
                segs, j = [t], i + 1
                while j + 1 < len(toks) and toks[j][0] == "::" and re.match(
                    r"[A-Za-z_]", toks[j + 1][0]
                ):
                    segs.append(toks[j + 1][0])
                    j += 2
                if len(segs) > 1:
                    here.paths.append((segs, line))
                    here.words.update(segs)
                    i = j
                    continue
        i += 1


# ---------------------------------------------------------------------------------------------
# A crate: its scopes, name resolution, and the dependency graph between its files.


class Crate:
    def __init__(self, src_dir, root_file):
        self.src_dir = src_dir
        self.root_file = root_file
        self.base = os.path.dirname(root_file)
        self.label = os.path.relpath(root_file, src_dir)
        self.root_node = os.path.basename(root_file) if self.base == src_dir else self.label
        self.scopes = {}
        self.files = {}  # node -> source file
        self.load(root_file, self.root_node, (), self.base)

    def new_scope(self, path, file_node):
        s = Scope(path, file_node)
        self.scopes[path] = s
        return s

    def child_file(self, children_dir, inline_path, name):
        d = os.path.join(children_dir, *inline_path)
        flat = os.path.join(d, name + ".rs")
        return flat if os.path.exists(flat) else os.path.join(d, name, "mod.rs")

    def load(self, path, node, module_path, children_dir):
        self.files[node] = path
        parse_file(self, path, node, module_path, children_dir)
        for s in [s for s in self.scopes.values() if s.file == node]:
            for name, child in s.children.items():
                if child is None:
                    continue
                if not os.path.exists(child):
                    raise Unusable(f"{child}: declared by `mod {name};` but missing")
                sub = s.path + (name,)
                sub_dir = os.path.dirname(child) if child.endswith("mod.rs") else child[:-3]
                self.load(child, "/".join(sub), sub, sub_dir)

    def is_ancestor(self, a, b):
        """Whether module `a` encloses module `b` (the root encloses every module)."""
        return a == self.root_node or b.startswith(a + "/")

    def top_level(self, node):
        return node if node == self.root_node else node.split("/")[0]

    def absolute(self, scope, segs, seen=()):
        """The absolute module path of a path written in `scope`; None if it leaves the crate."""
        if not segs:
            return None
        first, rest = segs[0], tuple(segs[1:])
        if first in ("crate", "$crate"):
            return rest
        if first in ("self", "super"):
            base, k = scope.path, 0
            while k < len(segs) and segs[k] in ("self", "super"):
                if segs[k] == "super":
                    base = base[:-1]
                k += 1
            return base + tuple(segs[k:])
        if first in scope.children:
            return scope.path + tuple(segs)
        if first in scope.aliases and (scope.path, first) not in seen:
            target = self.absolute(scope, scope.aliases[first], seen + ((scope.path, first),))
            return None if target is None else target + rest
        return None

    def resolve(self, segs, strict=False, seen=None):
        """(scope whose file defines what `segs` names, whether it names a module), or None."""
        seen = set() if seen is None else seen
        if segs in seen:
            return None
        seen.add(segs)
        k = len(segs)
        while k > 0 and segs[:k] not in self.scopes:
            k -= 1
        scope = self.scopes[segs[:k]]
        if k == len(segs):
            return scope, True
        name = segs[k]
        if name in scope.defs:
            return scope, False
        if name in scope.aliases:
            target = self.absolute(scope, scope.aliases[name])
            if target is None:
                return None
            return self.resolve(target + segs[k + 1 :], strict, seen)
        for g, _, _ in scope.globs:
            target = self.absolute(scope, g)
            r = target is not None and self.resolve(target + segs[k:], True, seen)
            if r:
                return r
        return None if strict else (scope, False)

    def edges(self):
        """{node: {node it depends on: (line, text) of the first place that makes it so}}."""
        out = {node: {} for node in self.files}

        def add(scope, target, line, text):
            src, dst = scope.file, target.file
            if src != dst and dst not in out[src]:
                out[src][dst] = (line, text)

        for scope in self.scopes.values():
            # An imported item counts where the importing code uses it: an import only passed
            # on (`pub use`) is followed by whoever uses it, not counted here.
            for name, line, text in scope.uses:
                absolute = self.absolute(scope, scope.aliases[name])
                if name not in scope.words or absolute is None:
                    continue
                r = self.resolve(absolute)
                if r and not r[1]:
                    add(scope, r[0], line, text)
            for g, line, text in scope.globs:
                absolute = self.absolute(scope, g)
                r = absolute is not None and self.resolve(absolute)
                if not r or not r[1]:
                    continue
                names = set(r[0].defs) | set(r[0].aliases) | set(r[0].children)
                for name in sorted(names & scope.words):
                    hit = self.resolve(absolute + (name,))
                    if hit and not hit[1]:
                        add(scope, hit[0], line, text)
            for segs, line in scope.paths:
                absolute = self.absolute(scope, segs)
                r = absolute is not None and self.resolve(absolute)
                if r:
                    add(scope, r[0], line, "::".join(segs))
        return out

    def where(self, node, line):
        path = os.path.relpath(self.files[node])
        return f"{path}:{line}" if line else path


# ---------------------------------------------------------------------------------------------
# Cycles: strongly connected components, and one loop through each.


def components(graph):
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def loop_through(graph, comp):
    """A shortest cycle through the component's first member, as a list of nodes."""
    members = set(comp)
    start = comp[0]
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w not in members:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp + [start]


def report_cycles(title, graph, comps, evidence):
    for comp in comps:
        print(f"  cycle among {len(comp)} {title}: {', '.join(comp)}")
        print(f"    loop: {' -> '.join(loop_through(graph, comp))}")
        for a in comp:
            for b in sorted(graph[a]):
                if b in comp:
                    for line in evidence(a, b):
                        print(f"    {line}")


# ---------------------------------------------------------------------------------------------


def crate_roots(src_dir):
    roots = [os.path.join(src_dir, n) for n in ROOT_NAMES]
    roots = [p for p in roots if os.path.isfile(p)]
    bin_dir = os.path.join(src_dir, "bin")
    if os.path.isdir(bin_dir):
        for n in sorted(os.listdir(bin_dir)):
            p = os.path.join(bin_dir, n)
            if n.endswith(".rs") and os.path.isfile(p):
                roots.append(p)
            elif os.path.isfile(os.path.join(p, "main.rs")):
                roots.append(os.path.join(p, "main.rs"))
    return roots


def workspace_src_dirs(workspace):
    with open(os.path.join(workspace, "Cargo.toml"), "rb") as f:
        members = tomllib.load(f).get("workspace", {}).get("members", [])
    dirs = []
    for m in members:
        src = os.path.join(workspace, m, "src")
        if os.path.isdir(src) and crate_roots(src):
            dirs.append(os.path.relpath(src))
        else:
            member = os.path.relpath(os.path.join(workspace, m))
            print(f"{member}: no src/ with a crate root, skipped")
    return dirs


def check(src_dir, graph_mode, strict):
    """Print the report for one src dir; True when it has a cycle."""
    if not os.path.isdir(src_dir):
        raise Unusable(f"{src_dir}: no such folder")
    roots = crate_roots(src_dir)
    if not roots:
        raise Unusable(
            f"{src_dir}: holds no crate root (lib.rs, main.rs, bin/*.rs or bin/*/main.rs),"
            " so no modules to check; give a crate's src folder"
        )
    any_cycle = False
    for root in roots:
        crate = Crate(src_dir, root)
        edges = crate.edges()
        file_graph = {
            a: {b for b in bs if strict or not crate.is_ancestor(b, a)}
            for a, bs in edges.items()
        }
        top_graph = defaultdict(set)
        top_why = defaultdict(list)
        for a, bs in file_graph.items():
            top_graph.setdefault(crate.top_level(a), set())
            for b in bs:
                if crate.top_level(a) != crate.top_level(b):
                    top_graph[crate.top_level(a)].add(crate.top_level(b))
                    top_why[crate.top_level(a), crate.top_level(b)].append((a, b))
        file_cycles = components(file_graph)
        top_cycles = components(top_graph)
        verdict = "no cycle" if not (file_cycles or top_cycles) else (
            f"{len(file_cycles)} cycle(s) among files, {len(top_cycles)} among top-level modules"
        )
        count = f"{len(file_graph)} module{'s' if len(file_graph) > 1 else ''}"
        name = os.path.join(src_dir, crate.label)
        print(f"{name}: {count} ({len(top_graph)} top-level), {verdict}")
        if graph_mode:
            graph = edges if graph_mode == "files" else top_graph
            for a in sorted(graph):
                if graph[a]:
                    print(f"{a} -> {', '.join(sorted(graph[a]))}")

        def file_evidence(a, b):
            line, text = edges[a][b]
            return [f"{a} -> {b}: {crate.where(a, line)} `{text}`"]

        def top_evidence(a, b):
            out = [f"{a} -> {b}:"]
            for fa, fb in sorted(top_why[a, b]):
                line, text = edges[fa][fb]
                out.append(f"  {fa} -> {fb}: {crate.where(fa, line)} `{text}`")
            return out

        report_cycles("files", file_graph, file_cycles, file_evidence)
        report_cycles("top-level modules", top_graph, top_cycles, top_evidence)
        any_cycle |= bool(file_cycles or top_cycles)
    return any_cycle


def main():
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Dependencies are read from the source text, not from rustc: a path the "
        "checker cannot place (a macro's output, an external crate) is not counted.",
    )
    parser.add_argument(
        "src_dirs",
        nargs="*",
        metavar="SRC_DIR",
        help="a crate's src folder (default: every workspace member's src/)",
    )
    parser.add_argument(
        "--graph",
        dest="graph",
        action="store_const",
        const="files",
        help="also print which modules depend on which, one line a module",
    )
    parser.add_argument(
        "--top-graph",
        dest="graph",
        action="store_const",
        const="top",
        help="also print which top-level modules depend on which",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="also count a module's use of its enclosing modules' items (`super::Item`)",
    )
    parser.add_argument(
        "--workspace",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
        help="workspace folder whose members are checked when no SRC_DIR is given",
    )
    args = parser.parse_args()
    try:
        src_dirs = args.src_dirs or workspace_src_dirs(args.workspace)
        if not src_dirs:
            raise Unusable(f"{args.workspace}: no workspace member has a src folder")
        cycles = [check(d, args.graph, args.strict) for d in src_dirs]
    except BrokenPipeError:
        return 1
    except (Unusable, OSError, tomllib.TOMLDecodeError) as e:
        print(f"module-graph: {e}", file=sys.stderr)
        return 2
    if any(cycles):
        print("import cycles found: a module must not depend on one that depends on it")
        return 1
    print("no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
