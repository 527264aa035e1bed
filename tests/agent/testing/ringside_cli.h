#ifndef RINGSIDE_TESTS_AGENT_TESTING_RINGSIDE_CLI_H_
#define RINGSIDE_TESTS_AGENT_TESTING_RINGSIDE_CLI_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "ringside/trace/trace.pb.h"

namespace ringside::agent::testing {

// A path in the test's temp dir, unique to this test process; removed (if
// it is a file) when the binary's tests end.
std::string TempPath(const std::string& name);

// Runs build/ringside with `args`, its stderr discarded. Returns its exit
// status (or -signal); with `wait` false, returns 0 at once and the caller
// reaps `*started`.
int RunRingside(const std::vector<std::string>& args, pid_t* started = nullptr, bool wait = true);

// The same, returning what it printed on stdout.
std::string RunRingsideCapture(const std::vector<std::string>& args, int* exit_code);

// Runs another program (`binary`, a path) the same way.
std::string RunProgramCapture(const std::string& binary, const std::vector<std::string>& args,
                              int* exit_code);

// The same, returning what it printed on stderr; with `uid`, run as that
// user (and group) with no supplementary groups, which needs root.
std::string RunRingsideCaptureStderr(const std::vector<std::string>& args, int* exit_code,
                                     uid_t uid = static_cast<uid_t>(-1));

// Parses a trace file, its compressed packets replaced by the packets they
// hold (a test failure if it does not parse).
trace::Trace ReadTraceFile(const std::string& path);

}  // namespace ringside::agent::testing

#endif  // RINGSIDE_TESTS_AGENT_TESTING_RINGSIDE_CLI_H_
