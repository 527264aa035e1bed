#ifndef RINGSIDE_AGENT_LIFECYCLE_AGENT_LOG_H_
#define RINGSIDE_AGENT_LIFECYCLE_AGENT_LOG_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ringside::agent {

// Syslog priorities, as journald reads them from a "<N>" line prefix.
enum class LogLevel { kError = 3, kWarning = 4, kNotice = 5, kInfo = 6, kDebug = 7 };

// The agent's log: lines on stderr (or another fd), in the form whoever
// reads them understands.
//
// Under systemd, stderr is a journal stream (JOURNAL_STREAM names its
// device:inode, as sd-daemon(3) documents): each line is "<N>message",
// journald takes the priority from the prefix and adds time and identity.
// Anywhere else (a terminal, a file, a container runtime's log) each line is
//
//   2024-01-02T03:04:05.678Z ringside agent: warning: message
//
// with the time in UTC. A message with newlines becomes several lines, each
// with the prefix, so that no line loses its level.
//
// The agent logs what changes (a source attached or failed, a snapshot
// written), never a line per event; LogLimited() bounds messages a peer or
// the environment could repeat.
//
// Thread-safe: each call is one write() of whole lines, so lines from
// different threads never mix.
class AgentLog {
 public:
  // Logs to `fd` (not owned), dropping lines less severe than `min_level`.
  explicit AgentLog(int fd = 2, LogLevel min_level = LogLevel::kInfo);
  // The same, with the time taken from `clock` (for the timestamps and the
  // rate limit).
  AgentLog(int fd, LogLevel min_level, std::function<absl::Time()> clock);
  AgentLog(const AgentLog&) = delete;
  AgentLog& operator=(const AgentLog&) = delete;

  void Log(LogLevel level, absl::string_view message);
  void Error(absl::string_view message) { Log(LogLevel::kError, message); }
  void Warning(absl::string_view message) { Log(LogLevel::kWarning, message); }
  void Notice(absl::string_view message) { Log(LogLevel::kNotice, message); }
  void Info(absl::string_view message) { Log(LogLevel::kInfo, message); }
  void Debug(absl::string_view message) { Log(LogLevel::kDebug, message); }

  // Log(), at most `burst` lines per `key` per `window` (a fixed window that
  // starts with the first line logged for the key). What is held back is
  // counted, and the next line logged for that key ends with
  // "(N similar messages suppressed)". Lines below min_level neither log
  // nor count. At most kMaxRateLimitKeys keys are tracked; beyond that,
  // new keys share one limit.
  void LogLimited(LogLevel level, absl::string_view key, absl::string_view message, int burst = 5,
                  absl::Duration window = absl::Minutes(1));

  // True when `fd` is the journal stream named by JOURNAL_STREAM (read at
  // construction).
  bool journald() const { return journald_; }
  LogLevel min_level() const { return min_level_; }

  static constexpr size_t kMaxRateLimitKeys = 1024;
  size_t rate_limit_keys_for_testing() const;

 private:
  struct RateLimit {
    absl::Time window_start = absl::InfinitePast();
    absl::Duration window;
    int logged = 0;
    int64_t suppressed = 0;
  };

  bool Wanted(LogLevel level) const;
  std::string Format(LogLevel level, absl::string_view message, absl::Time now) const;
  void WriteLocked(const std::string& lines) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  RateLimit& LimitFor(absl::string_view key, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int fd_;
  const LogLevel min_level_;
  const std::function<absl::Time()> clock_;
  const bool journald_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, RateLimit> limits_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_LIFECYCLE_AGENT_LOG_H_
