#ifndef RINGSIDE_AGENT_SYMBOLS_ELF_FILE_H_
#define RINGSIDE_AGENT_SYMBOLS_ELF_FILE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside::agent {

// A function an ELF virtual address falls in: its name (a view into the
// ElfFile, valid as long as it lives) and the address's offset from its start.
struct ElfFunction {
  absl::string_view name;
  uint64_t start = 0;
  uint64_t offset = 0;
};

// What naming the addresses mapped from one ELF file (an executable or a
// shared library) needs of it, read once with libelf:
//   - its GNU build id (the NT_GNU_BUILD_ID note), which names the file for
//     Perfetto's offline symbolizer and for debuginfod;
//   - its PT_LOAD segments, to turn an offset in the file (what a mapping
//     gives) into the ELF virtual address its symbols use;
//   - its functions: STT_FUNC and STT_GNU_IFUNC symbols with a size, from
//     .symtab, or from .dynsym when the file has no .symtab (stripped).
//     Names stay mangled, as the file has them: what llvm-symbolizer and
//     Perfetto's tools compare. The agent's frame namer demangles what it
//     writes into a trace, as trace_processor v58 imports frame names as
//     they are.
//
// A function covers [start, start + size): an address past its size gets no
// name rather than the previous function's (the gaps a stripped file's
// .dynsym leaves are most of its code). Where symbols share an address, a
// global one is kept over a weak one over a local one, then the longer.
//
// The file is untrusted (a path from another process's maps): libelf reads
// it with read(), not mmap, so a file truncated while being read is an
// error and not a SIGBUS; every libelf failure is an error, never a crash.
//
// Layout: names NUL-terminated back to back in one arena, indexed by one
// vector of 16-byte entries sorted by address. Immutable once read.
class ElfFile {
 public:
  struct LoadSegment {
    uint64_t offset = 0;  // p_offset
    uint64_t vaddr = 0;   // p_vaddr
    uint64_t filesz = 0;  // p_filesz
    bool executable = false;
  };

  // Reads the ELF file open at `fd` (the caller opened it, checked it is a
  // regular file and bounded its size). `what` names it in errors.
  // kInvalidArgument when libelf cannot read it as ELF or it has no
  // PT_LOAD segment; a file without a build id or functions is no error.
  static absl::StatusOr<ElfFile> Read(int fd, absl::string_view what);

  // The build id's bytes as the note holds them (what Perfetto's
  // InternedData.build_ids carries), empty when the file has none; and the
  // same in lowercase hex, as `readelf -n` prints it and trace processor's
  // stack_profile_mapping.build_id shows it.
  const std::string& build_id() const { return build_id_; }
  std::string build_id_hex() const;

  // p_vaddr - p_offset of the first executable PT_LOAD segment, 0 when
  // there is none: libunwindstack's load bias, which Perfetto's Mapping
  // carries and its offline symbolizer compares with the file it finds.
  uint64_t load_bias() const { return load_bias_; }

  // The ELF virtual address of the byte at `offset` in the file: offset -
  // p_offset + p_vaddr of the PT_LOAD segment holding it (an executable one
  // first, where two share a page); nullopt when no segment holds it.
  std::optional<uint64_t> FileOffsetToVaddr(uint64_t offset) const;

  // The function `vaddr` falls in, or nullopt.
  std::optional<ElfFunction> FindFunction(uint64_t vaddr) const;

  const std::vector<LoadSegment>& segments() const { return segments_; }
  size_t function_count() const { return functions_.size(); }
  // True when the names came from .dynsym (the file has no .symtab).
  bool functions_from_dynsym() const { return from_dynsym_; }
  size_t memory_bytes() const;

 private:
  class Reader;  // elf_file.cc

  struct Function {
    uint64_t addr;
    uint32_t size;
    uint32_t name_offset;
  };
  static_assert(sizeof(Function) == 16);

  ElfFile() = default;

  std::string build_id_;
  uint64_t load_bias_ = 0;
  std::vector<LoadSegment> segments_;
  std::vector<Function> functions_;
  std::string names_;
  bool from_dynsym_ = false;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SYMBOLS_ELF_FILE_H_
