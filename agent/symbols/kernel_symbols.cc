#include "agent/symbols/kernel_symbols.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/scoped_fd.h"
#include "base/status.h"

namespace ringside::agent {
namespace {

bool IsFunctionType(char type) { return type == 't' || type == 'T' || type == 'W' || type == 'w'; }

bool IsTextEndMarker(absl::string_view name) {
  return name == "_etext" || name == "_einittext" ||
         (absl::StartsWith(name, "__") && absl::EndsWith(name, "_text_end"));
}

// The starts of text sections: they share their address with the section's
// first function, which is the better name.
bool IsTextStartMarker(absl::string_view name) {
  return name == "_stext" || name == "_text" || name == "_sinittext" ||
         (absl::StartsWith(name, "__") && absl::EndsWith(name, "_text_start"));
}

// Which symbol names an address several share; higher wins. 0 names
// nothing (data, an end marker), 1 is a section's start marker, a function
// is 2 + 4 * binding (T 2, W and w 1, t 0) + 3 - its leading underscores
// (up to 3).
constexpr int kMaxRank = 2 + 4 * 2 + 3;
int Rank(char type, absl::string_view name) {
  if (!IsFunctionType(type) || IsTextEndMarker(name)) return 0;
  if (IsTextStartMarker(name)) return 1;
  const int binding = type == 'T' ? 2 : (type == 't' ? 0 : 1);
  int underscores = 0;
  while (underscores < 3 && underscores < static_cast<int>(name.size()) &&
         name[underscores] == '_') {
    ++underscores;
  }
  return 2 + 4 * binding + (3 - underscores);
}

// Parses "HEX" (at most 16 digits) from the front of `s`, advancing it.
bool ConsumeHex(absl::string_view* s, uint64_t* value) {
  uint64_t v = 0;
  size_t i = 0;
  for (; i < s->size() && i < 17; ++i) {
    const char c = (*s)[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      break;
    }
    v = (v << 4) | static_cast<uint64_t>(digit);
  }
  if (i == 0 || i > 16) return false;
  s->remove_prefix(i);
  *value = v;
  return true;
}

// "ADDR TYPE NAME" or "ADDR TYPE NAME\t[MODULE]"; false for anything else.
bool ParseLine(absl::string_view line, uint64_t* addr, char* type, absl::string_view* name,
               absl::string_view* module) {
  if (!ConsumeHex(&line, addr) || line.size() < 4 || line[0] != ' ' || line[2] != ' ') {
    return false;
  }
  *type = line[1];
  line.remove_prefix(3);
  const size_t name_end = line.find_first_of(" \t");
  *name = line.substr(0, name_end);
  *module = {};
  if (name->empty()) return false;
  if (name_end == absl::string_view::npos) return true;
  line.remove_prefix(name_end);
  const size_t open = line.find('[');
  const size_t close = line.rfind(']');
  if (open == absl::string_view::npos || close == absl::string_view::npos || close <= open + 1) {
    return false;
  }
  *module = line.substr(open + 1, close - open - 1);
  return true;
}

}  // namespace

// Builds a table line by line: a function's name goes straight into the
// arena, so that the text read is never held whole (at 3 ms a megabyte of
// first-touched memory, holding kallsyms' 5 MB of text and a copy of each
// line's parts would double the load time). While building, the top bits of
// an entry's name_size hold its rank among the symbols at its address.
class KernelSymbols::Builder {
 public:
  explicit Builder(KernelSymbols* table) : table_(table) { table_->modules_.emplace_back(); }

  void AddLine(absl::string_view line) {
    uint64_t addr;
    char type;
    absl::string_view name, module;
    if (!ParseLine(line, &addr, &type, &name, &module) || name.size() > kMaxNameBytes) return;
    ++lines_;
    any_address_ |= addr != 0;
    uint16_t module_id = 0;
    if (!module.empty()) {
      auto it = module_index_.find(module);
      if (it == module_index_.end()) {
        if (table_->modules_.size() >= kNoName) return;
        it = module_index_.emplace(std::string(module), table_->modules_.size()).first;
        table_->modules_.emplace_back(module);
      }
      module_id = it->second;
    }
    const int rank = Rank(type, name);
    if (rank == 0) {
      table_->entries_.push_back({addr, 0, 0, kNoName});
      return;
    }
    table_->entries_.push_back({addr, static_cast<uint32_t>(table_->names_.size()),
                                static_cast<uint16_t>(name.size() | rank << kRankShift),
                                module_id});
    table_->names_.append(name.data(), name.size());
  }

  absl::Status Finish(absl::string_view path) {
    if (lines_ > 0 && !any_address_) {
      return absl::PermissionDeniedError(
          absl::StrCat(path,
                       ": every address reads 0: the kernel hides them from this reader "
                       "(kernel.kptr_restrict is 2, or it is 1 and the reader lacks CAP_SYSLOG); "
                       "kernel frames stay unnamed unless ringside reads it with CAP_SYSLOG and "
                       "kernel.kptr_restrict at most 1"));
    }
    std::vector<Entry>& entries = table_->entries_;
    std::stable_sort(entries.begin(), entries.end(),
                     [](const Entry& a, const Entry& b) { return a.addr < b.addr; });
    // One entry per address, the best-ranked symbol there (the first on ties).
    size_t kept = 0;
    for (size_t i = 0; i < entries.size();) {
      size_t best = i, j = i + 1;
      for (; j < entries.size() && entries[j].addr == entries[i].addr; ++j) {
        if (RankOf(entries[j]) > RankOf(entries[best])) best = j;
      }
      i = j;
      Entry e = entries[best];
      if (e.module == kNoName) {
        // Only the first of a run of non-functions matters: it ends the
        // function below it.
        if (kept > 0 && entries[kept - 1].module != kNoName) entries[kept++] = e;
        continue;
      }
      e.name_size &= (1 << kRankShift) - 1;
      entries[kept++] = e;
      ++table_->function_count_;
    }
    entries.resize(kept);
    if (table_->function_count_ == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": no function symbol (type t, T, W or w) in ", lines_, " lines"));
    }
    entries.shrink_to_fit();
    table_->names_.shrink_to_fit();
    return absl::OkStatus();
  }

 private:
  // KSYM_NAME_LEN is 512; the bits above a name's size hold its rank.
  static constexpr int kRankShift = 12;
  static constexpr size_t kMaxNameBytes = (1 << kRankShift) - 1;
  static_assert(kMaxRank < (1 << (16 - kRankShift)));

  static int RankOf(const Entry& e) { return e.module == kNoName ? 0 : e.name_size >> kRankShift; }

  KernelSymbols* table_;
  absl::flat_hash_map<std::string, uint16_t> module_index_;
  size_t lines_ = 0;
  bool any_address_ = false;
};

absl::StatusOr<KernelSymbols> KernelSymbols::Load(const std::string& path) {
  base::ScopedFd fd(base::RetryOnEintr([&] { return open(path.c_str(), O_RDONLY | O_CLOEXEC); }));
  if (!fd) return base::ErrnoStatus("opening " + path);
  KernelSymbols table;
  Builder builder(&table);
  // 64 KiB reads: seq_file fills a buffer of the size asked for, and asking
  // for megabytes at once reads /proc/kallsyms four times slower.
  constexpr size_t kChunk = 64 * 1024;
  std::string buffer(2 * kChunk, '\0');
  size_t held = 0;  // bytes of an unfinished line at buffer's front
  size_t total = 0;
  for (;;) {
    if (buffer.size() - held < kChunk) buffer.resize(held + kChunk);  // a very long line
    const ssize_t n =
        base::RetryOnEintr([&] { return read(fd.get(), buffer.data() + held, kChunk); });
    if (n < 0) return base::ErrnoStatus("reading " + path);
    total += static_cast<size_t>(n);
    if (total > kMaxFileBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(path, ": longer than the ", kMaxFileBytes, " bytes kallsyms may take"));
    }
    absl::string_view text(buffer.data(), held + static_cast<size_t>(n));
    for (size_t eol; (eol = text.find('\n')) != absl::string_view::npos;) {
      builder.AddLine(text.substr(0, eol));
      text.remove_prefix(eol + 1);
    }
    if (n == 0) {
      if (!text.empty()) builder.AddLine(text);
      break;
    }
    held = text.size();
    memmove(buffer.data(), text.data(), held);
  }
  if (absl::Status s = builder.Finish(path); !s.ok()) return s;
  return table;
}

absl::StatusOr<KernelSymbols> KernelSymbols::Parse(absl::string_view text, absl::string_view path) {
  KernelSymbols table;
  Builder builder(&table);
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    builder.AddLine(text.substr(0, eol));
    text.remove_prefix(eol == absl::string_view::npos ? text.size() : eol + 1);
  }
  if (absl::Status s = builder.Finish(path); !s.ok()) return s;
  return table;
}

std::optional<KernelSymbol> KernelSymbols::Find(uint64_t addr) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), addr,
                             [](uint64_t a, const Entry& e) { return a < e.addr; });
  if (it == entries_.begin()) return std::nullopt;
  const Entry& e = *(it - 1);
  if (e.module == kNoName || addr - e.addr >= kMaxFunctionBytes) return std::nullopt;
  return KernelSymbol{absl::string_view(names_).substr(e.name_offset, e.name_size),
                      modules_[e.module], e.addr, addr - e.addr};
}

size_t KernelSymbols::memory_bytes() const {
  size_t bytes = sizeof(*this) + entries_.capacity() * sizeof(Entry) + names_.capacity() +
                 modules_.capacity() * sizeof(std::string);
  for (const std::string& m : modules_) bytes += m.capacity();
  return bytes;
}

}  // namespace ringside::agent
