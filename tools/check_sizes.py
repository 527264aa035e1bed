#!/usr/bin/env python3
"""Fails on a production function, class or file too long to hold in mind.

A function is its definition, first line to last (Universal Ctags' line and
end); a class is the sum of its member functions' definitions, wherever they
are (a class spread over several .cc files counts whole); a file is its
lines, as `wc -l` counts them (every .cc and .h). The limits and the few
allowed exceptions are in tools/sizes.txt (its comments say how to read it).
Scans the production sources: agent/, base/, buffer/, bpf/, ftrace/.

Prints one line per problem, "file:line: ...", and exits 1 if there is any;
0 and one summary line otherwise. Needs `ctags` (Debian's universal-ctags,
which `make deps` installs); exits 2 naming it when it is missing.
"""

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys

PRODUCTION = ("agent", "base", "buffer", "bpf", "ftrace")
# What tools/sizes.txt limits: `limit KIND N`.
LIMITS = ("function", "class", "file")
# The files whose lines count against `limit file`.
SOURCE_SUFFIXES = (".cc", ".h")


class TableError(Exception):
    pass


class Table:
    """tools/sizes.txt, parsed."""

    def __init__(self, path, text):
        self.path = path
        self.function_limit = None
        self.class_limit = None
        self.file_limit = None
        self.functions = {}  # (file, qualified name) -> (allowed lines, table line)
        self.classes = {}  # qualified class -> (allowed lines, table line)
        self.files = {}  # file -> (allowed lines, table line)
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            words = line.split()
            try:
                if words[0] == "limit" and len(words) == 3 and words[1] in LIMITS:
                    setattr(self, f"{words[1]}_limit", int(words[2]))
                elif words[0] == "function" and len(words) == 4:
                    self.functions[(words[1], words[2])] = (int(words[3]), number)
                elif words[0] == "class" and len(words) == 3:
                    self.classes[words[1]] = (int(words[2]), number)
                elif words[0] == "file" and len(words) == 3:
                    self.files[words[1]] = (int(words[2]), number)
                else:
                    raise ValueError
            except ValueError:
                raise TableError(f"{path}:{number}: cannot read {raw.strip()!r}") from None
        if any(getattr(self, f"{kind}_limit") is None for kind in LIMITS):
            raise TableError(f"{path}: needs 'limit function N', 'limit class N' and "
                             "'limit file N'")


def definitions(root):
    """Every function definition: (file, line, lines, qualified name, class or None)."""
    ctags = shutil.which("ctags")
    if ctags is None:
        raise TableError("ctags is missing (Debian's universal-ctags; `make deps` installs it)")
    folders = [f for f in PRODUCTION if os.path.isdir(os.path.join(root, f))]
    result = subprocess.run(
        [ctags, "-R", "--languages=C,C++", "--kinds-C=f", "--kinds-C++=f", "--fields=+neZ",
         "--output-format=json", "-f", "-", *folders],
        cwd=root, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise TableError(f"ctags failed: {result.stderr.strip()}")
    found = []
    for text in result.stdout.splitlines():
        tag = json.loads(text)
        if tag.get("_type") != "tag" or "end" not in tag:
            continue
        scope = tag.get("scope", "")
        # Anonymous namespaces get a generated name; leave them out of the name.
        scope = "::".join(p for p in scope.split("::") if p and not p.startswith("__anon"))
        short = scope.split("::")
        owner = scope if tag.get("scopeKind") in ("class", "struct") else None
        name = tag["name"] if owner is None else f"{short[-1]}::{tag['name']}"
        found.append((tag["path"], tag["line"], tag["end"] - tag["line"] + 1, name, owner))
    return found


def file_lengths(root):
    """Every production .cc and .h file: {path from root: lines, as `wc -l` counts them}."""
    lengths = {}
    for folder in PRODUCTION:
        for parent, dirs, names in os.walk(os.path.join(root, folder)):
            dirs.sort()
            for name in sorted(names):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                full = os.path.join(parent, name)
                with open(full, "rb") as f:
                    lengths[os.path.relpath(full, root)] = f.read().count(b"\n")
    return lengths


def check_files(table, lengths):
    """The problems of files over `limit file`, and of its exceptions."""
    problems = []
    for path, lines in sorted(lengths.items()):
        if lines <= table.file_limit:
            continue
        allowed = table.files.get(path)
        if allowed is None:
            problems.append(f"{path}:1: the file is {lines} lines, over the limit of "
                            f"{table.file_limit} for a file ({table.path}): move a part with a "
                            "concern of its own into a file of its own")
        elif lines > allowed[0]:
            problems.append(f"{path}:1: the file is {lines} lines, more than the {allowed[0]} "
                            f"that {table.path}:{allowed[1]} allows it")
    for path, (_, number) in sorted(table.files.items()):
        if lengths.get(path, 0) <= table.file_limit:
            problems.append(f"{table.path}:{number}: allows file {path}, which is no longer over "
                            f"{table.file_limit} lines (or is gone): remove the line")
    return problems


def check(table, found):
    problems = []
    seen_functions = set()
    per_class = collections.defaultdict(int)
    class_home = {}
    for path, line, lines, name, owner in sorted(found):
        if owner is not None:
            per_class[owner] += lines
            class_home.setdefault(owner, (path, line))
        if lines <= table.function_limit:
            continue
        allowed = table.functions.get((path, name))
        if allowed is None:
            problems.append(f"{path}:{line}: {name} is {lines} lines, over the limit of "
                            f"{table.function_limit} ({table.path}): split it by what its "
                            "parts do, or a table where the code repeats")
            continue
        seen_functions.add((path, name))
        if lines > allowed[0]:
            problems.append(f"{path}:{line}: {name} is {lines} lines, more than the "
                            f"{allowed[0]} that {table.path}:{allowed[1]} allows it")
    for (path, name), (_, number) in sorted(table.functions.items()):
        if (path, name) not in seen_functions:
            problems.append(f"{table.path}:{number}: allows {path} {name}, which is no longer "
                            f"over {table.function_limit} lines (or is gone): remove the line")
    for owner, lines in sorted(per_class.items()):
        short = owner.split("::")[-1]
        allowed = table.classes.get(short)
        path, line = class_home[owner]
        if lines <= table.class_limit:
            continue
        if allowed is None:
            problems.append(f"{path}:{line}: class {short} has {lines} lines of member "
                            f"functions, over the limit of {table.class_limit} "
                            f"({table.path}): give a part of it a class of its own")
        elif lines > allowed[0]:
            problems.append(f"{path}:{line}: class {short} has {lines} lines of member "
                            f"functions, more than the {allowed[0]} that "
                            f"{table.path}:{allowed[1]} allows it")
    large = {o.split("::")[-1] for o, n in per_class.items() if n > table.class_limit}
    for short, (_, number) in sorted(table.classes.items()):
        if short not in large:
            problems.append(f"{table.path}:{number}: allows class {short}, which is no longer "
                            f"over {table.class_limit} lines (or is gone): remove the line")
    return problems, per_class


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", default=".", help="the repository (default: .)")
    parser.add_argument("--table", default="tools/sizes.txt",
                        help="the limits, from --root (default: tools/sizes.txt)")
    parser.add_argument("--top", type=int, default=0,
                        help="also print the N longest functions and classes")
    args = parser.parse_args(argv)
    try:
        with open(os.path.join(args.root, args.table), encoding="utf-8") as f:
            table = Table(args.table, f.read())
        found = definitions(args.root)
        lengths = file_lengths(args.root)
    except (OSError, TableError) as e:
        print(f"check_sizes: {e}", file=sys.stderr)
        return 2
    problems, per_class = check(table, found)
    problems += check_files(table, lengths)
    if args.top:
        for path, line, lines, name, _ in sorted(found, key=lambda d: -d[2])[:args.top]:
            print(f"{lines:5d}  {name}  ({path}:{line})")
        for owner, lines in sorted(per_class.items(), key=lambda c: -c[1])[:args.top]:
            print(f"{lines:5d}  class {owner.split('::')[-1]}")
        for path, lines in sorted(lengths.items(), key=lambda f: -f[1])[:args.top]:
            print(f"{lines:5d}  file {path}")
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_sizes: {len(problems)} problem(s); the limits are in {args.table}")
        return 1
    print(f"check_sizes: {len(found)} functions in {len(lengths)} files, none over "
          f"{table.function_limit} lines, no class over {table.class_limit} and no file over "
          f"{table.file_limit} but the {len(table.functions)} functions, "
          f"{len(table.classes)} classes and {len(table.files)} files {args.table} allows, "
          "to shrink")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
