#ifndef RINGSIDE_TESTS_TESTING_TEST_SIZE_H_
#define RINGSIDE_TESTS_TESTING_TEST_SIZE_H_

#include <cstdlib>
#include <cstring>

namespace ringside::testing {

// True under `make test-long` (RINGSIDE_LONG_TESTS=1): the slowest
// end-to-end scenarios then run at their full size. `make test` runs them at
// a smaller size that proves the same behaviour in a fraction of the time.
inline bool LongTests() {
  const char* v = std::getenv("RINGSIDE_LONG_TESTS");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

// `quick` under `make test`, `full` under `make test-long`.
template <typename T>
T TestSize(T quick, T full) {
  return LongTests() ? full : quick;
}

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_TEST_SIZE_H_
