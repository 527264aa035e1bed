#!/usr/bin/env python3
"""Fails on a call (any symbol reference) that crosses a layer it may not.

The include check (tools/check_layers.py) holds what a file may #include to
tools/layers.txt. It cannot see a dependency that no include shows: a
function declared in a lower layer's header and defined above it (a "hook"
that buffer/ calls and agent/ implements), or a declaration written by hand
where it is used. The linker sees both. The build makes one library per
component and one per agent/ folder; this reads each one's symbols with
`nm` and, for every symbol a library uses but does not define, finds the
libraries that define it. A use is fine when the library itself or one it
may use (the table's rules, as for includes) defines it; otherwise it is a
problem, printed as

  LIB/OBJECT: uses SYMBOL, defined in OTHER: rule (tools/layers.txt)

Only strong definitions count: an inline function or a template instance is
defined weakly in every library that uses it, and its header's include is
the include check's business. Exits 1 on any problem; 0 and a summary line
otherwise. Python's standard library and binutils' nm only.
"""

import argparse
import collections
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_layers  # noqa: E402  (the table and its rules: one reading of layers.txt)

# nm's POSIX format types: upper case is global. V, W and u are weak or
# unique (an inline function's or a template's copy in each user).
STRONG_DEFINED = set("ABCDGRSTI")
UNDEFINED = "U"


def read_symbols(path):
    """{object name: (set of strong definitions, set of undefined uses)} of an archive or object."""
    result = subprocess.run(["nm", "--format=posix", "-A", path], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"nm {path} failed: {result.stderr.strip()}")
    objects = collections.defaultdict(lambda: (set(), set()))
    for line in result.stdout.splitlines():
        where, sep, rest = line.partition(": ")
        if not sep:
            continue
        fields = rest.split()
        if len(fields) < 2:
            continue
        name, kind = fields[0], fields[1]
        member = where[where.find("[") + 1 : -1] if where.endswith("]") else os.path.basename(where)
        defined, used = objects[member]
        if kind in STRONG_DEFINED:
            defined.add(name)
        elif kind == UNDEFINED:
            used.add(name)
    return objects


def demangle(names):
    if not names:
        return {}
    result = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    lines = result.stdout.splitlines() if result.returncode == 0 else names
    return dict(zip(names, lines))


def representative(lib):
    """A path inside the library, for the include rules: agent/cli -> agent/cli/_."""
    return f"{lib}/_"


def check(table, libs):
    """Problems, each a line, and the number of uses checked across libraries.

    `libs` is [(name, [paths])]: name as the table knows it (base, buffer,
    agent/cli, ...), paths its archives and objects."""
    checker = check_layers.Checker(table)
    defined_in = collections.defaultdict(set)  # symbol -> libraries defining it strongly
    uses = []  # (lib, object, symbol)
    for name, paths in libs:
        for path in paths:
            for member, (defined, used) in read_symbols(path).items():
                for symbol in defined:
                    defined_in[symbol].add(name)
                uses += [(name, member, symbol) for symbol in used]
    problems, crossings = [], set()
    for lib, member, symbol in uses:
        definers = defined_in.get(symbol)
        if not definers or lib in definers:
            continue
        whys = {other: checker.rule_broken(representative(lib), representative(other))
                for other in sorted(definers)}
        if any(why is None for why in whys.values()):
            crossings.add((lib, symbol))
            continue
        other, why = next(iter(whys.items()))
        problems.append((lib, member, symbol, other, why))
    names = demangle(sorted({p[2] for p in problems}))
    lines = [f"{lib}/{member}: uses {names.get(symbol, symbol)}, defined in {other}/: "
             f"{why} ({table.path})" for lib, member, symbol, other, why in sorted(set(problems))]
    return lines, len(crossings)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default="tools/layers.txt")
    parser.add_argument("--lib", action="append", default=[], metavar="NAME=PATH",
                        help="a library of the build as the table names it (agent/cli, base, ...)"
                             " and an archive or object of it; repeat for each")
    args = parser.parse_args()
    try:
        with open(args.table) as f:
            table = check_layers.Table(args.table, f.read())
    except (OSError, check_layers.TableError) as e:
        print(f"check_links: {e}", file=sys.stderr)
        return 2
    libs = collections.defaultdict(list)
    for spec in args.lib:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            print(f"check_links: --lib {spec}: expected NAME=PATH", file=sys.stderr)
            return 2
        if not os.path.exists(path):
            print(f"check_links: {path} (library {name}) does not exist: build it first",
                  file=sys.stderr)
            return 2
        libs[name].append(path)
    try:
        problems, crossings = check(table, sorted(libs.items()))
    except (OSError, RuntimeError) as e:
        print(f"check_links: {e}", file=sys.stderr)
        return 2
    for line in problems:
        print(line)
    if problems:
        print(f"check_links: {len(problems)} use(s) across a layer they may not cross "
              f"(change the code, or the layers in {table.path})", file=sys.stderr)
        return 1
    print(f"check_links: {len(libs)} libraries, {crossings} symbols used across libraries, "
          "every one as the layers allow")
    return 0


if __name__ == "__main__":
    sys.exit(main())
