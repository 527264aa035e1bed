#!/usr/bin/env python3
"""tools/check_sizes.py passes the real tree and fails each kind of overgrowth.

Each test copies the production sources and tools/sizes.txt into a scratch
tree, plants one change there and runs the checker over it with --root. Run by
`make check-sizes` (so by `make test`); standard library and ctags only.
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
CHECKER = os.path.join(REPO, "tools", "check_sizes.py")
sys.dont_write_bytecode = True  # The source tree is never written to (Makefile).
sys.path.insert(0, os.path.join(REPO, "tools"))
import check_sizes  # noqa: E402


def run(root):
    """The checker's exit status and output over `root`, as `make check-sizes` runs it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = check_sizes.main(["--root", root])
    return status, out.getvalue()


def function(name, lines, scope=""):
    """C++ text defining `scope name()` over exactly `lines` lines."""
    body = "".join(f"  x += {i};\n" for i in range(lines - 4))
    return f"int {scope}{name}() {{\n  int x = 0;\n{body}  return x;\n}}\n"


class CheckSizesTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="check_sizes_test.")
        self.addCleanup(shutil.rmtree, self.root)
        for folder in check_sizes.PRODUCTION:
            shutil.copytree(os.path.join(REPO, folder), os.path.join(self.root, folder))
        os.makedirs(os.path.join(self.root, "tools"))
        shutil.copy(os.path.join(REPO, "tools", "sizes.txt"),
                    os.path.join(self.root, "tools", "sizes.txt"))

    def plant(self, path, text):
        """Appends `text` to `path`; returns the line it starts on."""
        full = os.path.join(self.root, path)
        with open(full, encoding="utf-8") as f:
            lines = f.read().count("\n")
        with open(full, "a", encoding="utf-8") as f:
            f.write(text)
        return lines + 1

    def allow(self, line):
        with open(os.path.join(self.root, "tools", "sizes.txt"), "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def assertFailsWith(self, expected):
        status, out = run(self.root)
        self.assertEqual(status, 1, out)
        self.assertIn(expected, out)
        return out

    def test_real_tree_passes(self):
        result = subprocess.run([sys.executable, CHECKER], cwd=REPO, capture_output=True,
                                text=True)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(run(self.root)[0], 0)

    def test_function_over_the_limit_fails_with_file_line_and_size(self):
        line = self.plant("base/status.cc", function("PlantedLong", 81))
        self.assertFailsWith(f"base/status.cc:{line}: PlantedLong is 81 lines, over the limit "
                             "of 80 (tools/sizes.txt)")

    def test_function_at_the_limit_passes(self):
        self.plant("base/status.cc", function("PlantedAtLimit", 80))
        status, out = run(self.root)
        self.assertEqual(status, 0, out)

    def test_allowed_function_passes_until_it_grows(self):
        self.plant("base/status.cc", function("PlantedAllowed", 90))
        self.allow("function base/status.cc PlantedAllowed 90  # planted")
        status, out = run(self.root)
        self.assertEqual(status, 0, out)
        self.plant("base/status.cc", function("PlantedAllowed", 91, "Other::"))
        path = os.path.join(self.root, "base", "status.cc")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(path, "w", encoding="utf-8") as f:  # one more line in the allowed one
            f.write(text.replace("int PlantedAllowed() {\n", "int PlantedAllowed() {\n\n", 1))
        self.assertFailsWith("PlantedAllowed is 91 lines, more than the 90 that "
                             "tools/sizes.txt:")

    def test_stale_allowance_fails(self):
        self.allow("function base/status.cc ErrnoToStatus 120  # planted")
        self.assertFailsWith("allows base/status.cc ErrnoToStatus, which is no longer over 80 "
                             "lines (or is gone): remove the line")

    def test_class_over_the_limit_fails(self):
        text = "struct Planted {\n" + "".join(f"  int M{i}();\n" for i in range(6)) + "};\n"
        text += "".join(function(f"M{i}", 70, "Planted::") for i in range(6))
        self.plant("base/status.cc", text)
        self.assertFailsWith("class Planted has 420 lines of member functions, over the "
                             "limit of 400")

    def write(self, path, lines):
        """A new file `path` of `lines` comment lines."""
        with open(os.path.join(self.root, path), "w", encoding="utf-8") as f:
            f.write("".join(f"// {i}\n" for i in range(lines)))

    def test_file_over_the_limit_fails_naming_it_and_its_length(self):
        self.write("base/planted_long.cc", 551)
        self.assertFailsWith("base/planted_long.cc:1: the file is 551 lines, over the limit of "
                             "550 for a file (tools/sizes.txt)")

    def test_file_at_the_limit_passes_and_other_files_do_not_count(self):
        self.write("base/planted_at_limit.h", 550)
        self.write("bpf/planted.bpf.c", 900)
        self.write("base/planted_notes.txt", 900)
        status, out = run(self.root)
        self.assertEqual(status, 0, out)

    def test_allowed_file_passes_until_it_grows(self):
        self.write("agent/planted_long.cc", 600)
        self.allow("file agent/planted_long.cc 600  # planted")
        status, out = run(self.root)
        self.assertEqual(status, 0, out)
        self.write("agent/planted_long.cc", 601)
        self.assertFailsWith("agent/planted_long.cc:1: the file is 601 lines, more than the 600 "
                             "that tools/sizes.txt:")

    def test_stale_file_allowance_fails(self):
        self.allow("file base/status.cc 600  # planted")
        self.assertFailsWith("allows file base/status.cc, which is no longer over 550 lines "
                             "(or is gone): remove the line")
        self.allow("file base/gone.cc 600  # planted")
        self.assertFailsWith("allows file base/gone.cc, which is no longer over 550 lines "
                             "(or is gone): remove the line")

    def test_table_without_a_file_limit_is_refused(self):
        path = os.path.join(self.root, "tools", "sizes.txt")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace("limit file 550\n", ""))
        status, out = run(self.root)
        self.assertEqual(status, 2, out)
        self.assertIn("needs 'limit function N', 'limit class N' and 'limit file N'", out)

    def test_missing_ctags_is_named(self):
        path = os.environ.get("PATH", "")
        os.environ["PATH"] = ""
        try:
            status, out = run(self.root)
        finally:
            os.environ["PATH"] = path
        self.assertEqual(status, 2, out)
        self.assertIn("ctags is missing (Debian's universal-ctags", out)


if __name__ == "__main__":
    unittest.main()
