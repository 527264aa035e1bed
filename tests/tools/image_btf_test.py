#!/usr/bin/env python3
"""tools/image_btf.py finds a kernel's BTF inside a boot image, as the arm64
cross build needs (tools/cross_sysroot.sh): the largest well-formed blob,
whole, in a raw or a gzip'd image, and a clear error when there is none.
Run by `make test`; standard library only.
"""

import gzip
import os
import struct
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOL = os.path.join(REPO, "tools", "image_btf.py")
sys.dont_write_bytecode = True  # The source tree is never written to (Makefile).


def btf(types, strings):
    """A BTF blob: its 24-byte header, `types` and `strings` (NUL-framed)."""
    strings = b"\0" + strings + b"\0"
    header = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(strings))
    return header + types + strings


class ImageBtfTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.dir.name, "vmlinux.btf")

    def tearDown(self):
        self.dir.cleanup()

    def extract(self, image):
        path = os.path.join(self.dir.name, "Image")
        with open(path, "wb") as f:
            f.write(image)
        return subprocess.run([sys.executable, TOOL, path, self.out], capture_output=True,
                              text=True)

    def written(self):
        with open(self.out, "rb") as f:
            return f.read()

    def test_the_largest_well_formed_blob_whole(self):
        vmlinux = btf(os.urandom(4096), b"task_struct\0pid")
        module = btf(os.urandom(64), b"x")
        # A header whose strings run past the image's end: not a blob.
        cut = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, 16, 16, 1 << 30)
        image = os.urandom(1000) + module + os.urandom(77) + vmlinux + os.urandom(300) + cut
        r = self.extract(image)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.written(), vmlinux)
        self.assertIn(f"{len(vmlinux)} bytes", r.stdout)

    def test_a_gzipped_image(self):
        vmlinux = btf(os.urandom(2048), b"rq")
        r = self.extract(gzip.compress(os.urandom(500) + vmlinux + os.urandom(500)))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.written(), vmlinux)

    def test_strings_must_be_nul_framed(self):
        blob = bytearray(btf(os.urandom(256), b"abc"))
        blob[-1] = ord("x")
        r = self.extract(os.urandom(100) + bytes(blob) + b"y" * 100)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no BTF in this image", r.stderr)
        self.assertFalse(os.path.exists(self.out))

    @unittest.skipUnless(os.path.exists("/sys/kernel/btf/vmlinux"), "no /sys/kernel/btf/vmlinux")
    def test_this_kernels_btf_among_other_bytes(self):
        with open("/sys/kernel/btf/vmlinux", "rb") as f:
            vmlinux = f.read()
        r = self.extract(os.urandom(4096) + vmlinux + os.urandom(4096))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.written(), vmlinux)


if __name__ == "__main__":
    unittest.main()
