#ifndef RINGSIDE_AGENT_SOURCES_EVENT_WATCH_H_
#define RINGSIDE_AGENT_SOURCES_EVENT_WATCH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/scoped_fd.h"
#include "base/wakeable_epoll.h"
#include "ftrace/tracefs.h"

namespace ringside::agent {

// An event trigger's rule (trigger_config's `event`): fire `trigger` when
// the tracepoint `event` ("group/name") is hit and passes `filter`, in
// ftrace's own filter syntax ("nr_sector > 1024 && rwbs ~ \"*W*\"").
struct EventRule {
  std::string trigger;
  std::string event;
  std::string filter;

  bool operator==(const EventRule&) const = default;
};

// An event that passed a rule.
struct EventHit {
  std::string trigger;
  // The rule and the event as ftrace prints it: "sched/sched_process_exec
  // (filename ~ \"*true\"): sh-42 [001] filename=/bin/true pid=42
  // old_pid=42".
  std::string detail;
  int64_t boottime_ns = 0;
};

class EventListener {
 public:
  virtual ~EventListener() = default;
  // On the watch's thread: returns quickly, never waits for the session.
  virtual void OnEventHit(const EventHit& hit) = 0;
};

// The kernel's own filter on a tracepoint, in a tracefs instance of its
// own for each rule (instances/ringside-trigger-<id>, removed at the end,
// as the ftrace source's; a small buffer, trace_clock boot): the kernel
// drops every event the filter does not pass, and the watch's thread
// sleeps in epoll on the instances' trace_pipe until one comes. An event
// storm costs the thread one read a pass, and a pass at most every
// kMinPass: the events of a pass fire their trigger once (the trigger's
// limits do the rest), the others counted.
class EventWatch {
 public:
  static constexpr int64_t kMinPassMs = 100;

  // Sets every rule up it can and starts the thread; a rule it cannot (no
  // such event, a filter the kernel refuses: its own words) is named in
  // warnings(). Fails when tracefs cannot be opened, or nothing is left.
  static absl::StatusOr<std::unique_ptr<EventWatch>> Start(std::vector<EventRule> rules,
                                                           EventListener* listener);
  // With tracefs at hand (tests).
  static absl::StatusOr<std::unique_ptr<EventWatch>> Start(const ftrace::Tracefs& tracefs,
                                                           std::vector<EventRule> rules,
                                                           EventListener* listener);
  ~EventWatch();
  EventWatch(const EventWatch&) = delete;
  EventWatch& operator=(const EventWatch&) = delete;

  const std::vector<std::string>& warnings() const { return warnings_; }

  struct Stats {
    uint32_t watching = 0;  // Rules set up.
    uint32_t failed = 0;    // Rules that could not be.
    uint64_t hits = 0;      // Events that passed a filter.
    uint64_t fired = 0;     // Fires of their triggers (at most one a pass a rule).
  };
  Stats stats() const;

  // The time (seconds, as the line prints it under trace_clock boot) and
  // the text of one line of trace_pipe, "<task>-<pid> [cpu] flags
  // <time>: <event>: <fields>"; nullopt for a line that is not one.
  struct Line {
    int64_t boottime_ns = 0;
    std::string text;  // Task, CPU and fields, the flags and time left out.
  };
  static std::optional<Line> ParseLine(absl::string_view line);

 private:
  struct Watched {
    size_t rule = 0;
    std::unique_ptr<ftrace::Instance> instance;
    base::ScopedFd pipe;
    std::string partial;  // A line cut by the end of a read.
  };

  EventWatch(std::vector<EventRule> rules, EventListener* listener);
  std::optional<std::string> SetUp(const ftrace::Tracefs& tracefs, size_t rule);
  void Loop();
  void Read(Watched* w);

  const std::vector<EventRule> rules_;
  EventListener* const listener_;
  std::vector<std::string> warnings_;
  std::vector<Watched> watched_;
  std::unique_ptr<ftrace::Tracefs> mounted_;  // Tracefs mounted for us, unmounted at the end.
  base::WakeableEpoll epoll_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> fired_{0};
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_EVENT_WATCH_H_
