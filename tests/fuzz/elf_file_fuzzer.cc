// libFuzzer target: the input is a whole file handed to ElfFile::Read as
// the binary a process has mapped (its path chosen by that process, its
// bytes by whoever wrote it). Read may fail; it must not crash, and what
// it finds must hold together: a function found covers the address asked.

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

#include "agent/symbols/elf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ringside::agent::ElfFile;
  const int fd = memfd_create("elf_file_fuzzer", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (size > 0 && write(fd, data, size) != static_cast<ssize_t>(size)) {
    close(fd);
    return 0;
  }
  const auto file = ElfFile::Read(fd, "fuzz");
  close(fd);
  if (!file.ok()) return 0;
  (void)file->build_id_hex();
  for (const ElfFile::LoadSegment& s : file->segments()) {
    for (uint64_t offset : {s.offset, s.offset + s.filesz / 2}) {
      const auto vaddr = file->FileOffsetToVaddr(offset);
      if (!vaddr) continue;
      const auto f = file->FindFunction(*vaddr);
      if (f && (f->start > *vaddr || f->offset != *vaddr - f->start || f->name.empty())) {
        std::abort();
      }
    }
  }
  return 0;
}
