#include "tests/agent/testing/scoped_env.h"

#include <stdlib.h>

#include <cstdio>

namespace ringside::agent::testing {

ScopedEnv::ScopedEnv(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const char* value = getenv(name.c_str());
    saved_[name] = value == nullptr ? std::nullopt : std::optional<std::string>(value);
    unsetenv(name.c_str());
  }
}

ScopedEnv::~ScopedEnv() {
  for (const auto& [name, value] : saved_) {
    if (value.has_value()) {
      setenv(name.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
}

void ScopedEnv::Set(const std::string& name, const std::string& value) {
  if (saved_.count(name) == 0) {
    std::fprintf(stderr, "ScopedEnv: %s is not restored by this ScopedEnv\n", name.c_str());
    abort();
  }
  setenv(name.c_str(), value.c_str(), 1);
}

}  // namespace ringside::agent::testing
