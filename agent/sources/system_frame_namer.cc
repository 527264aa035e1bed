#include "agent/sources/system_frame_namer.h"

#include <cxxabi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/symbols/kernel_symbols.h"
#include "agent/symbols/user_symbolizer.h"

namespace ringside::agent {
namespace {

// The kernel's mapping, as Perfetto's profilers name it; a kernel frame's
// rel_pc is its address.
constexpr const char* kKernelMapping = "[kernel.kallsyms]";

class SystemFrameNamer : public FrameNamer {
 public:
  SystemFrameNamer(const std::string& proc_root, bool preload_own_binary)
      : user_(UserSymbolizer::Options{.proc_root = proc_root}) {
    // Read now, at setup: with kernel.kptr_restrict 1 the addresses need
    // CAP_SYSLOG, which the agent drops once set up.
    absl::StatusOr<KernelSymbols> k = KernelSymbols::Load();
    if (k.ok()) kernel_.emplace(std::move(*k));
    // The programs give pids as the initial PID namespace numbers them;
    // a /proc of another namespace has other processes under those
    // numbers, whose files would name frames wrongly.
    if (!ProcNumbersPidsAsTheKernelDoes(proc_root)) {
      user_unnamed_reason_ = absl::StrCat(
          proc_root,
          " belongs to a PID namespace other than the host's, so the processes the stacks "
          "name are not found under their pids: user frames keep their addresses, unnamed "
          "(run the agent in the host's PID namespace: hostPID in Kubernetes)");
    } else if (preload_own_binary) {
      PreloadOwnBinary(proc_root);
    }
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

  Frame User(int32_t tgid, uint64_t ip, bool innermost) override {
    if (!user_unnamed_reason_.empty()) {
      Frame f;
      f.rel_pc = ip;
      return f;
    }
    const UserFrame u = user_.Symbolize(
        tgid, ip,
        innermost ? UserSymbolizer::Position::kInnermost : UserSymbolizer::Position::kCaller);
    Frame f;
    f.rel_pc = u.has_mapping ? u.rel_pc : ip;
    if (!u.has_mapping) return f;
    f.function = Demangled(u.function_name);
    f.mapping = std::string(u.mapping.path);
    f.build_id = std::string(u.mapping.build_id);
    f.start = u.mapping.start;
    f.end = u.mapping.end;
    f.offset = u.mapping.pgoff;
    f.load_bias = u.mapping.load_bias;
    f.final_name = u.file_read;
    return f;
  }

  void ProcessForked(int32_t parent_tgid, int32_t child_tgid) override {
    user_.ProcessForked(parent_tgid, child_tgid);
  }
  void ProcessExeced(int32_t tgid) override { user_.ProcessExeced(tgid); }
  void ProcessExited(int32_t tgid) override { user_.ProcessExited(tgid); }
  uint64_t UserSpace(int32_t tgid) const override {
    return user_unnamed_reason_.empty() ? user_.SpaceId(tgid) : 0;
  }
  void ForgetProcess(int32_t tgid) override { user_.ForgetProcess(tgid); }

  size_t memory_bytes() const override {
    return user_.memory_bytes() + (kernel_.has_value() ? kernel_->memory_bytes() : 0) +
           demangled_bytes_;
  }

  std::string user_frames_unnamed_reason() const override { return user_unnamed_reason_; }
  UserSymbolizerStats user_stats() const override { return user_.stats(); }

 private:
  // Names as people read them, cached: a frame is named once per new
  // callstack it is in, and demangling allocates. Bounded like the other
  // caches: past kMaxDemangled names it starts again.
  static constexpr size_t kMaxDemangled = 1 << 16;
  std::string Demangled(absl::string_view mangled) {
    if (!absl::StartsWith(mangled, "_Z")) return std::string(mangled);
    auto it = demangled_.find(mangled);
    if (it != demangled_.end()) return it->second;
    if (demangled_.size() >= kMaxDemangled) {
      demangled_.clear();
      demangled_bytes_ = 0;
    }
    std::string name = DemangledName(mangled);
    demangled_bytes_ += mangled.size() + name.size() + 2 * sizeof(std::string);
    return demangled_.emplace(std::string(mangled), std::move(name)).first->second;
  }

  // The agent's own threads are in the stacks it records (its CPU samples
  // and its blocks): its binary's symbols are read now, at setup, not on the
  // BPF reader's path at the first of them, in the middle of what is being
  // recorded (7 ms and 450 page faults for a 100 MB binary with debug info
  // on this project's VM). `proc_root`/self is this process as that mount
  // numbers it, as the programs do.
  void PreloadOwnBinary(const std::string& proc_root) {
    char link[32];
    const ssize_t n = readlink((proc_root + "/self").c_str(), link, sizeof(link));
    int32_t pid = 0;
    if (n <= 0 || !absl::SimpleAtoi(absl::string_view(link, static_cast<size_t>(n)), &pid)) return;
    user_.Preload(pid, reinterpret_cast<uintptr_t>(&MakeSystemFrameNamer));
  }

  std::optional<KernelSymbols> kernel_;
  UserSymbolizer user_;
  std::string user_unnamed_reason_;
  absl::flat_hash_map<std::string, std::string> demangled_;
  size_t demangled_bytes_ = 0;
};

}  // namespace

std::string DemangledName(absl::string_view mangled) {
  // The Itanium C++ ABI's (g++, clang, and Rust's legacy symbols); other
  // names stay as they are.
  if (!absl::StartsWith(mangled, "_Z")) return std::string(mangled);
  const std::string z(mangled);
  int status = 0;
  char* out = abi::__cxa_demangle(z.c_str(), nullptr, nullptr, &status);
  std::string name = status == 0 && out != nullptr ? std::string(out) : z;
  std::free(out);
  return name;
}

bool ProcNumbersPidsAsTheKernelDoes(const std::string& proc_root) {
  // The initial PID namespace's inode number, fixed since Linux 3.8
  // (PROC_PID_INIT_INO).
  constexpr ino_t kInitialPidNamespace = 0xEFFFFFFCu;
  const auto initial = [&](const char* path) {
    struct stat st;
    return stat((proc_root + path).c_str(), &st) == 0 && st.st_ino == kInitialPidNamespace;
  };
  // In the initial namespace ourselves, and seen in this mount: it numbers
  // pids there too (another namespace's mount would not show us). Else the
  // mount's own namespace is its init process's (a host's /proc mounted in
  // a container), which a kernel may keep from us even as root.
  return initial("/self/ns/pid") || initial("/1/ns/pid");
}

std::unique_ptr<FrameNamer> MakeSystemFrameNamer(const std::string& proc_root,
                                                 bool preload_own_binary) {
  return std::make_unique<SystemFrameNamer>(proc_root, preload_own_binary);
}

}  // namespace ringside::agent
