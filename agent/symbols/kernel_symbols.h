#ifndef RINGSIDE_AGENT_SYMBOLS_KERNEL_SYMBOLS_H_
#define RINGSIDE_AGENT_SYMBOLS_KERNEL_SYMBOLS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside::agent {

// A kernel function an address falls in: its name and module ("" for the
// kernel image itself), views into the KernelSymbols that found it and
// valid as long as it lives, and the address's offset from its start.
struct KernelSymbol {
  absl::string_view name;
  absl::string_view module;
  uint64_t start = 0;
  uint64_t offset = 0;
};

// The kernel's function symbols, from /proc/kallsyms, to name the raw
// instruction addresses of kernel stacks (bpf_get_stackid).
//
// Which symbols name code: the text types t and T, and the weak ones W and w
// (nm gives weak objects V/v, so a weak symbol in kallsyms is code). Data
// and everything else (d D b B r R a A ...) never names an address, but
// where such a symbol sits above a function it ends that function's range.
// Module symbols ("addr t name\t[module]") are kept with their module; so
// are the kernel's own pseudo-modules ([bpf], [__builtin__ftrace]).
//
// kallsyms gives no sizes, so a function is taken to run to the next symbol,
// with three limits, so that Find gives no name rather than a wrong one:
//   - below the lowest symbol: nothing;
//   - the end markers of text (_etext, _einittext, and the __*_text_end of
//     the kernel's text sections: __entry_text_end, __irqentry_text_end, ...)
//     name nothing: an address at or above one and below the next function
//     is outside the code;
//   - an address more than kMaxFunctionBytes past the start of the function
//     below it is nothing (no kernel function is that long: the longest
//     measured on 6.18 is 20 KiB), which bounds what lies past the last
//     symbol of the kernel image or of a module.
// Where several symbols share an address (_stext, _text and the first
// function), one is kept: a function over an end marker or data, then
// global (T) over weak (W, w) over local (t), then the fewest leading
// underscores, then the file's first.
//
// Layout: one arena holds every kept name back to back (no separators), and
// one vector of 16-byte entries sorted by address indexes it:
//
//   entries_:  [addr | name offset | name size | module] ...   sorted by addr
//                          |
//   names_:    "schedulepipe_readvfs_read..."
//
// About 40 bytes per function with its name (121,792 functions, 4.9 MB, on a
// 6.18 kernel). Immutable once loaded: Find may be called from any thread.
class KernelSymbols {
 public:
  static constexpr uint64_t kMaxFunctionBytes = 256 * 1024;
  // kallsyms is a few MB; more than this is not kallsyms.
  static constexpr size_t kMaxFileBytes = 256 << 20;

  // Reads and parses `path` (/proc/kallsyms; tests give their own).
  // Fails with the errno of its read, naming the file; with
  // kPermissionDenied when every address reads 0 (kernel.kptr_restrict, or a
  // reader without CAP_SYSLOG: the kernel hides the addresses, not the
  // names); with kInvalidArgument when it holds no function symbol at all.
  static absl::StatusOr<KernelSymbols> Load(const std::string& path = "/proc/kallsyms");
  // The same, of kallsyms text already read; `path` only names it in errors.
  // Lines that are not "HEX TYPE NAME [\t[MODULE]]" are skipped.
  static absl::StatusOr<KernelSymbols> Parse(absl::string_view text, absl::string_view path);

  // The function `addr` falls in, by binary search; nullopt when it falls
  // in none (the rules above). For a return address (every frame of a
  // stack but the innermost), pass it minus 1: a call that ends a function
  // returns to the first byte of the next.
  std::optional<KernelSymbol> Find(uint64_t addr) const;

  // The functions kept (after merging symbols that share an address).
  size_t function_count() const { return function_count_; }
  // The heap this table holds, for status.
  size_t memory_bytes() const;

 private:
  static constexpr uint16_t kNoName = 0xffff;  // module_ of an entry that names nothing

  struct Entry {
    uint64_t addr;
    uint32_t name_offset;
    uint16_t name_size;
    uint16_t module;  // index into modules_ (0: the kernel image), or kNoName
  };
  static_assert(sizeof(Entry) == 16);

  class Builder;  // kernel_symbols.cc

  KernelSymbols() = default;

  std::vector<Entry> entries_;
  std::string names_;
  std::vector<std::string> modules_;
  size_t function_count_ = 0;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SYMBOLS_KERNEL_SYMBOLS_H_
