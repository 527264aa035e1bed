#!/usr/bin/env python3
"""tools/check_docs.py passes the real tree and fails each kind of drift, naming it.

What the checker reads of the tree is copied once into a scratch folder; each
test plants one change there, runs the checker over it with --root, and puts
the file back. Run by `make check-docs` (so by `make test`); standard library
only, about a second.
"""

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHECKER = os.path.join(REPO, "tools", "check_docs.py")
ARCHITECTURE = "docs/design/architecture.md"
THREADING = "docs/design/threading.md"
DEVELOPMENT = "docs/development.md"
sys.dont_write_bytecode = True  # The source tree is never written to (Makefile).
sys.path.insert(0, os.path.join(REPO, "tools"))
import check_docs  # noqa: E402


def run(root):
    """The checker's exit status and output over `root`, as `make check-docs` runs it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = check_docs.main(["--root", root])
    return status, out.getvalue()


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


class CheckDocsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.mkdtemp(prefix="check_docs_test.")
        cls.root = os.path.join(cls.scratch, "repo")
        # What the checker reads: the production code, and every page with what its links
        # name (the folders below); not tests/ (most of the tree), unless it has a page.
        for folder in check_docs.PRODUCTION + ("docs", "deploy", "tools", ".ci"):
            if os.path.isdir(os.path.join(REPO, folder)):
                shutil.copytree(os.path.join(REPO, folder), os.path.join(cls.root, folder),
                                ignore=shutil.ignore_patterns("__pycache__"))
        for page in check_docs.markdown_files(REPO):
            if not os.path.exists(os.path.join(cls.root, page)):
                os.makedirs(os.path.dirname(os.path.join(cls.root, page)), exist_ok=True)
                shutil.copy(os.path.join(REPO, page), os.path.join(cls.root, page))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch)

    def path(self, relative):
        return os.path.join(self.root, relative)

    def keep(self, relative):
        """Puts `relative` back as it is now (or removes it) when the test ends."""
        full = self.path(relative)
        if os.path.exists(full):
            with open(full, encoding="utf-8") as f:
                self.addCleanup(write, full, f.read())
        else:
            self.addCleanup(os.remove, full)

    def edit(self, relative, old, new):
        """Replaces the first `old` in `relative`; returns the line it was on."""
        self.keep(relative)
        with open(self.path(relative), encoding="utf-8") as f:
            text = f.read()
        self.assertIn(old, text, f"{relative} no longer has {old!r}: pick another line to plant")
        with open(self.path(relative), "w", encoding="utf-8") as f:
            f.write(text.replace(old, new, 1))
        return text[: text.index(old)].count("\n") + 1

    def append(self, relative, text):
        """Appends `text` (one line) to `relative`, made if missing; returns its line number."""
        self.keep(relative)
        full = self.path(relative)
        lines = 0
        if os.path.exists(full):
            with open(full, encoding="utf-8") as f:
                lines = f.read().count("\n")
        with open(full, "a", encoding="utf-8") as f:
            f.write(text + "\n")
        return lines + 1

    def line_of(self, relative, text):
        with open(self.path(relative), encoding="utf-8") as f:
            lines = f.read().splitlines()
        return next(i for i, line in enumerate(lines, 1) if text in line)

    def assertFailsWith(self, *expected):
        status, out = run(self.root)
        self.assertEqual(status, 1, out)
        for line in expected:
            self.assertIn(line, out)
        return out

    def test_real_tree_passes(self):
        result = subprocess.run([sys.executable, "-B", CHECKER], cwd=REPO, capture_output=True,
                                text=True)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        status, out = run(self.root)
        self.assertEqual(status, 0, out)

    # --- Links

    def test_link_to_a_missing_file_fails(self):
        line = self.append("docs/recording.md", "See [the old page](replay.md).")
        self.assertFailsWith(f"docs/recording.md:{line}: link 'replay.md': no such file or "
                             "folder: expected docs/replay.md to exist")

    def test_link_outside_the_repository_fails(self):
        line = self.append(ARCHITECTURE, "The seeds: [seeds](../../../shared/seeds/).")
        self.assertFailsWith(f"{ARCHITECTURE}:{line}: link '../../../shared/seeds/': leaves the "
                             "repository (resolves to ../shared/seeds)")

    def test_link_to_a_missing_heading_fails(self):
        line = self.append("README.md", "[staging](docs/config.md#no-such-heading)")
        self.assertFailsWith(f"README.md:{line}: link 'docs/config.md#no-such-heading': no "
                             "heading of docs/config.md has the anchor '#no-such-heading'")

    def test_links_in_code_are_not_links(self):
        self.append("docs/recording.md", "`[a](nowhere.md)`\n\n```text\n[b](nowhere.md)\n```")
        status, out = run(self.root)
        self.assertEqual(status, 0, out)

    # --- Subcommands

    def test_doc_list_without_a_dispatched_subcommand_fails(self):
        line = self.edit(DEVELOPMENT, "`inspect`, `merge`, ", "`inspect`, ")
        self.assertFailsWith(f"{DEVELOPMENT}:{line}: the `agent/cli/` row's subcommands lacks "
                             "merge: expected agent inspect list merge record snapshot status "
                             "stop trigger (agent/cli/main.cc's kCommands), found record inspect "
                             "list agent status snapshot trigger stop")

    def test_doc_list_with_a_subcommand_not_dispatched_fails(self):
        self.edit(ARCHITECTURE, "`merge`, `list`)", "`merge`, `list`, `replay`)")
        line = self.line_of(ARCHITECTURE, "one file per subcommand (")
        self.assertFailsWith(f"{ARCHITECTURE}:{line}: the `cli/` entry's subcommands lists "
                             "replay, which agent/cli/main.cc does not dispatch")

    def test_new_subcommand_missing_from_every_list_fails(self):
        self.append("agent/cli/replay_command.cc",
                    'const CommandSpec& ReplayCommandSpec() {\n'
                    '  static const CommandSpec* spec = new CommandSpec{\n'
                    '      .name = "replay",\n  };\n  return *spec;\n}')
        self.edit("agent/cli/main.cc", "};\n\nconstexpr char kUsage",
                  "    {ringside::agent::ReplayCommandSpec, ringside::agent::RunReplay},\n"
                  "};\n\nconstexpr char kUsage")
        out = self.assertFailsWith(
            f"agent/cli/main.cc:{self.line_of('agent/cli/main.cc', 'Commands:')}: "
            "`ringside --help`'s Commands: lacks replay: expected agent inspect list merge record "
            "replay snapshot status stop trigger (agent/cli/main.cc's kCommands), found record "
            "inspect merge list agent status snapshot stop trigger help",
            f"{ARCHITECTURE}:{self.line_of(ARCHITECTURE, 'one file per subcommand (')}: the "
            "`cli/` entry's subcommands lacks replay",
            f"{ARCHITECTURE}:{self.line_of(ARCHITECTURE, '## Interfaces a user sees')}: the "
            "commands of 'Interfaces a user sees' lacks replay",
            f"{DEVELOPMENT}:{self.line_of(DEVELOPMENT, '| `agent/cli/` |')}: the `agent/cli/` "
            "row's subcommands lacks replay")
        self.assertIn("check_docs: 4 problem(s)", out)

    # --- Threads and locks

    def page_counts(self):
        """The page's mutex, member and header counts (a new lock or a refactor moves them)."""
        with open(os.path.join(REPO, THREADING), encoding="utf-8") as f:
            match = re.search(r"(\d+) mutexes: (\d+) `absl::Mutex` members in (\d+) headers",
                              f.read())
        self.assertIsNotNone(match, f"{THREADING} no longer counts the mutexes")
        return tuple(int(g) for g in match.groups())

    def test_wrong_mutex_count_fails(self):
        mutexes, members, headers = self.page_counts()
        line = self.edit(THREADING, f"{mutexes} mutexes: {members}",
                         f"{mutexes - 1} mutexes: {members - 1}")
        self.assertFailsWith(f"{THREADING}:{line}: says {mutexes - 1} mutexes: {members - 1} "
                             f"`absl::Mutex` members in {headers} headers; expected {mutexes} "
                             f"mutexes: {members} `absl::Mutex` members in {headers} headers")

    def test_new_mutex_member_in_a_header_fails(self):
        mutexes, members, headers = self.page_counts()
        self.append("agent/writer/chunk_census.h",
                    "namespace ringside::agent {\n\nclass ChunkCensus {\n private:\n"
                    "  struct Count {\n    int n = 0;\n  };\n"
                    "  mutable absl::Mutex census_mu_;\n};\n\n}  // namespace ringside::agent")
        self.assertFailsWith(
            "agent/writer/chunk_census.h:8: absl::Mutex ChunkCensus::census_mu_ has no row in "
            f"{THREADING}'s lock table: expected a row `ChunkCensus::census_mu_` "
            "(`agent/writer/chunk_census.h`)",
            f"says {mutexes} mutexes: {members} `absl::Mutex` members in {headers} headers; "
            f"expected {mutexes + 1} mutexes: {members + 1} `absl::Mutex` members in "
            f"{headers + 1} headers",
            f"the lock table has {mutexes} rows: expected {mutexes + 1}")

    def test_row_of_a_mutex_that_is_gone_fails(self):
        self.edit("agent/metrics/metrics_listener.h", "mutable absl::Mutex cache_mu_;",
                  "mutable SpinLock cache_mu_;")
        self.assertFailsWith("the lock table names `MetricsListener::cache_mu_`, which the code "
                             "does not declare as a mutex: remove the row")

    def test_wrong_thread_count_fails(self):
        line = self.edit(THREADING, "runs all fourteen", "runs all thirteen")
        self.assertFailsWith(f"{THREADING}:{line}: says `ringside agent` runs all thirteen: expected "
                             "fourteen (the thread table's rows: main and 13 std::thread members)")

    def test_new_thread_member_fails(self):
        self.edit("agent/snapshots/snapshot_writer.h", "  std::thread thread_;",
                  "  std::thread thread_;\n  std::thread pruner_;")
        self.assertFailsWith("std::thread SnapshotWriter::pruner_ has no row in "
                             f"{THREADING}'s thread table")

    def test_count_repeated_outside_threading_md_fails(self):
        line = self.append(ARCHITECTURE, "`ringside agent` runs ten threads.")
        self.assertFailsWith(f"{ARCHITECTURE}:{line}: says 'ten threads': expected no count "
                             f"here, a link to {THREADING}")


if __name__ == "__main__":
    unittest.main()
