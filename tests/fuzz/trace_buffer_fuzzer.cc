// libFuzzer target: the input is a script of operations on one small
// TraceBuffer (commits by well-behaved and hostile producers, patches, reads,
// clones), checked after every operation by the buffer harness. See
// tests/buffer/testing/buffer_harness.h for the script and the invariants.

#include <cstdio>
#include <cstdlib>

#include "tests/buffer/testing/buffer_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringside::buffer::testing::HarnessOptions options;  // Buffer size from the script.
  const ringside::buffer::testing::HarnessResult result =
      ringside::buffer::testing::RunBufferScript(data, size, options);
  if (!result.ok) {
    std::fprintf(stderr, "trace_buffer_fuzzer: invariant broken: %s\n", result.failure.c_str());
    std::abort();
  }
  return 0;
}
