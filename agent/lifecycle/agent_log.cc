#include "agent/lifecycle/agent_log.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/file_io.h"

namespace ringside::agent {
namespace {

// Where new keys go once kMaxRateLimitKeys are tracked; no caller's key
// starts with a NUL.
constexpr absl::string_view kOverflowKey("\0overflow", 9);

// True when JOURNAL_STREAM ("<device>:<inode>", decimal) is the file `fd`
// is open on: our stderr is then connected to journald, not merely
// inherited from a process that was.
bool IsJournalStream(int fd) {
  const char* env = getenv("JOURNAL_STREAM");
  if (env == nullptr) return false;
  std::vector<absl::string_view> parts = absl::StrSplit(env, ':');
  uint64_t dev = 0;
  uint64_t ino = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &dev) || !absl::SimpleAtoi(parts[1], &ino)) {
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  return static_cast<uint64_t>(st.st_dev) == dev && static_cast<uint64_t>(st.st_ino) == ino;
}

absl::string_view LevelWord(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kNotice:
      return "notice";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "unknown";
}

}  // namespace

AgentLog::AgentLog(int fd, LogLevel min_level) : AgentLog(fd, min_level, &absl::Now) {}

AgentLog::AgentLog(int fd, LogLevel min_level, std::function<absl::Time()> clock)
    : fd_(fd), min_level_(min_level), clock_(std::move(clock)), journald_(IsJournalStream(fd)) {}

bool AgentLog::Wanted(LogLevel level) const {
  return static_cast<int>(level) <= static_cast<int>(min_level_);
}

std::string AgentLog::Format(LogLevel level, absl::string_view message, absl::Time now) const {
  const std::string prefix =
      journald_ ? absl::StrCat("<", static_cast<int>(level), ">")
                : absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", now, absl::UTCTimeZone()),
                               " ringside agent: ", LevelWord(level), ": ");
  while (!message.empty() && message.back() == '\n') message.remove_suffix(1);
  std::string lines;
  for (absl::string_view line : absl::StrSplit(message, '\n')) {
    absl::StrAppend(&lines, prefix, line, "\n");
  }
  return lines;
}

void AgentLog::WriteLocked(const std::string& lines) {
  // Nowhere to report a log that cannot be written (EPIPE, EAGAIN on a
  // non-blocking stderr, a full disk): the rest of it is dropped.
  (void)base::WriteAll(fd_, lines);
}

void AgentLog::Log(LogLevel level, absl::string_view message) {
  if (!Wanted(level)) return;
  const std::string lines = Format(level, message, clock_());
  absl::MutexLock lock(&mu_);
  WriteLocked(lines);
}

AgentLog::RateLimit& AgentLog::LimitFor(absl::string_view key, absl::Time now) {
  if (auto it = limits_.find(key); it != limits_.end()) return it->second;
  if (limits_.size() >= kMaxRateLimitKeys) {
    // Keys whose window is over and that hold back nothing carry no state
    // worth keeping.
    absl::erase_if(limits_, [now](const auto& entry) {
      const RateLimit& limit = entry.second;
      return limit.suppressed == 0 && now - limit.window_start >= limit.window;
    });
    if (limits_.size() >= kMaxRateLimitKeys) key = kOverflowKey;
  }
  return limits_[key];
}

void AgentLog::LogLimited(LogLevel level, absl::string_view key, absl::string_view message,
                          int burst, absl::Duration window) {
  if (!Wanted(level)) return;
  const absl::Time now = clock_();
  absl::MutexLock lock(&mu_);
  RateLimit& limit = LimitFor(key, now);
  limit.window = window;
  if (now - limit.window_start >= window) {
    limit.window_start = now;
    limit.logged = 0;
  }
  if (limit.logged >= burst) {
    ++limit.suppressed;
    return;
  }
  ++limit.logged;
  if (limit.suppressed == 0) {
    WriteLocked(Format(level, message, now));
    return;
  }
  while (!message.empty() && message.back() == '\n') message.remove_suffix(1);
  WriteLocked(Format(
      level, absl::StrCat(message, " (", limit.suppressed, " similar messages suppressed)"), now));
  limit.suppressed = 0;
}

size_t AgentLog::rate_limit_keys_for_testing() const {
  absl::MutexLock lock(&mu_);
  return limits_.size();
}

}  // namespace ringside::agent
