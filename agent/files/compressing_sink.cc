#include "agent/files/compressing_sink.h"

#include <time.h>

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
  bytes_in_ += packets.size();
  bytes_out_ += compressed_.size();
  cpu_ns_ += cpu;
  return absl::OkStatus();
}

}  // namespace ringside::agent
