#ifndef RINGSIDE_BASE_BOOTTIME_H_
#define RINGSIDE_BASE_BOOTTIME_H_

#include <time.h>

#include <cstdint>

namespace ringside::base {

// CLOCK_BOOTTIME now, in ns: the trace's clock.
inline uint64_t BoottimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace ringside::base

#endif  // RINGSIDE_BASE_BOOTTIME_H_
