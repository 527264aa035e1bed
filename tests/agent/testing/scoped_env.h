#ifndef RINGSIDE_TESTS_AGENT_TESTING_SCOPED_ENV_H_
#define RINGSIDE_TESTS_AGENT_TESTING_SCOPED_ENV_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ringside::agent::testing {

// Environment variables a test sets, restored to what they were (set or
// unset) when it ends. The named variables start unset, so that a test run
// from a systemd unit or the journal does not see the runner's own
// NOTIFY_SOCKET or JOURNAL_STREAM. Not thread-safe, like setenv().
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::vector<std::string>& names);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

  // REQUIRES: `name` is one of the names given to the constructor.
  void Set(const std::string& name, const std::string& value);

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace ringside::agent::testing

#endif  // RINGSIDE_TESTS_AGENT_TESTING_SCOPED_ENV_H_
