#include "base/owner_thread.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace ringside::base {

void OwnerThread::Fail(std::thread::id me, std::thread::id owner) const {
  std::ostringstream ids;
  ids << "thread " << me << " (task " << syscall(SYS_gettid) << "), owned by thread " << owner;
  std::fprintf(stderr,
               "ringside: internal error: %s used on %s; stopping before it is corrupted "
               "(docs/design/threading.md)\n",
               what_, ids.str().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace ringside::base
