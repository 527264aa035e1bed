// libFuzzer target: the input is raw BTF (any bytes), scanned for the
// tracepoints' probes as the loader scans the kernel's. ASan catches any
// read outside the input; every probe found must have a sane argument count.

#include <cstdlib>
#include <cstring>
#include <memory>

#include "bpf/kernel_tracepoints.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exactly-sized copy, so a read past the end is a heap overflow.
  std::unique_ptr<char[]> bytes(new char[size]);
  if (size > 0) std::memcpy(bytes.get(), data, size);
  absl::StatusOr<ringside::bpf::KernelTracepoints> k =
      ringside::bpf::KernelTracepoints::FromRawBtf(absl::string_view(bytes.get(), size));
  if (!k.ok()) return 0;
  for (const auto& [name, probe] : k->probes()) {
    if (probe.num_args < 0 || probe.num_args > 0xffff) std::abort();
  }
  return 0;
}
