#include "agent/lifecycle/privileges.h"

#include <dirent.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/small_file.h"

namespace ringside::agent {
namespace {

// capabilities(7), by number.
constexpr const char* kCapabilityNames[] = {
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
};

// The request every thread answers from its signal handler.
std::atomic<CapabilityMask> g_keep{0};
std::atomic<int> g_answers{0};
std::atomic<int> g_error{0};

// Lowers the calling thread's capabilities to `keep` and sets no_new_privs.
// Raw system calls only: it runs in a signal handler. Returns 0 or an errno.
int DropOwnCapabilities(CapabilityMask keep) {
  // EINVAL: a kernel before 4.3 has no ambient set, so there is none to clear.
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
    return errno;
  }
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
  if (syscall(SYS_capget, &header, data) != 0) return errno;
  const CapabilityMask effective = data[0].effective | (CapabilityMask{data[1].effective} << 32);
  const CapabilityMask permitted = data[0].permitted | (CapabilityMask{data[1].permitted} << 32);
  // The bounding set limits what an exec could bring back; lowering it
  // needs CAP_SETPCAP, which a hardened unit does not grant. no_new_privs
  // below closes that door either way.
  if ((effective & CapabilityBit(CAP_SETPCAP)) != 0) {
    for (int cap = 0; cap < 64; ++cap) {
      if ((keep & CapabilityBit(cap)) != 0) continue;
      const int in_set = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
      if (in_set < 0) break;  // Past the last capability this kernel knows.
      if (in_set == 1 && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) return errno;
    }
  }
  const CapabilityMask kept = permitted & keep;
  for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; ++i) {
    data[i].effective = data[i].permitted = static_cast<uint32_t>(kept >> (32 * i));
    data[i].inheritable = 0;
  }
  if (syscall(SYS_capset, &header, data) != 0) return errno;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  return 0;
}

void AnswerDropRequest(int) {
  const int saved_errno = errno;
  const int err = DropOwnCapabilities(g_keep.load());
  if (err != 0) g_error.store(err);
  g_answers.fetch_add(1);
  errno = saved_errno;
}

std::vector<pid_t> ListThreads(pid_t pid) {
  std::vector<pid_t> tids;
  const std::string dir = pid == 0 ? "/proc/self/task" : absl::StrCat("/proc/", pid, "/task");
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return tids;
  while (dirent* e = readdir(d)) {
    int tid;
    if (absl::SimpleAtoi(e->d_name, &tid)) tids.push_back(tid);
  }
  closedir(d);
  return tids;
}

std::string ThreadName(pid_t tid) {
  std::string comm = base::ReadSmallFileOrEmpty(absl::StrCat("/proc/self/task/", tid, "/comm"));
  absl::StripTrailingAsciiWhitespace(&comm);
  return comm;
}

// True if thread `tid` of this process holds `signal_number` back (see
// HoldsSignalBack); false when its status cannot be read.
bool ThreadHoldsSignalBack(pid_t tid, int signal_number) {
  return HoldsSignalBack(
      base::ReadSmallFileOrEmpty(absl::StrCat("/proc/self/task/", tid, "/status")), signal_number);
}

// Thread `tid`'s state letter (R, S, D...), '?' if it cannot be read.
char ThreadStateLetter(pid_t tid) {
  const std::string stat =
      base::ReadSmallFileOrEmpty(absl::StrCat("/proc/self/task/", tid, "/stat"));
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : '?';
}

// "state D, in wchan_name" for a failure message.
std::string ThreadState(pid_t tid) {
  const std::string state(1, ThreadStateLetter(tid));
  std::string wchan = base::ReadSmallFileOrEmpty(absl::StrCat("/proc/self/task/", tid, "/wchan"));
  absl::StripTrailingAsciiWhitespace(&wchan);
  return absl::StrCat("state ", state, ", in ", wchan.empty() || wchan == "0" ? "?" : wchan);
}

}  // namespace

bool HoldsSignalBack(absl::string_view status_text, int signal_number) {
  uint64_t blocked = 0, pending = 0;
  bool has_blocked = false, has_pending = false;
  for (absl::string_view line : absl::StrSplit(status_text, '\n')) {
    const bool is_blocked = absl::ConsumePrefix(&line, "SigBlk:");
    if (!is_blocked && !absl::ConsumePrefix(&line, "SigPnd:")) continue;
    uint64_t mask = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(line), &mask)) return false;
    (is_blocked ? blocked : pending) = mask;
    (is_blocked ? has_blocked : has_pending) = true;
  }
  const uint64_t bit = uint64_t{1} << (signal_number - 1);
  return has_blocked && has_pending && (blocked & bit) != 0 && (pending & bit) != 0;
}

CapabilityMask CapabilitiesToKeep(const KeptCapabilities& needs) {
  CapabilityMask keep = 0;
  if (needs.output_group) keep |= CapabilityBit(CAP_CHOWN);
  // Linux 6.5 moved the unprivileged_bpf_disabled check from every bpf()
  // command to the ones that create maps and load programs.
  int major = 0, minor = 0;
  const std::vector<absl::string_view> parts =
      absl::StrSplit(needs.kernel_release, absl::MaxSplits(absl::ByAnyChar(".-"), 2));
  const bool parsed =
      parts.size() >= 2 && absl::SimpleAtoi(parts[0], &major) && absl::SimpleAtoi(parts[1], &minor);
  const bool lookups_gated = !parsed || major < 6 || (major == 6 && minor < 5);
  if (lookups_gated && needs.unprivileged_bpf_disabled != 0) keep |= CapabilityBit(CAP_BPF);
  return keep;
}

CapabilityMask CapabilitiesToKeepHere(bool output_group) {
  KeptCapabilities needs;
  needs.output_group = output_group;
  utsname u;
  if (uname(&u) == 0) needs.kernel_release = u.release;
  int disabled = 0;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(base::ReadSmallFileOrEmpty(
                           "/proc/sys/kernel/unprivileged_bpf_disabled")),
                       &disabled)) {
    needs.unprivileged_bpf_disabled = disabled;
  }
  return CapabilitiesToKeep(needs);
}

namespace {

// Signals thread `tid` to drop its capabilities (AnswerDropRequest) and
// waits for its answer; fails when it does not answer in time. A thread
// that has exited meanwhile is done.
absl::Status AskThreadToDrop(pid_t tid, int signal_number) {
  const int before = g_answers.load();
  if (syscall(SYS_tgkill, getpid(), tid, signal_number) != 0) {
    if (errno == ESRCH) return absl::OkStatus();  // It has exited.
    return absl::InternalError(absl::StrCat("tgkill thread ", tid, ": ", strerror(errno)));
  }
  // A thread that holds the signal back (blocked and still pending) for
  // kBlockedWait in a row fails the drop. Any other answers once the
  // kernel lets its handler run, which a thread in an uninterruptible
  // wait (an fsync on a busy disk, a vfork) postpones: it gets
  // kBusyWait, so that a loaded machine delays the start instead of
  // failing it. So does a thread that blocks signals only for such a
  // wait (glibc's posix_spawn and system block them while the child has
  // its memory): one in state D is waited for. A thread running the
  // handler blocks the signal too, but it is no longer pending: that
  // thread is answering, however late its wait let it start.
  constexpr absl::Duration kBlockedWait = absl::Seconds(2);
  constexpr absl::Duration kBusyWait = absl::Seconds(60);
  const absl::Time start = absl::Now();
  absl::Time next_check = start;
  std::optional<absl::Time> held_since;
  while (g_answers.load() == before) {
    const absl::Time now = absl::Now();
    if (now >= next_check) {
      if (access(absl::StrCat("/proc/self/task/", tid).c_str(), F_OK) != 0) break;
      if (ThreadHoldsSignalBack(tid, signal_number) && ThreadStateLetter(tid) != 'D') {
        if (!held_since) held_since = now;
      } else {
        held_since.reset();
      }
      next_check = now + absl::Milliseconds(10);
    }
    if (held_since ? now - *held_since >= kBlockedWait : now - start >= kBusyWait) break;
    absl::SleepFor(absl::Microseconds(200));
  }
  if (g_answers.load() == before &&
      access(absl::StrCat("/proc/self/task/", tid).c_str(), F_OK) == 0) {
    const bool held = held_since.has_value();
    return absl::InternalError(absl::StrCat(
        "thread ", tid, " (", ThreadName(tid), ") did not drop its capabilities within ",
        absl::FormatDuration(held ? kBlockedWait : kBusyWait),
        held ? " (it blocks real-time signals)" : absl::StrCat(" (", ThreadState(tid), ")")));
  }
  return absl::OkStatus();
}

// AskThreadToDrop() of every thread but the caller's, the first failure
// stopping it.
absl::Status AskOtherThreadsToDrop(int signal_number) {
  const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
  std::set<pid_t> done = {self};
  // A thread started meanwhile by one that had not dropped yet shows up in
  // the next listing; one started by a thread that had is born without.
  for (bool found_new = true; found_new;) {
    found_new = false;
    for (pid_t tid : ListThreads(0)) {
      if (!done.insert(tid).second) continue;
      found_new = true;
      if (absl::Status status = AskThreadToDrop(tid, signal_number); !status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

// Fails naming a thread that still holds a capability beyond `keep`, or
// lacks no_new_privs.
absl::Status CheckThreadsKeepOnly(CapabilityMask keep) {
  absl::StatusOr<std::vector<ThreadCapabilities>> threads = ReadThreadCapabilities(0);
  if (!threads.ok()) return threads.status();
  for (const ThreadCapabilities& t : *threads) {
    const CapabilityMask extra = (t.effective | t.permitted | t.inheritable | t.ambient) & ~keep;
    if (extra != 0 || !t.no_new_privs) {
      return absl::InternalError(absl::StrCat(
          "thread ", t.tid, " (", ThreadName(t.tid), ") still holds ", CapabilityNames(extra),
          t.no_new_privs ? "" : " and has no_new_privs unset", " after dropping capabilities"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DropCapabilities(CapabilityMask keep) {
  // SIGRTMAX: glibc keeps the first real-time signals for itself, and
  // ringside uses no other.
  const int signal_number = SIGRTMAX;
  struct sigaction action = {}, previous = {};
  action.sa_handler = AnswerDropRequest;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(signal_number, &action, &previous) != 0) {
    return absl::InternalError(absl::StrCat("sigaction: ", std::strerror(errno)));
  }
  g_keep.store(keep);
  g_error.store(0);

  const absl::Status status = AskOtherThreadsToDrop(signal_number);
  if (status.ok()) {
    if (const int err = DropOwnCapabilities(keep); err != 0) g_error.store(err);
  }
  sigaction(signal_number, &previous, nullptr);
  if (!status.ok()) return status;
  if (const int err = g_error.load(); err != 0) {
    return absl::InternalError(
        absl::StrCat("dropping capabilities (capset/prctl): ", std::strerror(err)));
  }
  return CheckThreadsKeepOnly(keep);
}

absl::StatusOr<ThreadCapabilities> ParseThreadStatus(const std::string& status_text) {
  ThreadCapabilities out;
  int fields = 0;
  for (absl::string_view line : absl::StrSplit(status_text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const absl::string_view key = line.substr(0, colon);
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    CapabilityMask* mask = key == "CapEff"   ? &out.effective
                           : key == "CapPrm" ? &out.permitted
                           : key == "CapInh" ? &out.inheritable
                           : key == "CapAmb" ? &out.ambient
                           : key == "CapBnd" ? &out.bounding
                                             : nullptr;
    if (mask != nullptr) {
      if (!absl::SimpleHexAtoi(value, mask)) {
        return absl::InvalidArgumentError(absl::StrCat("status: bad ", key, " '", value, "'"));
      }
      ++fields;
    } else if (key == "NoNewPrivs") {
      out.no_new_privs = value == "1";
    } else if (key == "Pid") {
      (void)absl::SimpleAtoi(value, &out.tid);
    }
  }
  // CapAmb exists since Linux 4.3; the other four are older.
  if (fields < 4) return absl::InvalidArgumentError("status: no capability lines");
  return out;
}

absl::StatusOr<std::vector<ThreadCapabilities>> ReadThreadCapabilities(pid_t pid) {
  std::vector<ThreadCapabilities> out;
  const std::string dir = pid == 0 ? "/proc/self/task" : absl::StrCat("/proc/", pid, "/task");
  for (pid_t tid : ListThreads(pid)) {
    const std::string text = base::ReadSmallFileOrEmpty(absl::StrCat(dir, "/", tid, "/status"));
    if (text.empty()) continue;  // It has exited.
    absl::StatusOr<ThreadCapabilities> t = ParseThreadStatus(text);
    if (!t.ok()) return absl::InternalError(absl::StrCat(dir, "/", tid, "/", t.status().message()));
    out.push_back(*t);
  }
  if (out.empty()) return absl::NotFoundError(absl::StrCat("no threads in ", dir));
  return out;
}

std::string CapabilityNames(CapabilityMask mask) {
  std::vector<std::string> names;
  for (int cap = 0; cap < 64; ++cap) {
    if ((mask & CapabilityBit(cap)) == 0) continue;
    names.push_back(cap < static_cast<int>(std::size(kCapabilityNames))
                        ? kCapabilityNames[cap]
                        : absl::StrCat("capability ", cap));
  }
  return names.empty() ? "none" : absl::StrJoin(names, ",");
}

}  // namespace ringside::agent
