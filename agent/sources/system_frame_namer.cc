#include "agent/sources/system_frame_namer.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "agent/symbols/kernel_symbols.h"
#include "agent/symbols/user_symbolizer.h"

namespace ringside::agent {
namespace {

// The kernel's mapping, as Perfetto's profilers name it; a kernel frame's
// rel_pc is its address.
constexpr const char* kKernelMapping = "[kernel.kallsyms]";

class SystemFrameNamer : public FrameNamer {
 public:
  SystemFrameNamer() {
    // Read now, at setup: with kernel.kptr_restrict 1 the addresses need
    // CAP_SYSLOG, which the agent drops once set up.
    absl::StatusOr<KernelSymbols> k = KernelSymbols::Load();
    if (k.ok()) kernel_.emplace(std::move(*k));
  }

  Frame Kernel(uint64_t ip) override {
    Frame f;
    f.mapping = kKernelMapping;
    f.rel_pc = ip;
    if (kernel_.has_value()) {
      if (std::optional<KernelSymbol> s = kernel_->Find(ip); s.has_value()) {
        f.function = std::string(s->name);
      }
    }
    return f;
  }

  Frame User(int32_t tgid, uint64_t ip) override {
    const UserFrame u = user_.Symbolize(tgid, ip);
    Frame f;
    f.rel_pc = u.has_mapping ? u.rel_pc : ip;
    if (!u.has_mapping) return f;
    f.function = std::string(u.function_name);
    f.mapping = std::string(u.mapping.path);
    f.build_id = std::string(u.mapping.build_id);
    f.start = u.mapping.start;
    f.end = u.mapping.end;
    f.offset = u.mapping.pgoff;
    f.load_bias = u.mapping.load_bias;
    return f;
  }

  void ForgetProcess(int32_t tgid) override { user_.ForgetProcess(tgid); }

  size_t memory_bytes() const override {
    return user_.memory_bytes() + (kernel_.has_value() ? kernel_->memory_bytes() : 0);
  }

 private:
  std::optional<KernelSymbols> kernel_;
  UserSymbolizer user_;
};

}  // namespace

std::unique_ptr<FrameNamer> MakeSystemFrameNamer() { return std::make_unique<SystemFrameNamer>(); }

}  // namespace ringside::agent
