#include "agent/session/cpu_hotplug_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/scoped_fd.h"

namespace ringside::agent {
namespace {

// Far above any CPU count, so that a bogus range cannot make a huge set.
constexpr int kMaxCpu = 1 << 16;

}  // namespace

std::optional<std::set<int>> ParseCpuList(absl::string_view text_untrusted) {
  std::set<int> cpus;
  const absl::string_view text = absl::StripAsciiWhitespace(text_untrusted);
  if (text.empty()) return cpus;  // No CPU online: an empty list.
  for (absl::string_view range : absl::StrSplit(text, ',')) {
    const std::pair<absl::string_view, absl::string_view> ends =
        absl::StrSplit(range, absl::MaxSplits('-', 1));
    int first = 0, last = 0;
    if (!absl::SimpleAtoi(ends.first, &first)) return std::nullopt;
    last = first;
    if (range.find('-') != absl::string_view::npos && !absl::SimpleAtoi(ends.second, &last)) {
      return std::nullopt;
    }
    if (first < 0 || last < first || last > kMaxCpu) return std::nullopt;
    for (int cpu = first; cpu <= last; cpu++) cpus.insert(cpu);
  }
  return cpus;
}

CpuHotplugWatch::CpuHotplugWatch(std::string online_path) : online_path_(std::move(online_path)) {
  if (ReadText()) online_ = ParseCpuList(text_);
}

bool CpuHotplugWatch::ReadText() {
  if (!fd_.valid()) fd_.reset(open(online_path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd_.valid()) return false;
  char buf[4096];
  const ssize_t n = pread(fd_.get(), buf, sizeof(buf), 0);
  if (n < 0 || static_cast<size_t>(n) == sizeof(buf)) {
    fd_.reset();  // Opened again next time.
    text_.clear();
    return false;
  }
  text_.assign(buf, static_cast<size_t>(n));
  return true;
}

std::vector<std::string> CpuHotplugWatch::Poll() {
  std::vector<std::string> lines;
  const std::string before = text_;
  if (!ReadText() || (online_.has_value() && text_ == before)) return lines;
  std::optional<std::set<int>> now = ParseCpuList(text_);
  if (!now.has_value()) return lines;
  if (online_.has_value()) {
    for (int cpu : *online_) {
      if (now->count(cpu) == 0) {
        lines.push_back(absl::StrCat("CPU ", cpu,
                                     " went offline: nothing runs there to record until it is "
                                     "back; the other CPUs record on"));
      }
    }
    for (int cpu : *now) {
      if (online_->count(cpu) == 0) {
        lines.push_back(absl::StrCat("CPU ", cpu, " came online: recording on it"));
      }
    }
  }
  online_ = std::move(now);
  return lines;
}

}  // namespace ringside::agent
