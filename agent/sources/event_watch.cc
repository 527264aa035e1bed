#include "agent/sources/event_watch.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status.h"
#include "base/wakeable_epoll.h"

namespace ringside::agent {
namespace {

// Each rule's kernel buffer, per CPU: a filter passes few events, and those
// the watch has no time for are only counted by the kernel.
constexpr uint32_t kBufferKbPerCpu = 64;
// The detail of a fire is cut here: a trace_stats string, not a log.
constexpr size_t kMaxDetailBytes = 400;

// "1234.567890" (seconds, 6 to 9 digits after the point) into ns.
std::optional<int64_t> SecondsToNs(absl::string_view s) {
  const size_t dot = s.find('.');
  if (dot == absl::string_view::npos || dot == 0) return std::nullopt;
  absl::string_view frac = s.substr(dot + 1);
  int64_t sec = 0, f = 0;
  if (frac.empty() || frac.size() > 9 || !absl::SimpleAtoi(s.substr(0, dot), &sec) ||
      !absl::SimpleAtoi(frac, &f) || !absl::ascii_isdigit(static_cast<unsigned char>(s[0]))) {
    return std::nullopt;
  }
  for (size_t i = frac.size(); i < 9; i++) f *= 10;
  return sec * 1000000000 + f;
}

std::string Printable(absl::string_view s) {
  std::string out;
  for (char c : s.substr(0, kMaxDetailBytes)) {
    out += absl::ascii_isprint(static_cast<unsigned char>(c)) ? c : '?';
  }
  return out;
}

}  // namespace

std::optional<EventWatch::Line> EventWatch::ParseLine(absl::string_view line) {
  // The time is the first word ending in ':' that reads as seconds.
  for (size_t colon = line.find(": "); colon != absl::string_view::npos;
       colon = line.find(": ", colon + 1)) {
    const size_t space = line.rfind(' ', colon);
    const size_t start = space == absl::string_view::npos ? 0 : space + 1;
    const std::optional<int64_t> ns = SecondsToNs(line.substr(start, colon - start));
    if (!ns.has_value()) continue;
    // Before it: the task, its CPU and the flags (the word before the
    // time), which are left out.
    absl::string_view head = absl::StripAsciiWhitespace(line.substr(0, start));
    const size_t last = head.rfind(' ');
    if (last != absl::string_view::npos && !absl::EndsWith(head, "]")) head = head.substr(0, last);
    head = absl::StripAsciiWhitespace(head);
    return Line{*ns, absl::StrCat(head, " ", absl::StripAsciiWhitespace(line.substr(colon + 2)))};
  }
  return std::nullopt;
}

EventWatch::EventWatch(std::vector<EventRule> rules, EventListener* listener)
    : rules_(std::move(rules)), listener_(listener) {}

absl::StatusOr<std::unique_ptr<EventWatch>> EventWatch::Start(std::vector<EventRule> rules,
                                                              EventListener* listener) {
  absl::StatusOr<ftrace::Tracefs> tracefs = ftrace::Tracefs::Open();
  if (!tracefs.ok()) return tracefs.status();
  absl::StatusOr<std::unique_ptr<EventWatch>> w = Start(*tracefs, std::move(rules), listener);
  if (w.ok() && tracefs->mounted_by_us()) {
    (*w)->mounted_ = std::make_unique<ftrace::Tracefs>(*std::move(tracefs));
  } else if (tracefs->mounted_by_us()) {
    (void)tracefs->Unmount();
  }
  return w;
}

absl::StatusOr<std::unique_ptr<EventWatch>> EventWatch::Start(const ftrace::Tracefs& tracefs,
                                                              std::vector<EventRule> rules,
                                                              EventListener* listener) {
  std::unique_ptr<EventWatch> w(new EventWatch(std::move(rules), listener));
  absl::StatusOr<base::WakeableEpoll> epoll = base::WakeableEpoll::Make();
  if (!epoll.ok()) return epoll.status();
  w->epoll_ = *std::move(epoll);
  for (size_t r = 0; r < w->rules_.size(); r++) {
    if (std::optional<std::string> why = w->SetUp(tracefs, r); why.has_value()) {
      w->warnings_.push_back(absl::StrCat("trigger ", w->rules_[r].trigger, ": event ",
                                          w->rules_[r].event, " is not watched: ", *why));
    }
  }
  if (w->watched_.empty()) {
    return absl::FailedPreconditionError(w->warnings_.empty() ? "no event rule"
                                                              : w->warnings_.front());
  }
  for (size_t i = 0; i < w->watched_.size(); i++) {
    if (absl::Status st = w->epoll_.Add(w->watched_[i].pipe.get(), EPOLLIN, i); !st.ok()) {
      return st;
    }
  }
  w->thread_ = std::thread([p = w.get()] { p->Loop(); });
  return w;
}

std::optional<std::string> EventWatch::SetUp(const ftrace::Tracefs& tracefs, size_t rule) {
  const EventRule& r = rules_[rule];
  absl::StatusOr<std::unique_ptr<ftrace::Instance>> instance =
      ftrace::Instance::Create(tracefs, "trigger");
  if (!instance.ok()) return std::string(instance.status().message());
  ftrace::Instance& in = **instance;
  if (absl::StatusOr<uint32_t> kb = in.SetBufferSizeKb(kBufferKbPerCpu); !kb.ok()) {
    return std::string(kb.status().message());
  }
  if (absl::StatusOr<std::string> clock = in.SetTraceClock("boot"); !clock.ok()) {
    return std::string(clock.status().message());
  }
  const ftrace::Instance::EnableResult enabled = in.EnableEvents({{r.event, r.filter}});
  if (!enabled.unknown.empty()) return absl::StrCat("this kernel has no event ", r.event);
  if (!enabled.failed.empty()) return std::string(enabled.failed.front().second.message());
  if (enabled.enabled.empty()) return absl::StrCat("no event enabled for ", r.event);
  base::ScopedFd pipe(open((in.path() + "/trace_pipe").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!pipe.valid()) return absl::StrCat(in.path(), "/trace_pipe: ", std::strerror(errno));
  if (absl::Status on = in.SetTracingOn(true); !on.ok()) return std::string(on.message());
  watched_.push_back(Watched{rule, std::move(*instance), std::move(pipe), ""});
  return std::nullopt;
}

EventWatch::~EventWatch() {
  if (thread_.joinable()) {
    stop_.store(true);
    epoll_.Wake();
    thread_.join();
  }
  // The instances go (tracing off, removed) before tracefs is unmounted.
  watched_.clear();
  if (mounted_ != nullptr) (void)mounted_->Unmount();
}

void EventWatch::Read(Watched* w) {
  const EventRule& rule = rules_[w->rule];
  std::optional<Line> first;
  char buf[16384];
  for (int reads = 0; reads < 64; reads++) {
    const ssize_t n = read(w->pipe.get(), buf, sizeof(buf));
    if (n <= 0) break;
    w->partial.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = w->partial.find('\n')) != std::string::npos) {
      const std::optional<Line> line = ParseLine(absl::string_view(w->partial).substr(0, nl));
      if (line.has_value()) {
        hits_.fetch_add(1, std::memory_order_relaxed);
        if (!first.has_value()) first = line;
      }
      w->partial.erase(0, nl + 1);
    }
    // A line longer than any event's: not one, dropped.
    if (w->partial.size() > sizeof(buf)) w->partial.clear();
  }
  if (!first.has_value()) return;
  fired_.fetch_add(1, std::memory_order_relaxed);
  listener_->OnEventHit(EventHit{
      rule.trigger,
      Printable(absl::StrCat(rule.event, rule.filter.empty() ? "" : " (" + rule.filter + ")", ": ",
                             first->text)),
      first->boottime_ns});
}

void EventWatch::Loop() {
  pthread_setname_np(pthread_self(), "rs-eventwatch");
  while (!stop_.load()) {
    epoll_event events[16];
    const int n = epoll_wait(epoll_.epoll.get(), events, 16, -1);
    for (int i = 0; i < n && !stop_.load(); i++) {
      if (events[i].data.u64 == base::WakeableEpoll::kWakeToken) continue;
      Read(&watched_[events[i].data.u64]);
    }
    // A storm of matching events costs a read every kMinPassMs at most.
    if (!stop_.load()) absl::SleepFor(absl::Milliseconds(kMinPassMs));
  }
}

EventWatch::Stats EventWatch::stats() const {
  return {static_cast<uint32_t>(watched_.size()),
          static_cast<uint32_t>(rules_.size() - watched_.size()),
          hits_.load(std::memory_order_relaxed), fired_.load(std::memory_order_relaxed)};
}

}  // namespace ringside::agent
