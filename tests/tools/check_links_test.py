#!/usr/bin/env python3
"""tools/check_links.py passes allowed uses and fails each kind of use across a layer.

Each test compiles a few one-function sources into libraries of a scratch
folder, named as the build names ringside's (buffer, agent/cli, ...), and runs
the checker over them with the real tools/layers.txt. Run by `make
check-links` (so by `make test`); needs g++, ar and nm; a few seconds.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHECKER = os.path.join(REPO, "tools", "check_links.py")
TABLE = os.path.join(REPO, "tools", "layers.txt")
sys.dont_write_bytecode = True  # The source tree is never written to (Makefile).


class CheckLinksTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="check_links_test.")
        self.addCleanup(shutil.rmtree, self.root)
        self.libs = {}  # name -> archive

    def library(self, name, **sources):
        """Compiles `sources` ({object name: C++ text}) into the library `name`."""
        folder = os.path.join(self.root, name.replace("/", "_"))
        os.makedirs(folder)
        objects = []
        for stem, text in sources.items():
            source = os.path.join(folder, stem + ".cc")
            with open(source, "w", encoding="utf-8") as f:
                f.write(text)
            objects.append(os.path.join(folder, stem + ".o"))
            subprocess.run(["g++", "-std=c++20", "-O0", "-c", source, "-o", objects[-1]],
                           check=True)
        archive = os.path.join(self.root, f"lib{name.replace('/', '_')}.a")
        subprocess.run(["ar", "rcs", archive] + objects, check=True)
        self.libs[name] = archive

    def run_checker(self, *extra):
        args = [sys.executable, CHECKER, "--table", TABLE]
        args += [f"--lib={name}={path}" for name, path in sorted(self.libs.items())]
        result = subprocess.run(args + list(extra), capture_output=True, text=True)
        return result.returncode, result.stdout + result.stderr

    def assertFailsWith(self, expected):
        status, out = self.run_checker()
        self.assertEqual(status, 1, out)
        self.assertIn(expected, out)

    def test_uses_the_layers_allow_pass(self):
        self.library("base", fd="namespace ringside::base { int Close(int fd) { return fd; } }")
        self.library("ftrace", tracefs="""
            namespace ringside::base { int Close(int); }
            namespace ringside::ftrace { int Unmount() { return base::Close(3); } }""")
        self.library("agent/sources", factory="""
            namespace ringside::ftrace { int Unmount(); }
            namespace ringside::agent { int UnmountTracefs() { return ftrace::Unmount(); } }""")
        self.library("agent/cli", main="""
            namespace ringside::agent { int UnmountTracefs(); }
            int main() { return ringside::agent::UnmountTracefs(); }""")
        status, out = self.run_checker()
        self.assertEqual(status, 0, out)
        self.assertIn("4 libraries, 3 symbols used across libraries", out)

    def test_a_hook_declared_below_and_defined_above_fails(self):
        # Every include here is allowed (agent/ may include buffer/'s header);
        # only the link shows buffer/ calling up into agent/.
        self.library("buffer", ring="""
            namespace ringside::agent { void OnWrap(); }
            namespace ringside::buffer { void Wrap() { agent::OnWrap(); } }""")
        self.library("agent/session", hooks="namespace ringside::agent { void OnWrap() {} }")
        self.assertFailsWith("buffer/ring.o: uses ringside::agent::OnWrap(), defined in "
                             "agent/session/: buffer/ may not include agent/ (" + TABLE + ")")

    def test_a_call_up_a_level_inside_agent_fails(self):
        self.library("agent/cli", status="namespace ringside::agent { int Columns() { return 80; } }")
        self.library("agent/tracefile", inspector="""
            namespace ringside::agent { int Columns(); int Width() { return Columns(); } }""")
        self.assertFailsWith("agent/tracefile/inspector.o: uses ringside::agent::Columns(), "
                             "defined in agent/cli/: agent/tracefile may not include agent/cli/ "
                             "(level 1 is above its level 7)")

    def test_a_folder_the_direct_rule_leaves_out_fails(self):
        self.library("buffer", buf="namespace ringside::buffer { void Free() {} }")
        self.library("agent/snapshots", writer="""
            namespace ringside::buffer { void Free(); }
            namespace ringside::agent { void Done() { buffer::Free(); } }""")
        self.assertFailsWith("agent/snapshots/writer.o: uses ringside::buffer::Free(), defined "
                             "in buffer/: agent/snapshots may not include buffer/ (only ")

    def test_inline_copies_are_the_include_checks_business(self):
        # An inline function is defined (weakly) in each library that uses it:
        # no library depends on another for it.
        inline = "namespace ringside::ftrace { inline int Page() { return 4096; } }\n"
        self.library("ftrace", reader=inline + "int (*keep_reader)() = ringside::ftrace::Page;")
        self.library("agent/session", watch=inline + "int (*keep_watch)() = ringside::ftrace::Page;")
        status, out = self.run_checker()
        self.assertEqual(status, 0, out)

    def test_a_missing_library_is_named(self):
        status, out = self.run_checker(f"--lib=base={self.root}/libgone.a")
        self.assertEqual(status, 2, out)
        self.assertIn(f"{self.root}/libgone.a (library base) does not exist", out)


if __name__ == "__main__":
    unittest.main()
