#include "agent/sources/cpu_budget.h"

#include <time.h>

#include <algorithm>
#include <utility>

namespace ringside::agent {
namespace {

absl::Duration ThreadCpuTime() {
  timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return absl::ZeroDuration();
  return absl::DurationFromTimespec(ts);
}

}  // namespace

CpuBudget::CpuBudget(uint32_t percent, absl::Duration burst, std::function<absl::Time()> now)
    : percent_(std::max<uint32_t>(percent, 1)),
      allowance_(burst * percent_ / 100),
      now_(now ? std::move(now) : [] { return absl::Now(); }) {
  last_drain_ = now_();
  stats_.percent = percent_;
}

absl::Duration CpuBudget::Charge(absl::Duration cpu_used) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  // What the budget gave back since the last charge.
  debt_ = std::max(absl::ZeroDuration(), debt_ - (now - last_drain_) * percent_ / 100);
  last_drain_ = now;
  debt_ += std::max(absl::ZeroDuration(), cpu_used);
  stats_.cpu_charged += std::max(absl::ZeroDuration(), cpu_used);
  if (debt_ <= allowance_) return absl::ZeroDuration();
  // Paused this long, the bucket drains back to the allowance.
  const absl::Duration pause = (debt_ - allowance_) * 100 / percent_;
  stats_.paused += pause;
  stats_.pauses++;
  return pause;
}

CpuBudget::Stats CpuBudget::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

CpuBudget::ThreadMeter::ThreadMeter() : last_(ThreadCpuTime()) {}

absl::Duration CpuBudget::ThreadMeter::TakeUsed() {
  const absl::Duration now = ThreadCpuTime();
  const absl::Duration used = now - last_;
  last_ = now;
  return used;
}

void ConsumerPacer::AfterPass(const std::atomic<bool>& stop,
                              const std::function<bool()>& cut_short) {
  if (!meter_.has_value()) meter_.emplace();
  const absl::Duration used = meter_->TakeUsed();
  cpu_ns_.fetch_add(absl::ToInt64Nanoseconds(used), std::memory_order_relaxed);
  if (budget_ == nullptr) return;
  const absl::Duration pause = budget_->Charge(used);
  if (pause <= absl::ZeroDuration()) return;
  pauses_.fetch_add(1, std::memory_order_relaxed);
  const absl::Time start = absl::Now();
  const absl::Time end = start + pause;
  for (absl::Time now = start;
       now < end && !stop.load(std::memory_order_acquire) && !(cut_short && cut_short());
       now = absl::Now()) {
    absl::SleepFor(std::min(end - now, absl::Milliseconds(10)));
  }
  paused_ns_.fetch_add(absl::ToInt64Nanoseconds(absl::Now() - start), std::memory_order_relaxed);
}

}  // namespace ringside::agent
