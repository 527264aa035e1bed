#!/usr/bin/env python3
"""Cuts a kernel's BTF out of its boot image: IMAGE [OUT].

Debian's arm64 kernel packages ship the kernel as a raw Image (gzip'd on
some), not an ELF file, so bpftool cannot read its .BTF section by name;
the section's bytes are still in the image, whole. The BTF of vmlinux is the
largest well-formed BTF blob in it: a header (magic 0xeb9f, version 1,
24 bytes), the types right after it, the strings right after the types,
starting and ending with a NUL. Writes that blob to OUT (default
vmlinux.btf), the same bytes as the booted kernel's /sys/kernel/btf/vmlinux.
"""

import gzip
import struct
import sys

MAGIC = b"\x9f\xeb\x01"  # 0xeb9f little-endian, then version 1.
HEADER = struct.Struct("<HBBIIIII")


def blobs(image):
    """(offset, size) of each well-formed little-endian BTF blob in image."""
    at = image.find(MAGIC)
    while at >= 0:
        if at + HEADER.size <= len(image):
            _, _, _, hdr_len, type_off, type_len, str_off, str_len = HEADER.unpack_from(image, at)
            begin = at + hdr_len
            end = begin + str_off + str_len
            if (hdr_len == HEADER.size and type_off == 0 and str_off == type_len
                    and str_len > 0 and end <= len(image)
                    and image[begin + str_off] == 0 and image[end - 1] == 0):
                yield at, end - at
        at = image.find(MAGIC, at + 1)


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(f"usage: {argv[0]} IMAGE [OUT]")
    out = argv[2] if len(argv) == 3 else "vmlinux.btf"
    with open(argv[1], "rb") as f:
        image = f.read()
    if image[:2] == b"\x1f\x8b":
        image = gzip.decompress(image)
    found = sorted(blobs(image), key=lambda b: b[1])
    if not found:
        sys.exit(f"{argv[1]}: no BTF in this image (a kernel built without CONFIG_DEBUG_INFO_BTF?)")
    at, size = found[-1]
    with open(out, "wb") as f:
        f.write(image[at:at + size])
    print(f"{argv[1]}: BTF at offset {at:#x}, {size} bytes -> {out}")


if __name__ == "__main__":
    main(sys.argv)
