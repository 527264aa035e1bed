#include "agent/output/compressing_sink.h"

#include <time.h>

#include "absl/strings/str_cat.h"

namespace ringside::agent {
namespace {

uint64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

absl::Status CompressingSink::Write(absl::string_view packets) {
  compressed_.clear();
  const uint64_t start = ThreadCpuNs();
  const absl::Status compressed =
      compressor_->Compress(std::string_view(packets.data(), packets.size()), &compressed_);
  const uint64_t cpu = ThreadCpuNs() - start;
  if (!compressed.ok()) return compressed;
  if (absl::Status st = inner_->Write(compressed_); !st.ok()) return st;
  bytes_in_.fetch_add(packets.size(), std::memory_order_relaxed);
  bytes_out_.fetch_add(compressed_.size(), std::memory_order_relaxed);
  cpu_ns_.fetch_add(cpu, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status CompressingSink::NextFile() {
  if (rotating_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(inner_->display_name(), " is one file, not a stream of files"));
  }
  return rotating_->NextFile();
}

}  // namespace ringside::agent
