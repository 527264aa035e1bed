#ifndef RINGSIDE_TESTS_TESTING_BPF_RING_FILL_H_
#define RINGSIDE_TESTS_TESTING_BPF_RING_FILL_H_

#include <sys/types.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringside::testing {

// What the BPF ring buffers (BPF_MAP_TYPE_RINGBUF) that process `pid`
// holds have in them, read from the kernel's own positions: the bytes
// written and not yet consumed, summed over the rings, and how many rings.
struct BpfRingFill {
  int rings = 0;
  uint64_t unread_bytes = 0;
};
absl::StatusOr<BpfRingFill> ReadBpfRingFill(pid_t pid);

// Waits until every BPF ring of `pid` has been read to its end (the
// consumer position has reached the producer's), or `timeout` passes. For
// tests that need a reader to have caught up before their next phase,
// however slow the reader is on this machine (sanitizers, a CPU budget, a
// loaded host): a fixed sleep is not enough there.
absl::Status WaitUntilBpfRingsRead(pid_t pid, absl::Duration timeout);

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_BPF_RING_FILL_H_
