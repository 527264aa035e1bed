#include "tests/testing/bpf_ring_fill.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <linux/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace ringside::testing {
namespace {

// The ids of the BPF_MAP_TYPE_RINGBUF maps among `pid`'s fds (fdinfo's
// map_type and map_id lines).
absl::StatusOr<std::set<uint32_t>> RingMapIds(pid_t pid) {
  const std::string dir = absl::StrCat("/proc/", pid, "/fdinfo");
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return absl::NotFoundError(absl::StrCat(dir, ": no such process"));
  std::set<uint32_t> ids;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream info(absl::StrCat(dir, "/", e->d_name));
    std::string line;
    uint32_t type = 0, id = 0;
    bool have_type = false, have_id = false;
    while (std::getline(info, line)) {
      absl::string_view rest = line;
      if (absl::ConsumePrefix(&rest, "map_type:")) {
        have_type = absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &type);
      } else if (absl::ConsumePrefix(&rest, "map_id:")) {
        have_id = absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &id);
      }
    }
    if (have_type && have_id && type == BPF_MAP_TYPE_RINGBUF) ids.insert(id);
  }
  closedir(d);
  return ids;
}

// The ring's unread bytes: its producer position minus its consumer's.
// The kernel maps the consumer position's page first and the producer's
// second; both read-only here.
absl::StatusOr<uint64_t> UnreadBytes(uint32_t map_id) {
  const int fd = bpf_map_get_fd_by_id(map_id);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("BPF map ", map_id, " is gone"));
  const long page = sysconf(_SC_PAGESIZE);
  void* p = mmap(nullptr, 2 * page, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mmap of BPF ring ", map_id));
  }
  const auto* consumer = static_cast<const uint64_t*>(p);
  const auto* producer = reinterpret_cast<const uint64_t*>(static_cast<const char*>(p) + page);
  const uint64_t c = __atomic_load_n(consumer, __ATOMIC_ACQUIRE);
  const uint64_t pr = __atomic_load_n(producer, __ATOMIC_ACQUIRE);
  munmap(p, 2 * page);
  return pr - c;
}

}  // namespace

absl::StatusOr<BpfRingFill> ReadBpfRingFill(pid_t pid) {
  absl::StatusOr<std::set<uint32_t>> ids = RingMapIds(pid);
  if (!ids.ok()) return ids.status();
  BpfRingFill fill;
  for (uint32_t id : *ids) {
    absl::StatusOr<uint64_t> unread = UnreadBytes(id);
    if (!unread.ok()) return unread.status();
    fill.rings++;
    fill.unread_bytes += *unread;
  }
  return fill;
}

absl::Status WaitUntilBpfRingsRead(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<BpfRingFill> fill = ReadBpfRingFill(pid);
    if (!fill.ok()) return fill.status();
    if (fill->rings == 0) {
      return absl::NotFoundError(absl::StrCat("process ", pid, " holds no BPF ring buffer"));
    }
    if (fill->unread_bytes == 0) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(fill->unread_bytes, " bytes still unread in the ", fill->rings,
                       " BPF rings of process ", pid, " after ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace ringside::testing
