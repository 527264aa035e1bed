// libFuzzer target: the input is one ftrace ring-buffer page (any size, any
// bytes), parsed with this kernel's default layout. Every event handed out
// must lie inside the page; ASan catches any read outside it.

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "ftrace/page_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ringside::ftrace::PageParser;
  // An exactly-sized copy, so a read past the end is a heap overflow.
  std::unique_ptr<uint8_t[]> page(new uint8_t[size]);
  if (size > 0) std::memcpy(page.get(), data, size);
  static const PageParser parser{ringside::ftrace::PageHeaderFormat{},
                                 ringside::ftrace::EventHeaderFormat{}};
  std::vector<ringside::ftrace::RawEvent> events;
  parser.Parse(page.get(), size, &events);
  for (const auto& e : events) {
    if (e.data < page.get() || e.data + e.size > page.get() + size) std::abort();
  }
  return 0;
}
