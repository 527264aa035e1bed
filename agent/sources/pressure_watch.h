#ifndef RINGSIDE_AGENT_SOURCES_PRESSURE_WATCH_H_
#define RINGSIDE_AGENT_SOURCES_PRESSURE_WATCH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/scoped_fd.h"
#include "base/wakeable_epoll.h"

namespace ringside::agent {

// A pressure trigger's threshold (trigger_config's `pressure`), as the
// kernel's PSI triggers take it: fire `trigger` when tasks stalled on
// `resource` for `stall_us` or more within a `window_us` window.
struct PressureRule {
  std::string trigger;
  std::string resource;  // "cpu", "memory" or "io": the file's name.
  bool full = false;     // The "full" line rather than "some".
  uint32_t stall_us = 0;
  uint32_t window_us = 0;
  // Cgroup v2 paths below the cgroup2 mount ("/system.slice/x.service"),
  // each watched apart; empty: the machine's /proc/pressure.
  std::vector<std::string> cgroups;

  bool operator==(const PressureRule&) const = default;
};

// The kernel said a threshold was crossed.
struct PressureEvent {
  std::string trigger;
  // What fired and what the file said then: "memory some >= 150 ms in
  // 1000 ms of cgroup /x: avg10 12.40%, avg60 3.10%, total 4.512 s".
  std::string detail;
  int64_t boottime_ns = 0;
};

// Told of each event on the watch's thread: returns quickly, never waits
// for the session.
class PressureListener {
 public:
  virtual ~PressureListener() = default;
  virtual void OnPressure(const PressureEvent& event) = 0;
};

// The kernel's PSI triggers for a config's pressure rules, and one thread
// that sleeps in epoll until the kernel wakes it with one (EPOLLPRI): an
// event costs nothing until it happens, and the kernel sends at most one a
// window. Each rule is written into its file ("some 150000 1000000"): the
// machine's /proc/pressure/<resource>, or each of its cgroups'
// <resource>.pressure. A cgroup that does not exist yet, or that is
// removed while watched (EPOLLERR), is looked for again every
// `retry_period` and watched once it is there.
//
// The kernel takes a window that is not a multiple of 2 s only from a
// process with CAP_SYS_RESOURCE when it opens the file (Linux 6.5 and
// later): the agent opens the files at start, before it drops its
// privileges; a cgroup that appears later with such a window cannot be
// watched, and warnings() says so.
class PressureWatch {
 public:
  struct Options {
    std::string proc = "/proc";
    // Where cgroup2 is mounted ("" when it is not: cgroup rules wait).
    std::string cgroup2_mount;
    absl::Duration retry_period = absl::Seconds(5);
  };

  // Arms every rule it can and starts the thread. Fails only when the
  // epoll or eventfd cannot be made; a rule that cannot be armed is named
  // in warnings(), and the others are watched.
  static absl::StatusOr<std::unique_ptr<PressureWatch>> Start(std::vector<PressureRule> rules,
                                                              PressureListener* listener,
                                                              Options options);
  ~PressureWatch();
  PressureWatch(const PressureWatch&) = delete;
  PressureWatch& operator=(const PressureWatch&) = delete;

  // Why a rule, or one of its cgroups, is not watched (at start, and each
  // new reason found while retrying), oldest first; thread-safe.
  std::vector<std::string> TakeWarnings();

  struct Stats {
    uint64_t events = 0;    // Thresholds the kernel said were crossed.
    uint32_t watching = 0;  // Files armed now.
    uint32_t waiting = 0;   // Files not armed now (a cgroup still to come, an error).
  };
  Stats stats() const;

  // The text written into a pressure file for `rule` ("full 150000 1000000").
  static std::string TriggerText(const PressureRule& rule);

 private:
  struct Target {
    size_t rule = 0;
    std::string cgroup;  // "" for the machine.
    std::string path;    // The pressure file.
    base::ScopedFd fd;
    std::string last_error;  // Said once, until it changes.
  };

  PressureWatch(std::vector<PressureRule> rules, PressureListener* listener, Options options);
  // Opens and arms `t` and adds it to the epoll; false (with a warning when
  // the reason is new) when it cannot.
  bool Arm(Target* t);
  void Disarm(Target* t);
  void Loop();
  void Fire(Target* t);
  void Warn(Target* t, const std::string& why);

  const std::vector<PressureRule> rules_;
  PressureListener* const listener_;
  const Options options_;
  std::vector<Target> targets_;  // The watch thread's, after Start().
  base::WakeableEpoll epoll_;    // Its wake: the destructor stops the thread.
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> events_{0};
  std::atomic<uint32_t> watching_{0};

  mutable absl::Mutex mu_;
  std::vector<std::string> warnings_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_PRESSURE_WATCH_H_
