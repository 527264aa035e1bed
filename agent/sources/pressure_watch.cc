#include "agent/sources/pressure_watch.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/sources/proc_counters.h"
#include "base/boottime.h"
#include "base/status.h"
#include "base/wakeable_epoll.h"

namespace ringside::agent {
namespace {

// The file's text now, read again from its start ("" on an error).
std::string ReadFromStart(int fd) {
  char buf[512];
  const ssize_t n = pread(fd, buf, sizeof(buf), 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Whether this thread's effective set has CAP_SYS_RESOURCE, which the
// kernel asks of a window that is not a multiple of 2 s.
bool HasCapSysResource() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_SYS_RESOURCE / 32].effective & (1u << (CAP_SYS_RESOURCE % 32))) != 0;
}

}  // namespace

std::string PressureWatch::TriggerText(const PressureRule& rule) {
  return absl::StrCat(rule.full ? "full" : "some", " ", rule.stall_us, " ", rule.window_us);
}

PressureWatch::PressureWatch(std::vector<PressureRule> rules, PressureListener* listener,
                             Options options)
    : rules_(std::move(rules)), listener_(listener), options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<PressureWatch>> PressureWatch::Start(std::vector<PressureRule> rules,
                                                                    PressureListener* listener,
                                                                    Options options) {
  std::unique_ptr<PressureWatch> w(
      new PressureWatch(std::move(rules), listener, std::move(options)));
  absl::StatusOr<base::WakeableEpoll> epoll = base::WakeableEpoll::Make();
  if (!epoll.ok()) return epoll.status();
  w->epoll_ = *std::move(epoll);
  for (size_t r = 0; r < w->rules_.size(); r++) {
    const PressureRule& rule = w->rules_[r];
    if (rule.cgroups.empty()) {
      w->targets_.push_back(
          Target{r, "", absl::StrCat(w->options_.proc, "/pressure/", rule.resource), {}, ""});
    }
    for (const std::string& cg : rule.cgroups) {
      w->targets_.push_back(Target{r,
                                   cg,
                                   absl::StrCat(w->options_.cgroup2_mount, cg == "/" ? "" : cg, "/",
                                                rule.resource, ".pressure"),
                                   {},
                                   ""});
    }
  }
  for (Target& t : w->targets_) w->Arm(&t);
  w->thread_ = std::thread([p = w.get()] { p->Loop(); });
  return w;
}

PressureWatch::~PressureWatch() {
  if (thread_.joinable()) {
    stop_.store(true);
    epoll_.Wake();
    thread_.join();
  }
}

void PressureWatch::Warn(Target* t, const std::string& why) {
  if (why == t->last_error) return;
  t->last_error = why;
  const PressureRule& rule = rules_[t->rule];
  absl::MutexLock lock(&mu_);
  warnings_.push_back(
      absl::StrCat("trigger ", rule.trigger, ": ",
                   t->cgroup.empty() ? "the machine's" : "cgroup " + t->cgroup + "'s", " ",
                   rule.resource, " pressure is not watched: ", why));
}

bool PressureWatch::Arm(Target* t) {
  const PressureRule& rule = rules_[t->rule];
  if (!t->cgroup.empty() && options_.cgroup2_mount.empty()) {
    Warn(t, "cgroup2 is not mounted");
    return false;
  }
  base::ScopedFd fd(open(t->path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    if (err == ENOENT && !t->cgroup.empty()) {
      Warn(t, absl::StrCat("no such cgroup yet (", t->path, "); watched once it is there"));
    } else if (err == ENOENT) {
      Warn(t, absl::StrCat(t->path,
                           " is missing: a kernel without CONFIG_PSI, or one built with "
                           "CONFIG_PSI_DEFAULT_DISABLED (Debian's, RHEL's) and booted without "
                           "psi=1"));
    } else {
      Warn(t, absl::StrCat("cannot open ", t->path, ": ", std::strerror(err)));
    }
    return false;
  }
  // The kernel reads the text up to its NUL.
  const std::string text = TriggerText(rule);
  if (write(fd.get(), text.c_str(), text.size() + 1) < 0) {
    const int err = errno;
    std::string why =
        absl::StrCat("the kernel refuses '", text, "' in ", t->path, ": ", std::strerror(err));
    if (err == EINVAL && rule.full && rule.resource == "cpu") {
      absl::StrAppend(&why, " (full CPU pressure needs Linux 5.13)");
    } else if ((err == EINVAL || err == EPERM) && rule.window_us % 2000000 != 0) {
      absl::StrAppend(&why,
                      " (a window that is not a multiple of 2000 ms needs CAP_SYS_RESOURCE on "
                      "Linux 6.5 and later, which this process ",
                      HasCapSysResource() ? "had not when it opened the file: the agent opens "
                                            "them at its start, before it drops its privileges"
                                          : "has not",
                      ")");
    }
    Warn(t, why);
    return false;
  }
  if (absl::Status st = epoll_.Add(fd.get(), EPOLLPRI, static_cast<uint64_t>(t - targets_.data()));
      !st.ok()) {
    Warn(t, std::string(st.message()));
    return false;
  }
  t->fd = std::move(fd);
  t->last_error.clear();
  watching_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void PressureWatch::Disarm(Target* t) {
  (void)epoll_ctl(epoll_.epoll.get(), EPOLL_CTL_DEL, t->fd.get(), nullptr);
  t->fd = base::ScopedFd();
  // Release: a reader that sees the count drop sees the warning before it.
  watching_.fetch_sub(1, std::memory_order_release);
}

void PressureWatch::Fire(Target* t) {
  const PressureRule& rule = rules_[t->rule];
  const int64_t now = static_cast<int64_t>(base::BoottimeNs());
  const Pressure p = ParsePressure(ReadFromStart(t->fd.get()));
  const std::optional<PressureLine>& line = rule.full ? p.full : p.some;
  std::string detail =
      absl::StrFormat("%s %s >= %u ms in %u ms of %s", rule.resource, rule.full ? "full" : "some",
                      rule.stall_us / 1000, rule.window_us / 1000,
                      t->cgroup.empty() ? std::string("the machine") : "cgroup " + t->cgroup);
  if (line.has_value()) {
    absl::StrAppendFormat(&detail, ": avg10 %.2f%%, avg60 %.2f%%, total %.3f s", line->avg10,
                          line->avg60, static_cast<double>(line->total_us) / 1e6);
  }
  events_.fetch_add(1, std::memory_order_relaxed);
  listener_->OnPressure(PressureEvent{rule.trigger, std::move(detail), now});
}

void PressureWatch::Loop() {
  pthread_setname_np(pthread_self(), "rs-pressure");
  absl::Time next_retry = absl::Now() + options_.retry_period;
  while (!stop_.load()) {
    epoll_event events[16];
    const int64_t wait_ms =
        std::max<int64_t>(0, absl::ToInt64Milliseconds(next_retry - absl::Now()));
    const int n = epoll_wait(epoll_.epoll.get(), events, 16, static_cast<int>(wait_ms) + 1);
    for (int i = 0; i < n && !stop_.load(); i++) {
      if (events[i].data.u64 == base::WakeableEpoll::kWakeToken) continue;
      Target* t = &targets_[events[i].data.u64];
      if (!t->fd.valid()) continue;
      if (events[i].events & EPOLLERR) {
        // The cgroup was removed: watched again if it comes back. Said
        // before it counts as not watched, so that whoever sees the count
        // drop (status, a test) finds the reason already there.
        Warn(t, "its cgroup was removed; watched again once it is back");
        Disarm(t);
        continue;
      }
      if (events[i].events & EPOLLPRI) Fire(t);
    }
    if (absl::Now() >= next_retry) {
      for (Target& t : targets_) {
        if (!t.fd.valid()) Arm(&t);
      }
      next_retry = absl::Now() + options_.retry_period;
    }
  }
}

std::vector<std::string> PressureWatch::TakeWarnings() {
  absl::MutexLock lock(&mu_);
  return std::exchange(warnings_, {});
}

PressureWatch::Stats PressureWatch::stats() const {
  const uint32_t watching = watching_.load(std::memory_order_acquire);
  return {events_.load(std::memory_order_relaxed), watching,
          static_cast<uint32_t>(targets_.size()) - watching};
}

}  // namespace ringside::agent
