#include "tests/testing/workloads.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ringside::testing {

std::vector<pid_t> StartPipeStorm(int pairs) {
  std::vector<pid_t> pids;
  for (int i = 0; i < pairs; i++) {
    int ab[2], ba[2];
    if (pipe(ab) != 0) break;
    if (pipe(ba) != 0) {
      close(ab[0]);
      close(ab[1]);
      break;
    }
    for (int side = 0; side < 2; side++) {
      const pid_t pid = fork();
      if (pid == 0) {
        const int in = side == 0 ? ba[0] : ab[0];
        const int out = side == 0 ? ab[1] : ba[1];
        char c = 0;
        if (side == 0 && write(out, &c, 1) != 1) _exit(1);
        while (read(in, &c, 1) == 1 && write(out, &c, 1) == 1) {
        }
        _exit(0);
      }
      if (pid > 0) pids.push_back(pid);
    }
    for (int fd : {ab[0], ab[1], ba[0], ba[1]}) close(fd);
  }
  return pids;
}

void StopProcesses(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
}

}  // namespace ringside::testing
