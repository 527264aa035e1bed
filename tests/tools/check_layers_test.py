#!/usr/bin/env python3
"""tools/check_layers.py passes the real tree and fails each kind of bad change.

Each test copies the production sources, tools/layers.txt and the architecture
page into a scratch tree, plants one change there and runs the checker over
it with --root. Run by `make check-layers` (so by `make test`); standard
library only, about a second.
"""

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHECKER = os.path.join(REPO, "tools", "check_layers.py")
DOC = "docs/design/architecture.md"
FOLDER_TABLE = "docs/development.md"
sys.dont_write_bytecode = True  # The source tree is never written to (Makefile).
sys.path.insert(0, os.path.join(REPO, "tools"))
import check_layers  # noqa: E402


def run(root):
    """The checker's exit status and output over `root`, as `make check-layers` runs it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = check_layers.main(["--root", root, "--doc", DOC, "--folder-table", FOLDER_TABLE])
    return status, out.getvalue()


class CheckLayersTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="check_layers_test.")
        self.addCleanup(shutil.rmtree, self.root)
        for folder in ("agent", "base", "buffer", "bpf", "ftrace"):
            shutil.copytree(os.path.join(REPO, folder), os.path.join(self.root, folder))
        for path in ("tools/layers.txt", DOC, FOLDER_TABLE):
            os.makedirs(os.path.dirname(os.path.join(self.root, path)), exist_ok=True)
            shutil.copy(os.path.join(REPO, path), os.path.join(self.root, path))

    def edit(self, path, old, new):
        full = os.path.join(self.root, path)
        with open(full, encoding="utf-8") as f:
            text = f.read()
        self.assertIn(old, text, f"{path} no longer has {old!r}: pick another line to plant")
        with open(full, "w", encoding="utf-8") as f:
            f.write(text.replace(old, new, 1))

    def plant_include(self, path, included):
        """Appends an include to `path`; returns its line number."""
        full = os.path.join(self.root, path)
        with open(full, encoding="utf-8") as f:
            lines = f.read().count("\n")
        with open(full, "a", encoding="utf-8") as f:
            f.write(f'#include "{included}"\n')
        return lines + 1

    def assertFailsWith(self, expected):
        status, out = run(self.root)
        self.assertEqual(status, 1, out)
        self.assertIn(expected, out)
        return out

    def test_real_tree_passes(self):
        result = subprocess.run([sys.executable, CHECKER, "--doc", DOC,
                                 "--folder-table", FOLDER_TABLE], cwd=REPO,
                                capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(run(self.root)[0], 0)

    def test_agent_folder_including_bpf_fails_with_file_and_line(self):
        line = self.plant_include("agent/config/config_validation.cc", "bpf/common_events.h")
        self.assertFailsWith(
            f"agent/config/config_validation.cc:{line}: includes bpf/common_events.h: "
            "agent/config may not include bpf/ (only agent/sources may) (tools/layers.txt)")

    def test_folder_including_an_earlier_level_fails(self):
        line = self.plant_include("agent/writer/trace_writer.cc",
                                  "agent/session/tracing_session.h")
        self.assertFailsWith(
            f"agent/writer/trace_writer.cc:{line}: includes agent/session/tracing_session.h: "
            "agent/writer may not include agent/session/ (level 4 is above its level 6)")

    def test_folders_on_one_level_never_include_each_other(self):
        line = self.plant_include("agent/output/output_dir.h", "agent/config/defaults.h")
        self.assertFailsWith(
            f"agent/output/output_dir.h:{line}: includes agent/config/defaults.h: "
            "agent/output may not include agent/config/ (both on level 6")

    def test_component_including_another_fails(self):
        line = self.plant_include("buffer/chunk_abi.cc", "ftrace/tracefs.h")
        self.assertFailsWith(f"buffer/chunk_abi.cc:{line}: includes ftrace/tracefs.h: "
                             "buffer/ may not include ftrace/")

    def test_every_component_and_agent_folder_may_include_base(self):
        for path in ("buffer/chunk_abi.cc", "bpf/ring_reader.cc", "ftrace/tracefs.cc",
                     "agent/cli/main.cc", "base/owner_thread.h"):
            self.plant_include(path, "base/scoped_fd.h")
        status, out = run(self.root)
        self.assertEqual(status, 0, out)

    def test_base_including_another_component_fails(self):
        line = self.plant_include("base/status.cc", "buffer/chunk_abi.h")
        self.assertFailsWith(f"base/status.cc:{line}: includes buffer/chunk_abi.h: "
                             "base/ may not include buffer/")

    def test_two_file_cycle_fails_with_the_chain(self):
        base = os.path.join(self.root, "agent", "tracefile")
        with open(os.path.join(base, "planted_a.h"), "w", encoding="utf-8") as f:
            f.write('#pragma once\n#include "agent/tracefile/planted_b.h"\n')
        with open(os.path.join(base, "planted_b.h"), "w", encoding="utf-8") as f:
            f.write('#pragma once\n\n#include "agent/tracefile/planted_a.h"\n')
        out = self.assertFailsWith(
            "agent/tracefile/planted_a.h:2: include cycle: agent/tracefile/planted_a.h -> "
            "agent/tracefile/planted_b.h -> agent/tracefile/planted_a.h")
        self.assertNotIn("unit cycle", out)  # The same cycle, said once.

    def test_two_unit_cycle_fails_with_its_includes(self):
        base = os.path.join(self.root, "agent", "tracefile")
        for name, text in (("planted_c.h", "#pragma once\n"),
                           ("planted_c.cc", '#include "agent/tracefile/planted_d.h"\n'),
                           ("planted_d.h", '#pragma once\n#include "agent/tracefile/planted_c.h"\n')):
            with open(os.path.join(base, name), "w", encoding="utf-8") as f:
                f.write(text)
        out = self.assertFailsWith(
            "agent/tracefile/planted_c.cc:1: unit cycle: agent/tracefile/planted_c -> agent/tracefile/planted_d "
            "-> agent/tracefile/planted_c (agent/tracefile/planted_c.cc:1 includes agent/tracefile/planted_d.h, "
            "agent/tracefile/planted_d.h:2 includes agent/tracefile/planted_c.h)")
        self.assertNotIn("include cycle", out)

    def test_stale_allowlist_entry_fails(self):
        self.edit("tools/layers.txt", "\n# cycle A -> B",
                  "\nallow agent/config/defaults.cc -> buffer/chunk_abi.h  # planted\n"
                  "# cycle A -> B")
        self.assertFailsWith("allows agent/config/defaults.cc -> buffer/chunk_abi.h, "
                             "which no longer breaks a rule: remove the line")

    def test_stale_unit_cycle_fails(self):
        self.edit("tools/layers.txt", "\n# cycle A -> B",
                  "\nunit-cycle agent/config/config_loader -> agent/config/config_validation -> "
                  "agent/config/config_loader  # planted\n# cycle A -> B")
        self.assertFailsWith("lists the unit cycle agent/config/config_loader -> "
                             "agent/config/config_validation -> agent/config/config_loader, "
                             "which is gone: remove the line")

    def test_doc_levels_that_differ_from_the_table_fail(self):
        self.edit(DOC, "4. `session/`", "4. `session/`, `base/`")
        self.assertFailsWith("differ from tools/layers.txt's: 1. cli; 2. daemon;")

    def test_folder_table_that_misses_an_include_fails(self):
        # A legal include (metrics/ may include config/) that the table's row
        # does not name: the docs would no longer say what the folder depends on.
        self.plant_include("agent/metrics/prometheus_text.cc", "agent/config/defaults.h")
        self.assertFailsWith("docs/development.md:")
        self.assertFailsWith("agent/metrics/ includes config, output; the table says output")

    def test_folder_table_without_a_row_for_a_new_folder_fails(self):
        os.makedirs(os.path.join(self.root, "agent", "planted"))
        with open(os.path.join(self.root, "agent", "planted", "x.h"), "w",
                  encoding="utf-8") as f:
            f.write("#pragma once\n")
        self.edit("tools/layers.txt", "level 7: tracefile", "level 7: tracefile planted")
        self.assertFailsWith("no row for agent/planted/ in the table of folders")


if __name__ == "__main__":
    unittest.main()
