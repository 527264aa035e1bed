#!/usr/bin/env python3
"""Fails on an #include "..." that crosses a layer it may not, or closes a cycle.

The layers are declared once, in tools/layers.txt (its comments say how to
read it). This scans the production sources (agent/, buffer/, bpf/, ftrace/:
.h, .cc and .c), resolves each quoted include as the compiler does (the
including file's folder, then the repository root: the build uses -I.),
passes over what is not in the tree (system and third-party headers, the
generated skeletons and vmlinux.h) and counts the generated protobuf headers
(ringside/...pb.h) as protos/. Then:

  - a component includes only itself and the components its line names;
  - inside agent/, a folder includes files of its own folder and of folders
    on later levels only; folders on one level never include each other;
  - a component that a `direct` line names is included, from agent/, only by
    the folders that line lists;
  - no two files include each other, directly or through others (a file
    cycle), and no two units do (a unit is a header and its sources:
    a.cc includes b.h, which includes a.h);
  - every exception the table's allowlist names still occurs (the list only
    shrinks);
  - with --doc, the levels architecture.md lists under "Inside `agent/`"
    are the table's;
  - with --folder-table, the "includes" column of development.md's table of
    agent folders names exactly the agent folders each one includes today.

Prints one line per problem, "file:line: includes X: rule (tools/layers.txt)",
and exits 1 if there is any; 0 and one summary line otherwise. Python's
standard library only; it reads a few hundred files in well under a second.
"""

import argparse
import collections
import os
import re
import sys

SOURCE_SUFFIXES = (".h", ".cc", ".c")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
PROTO_PREFIX = "ringside/"


class TableError(Exception):
    pass


class Table:
    """tools/layers.txt, parsed."""

    def __init__(self, path, text):
        self.path = path
        self.components = {}  # name -> set of components it may include
        self.levels = {}  # agent folder -> level number
        self.placed = {}  # file at agent/ top -> the agent folder it counts as
        self.direct = {}  # component -> agent folders that may include it
        self.allowed = {}  # (file, included) -> table line
        self.cycles = {}  # normalized cycle of files -> table line
        self.unit_cycles = {}  # normalized cycle of units (a .h and its .cc) -> table line
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            self._parse(line, number)
        for folder in self.placed.values():
            if folder not in self.levels:
                raise TableError(f"{path}: place names {folder}, which no level lists")

    def _parse(self, line, number):
        word, _, rest = line.partition(" ")
        head, colon, tail = rest.partition(":")
        head, names = head.strip(), tail.split()
        where = f"{self.path}:{number}"
        if word == "component" and colon:
            self.components[head] = set(names)
        elif word == "level" and colon and head.isdigit():
            for folder in names:
                if folder in self.levels:
                    raise TableError(f"{where}: agent/{folder} is on two levels")
                self.levels[folder] = int(head)
        elif word == "place" and colon and len(names) == 1:
            self.placed[head] = names[0]
        elif word == "direct" and colon:
            self.direct[head] = set(names)
        elif word == "allow" and "->" in rest:
            source, _, included = rest.partition("->")
            self.allowed[(source.strip(), included.strip())] = number
        elif word in ("cycle", "unit-cycle") and "->" in rest:
            chain = [f.strip() for f in rest.split("->")]
            if len(chain) < 3 or chain[0] != chain[-1]:
                raise TableError(f"{where}: a cycle starts and ends at the same name")
            listed = self.cycles if word == "cycle" else self.unit_cycles
            listed[normalize_cycle(chain[:-1])] = number
        else:
            raise TableError(f"{where}: cannot read '{line}'")


def normalize_cycle(files):
    """The cycle as a tuple starting at its smallest file, so rotations compare equal."""
    start = files.index(min(files))
    return tuple(files[start:] + files[:start])


def unit_of(path):
    """A header and its sources are one unit: agent/config/config_loader.{h,cc}."""
    for suffix in SOURCE_SUFFIXES:
        if path.endswith(suffix):
            return path[: -len(suffix)]
    return path


def component_of(path):
    if path.startswith(PROTO_PREFIX):
        return "protos"
    return path.split("/", 1)[0]


def scan(root, components):
    """Every production source: {path: [(line, included path as resolved)]}."""
    files = {}
    for component in sorted(components):
        top = os.path.join(root, component)
        for folder, dirs, names in os.walk(top):
            dirs.sort()
            for name in sorted(names):
                if name.endswith(SOURCE_SUFFIXES):
                    path = os.path.relpath(os.path.join(folder, name), root)
                    files[path.replace(os.sep, "/")] = None
    for path in files:
        includes = []
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, text in enumerate(f, 1):
                match = INCLUDE_RE.match(text)
                if not match:
                    continue
                resolved = resolve(root, path, match.group(1), components)
                if resolved:
                    includes.append((number, resolved))
        files[path] = includes
    return files


def resolve(root, including, name, components):
    """The included file's path from the root, or None for one outside the layers."""
    if name.startswith(PROTO_PREFIX):
        return name
    beside = os.path.normpath(os.path.join(os.path.dirname(including), name))
    for candidate in (beside, os.path.normpath(name)):
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate.replace(os.sep, "/")
    # Not in the tree: a system, third-party or generated header, unless it
    # names a component (a file that is gone; the compiler says so).
    return name if component_of(name) in components else None


class Checker:
    def __init__(self, table):
        self.table = table

    def agent_folder(self, path):
        """The agent folder a file under agent/ counts as; None if the table places it nowhere."""
        parts = path.split("/")
        if len(parts) >= 3:
            return parts[1]
        return self.table.placed.get(path)

    def rule_broken(self, source, included):
        """Why `source` may not include `included`, or None if it may."""
        t = self.table
        src, dst = component_of(source), component_of(included)
        if src != dst:
            if dst not in t.components.get(src, set()):
                return f"{src}/ may not include {dst}/"
            if src == "agent" and dst in t.direct:
                folder = self.agent_folder(source)
                if folder not in t.direct[dst]:
                    who = ", ".join(f"agent/{f}" for f in sorted(t.direct[dst]))
                    return f"agent/{folder} may not include {dst}/ (only {who} may)"
            return None
        if src != "agent":
            return None
        a, b = self.agent_folder(source), self.agent_folder(included)
        for path, folder in ((source, a), (included, b)):
            if folder is None:
                return f"{path} is in no folder of the levels (place it)"
            if folder not in t.levels:
                return f"agent/{folder} is on no level"
        if a == b:
            return None
        if t.levels[a] == t.levels[b]:
            return (f"agent/{a} may not include agent/{b}/ "
                    f"(both on level {t.levels[a]}; they never include each other)")
        if t.levels[b] < t.levels[a]:
            return (f"agent/{a} may not include agent/{b}/ "
                    f"(level {t.levels[b]} is above its level {t.levels[a]})")
        return None

    def check(self, files):
        """Problems, each a line; the count of exceptions that still occur."""
        problems, seen = [], set()
        for path in sorted(files):
            for number, included in files[path]:
                why = self.rule_broken(path, included)
                if why is None:
                    continue
                seen.add((path, included))
                if (path, included) not in self.table.allowed:
                    problems.append(
                        f"{path}:{number}: includes {included}: {why} ({self.table.path})")
        for (path, included), number in sorted(self.table.allowed.items()):
            if (path, included) not in seen:
                problems.append(
                    f"{self.table.path}:{number}: allows {path} -> {included}, which no longer "
                    "breaks a rule: remove the line")
        file_edges = {p: {i: n for n, i in reversed(incs) if i in files and i != p}
                      for p, incs in files.items()}
        problems += self.cycle_problems("include cycle", file_edges, self.table.cycles)
        unit_edges = collections.defaultdict(dict)
        for path in sorted(files):
            for included, number in file_edges[path].items():
                if unit_of(included) != unit_of(path):
                    unit_edges[unit_of(path)].setdefault(
                        unit_of(included), (path, number, included))
        for path in files:
            unit_edges.setdefault(unit_of(path), {})
        in_file_cycles = {f for c in find_cycles(file_edges) for f in c}
        problems += self.cycle_problems("unit cycle", unit_edges, self.table.unit_cycles,
                                        in_file_cycles)
        return problems, len(seen)

    def cycle_problems(self, kind, edges, listed, in_file_cycles=frozenset()):
        """Cycles of `edges` ({node: {node it includes: where}}) not listed, and listed ones gone.

        A file's `where` is its include's line; a unit's, (file, line, included
        file) of one include, and the message names each."""
        problems = []
        graph = {node: sorted(targets) for node, targets in edges.items()}
        for cycle in find_cycles(graph):
            if cycle in listed:
                continue
            steps = [edges[a][b] for a, b in zip(cycle, cycle[1:] + cycle[:1])]
            if all(isinstance(s, tuple) and {s[0], s[2]} <= in_file_cycles for s in steps):
                continue  # The file cycle says it.
            chain = " -> ".join(cycle + (cycle[0],))
            if isinstance(steps[0], tuple):
                how = ", ".join(f"{f}:{n} includes {i}" for f, n, i in steps)
                problems.append(f"{steps[0][0]}:{steps[0][1]}: {kind}: {chain} "
                                f"({how}) ({self.table.path})")
            else:
                problems.append(f"{cycle[0]}:{steps[0]}: {kind}: {chain} ({self.table.path})")
        for cycle, number in sorted(listed.items(), key=lambda c: c[1]):
            pairs = zip(cycle, cycle[1:] + cycle[:1])
            if not all(b in edges.get(a, {}) for a, b in pairs):
                problems.append(f"{self.table.path}:{number}: lists the {kind} "
                                f"{' -> '.join(cycle + (cycle[0],))}, which is gone: "
                                "remove the line")
        return problems


def find_cycles(graph):
    """Cycles that together cover every edge inside a strongly connected set of files.

    For each such edge a -> b, the shortest way back from b to a closes one cycle;
    each is returned once, normalized, sorted."""
    cycles = set()
    for component in strongly_connected(graph):
        members = set(component)
        for a in sorted(members):
            for b in graph[a]:
                if b in members:
                    back = shortest_path(graph, b, a, members)
                    cycles.add(normalize_cycle([a] + back[:-1]))
    return sorted(cycles)


def strongly_connected(graph):
    """Tarjan's strongly connected sets with more than one file, iteratively."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    result.append(members)
    return result


def shortest_path(graph, start, goal, members):
    """Files from start to goal (both included), breadth first, inside members."""
    previous = {start: None}
    queue = collections.deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            break
        for child in graph[node]:
            if child in members and child not in previous:
                previous[child] = node
                queue.append(child)
    path, node = [], goal
    while node is not None:
        path.append(node)
        node = previous[node]
    return path[::-1]


DOC_HEADING = "### Inside `agent/`"
DOC_ITEM_RE = re.compile(r"^(\d+)\. (.*)")


def doc_problems(doc_path, table):
    """Where the doc's numbered list of agent folders differs from the table's levels."""
    with open(doc_path, encoding="utf-8") as f:
        text = f.read()
    if DOC_HEADING not in text:
        return [f"{doc_path}: no '{DOC_HEADING}' section to check against {table.path}"]
    section = text.split(DOC_HEADING, 1)[1].split("\n#", 1)[0]
    doc_levels = []  # (folder, level), a folder listed twice twice
    for line in section.splitlines():
        match = DOC_ITEM_RE.match(line)
        if match:
            names = match.group(2).split(":", 1)[0]
            for folder in re.findall(r"`([a-z_]+)/`", names):
                doc_levels.append((folder, int(match.group(1))))
    if sorted(doc_levels) == sorted(table.levels.items()):
        return []
    by_level = collections.defaultdict(list)
    for folder, level in sorted(table.levels.items()):
        by_level[level].append(folder)
    want = "; ".join(f"{n}. {' '.join(by_level[n])}" for n in sorted(by_level))
    return [f"{doc_path}: the levels under '{DOC_HEADING}' differ from {table.path}'s: {want}"]


FOLDER_ROW_RE = re.compile(r"^\|\s*`agent/([a-z_]+)/`\s*\|([^|]*)\|")


def folder_table_problems(doc_path, table, files):
    """Where the doc's table of agent folders names other includes than the code has."""
    checker = Checker(table)
    actual = collections.defaultdict(set)
    for source, includes in files.items():
        folder = checker.agent_folder(source) if source.startswith("agent/") else None
        if folder is None:
            continue
        actual[folder]  # every folder gets a row, even one that includes nothing
        for _, included in includes:
            other = checker.agent_folder(included) if included.startswith("agent/") else None
            if other is not None and other != folder:
                actual[folder].add(other)
    with open(doc_path, encoding="utf-8") as f:
        rows = {}
        for number, text in enumerate(f, 1):
            match = FOLDER_ROW_RE.match(text)
            if match:
                named = {w.strip("` ") for w in match.group(2).split(",") if w.strip("` ")}
                rows[match.group(1)] = (number, named)
    problems = []
    for folder in sorted(set(actual) | set(rows)):
        if folder not in rows:
            problems.append(f"{doc_path}: no row for agent/{folder}/ in the table of folders")
            continue
        number, named = rows[folder]
        if folder not in actual:
            problems.append(f"{doc_path}:{number}: agent/{folder}/ has no sources")
        elif named != actual[folder]:
            want = ", ".join(sorted(actual[folder])) or "(none)"
            problems.append(f"{doc_path}:{number}: agent/{folder}/ includes {want}; "
                            f"the table says {', '.join(sorted(named)) or '(none)'}")
    return problems


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", default=".", help="the repository (default: .)")
    parser.add_argument("--table", default="tools/layers.txt",
                        help="the layer table, from --root (default: tools/layers.txt)")
    parser.add_argument("--doc", help="a page whose 'Inside `agent/`' list must match the table")
    parser.add_argument("--folder-table",
                        help="a page whose table of agent folders must name each one's includes")
    args = parser.parse_args(argv)
    try:
        with open(os.path.join(args.root, args.table), encoding="utf-8") as f:
            table = Table(args.table, f.read())
    except (OSError, TableError) as e:
        print(f"check_layers: {e}", file=sys.stderr)
        return 2
    scanned = [c for c in table.components if c != "protos"]
    files = scan(args.root, scanned)
    problems, excused = Checker(table).check(files)
    if args.doc:
        problems += doc_problems(os.path.join(args.root, args.doc), table)
    if args.folder_table:
        problems += folder_table_problems(os.path.join(args.root, args.folder_table), table, files)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_layers: {len(problems)} problem(s); the layers are in {args.table}")
        return 1
    cycles = len(table.cycles) + len(table.unit_cycles)
    print(f"check_layers: {len(files)} files, no new layer violations or include cycles "
          f"({excused} includes and {cycles} cycles listed in {args.table}, to remove)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
