#ifndef RINGSIDE_TESTS_AGENT_TESTING_TRACE_PROCESSOR_QUERY_H_
#define RINGSIDE_TESTS_AGENT_TESTING_TRACE_PROCESSOR_QUERY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringside::agent::testing {

// Perfetto's trace_processor_shell: $TRACE_PROCESSOR, or ../shared/bin
// beside the source tree; empty if neither is there.
std::string TraceProcessorPath();

// Declares `var`, the trace processor's path, or skips the test naming
// what it needs.
#define RINGSIDE_REQUIRE_TRACE_PROCESSOR(var)                                       \
  const std::string var = ::ringside::agent::testing::TraceProcessorPath();         \
  if (var.empty()) {                                                                \
    GTEST_SKIP() << "needs Perfetto's trace_processor_shell ($TRACE_PROCESSOR, or " \
                    "../shared/bin/trace_processor_shell beside the source tree)";  \
  }

// Runs `sql` (one statement) on `trace`; rows of the CSV it prints, the
// header left out, quotes stripped (the queries return no commas in values).
std::vector<std::vector<std::string>> Query(const std::string& tp, const std::string& trace,
                                            const std::string& sql);
// A query of one number; a test failure (and -1) otherwise.
int64_t QueryInt(const std::string& tp, const std::string& trace, const std::string& sql);

}  // namespace ringside::agent::testing

#endif  // RINGSIDE_TESTS_AGENT_TESTING_TRACE_PROCESSOR_QUERY_H_
