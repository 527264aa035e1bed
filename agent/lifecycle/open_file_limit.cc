#include "agent/lifecycle/open_file_limit.h"

#include <algorithm>

namespace ringside::agent {

rlim_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  const rlim_t wanted = std::min(limit.rlim_max, kAgentOpenFiles);
  if (limit.rlim_cur >= wanted) return limit.rlim_cur;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = wanted;
  return setrlimit(RLIMIT_NOFILE, &limit) == 0 ? wanted : before;
}

}  // namespace ringside::agent
