// libFuzzer target: the input is the text of a /proc/PID/maps or of a
// /proc/kallsyms (a process ringside does not trust chooses the names in
// the one; the other is read whatever it holds), parsed by ProcessMaps and
// KernelSymbols. Every mapping found must contain the address asked, and
// every name found must lie inside its table; ASan catches a read outside.

#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/symbols/kernel_symbols.h"
#include "agent/symbols/process_maps.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ringside::agent::KernelSymbols;
  using ringside::agent::MapsEntry;
  using ringside::agent::ProcessMaps;
  // An exactly-sized copy, so a read past the end is a heap overflow.
  const std::string text(reinterpret_cast<const char*>(data), size);

  const ProcessMaps maps = ProcessMaps::Parse(text);
  for (const MapsEntry& e : maps.entries()) {
    if (e.start >= e.end) std::abort();
    for (uint64_t addr : {e.start, e.end - 1, e.start + (e.end - e.start) / 2}) {
      const MapsEntry* found = maps.Find(addr);
      if (found == nullptr || addr < found->start || addr >= found->end) std::abort();
    }
  }

  const auto symbols = KernelSymbols::Parse(text, "fuzz");
  if (symbols.ok()) {
    uint64_t addr = 0;
    for (size_t i = 0; i + 8 <= size && i < 64 * 8; i += 8) {
      __builtin_memcpy(&addr, data + i, 8);
      for (uint64_t a : {addr, addr & 0xffffffffffff0000}) {
        const auto s = symbols->Find(a);
        if (s && (s->start > a || s->offset != a - s->start ||
                  s->offset >= KernelSymbols::kMaxFunctionBytes || s->name.empty())) {
          std::abort();
        }
      }
    }
  }
  return 0;
}
