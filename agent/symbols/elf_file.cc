#include "agent/symbols/elf_file.h"

#include <elf.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ringside::agent {
namespace {

struct ElfEnder {
  void operator()(Elf* elf) const { elf_end(elf); }
};
using ScopedElf = std::unique_ptr<Elf, ElfEnder>;

bool LibelfReady() {
  static const bool ready = elf_version(EV_CURRENT) != EV_NONE;
  return ready;
}

// A symbol before the table is built: its binding decides between symbols
// that share an address. Its name points into libelf's string table, alive
// as long as the Elf handle.
struct RawFunction {
  uint64_t addr;
  uint64_t size;
  const char* name;
  uint32_t name_bytes;  // With its NUL.
  int binding_rank;     // global 2, weak 1, local 0
};

int BindingRank(unsigned char info) {
  switch (GELF_ST_BIND(info)) {
    case STB_GLOBAL:
      return 2;
    case STB_WEAK:
      return 1;
    default:
      return 0;
  }
}

}  // namespace

// Fills an ElfFile from an open libelf handle.
class ElfFile::Reader {
 public:
  Reader(Elf* elf, ElfFile* file) : elf_(elf), file_(file) {}

  absl::Status ReadSegments(absl::string_view what) {
    size_t count = 0;
    if (elf_getphdrnum(elf_, &count) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": no program headers: ", elf_errmsg(-1)));
    }
    bool have_bias = false;
    for (size_t i = 0; i < count; ++i) {
      GElf_Phdr phdr;
      if (gelf_getphdr(elf_, static_cast<int>(i), &phdr) == nullptr) continue;
      if (phdr.p_type == PT_NOTE && file_->build_id_.empty()) ReadNoteChunk(phdr);
      if (phdr.p_type != PT_LOAD) continue;
      const bool exec = (phdr.p_flags & PF_X) != 0;
      file_->segments_.push_back({phdr.p_offset, phdr.p_vaddr, phdr.p_filesz, exec});
      if (exec && !have_bias) {
        file_->load_bias_ = phdr.p_vaddr - phdr.p_offset;
        have_bias = true;
      }
    }
    if (file_->segments_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": no PT_LOAD segment"));
    }
    return absl::OkStatus();
  }

  // The build id from the SHT_NOTE sections (PT_NOTE segments were tried
  // first by ReadSegments, for files without section headers), and the
  // functions of .symtab, or of .dynsym when there is no .symtab.
  void ReadSections() {
    Elf_Scn* symtab = nullptr;
    Elf_Scn* dynsym = nullptr;
    for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn != nullptr; scn = elf_nextscn(elf_, scn)) {
      GElf_Shdr shdr;
      if (gelf_getshdr(scn, &shdr) == nullptr) continue;
      if (shdr.sh_type == SHT_NOTE && file_->build_id_.empty()) {
        ReadNotes(elf_getdata(scn, nullptr));
      } else if (shdr.sh_type == SHT_SYMTAB && symtab == nullptr) {
        symtab = scn;
      } else if (shdr.sh_type == SHT_DYNSYM && dynsym == nullptr) {
        dynsym = scn;
      }
    }
    file_->from_dynsym_ = symtab == nullptr && dynsym != nullptr;
    if (Elf_Scn* scn = symtab != nullptr ? symtab : dynsym; scn != nullptr) ReadFunctions(scn);
  }

 private:
  void ReadNoteChunk(const GElf_Phdr& phdr) {
    ReadNotes(
        elf_getdata_rawchunk(elf_, static_cast<int64_t>(phdr.p_offset), phdr.p_filesz, ELF_T_NHDR));
  }

  void ReadNotes(Elf_Data* data) {
    if (data == nullptr) return;
    GElf_Nhdr nhdr;
    size_t name_at, desc_at;
    for (size_t at = 0, next; (next = gelf_getnote(data, at, &nhdr, &name_at, &desc_at)) > 0;
         at = next) {
      const char* bytes = static_cast<const char*>(data->d_buf);
      if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 &&
          memcmp(bytes + name_at, "GNU", 4) == 0 && nhdr.n_descsz > 0) {
        file_->build_id_.assign(bytes + desc_at, nhdr.n_descsz);
        return;
      }
    }
  }

  // The table is built in memory sized once: the symbols that name
  // functions, then at each address the one kept, then the names of those
  // alone. Grown by appends and then shrunk to fit, the names were copied
  // three times over, each time into memory the kernel had to fault in
  // (11 us a page on a VM): half the BPF reader's page faults while a
  // fork+exec storm brought new binaries to symbolize (issue 57).
  void ReadFunctions(Elf_Scn* scn) {
    GElf_Shdr shdr;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (gelf_getshdr(scn, &shdr) == nullptr || data == nullptr || shdr.sh_entsize == 0) return;
    const size_t count = data->d_size / shdr.sh_entsize;
    std::vector<RawFunction> raw;
    raw.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) break;
      const int type = GELF_ST_TYPE(sym.st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_size == 0 ||
          sym.st_shndx == SHN_UNDEF || sym.st_value == 0 ||
          sym.st_size > std::numeric_limits<uint32_t>::max()) {
        continue;
      }
      const char* name = elf_strptr(elf_, shdr.sh_link, sym.st_name);
      if (name == nullptr || name[0] == '\0') continue;
      // elf_strptr returns only strings that end inside their table.
      const size_t length = strlen(name);
      if (length >= std::numeric_limits<uint32_t>::max()) continue;
      raw.push_back({sym.st_value, sym.st_size, name, static_cast<uint32_t>(length + 1),
                     BindingRank(sym.st_info)});
    }
    std::stable_sort(raw.begin(), raw.end(),
                     [](const RawFunction& a, const RawFunction& b) { return a.addr < b.addr; });
    // At each address, the strongest binding (then the largest size), moved
    // to the front in place.
    size_t kept = 0;
    uint64_t name_bytes = 0;
    for (size_t i = 0; i < raw.size();) {
      size_t best = i, j = i + 1;
      for (; j < raw.size() && raw[j].addr == raw[i].addr; ++j) {
        if (std::tie(raw[j].binding_rank, raw[j].size) >
            std::tie(raw[best].binding_rank, raw[best].size)) {
          best = j;
        }
      }
      i = j;
      // Offsets into the names are 32-bit: a table past that keeps the
      // functions of its first 4 GiB of names.
      if (name_bytes + raw[best].name_bytes > std::numeric_limits<uint32_t>::max()) break;
      name_bytes += raw[best].name_bytes;
      raw[kept++] = raw[best];
    }
    std::vector<Function>& functions = file_->functions_;
    std::string& names = file_->names_;
    functions.reserve(kept);
    names.reserve(name_bytes);
    for (size_t i = 0; i < kept; ++i) {
      functions.push_back(
          {raw[i].addr, static_cast<uint32_t>(raw[i].size), static_cast<uint32_t>(names.size())});
      names.append(raw[i].name, raw[i].name_bytes);  // With its NUL.
    }
  }

  Elf* elf_;
  ElfFile* file_;
};

absl::StatusOr<ElfFile> ElfFile::Read(int fd, absl::string_view what) {
  if (!LibelfReady()) {
    return absl::InternalError(absl::StrCat("libelf: elf_version: ", elf_errmsg(-1)));
  }
  // ELF_C_READ: libelf read()s what it needs; a mapping (ELF_C_READ_MMAP)
  // of a file another process truncates would fault with SIGBUS.
  ScopedElf elf(elf_begin(fd, ELF_C_READ, nullptr));
  if (elf == nullptr || elf_kind(elf.get()) != ELF_K_ELF) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": not an ELF file: ", elf == nullptr ? elf_errmsg(-1) : "no ELF magic"));
  }
  GElf_Ehdr ehdr;
  if (gelf_getehdr(elf.get(), &ehdr) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unreadable ELF header: ", elf_errmsg(-1)));
  }
  ElfFile file;
  Reader reader(elf.get(), &file);
  if (absl::Status s = reader.ReadSegments(what); !s.ok()) return s;
  reader.ReadSections();
  return file;
}

std::string ElfFile::build_id_hex() const { return absl::BytesToHexString(build_id_); }

std::optional<uint64_t> ElfFile::FileOffsetToVaddr(uint64_t offset) const {
  for (const bool exec : {true, false}) {
    for (const LoadSegment& s : segments_) {
      if (s.executable == exec && offset >= s.offset && offset - s.offset < s.filesz) {
        return offset - s.offset + s.vaddr;
      }
    }
  }
  return std::nullopt;
}

std::optional<ElfFunction> ElfFile::FindFunction(uint64_t vaddr) const {
  auto it = std::upper_bound(functions_.begin(), functions_.end(), vaddr,
                             [](uint64_t a, const Function& f) { return a < f.addr; });
  if (it == functions_.begin()) return std::nullopt;
  const Function& f = *(it - 1);
  if (vaddr - f.addr >= f.size) return std::nullopt;
  return ElfFunction{absl::string_view(names_.data() + f.name_offset), f.addr, vaddr - f.addr};
}

size_t ElfFile::memory_bytes() const {
  return sizeof(*this) + build_id_.capacity() + segments_.capacity() * sizeof(LoadSegment) +
         functions_.capacity() * sizeof(Function) + names_.capacity();
}

}  // namespace ringside::agent
