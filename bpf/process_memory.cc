#include "bpf/process_memory.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/scoped_fd.h"
#include "base/status.h"
#include "bpf/load_errors.h"
#include "bpf/process_memory_events.h"
#include "process_memory.skel.h"

namespace ringside::bpf {

absl::StatusOr<std::unique_ptr<ProcessMemory>> ProcessMemory::Load() {
  std::unique_ptr<ProcessMemory> pm(new ProcessMemory());
  CaptureLibbpfLog();
  if ((pm->skel_ = rs_process_memory__open()) == nullptr) {
    return LoadError(errno, "opening bpf/process_memory");
  }
  if (const int err = rs_process_memory__load(pm->skel_); err != 0) {
    return LoadError(-err, "loading bpf/process_memory");
  }
  pm->link_ = bpf_program__attach_iter(pm->skel_->progs.process_memory, nullptr);
  if (pm->link_ == nullptr) return LoadError(errno, "attaching bpf/process_memory's task iterator");
  return pm;
}

ProcessMemory::~ProcessMemory() {
  if (link_ != nullptr) bpf_link__destroy(link_);
  if (skel_ != nullptr) rs_process_memory__destroy(skel_);
}

absl::Status ProcessMemory::Read(std::vector<Process>* out) {
  out->clear();
  base::ScopedFd fd(bpf_iter_create(bpf_link__fd(link_)));
  if (!fd.valid()) return base::ErrnoToStatus(errno, "starting a pass of the task iterator");
  // The whole pass, then its records: a read may end inside one.
  constexpr size_t kChunk = 64 * 1024;
  size_t used = 0;
  for (;;) {
    if (bytes_.size() < used + kChunk) bytes_.resize(used + kChunk);
    const ssize_t n = read(fd.get(), bytes_.data() + used, kChunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return base::ErrnoToStatus(errno, "reading the task iterator");
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  out->reserve(used / sizeof(rs_process_counters));
  for (size_t at = 0; at + sizeof(rs_process_counters) <= used; at += sizeof(rs_process_counters)) {
    rs_process_counters r;
    std::memcpy(&r, bytes_.data() + at, sizeof(r));
    out->push_back({r.tgid, r.oom_score_adj, r.file_pages + r.anon_pages + r.shmem_pages,
                    r.file_pages, r.anon_pages, r.shmem_pages, r.swap_entries, r.total_vm,
                    r.locked_vm, r.hiwater_rss});
  }
  return absl::OkStatus();
}

}  // namespace ringside::bpf
