#!/usr/bin/env python3
"""Fails where the docs say something the tree or the code no longer does.

Three kinds of fact in the docs drift without anyone noticing; this checks them:

  - links: every relative link of every *.md in the repository (inline
    `[text](target)`, images, and `[id]: target` definitions; not inside code)
    resolves to a file or folder inside the repository, and an anchor into a
    page names one of its headings (GitHub's slugs);
  - subcommands: the subcommands agent/cli/main.cc dispatches (its kCommands
    table, each entry's CommandSpec .name) are exactly those of every list
    SUBCOMMAND_LISTS names (`ringside --help`'s text, architecture.md's cli/
    entry and its "Interfaces a user sees", development.md's agent/cli/ row);
    `help` and `version`, which main() answers itself, may be listed too;
  - threads and locks (docs/design/threading.md): the thread table has a row
    for main and one for each std::thread member of the production code, and
    its "runs all N" says how many rows; the lock table has one row for each
    mutex the production code declares, naming the file that declares it, and
    the sentence above it counts them: "N mutexes: M `absl::Mutex` members in
    H headers, ...". No other page states a number of threads, mutexes or
    locks: it links to threading.md instead (one number, one place).

The production code is agent/, base/, buffer/, bpf/ and ftrace/ (.h, .cc, .c).
Prints one line per problem, "file:line: what: expected X, found Y", and exits
1 if there is any; 0 and one summary line otherwise. Python's standard library
only; well under a second.
"""

import argparse
import collections
import os
import re
import sys

PRODUCTION = ("agent", "base", "buffer", "bpf", "ftrace")
SOURCE_SUFFIXES = (".h", ".cc", ".c")
SKIPPED_DIRS = {"build", "out", "node_modules"}  # generated (.gitignore), never docs of ours
THREADING = "docs/design/threading.md"
CLI_MAIN = "agent/cli/main.cc"

NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
                "seventeen", "eighteen", "nineteen", "twenty"]
NUMBER = r"(\d+|" + "|".join(NUMBER_WORDS) + r")"


def number_value(word):
    word = word.lower()
    return int(word) if word.isdigit() else NUMBER_WORDS.index(word)


def number_word(n):
    return NUMBER_WORDS[n] if n < len(NUMBER_WORDS) else str(n)


def read_lines(root, path):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


# --- Links ----------------------------------------------------------------------

INLINE_LINK_RE = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DEFINITION_RE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?")
CODE_SPAN_RE = re.compile(r"(`+)(?:(?!\1).)+?\1")
FENCE_RE = re.compile(r"^\s*(```|~~~)")
HEADING_RE = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def markdown_files(root):
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
        for name in sorted(names):
            if name.endswith(".md"):
                found.append(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return found


def blank(match):
    return " " * len(match.group(0))


def prose_lines(lines):
    """(line number, text with code spans blanked) for the lines outside fenced code."""
    fence = None
    for number, line in enumerate(lines, 1):
        match = FENCE_RE.match(line)
        if match:
            if fence is None:
                fence = match.group(1)
            elif match.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield number, CODE_SPAN_RE.sub(blank, line) if "`" in line else line


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation out, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(lines):
    seen, result = collections.Counter(), set()
    for _, line in prose_lines([l.replace("`", "") for l in lines]):
        match = HEADING_RE.match(line)
        if match:
            base = slug(match.group(1))
            result.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
            seen[base] += 1
    return result


def page_problems(root, pages):
    """Each page's broken links, and its counts of threads or mutexes (threading.md's alone)."""
    problems, known = [], {}  # known: page -> its headings' anchors
    real_root = os.path.realpath(root)
    for page in pages:
        lines = read_lines(root, page)
        for number, line in prose_lines(lines):
            lower = line.lower()
            if page != THREADING and ("thread" in lower or "mutex" in lower or "lock" in lower):
                for match in COUNT_PHRASE_RE.finditer(line):
                    problems.append(f"{page}:{number}: says '{match.group(0)}': expected no "
                                    f"count here, a link to {THREADING}, which keeps the count "
                                    "checked")
            if "](" not in line and "]:" not in line:
                continue
            targets = [m.group(1) for m in INLINE_LINK_RE.finditer(line)]
            definition = DEFINITION_RE.match(line)
            if definition:
                targets.append(definition.group(1))
            for target in targets:
                if SCHEME_RE.match(target) or target.startswith("//"):
                    continue  # A URL, not a path of ours.
                problem = check_link(root, real_root, page, lines, target, known)
                if problem:
                    problems.append(f"{page}:{number}: link '{target}': {problem}")
    return problems


def check_link(root, real_root, page, lines, target, known):
    """What is wrong with `page`'s link to `target`, or None."""
    path, _, anchor = target.partition("#")
    if not path:
        resolved, target_lines = page, lines
    else:
        if path.startswith("/"):
            return "an absolute path; link relative to the page"
        resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)).replace(os.sep, "/")
        full = os.path.realpath(os.path.join(root, resolved))
        if resolved == ".." or resolved.startswith("../") or \
                os.path.commonpath([real_root, full]) != real_root:
            return (f"leaves the repository (resolves to {resolved}); expected a path inside it, "
                    "or a URL")
        if not os.path.exists(full):
            return f"no such file or folder: expected {resolved} to exist"
        if not anchor or not resolved.endswith(".md") or os.path.isdir(full):
            return None
        target_lines = None
    if anchor:
        if resolved not in known:
            known[resolved] = anchors(target_lines or read_lines(root, resolved))
        if anchor not in known[resolved]:
            return f"no heading of {resolved} has the anchor '#{anchor}'"
    return None


# --- Subcommands ------------------------------------------------------------------

COMMANDS_TABLE_RE = re.compile(r"kCommands\[\]\s*=\s*\{(.*?)\n\};", re.S)
COMMAND_ENTRY_RE = re.compile(r"\{\s*(?:[\w:]+::)?(\w+CommandSpec)\s*,")
BUILTIN_RE = re.compile(r'\bname == "(\w+)"')


def dispatched_commands(root):
    """The subcommands (main.cc's kCommands, each spec's .name) and main()'s own words."""
    main = "\n".join(read_lines(root, CLI_MAIN))
    table = COMMANDS_TABLE_RE.search(main)
    if not table:
        raise CheckError(f"{CLI_MAIN}: no 'kCommands[] = {{...}};' table to read the subcommands "
                         "from (tools/check_docs.py reads it)")
    specs = COMMAND_ENTRY_RE.findall(table.group(1))
    cli = os.path.dirname(CLI_MAIN)
    sources = sorted(n for n in os.listdir(os.path.join(root, cli)) if n.endswith(".cc"))
    commands = set()
    for spec in specs:
        definition = re.compile(r"CommandSpec&\s+" + spec + r"\(\)\s*\{")
        for name in sources:
            text = "\n".join(read_lines(root, f"{cli}/{name}"))
            match = definition.search(text)
            if not match:
                continue
            found = re.compile(r'\.name\s*=\s*"([\w-]+)"').search(text, match.end())
            if found:
                commands.add(found.group(1))
            break
        else:
            raise CheckError(f"{CLI_MAIN}: kCommands names {spec}(), which no {cli}/*.cc "
                             "defines with a .name")
    builtins = set(BUILTIN_RE.findall(main))
    return commands, builtins


def usage_list(lines):
    """main.cc's `ringside --help` text: the names under "Commands:"."""
    start = next((i for i, l in enumerate(lines) if '"Commands:\\n"' in l), None)
    if start is None:
        return None
    names = []
    for line in lines[start + 1:]:
        if not line.strip().startswith('"  '):
            break  # The list ends at its blank line, "\n".
        match = re.match(r'\s*"  (\w+)\s', line)
        if match:  # Not a summary's second line.
            names.append(match.group(1))
    return start + 1, names


def backticked_after(phrase):
    """A list reader: the `names` in the parentheses after `phrase`, on one line or the next."""
    def read(lines):
        for i, line in enumerate(lines):
            if phrase in line:
                text = " ".join(lines[i:i + 3]).split(phrase, 1)[1].split(")", 1)[0]
                return i + 1, re.findall(r"`([\w-]+)`", text)
        return None
    return read


def interfaces_list(lines):
    """architecture.md's "Interfaces a user sees": each `ringside X` and `ringside X | Y`."""
    heading = "## Interfaces a user sees"
    if heading not in lines:
        return None
    start = lines.index(heading)
    names = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        for span in re.findall(r"`ringside ([^`]*)`", line):
            names.append(span.split()[0])
            names += re.findall(r"\|\s*(\w+)", span)
    return start + 1, names


# (file, what the list is, how to read it): each list must be the dispatched subcommands.
SUBCOMMAND_LISTS = [
    (CLI_MAIN, "`ringside --help`'s Commands:", usage_list),
    ("docs/design/architecture.md", "the `cli/` entry's subcommands",
     backticked_after("one file per subcommand (")),
    ("docs/design/architecture.md", "the commands of 'Interfaces a user sees'", interfaces_list),
    ("docs/development.md", "the `agent/cli/` row's subcommands",
     backticked_after("one file per subcommand (")),
]


def subcommand_problems(root):
    commands, builtins = dispatched_commands(root)
    want = sorted(commands)
    problems = []
    for path, what, read in SUBCOMMAND_LISTS:
        found = read(read_lines(root, path))
        if found is None:
            problems.append(f"{path}: {what} not found (tools/check_docs.py's SUBCOMMAND_LISTS "
                            "says where the list is)")
            continue
        line, names = found
        missing = [n for n in want if n not in names]
        unknown = [n for n in names if n not in commands and n not in builtins]
        if missing or unknown:
            why = "; ".join(
                ([f"lacks {', '.join(missing)}"] if missing else []) +
                ([f"lists {', '.join(unknown)}, which {CLI_MAIN} does not dispatch"]
                 if unknown else []))
            problems.append(f"{path}:{line}: {what} {why}: expected {' '.join(want)} "
                            f"({CLI_MAIN}'s kCommands), found {' '.join(names)}")
    return problems, len(commands)


# --- Threads and locks ---------------------------------------------------------------

CLASS_RE = re.compile(r"^\s*(?:class|struct)\s+(?:\w+\s+)*?([A-Z][\w:]*)\s*(?:final\s*)?"
                      r"(?::[^;{]*)?\{?\s*$")
MUTEX_RE = re.compile(r"^\s*(?:(?:mutable|static|inline|ABSL_CONST_INIT)\s+)*"
                      r"(absl::Mutex|std::mutex|std::shared_mutex|std::recursive_mutex|"
                      r"std::timed_mutex)\s+(\w+)\b")
STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
BRACES_RE = re.compile(r"[{};]")
THREAD_RE = re.compile(r"^\s*(?:mutable\s+)?(std::thread|std::jthread)\s+(\w+)\s*[;{=]")
MEMBER_RE = re.compile(r"`((?:\w+::)+\w+)`")
FILE_RE = re.compile(r"`((?:agent|base|buffer|bpf|ftrace)/[\w/]+\.(?:h|cc|c))`")
LOCK_COUNT_RE = re.compile(NUMBER + r" mutexes: " + NUMBER + r" `absl::Mutex` members in " +
                           NUMBER + r" headers")
THREAD_COUNT_RE = re.compile(r"`ringside agent` runs all " + NUMBER + r"\b")
COUNT_PHRASE_RE = re.compile(r"\b" + NUMBER + r" (threads|mutexes|locks)\b", re.I)

Declaration = collections.namedtuple("Declaration", "path line kind name")


def declarations(root):
    """Every production std::thread and mutex declaration, named Class::member by its class.

    Returns (threads, mutexes), each a list of Declaration."""
    threads, mutexes = [], []
    for component in PRODUCTION:
        for folder, dirs, names in os.walk(os.path.join(root, component)):
            dirs.sort()
            for name in sorted(names):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
                lines = read_lines(root, path)
                text = "\n".join(lines)
                if "std::thread" not in text and "std::jthread" not in text and "utex" not in text:
                    continue  # Most files: nothing to find, and no class to follow.
                classes, depth, pending = [], 0, None  # classes: (name, depth of its body)
                for number, line in enumerate(lines, 1):
                    for pattern, found in ((THREAD_RE, threads), (MUTEX_RE, mutexes)):
                        match = pattern.match(line) if "::" in line else None
                        if match:
                            owner = f"{classes[-1][0]}::" if classes else ""
                            found.append(Declaration(path, number, match.group(1),
                                                     owner + match.group(2)))
                    if "class" in line or "struct" in line:
                        declared = CLASS_RE.match(line)
                        if declared:
                            pending = declared.group(1)
                    if "{" not in line and "}" not in line and not pending:
                        continue
                    code = STRING_RE.sub('""', line.split("//", 1)[0])
                    for c in BRACES_RE.findall(code):
                        if c == "{":
                            depth += 1
                            if pending:
                                classes.append((pending, depth))
                                pending = None
                        elif c == "}":
                            if classes and classes[-1][1] == depth:
                                classes.pop()
                            depth -= 1
                        elif pending:
                            pending = None  # A declaration only: `class Foo;`.
    return threads, mutexes


def section(lines, heading):
    """(index of the heading, the lines up to the next heading of its level or above)."""
    if heading not in lines:
        return None, []
    start = lines.index(heading)
    level = len(heading.split(" ", 1)[0])
    end = next((i for i in range(start + 1, len(lines))
                if re.match(r"#{1,%d} " % level, lines[i])), len(lines))
    return start, lines[start + 1:end]


def table_rows(lines, offset):
    """(line number, cells) of the first table's body rows."""
    rows, in_table = [], False
    for i, line in enumerate(lines):
        if line.startswith("|"):
            if re.match(r"^\|[\s:|-]+\|$", line):
                in_table = True
                continue
            if in_table:
                rows.append((offset + i + 1, [c.strip() for c in line.strip("|").split("|")]))
        elif in_table:
            break
    return rows


def same_member(named, declared):
    return named == declared or named.endswith("::" + declared) or declared.endswith("::" + named)


def thread_problems(threads, lines):
    start, body = section(lines, "## Threads")
    if start is None:
        return [f"{THREADING}: no '## Threads' section"], 0
    rows = table_rows(body, start + 1)
    problems = []
    named = []  # (line, Class::member) of each row but main's
    for line, cells in rows:
        if cells[0] == "**main**":
            continue
        member = MEMBER_RE.search(cells[1]) if len(cells) > 1 else None
        if not member:
            problems.append(f"{THREADING}:{line}: the thread {cells[0]} names no `Class::member` "
                            "where it starts: expected its std::thread member")
            continue
        named.append((line, member.group(1)))
    for d in threads:
        if not any(same_member(n, d.name) for _, n in named):
            problems.append(f"{d.path}:{d.line}: {d.kind} {d.name} has no row in {THREADING}'s "
                            f"thread table: expected a row naming `{d.name}`")
    for line, n in named:
        if not any(same_member(n, d.name) for d in threads):
            problems.append(f"{THREADING}:{line}: the thread table names `{n}`, which the code "
                            "does not declare as a std::thread: expected one of "
                            f"{', '.join(sorted(d.name for d in threads))}")
    count = [(start + 2 + i, m) for i, l in enumerate(body) for m in THREAD_COUNT_RE.finditer(l)]
    if not count:
        problems.append(f"{THREADING}: the '## Threads' section has no \"`ringside agent` runs "
                        f"all N\" sentence: expected N = {len(rows)}, its table's rows")
    for line, match in count:
        if number_value(match.group(1)) != len(rows):
            problems.append(f"{THREADING}:{line}: says `ringside agent` runs all "
                            f"{match.group(1)}: expected {number_word(len(rows))} "
                            f"(the thread table's rows: main and {len(threads)} std::thread "
                            "members)")
    return problems, len(rows)


def lock_problems(mutexes, lines):
    start, body = section(lines, "## Locks × threads")
    if start is None:
        return [f"{THREADING}: no '## Locks × threads' section"], 0
    in_headers = [d for d in mutexes if d.path.endswith(".h") and d.kind == "absl::Mutex"]
    headers = {d.path for d in in_headers}
    problems = []
    text = " ".join(body)
    count = LOCK_COUNT_RE.search(text)
    sentence_line = next((start + 2 + i for i, l in enumerate(body) if "mutexes:" in l), start + 1)
    want = (len(mutexes), len(in_headers), len(headers))
    if not count:
        problems.append(f"{THREADING}:{start + 1}: no \"N mutexes: M `absl::Mutex` members in H "
                        f"headers\" sentence: expected {want[0]} mutexes: {want[1]} `absl::Mutex` "
                        f"members in {want[2]} headers")
    else:
        said = tuple(number_value(g) for g in count.groups())
        if said != want:
            problems.append(
                f"{THREADING}:{sentence_line}: says {said[0]} mutexes: {said[1]} `absl::Mutex` "
                f"members in {said[2]} headers; expected {want[0]} mutexes: {want[1]} "
                f"`absl::Mutex` members in {want[2]} headers (the production code's declarations)")
    rows = table_rows(body, start + 1)
    named, file = [], None
    for line, cells in rows:
        member, path = MEMBER_RE.search(cells[0]), FILE_RE.search(cells[0])
        file = path.group(1) if path else (file if "(same" in cells[0] else None)
        if not member:
            problems.append(f"{THREADING}:{line}: a lock row names no `Class::member`")
            continue
        named.append((line, member.group(1), file))
    for d in mutexes:
        rows_for = [(line, f) for line, n, f in named if same_member(n, d.name)]
        if not rows_for:
            problems.append(f"{d.path}:{d.line}: {d.kind} {d.name} has no row in {THREADING}'s "
                            f"lock table: expected a row `{d.name}` (`{d.path}`)")
        elif all(f != d.path for _, f in rows_for):
            problems.append(f"{THREADING}:{rows_for[0][0]}: the row of `{d.name}` names the file "
                            f"{rows_for[0][1]}: expected {d.path}, which declares it")
    for line, n, _ in named:
        if not any(same_member(n, d.name) for d in mutexes):
            problems.append(f"{THREADING}:{line}: the lock table names `{n}`, which the code does "
                            "not declare as a mutex: remove the row")
    if len(rows) != len(mutexes):
        problems.append(f"{THREADING}:{start + 1}: the lock table has {len(rows)} rows: expected "
                        f"{len(mutexes)}, one per mutex the production code declares")
    return problems, len(mutexes)


class CheckError(Exception):
    pass


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", default=".", help="the repository (default: .)")
    args = parser.parse_args(argv)
    try:
        pages = markdown_files(args.root)
        problems = page_problems(args.root, pages)
        sub, commands = subcommand_problems(args.root)
        threading = read_lines(args.root, THREADING)
        thread_declarations, mutex_declarations = declarations(args.root)
        threads, thread_count = thread_problems(thread_declarations, threading)
        locks, lock_count = lock_problems(mutex_declarations, threading)
    except (OSError, CheckError) as e:
        print(f"check_docs: {e}", file=sys.stderr)
        return 2
    problems += sub + threads + locks
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_docs: {len(problems)} problem(s) (tools/check_docs.py says what it checks)")
        return 1
    print(f"check_docs: {len(pages)} pages' links, {commands} subcommands in "
          f"{len(SUBCOMMAND_LISTS)} lists, {thread_count} threads and {lock_count} mutexes in "
          f"{THREADING} agree with the tree")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
