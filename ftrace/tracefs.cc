#include "ftrace/tracefs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_io.h"
#include "base/scoped_fd.h"
#include "base/status.h"

namespace ringside::ftrace {
namespace {

constexpr char kTracingMount[] = "/sys/kernel/tracing";
constexpr char kDebugTracing[] = "/sys/kernel/debug/tracing";

// tracefs' own reading of an errno: a permission error names what tracefs
// needs, and what absl has no better code for is kUnavailable (ENODEV: no
// tracefs in this kernel), which the sources take as "no ftrace here".
absl::Status TracefsError(int err, const std::string& what) {
  std::string message = base::ErrnoMessage(err, what);
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(absl::StrCat(
          message, " (tracefs needs root or CAP_SYS_ADMIN, and a kernel not in lockdown)"));
    case EINVAL:
      return absl::InvalidArgumentError(message);
    case EBUSY:
      return absl::FailedPreconditionError(message);
    default:
      return absl::UnavailableError(message);
  }
}

bool IsTracefsRoot(const std::string& dir) {
  struct stat st;
  return stat((dir + "/events").c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
         stat((dir + "/trace_marker").c_str(), &st) == 0;
}

constexpr size_t kIdHexDigits = 16;

// What the text after the last '-' of a ringside-* instance name says about
// who made it.
enum class NameKind { kLocked, kLegacyPid, kUnknown };

NameKind KindOfName(const std::string& instance_name) {
  const size_t dash = instance_name.rfind('-');
  if (dash == std::string::npos || dash + 1 == instance_name.size()) return NameKind::kUnknown;
  const std::string suffix = instance_name.substr(dash + 1);
  const auto all_of = [&suffix](auto pred) {
    for (const char c : suffix) {
      if (!pred(c)) return false;
    }
    return true;
  };
  if (suffix.size() == kIdHexDigits &&
      all_of([](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); })) {
    return NameKind::kLocked;
  }
  // Pids have at most 7 digits (pid_max <= 4194304).
  if (suffix.size() <= 7 && all_of([](char c) { return c >= '0' && c <= '9'; })) {
    return NameKind::kLegacyPid;
  }
  return NameKind::kUnknown;
}

// An id for a new instance name. Uniqueness comes from mkdir refusing a
// taken name (Create then draws again), so the clock is an acceptable
// stand-in in the rare case getrandom cannot answer without blocking (early
// boot).
uint64_t NewInstanceId() {
  uint64_t id = 0;
  if (getrandom(&id, sizeof(id), GRND_NONBLOCK) == sizeof(id)) return id;
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec)) ^
         (static_cast<uint64_t>(getpid()) << 40);
}

int OpenDirectory(const std::string& path) {
  return open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
}

bool TryLock(int fd) {
  return base::RetryOnEintr([&] { return flock(fd, LOCK_EX | LOCK_NB); }) == 0;
}

// Stops an instance nobody owns (it may be tracing still) and removes it.
bool StopAndRemove(const Tracefs& tracefs, const std::string& rel) {
  (void)tracefs.Write(rel + "/tracing_on", "0");
  (void)tracefs.Write(rel + "/events/enable", "0");
  return rmdir((tracefs.root() + "/" + rel).c_str()) == 0;
}

}  // namespace

// Moves this process into a new mount namespace that receives mounts from
// the old one but sends none back. Returns false, changing nothing, where
// that cannot be done.
static bool EnterOwnMountNamespace() {
  const base::ScopedFd old_ns(open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC));
  if (!old_ns.valid()) return false;
  bool ok = false;
  if (unshare(CLONE_NEWNS) == 0) {
    ok = mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) == 0;
    // Our mounts would propagate back: return to where we were.
    if (!ok) setns(old_ns.get(), CLONE_NEWNS);
  }
  return ok;
}

absl::StatusOr<Tracefs> Tracefs::Open() {
  for (const char* dir : {kTracingMount, kDebugTracing}) {
    if (IsTracefsRoot(dir)) return Tracefs(dir, false);
  }
  // Mounted, but closed to this user (the kernel mounts tracefs 0700): not
  // "not mounted", which would send them looking for the wrong fix.
  for (const char* dir : {kTracingMount, kDebugTracing}) {
    struct statfs fs;
    struct stat st;
    if (statfs(dir, &fs) == 0 && static_cast<int64_t>(fs.f_type) == TRACEFS_MAGIC &&
        stat((std::string(dir) + "/events").c_str(), &st) != 0 &&
        (errno == EACCES || errno == EPERM)) {
      struct stat root;
      const bool have_root = stat(dir, &root) == 0;
      return absl::PermissionDeniedError(absl::StrCat(
          "tracefs is mounted at ", dir, ", but this user may not read it",
          have_root
              ? absl::StrFormat(" (mode %04o, owner uid %u)", root.st_mode & 07777, root.st_uid)
              : "",
          ": run as root, or give your group access (mount -o remount,gid=GROUP,mode=0750 ", dir,
          ")"));
    }
  }
  // Mount it where only this process and its children see it: in a mount
  // namespace of our own whose mounts do not propagate back. The mount then
  // goes when we do, even after a crash, and never from under another user
  // of tracefs. Where that cannot be had (a process already running threads
  // cannot unshare), mount it for everyone and unmount it at the end.
  const bool in_own_namespace = EnterOwnMountNamespace();
  if (mount("nodev", kTracingMount, "tracefs", 0, nullptr) != 0) {
    const int err = errno;
    if (err == ENODEV) {
      return absl::UnavailableError(
          "this kernel has no tracefs (built without CONFIG_TRACING?): ftrace events are "
          "unavailable");
    }
    if (err == EPERM || err == EACCES) {
      return absl::PermissionDeniedError(
          absl::StrCat("tracefs is not mounted and mounting it at ", kTracingMount,
                       " was refused: it needs CAP_SYS_ADMIN (run as root)"));
    }
    return TracefsError(err, absl::StrCat("mounting tracefs at ", kTracingMount));
  }
  if (!IsTracefsRoot(kTracingMount)) {
    umount(kTracingMount);
    return absl::UnavailableError(
        absl::StrCat("mounted tracefs at ", kTracingMount, " but it has no events"));
  }
  return Tracefs(kTracingMount, /*mounted_by_us=*/!in_own_namespace);
}

absl::Status Tracefs::Unmount() {
  if (!mounted_by_us_) return absl::OkStatus();
  if (umount(root_.c_str()) != 0) return TracefsError(errno, "unmounting " + root_);
  mounted_by_us_ = false;
  return absl::OkStatus();
}

bool Tracefs::Exists(const std::string& relative_path) const {
  struct stat st;
  return stat((root_ + "/" + relative_path).c_str(), &st) == 0;
}

std::vector<std::string> Tracefs::GroupEvents(const std::string& group) const {
  std::vector<std::string> names;
  DIR* dir = opendir((root_ + "/events/" + group).c_str());
  if (dir == nullptr) return names;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != ".." && entry->d_type == DT_DIR) names.push_back(name);
  }
  closedir(dir);
  return names;
}

absl::StatusOr<std::string> Tracefs::Read(const std::string& relative_path) const {
  const std::string path = root_ + "/" + relative_path;
  const base::ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return TracefsError(errno, "cannot open " + path);
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = base::RetryOnEintr([&] { return read(fd.get(), buf, sizeof(buf)); });
    if (n < 0) return TracefsError(errno, "cannot read " + path);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

absl::Status Tracefs::Write(const std::string& relative_path, const std::string& value) const {
  const std::string path = root_ + "/" + relative_path;
  const base::ScopedFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC | O_TRUNC));
  if (!fd.valid()) return TracefsError(errno, "cannot open " + path);
  // One write: a control file takes each write() as one command.
  const ssize_t n = base::RetryOnEintr([&] { return write(fd.get(), value.data(), value.size()); });
  const int err = errno;
  if (n < 0) return TracefsError(err, absl::StrCat("writing '", value, "' to ", path));
  if (static_cast<size_t>(n) != value.size()) {
    return absl::UnavailableError(absl::StrCat("short write of '", value, "' to ", path));
  }
  return absl::OkStatus();
}

// --- Instance ----------------------------------------------------------------

Instance::StaleInstances Instance::RemoveStaleInstances(const Tracefs& tracefs) {
  StaleInstances result;
  DIR* dir = opendir((tracefs.root() + "/instances").c_str());
  if (dir == nullptr) return result;
  std::vector<std::string> names;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.rfind(kPrefix, 0) == 0) names.push_back(name);
  }
  closedir(dir);
  for (const std::string& name : names) {
    const NameKind kind = KindOfName(name);
    if (kind == NameKind::kLegacyPid) result.legacy.push_back(name);
    if (kind != NameKind::kLocked) continue;
    const std::string rel = "instances/" + name;
    const base::ScopedFd fd(OpenDirectory(tracefs.root() + "/" + rel));
    if (!fd.valid()) continue;  // Removed meanwhile.
    // Removed while we hold the lock: a Create that locks the directory
    // after us finds it gone and draws another name.
    if (TryLock(fd.get()) && StopAndRemove(tracefs, rel)) result.removed.push_back(name);
  }
  return result;
}

absl::StatusOr<std::unique_ptr<Instance>> Instance::Create(const Tracefs& tracefs,
                                                           const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("bad instance name '", name, "'"));
  }
  RemoveStaleInstances(tracefs);
  // Each round that fails lost its name to another recorder (EEXIST) or its
  // new directory to a concurrent stale check; neither repeats for long.
  constexpr int kAttempts = 16;
  for (int attempt = 0; attempt < kAttempts; attempt++) {
    const std::string rel = absl::StrCat("instances/", kPrefix, name, "-",
                                         absl::Hex(NewInstanceId(), absl::kZeroPad16));
    const std::string path = tracefs.root() + "/" + rel;
    if (mkdir(path.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;
      return TracefsError(errno, "cannot create ftrace instance " + path);
    }
    base::ScopedFd fd(OpenDirectory(path));
    if (!fd.valid()) {
      if (errno == ENOENT) continue;  // A stale check removed it already.
      const int err = errno;
      rmdir(path.c_str());
      return TracefsError(err, "cannot open ftrace instance " + path);
    }
    // Held by a stale check that is removing it: take another name. Got it:
    // unless a stale check removed the directory before we locked it, it is
    // ours for good.
    struct stat locked, now;
    if (!TryLock(fd.get()) || fstat(fd.get(), &locked) != 0 || stat(path.c_str(), &now) != 0 ||
        locked.st_ino != now.st_ino) {
      continue;
    }
    std::unique_ptr<Instance> instance(new Instance(tracefs, rel, std::move(fd)));
    // A new instance traces at once; nothing until we are configured.
    if (absl::Status s = instance->SetTracingOn(false); !s.ok()) return s;
    return instance;
  }
  return absl::UnavailableError(absl::StrCat("cannot create an ftrace instance named ", kPrefix,
                                             name, "-<id> in ", tracefs.root(),
                                             "/instances: every name tried was taken or removed"));
}

absl::StatusOr<std::unique_ptr<Instance>> Instance::Adopt(const Tracefs& tracefs,
                                                          const std::string& relative_path) {
  const std::string path = tracefs.root() + "/" + relative_path;
  base::ScopedFd fd(OpenDirectory(path));
  if (!fd.valid()) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat("no ftrace instance ", path));
    }
    return TracefsError(errno, "cannot open ftrace instance " + path);
  }
  if (!TryLock(fd.get())) {
    return absl::UnavailableError(
        absl::StrCat("another ringside records into the ftrace instance ", path));
  }
  std::unique_ptr<Instance> instance(new Instance(tracefs, relative_path, std::move(fd)));
  instance->adopted_ = true;
  return instance;
}

Instance::~Instance() {
  if (adopted_) return;  // lock_fd_ goes with the object.
  (void)Remove();
  // Not removed (a reader still open): now unowned, the next stale check
  // removes it.
  lock_fd_.reset();
}

absl::Status Instance::Remove() {
  if (adopted_) {
    return absl::FailedPreconditionError(
        absl::StrCat("the ftrace instance ", path(), " is not ringside's to remove"));
  }
  if (removed_) return absl::OkStatus();
  (void)SetTracingOn(false);
  (void)DisableAllEvents();
  if (rmdir(path().c_str()) != 0) {
    return TracefsError(errno,
                        "cannot remove ftrace instance " + path() + " (is a reader still open?)");
  }
  removed_ = true;
  // Only now: unlocked before the rmdir, it could be taken for stale.
  lock_fd_.reset();
  return absl::OkStatus();
}

absl::Status Instance::EnableOne(const std::string& group, const std::string& name,
                                 const std::string& filter) {
  const std::string dir = name == "*" ? absl::StrCat(relative_path_, "/events/", group)
                                      : absl::StrCat(relative_path_, "/events/", group, "/", name);
  if (!filter.empty()) {
    if (absl::Status s = tracefs_.Write(dir + "/filter", filter); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("bad filter '", filter, "' for ", group, "/", name,
                                                 ": ", s.message()));
    }
  }
  return tracefs_.Write(dir + "/enable", "1");
}

Instance::EnableResult Instance::EnableEvents(const std::vector<EventSpec>& events) {
  EnableResult result;
  for (const EventSpec& spec : events) {
    std::vector<std::string> parts = absl::StrSplit(spec.event, absl::MaxSplits('/', 1));
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
      result.failed.emplace_back(
          spec.event, absl::InvalidArgumentError(absl::StrCat(
                          "'", spec.event, "' is not an event: write group/name or group/*")));
      continue;
    }
    const std::string& group = parts[0];
    const std::string& name = parts[1];
    const std::string dir =
        name == "*" ? "events/" + group : absl::StrCat("events/", group, "/", name);
    if (!tracefs_.Exists(relative_path_ + "/" + dir)) {
      result.unknown.push_back(spec.event);
      continue;
    }
    if (absl::Status s = EnableOne(group, name, spec.filter); !s.ok()) {
      result.failed.emplace_back(spec.event, s);
      continue;
    }
    result.enabled.push_back(spec.event);
  }
  return result;
}

absl::Status Instance::DisableAllEvents() {
  return tracefs_.Write(relative_path_ + "/events/enable", "0");
}

absl::StatusOr<uint32_t> Instance::SetBufferSizeKb(uint32_t per_cpu_kb) {
  if (absl::Status s = tracefs_.Write(relative_path_ + "/buffer_size_kb", absl::StrCat(per_cpu_kb));
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> applied = tracefs_.Read(relative_path_ + "/buffer_size_kb");
  if (!applied.ok()) return applied.status();
  // "1408" or, before first use, "7 (expanded: 1408)".
  uint32_t kb = 0;
  std::string first(absl::StripAsciiWhitespace(*applied));
  first = first.substr(0, first.find(' '));
  if (!absl::SimpleAtoi(first, &kb)) {
    return absl::InternalError(absl::StrCat("cannot parse buffer_size_kb '", *applied, "'"));
  }
  return kb;
}

absl::StatusOr<std::string> Instance::SetTraceClock(const std::string& clock) {
  if (absl::Status s = tracefs_.Write(relative_path_ + "/trace_clock", clock); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("this kernel refuses trace_clock '", clock, "': ", s.message()));
  }
  return TraceClock();
}

absl::StatusOr<std::string> Instance::TraceClock() const {
  absl::StatusOr<std::string> clocks = tracefs_.Read(relative_path_ + "/trace_clock");
  if (!clocks.ok()) return clocks.status();
  // "local global [boot] ...": the selected one is in brackets.
  const size_t open = clocks->find('[');
  const size_t close = clocks->find(']', open);
  if (open == std::string::npos || close == std::string::npos) {
    return absl::InternalError(absl::StrCat("cannot parse trace_clock '", *clocks, "'"));
  }
  return clocks->substr(open + 1, close - open - 1);
}

absl::Status Instance::SetTracingOn(bool on) {
  return tracefs_.Write(relative_path_ + "/tracing_on", on ? "1" : "0");
}

absl::Status Instance::Clear() { return tracefs_.Write(relative_path_ + "/trace", ""); }

absl::StatusOr<Instance::CpuStats> Instance::ReadCpuStats(int cpu) const {
  absl::StatusOr<std::string> text =
      tracefs_.Read(absl::StrCat(relative_path_, "/per_cpu/cpu", cpu, "/stats"));
  if (!text.ok()) return text.status();
  return ParseCpuStats(*text);
}

absl::StatusOr<Instance::CpuStats> ParseCpuStats(const std::string& text) {
  Instance::CpuStats stats;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    bool ok = true;
    if (key == "entries")
      ok = absl::SimpleAtoi(value, &stats.entries);
    else if (key == "overrun")
      ok = absl::SimpleAtoi(value, &stats.overrun);
    else if (key == "commit overrun")
      ok = absl::SimpleAtoi(value, &stats.commit_overrun);
    else if (key == "bytes")
      ok = absl::SimpleAtoi(value, &stats.bytes);
    else if (key == "oldest event ts")
      ok = absl::SimpleAtod(value, &stats.oldest_event_ts);
    else if (key == "now ts")
      ok = absl::SimpleAtod(value, &stats.now_ts);
    else if (key == "dropped events")
      ok = absl::SimpleAtoi(value, &stats.dropped_events);
    else if (key == "read events")
      ok = absl::SimpleAtoi(value, &stats.read_events);
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("per-CPU stats: cannot parse '", key, "' value '", value, "'"));
    }
  }
  return stats;
}

}  // namespace ringside::ftrace
