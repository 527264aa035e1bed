// libFuzzer target: the input is a whole trace file, any bytes, as a user
// may hand to `ringside inspect`. It is read, summarized and rendered as
// text and as JSON; nothing may crash, whatever the lengths, nesting or
// string bytes inside.

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/tracefile/trace_inspector.h"
#include "google/protobuf/stubs/logging.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One in-memory file, rewritten for each input; the reader opens it by
  // path like any file.
  static const int fd = [] {
    google::protobuf::SetLogHandler(nullptr);  // Its UTF-8 complaints, per string.
    return memfd_create("trace", MFD_CLOEXEC);
  }();
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0) std::abort();
  if (size > 0 && pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
  absl::StatusOr<ringside::agent::TraceSummary> summary = ringside::agent::InspectTraceFile(path);
  if (!summary.ok()) std::abort();  // A readable file always yields a summary.
  const std::string text = ringside::agent::SummaryToText(path, *summary);
  const std::string json = ringside::agent::SummaryToJsonText(path, *summary);
  if (text.empty() || json.empty()) std::abort();
  return 0;
}
