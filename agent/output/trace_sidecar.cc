#include "agent/output/trace_sidecar.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/tracefile/trace_inspector.h"
#include "base/dir_stream.h"
#include "base/file_io.h"
#include "base/json_text.h"
#include "base/scoped_fd.h"
#include "base/status.h"

namespace ringside::agent {
namespace {

// Every failure here is kUnavailable: the writer counts kNotFound as a
// trace that went away, which only WriteSidecar's open of the trace says.
absl::Status SidecarFailure(absl::string_view what) {
  return absl::UnavailableError(base::ErrnoMessage(errno, what));
}

// Writes `text` to a new file `name` in `dir_fd` (O_EXCL, never through a
// symlink), with its mode and group, fsynced.
absl::Status WriteNew(int dir_fd, const std::string& name, const std::string& display,
                      const std::string& text, std::optional<gid_t> group) {
  base::ScopedFd fd(
      openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return SidecarFailure(absl::StrCat("creating ", display));
  absl::Status st;
  if (group.has_value() &&
      (fchown(fd.get(), static_cast<uid_t>(-1), *group) != 0 || fchmod(fd.get(), 0640) != 0)) {
    st = SidecarFailure(absl::StrCat("giving ", display, " to its group"));
  }
  if (st.ok()) {
    if (const base::IoResult w = base::WriteAll(fd.get(), text); !w.ok()) {
      st = absl::UnavailableError(base::ErrnoMessage(w.err, absl::StrCat("writing ", display)));
    }
  }
  if (st.ok() && fsync(fd.get()) != 0) st = SidecarFailure(absl::StrCat("syncing ", display));
  fd.reset();  // Unchecked: the fsync() above has reported any write lost.
  if (!st.ok()) unlinkat(dir_fd, name.c_str(), 0);
  return st;
}

}  // namespace

std::string SidecarName(absl::string_view trace_name) {
  return absl::StrCat(trace_name, kSidecarSuffix);
}

std::string SidecarTempName(absl::string_view trace_name) {
  return absl::StrCat(".", trace_name, kSidecarSuffix, ".tmp");
}

bool IsSidecarOrItsTemporary(absl::string_view name) {
  return absl::EndsWith(name, kSidecarSuffix) ||
         (absl::StartsWith(name, ".") &&
          absl::EndsWith(name, absl::StrCat(kSidecarSuffix, ".tmp")));
}

absl::StatusOr<TraceSummary> WriteSidecar(const OutputDir& dir, const std::string& name,
                                          std::optional<gid_t> group, absl::Mutex* publish_mu) {
  const std::string display = dir.Join(name);
  base::ScopedFd fd(openat(dir.fd(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid() && errno == ENOENT) {
    return absl::NotFoundError(absl::StrCat("sidecar of ", display, ": the trace is gone"));
  }
  if (!fd.valid()) return SidecarFailure(absl::StrCat("sidecar of ", display));
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("sidecar of ", display, ": not a regular file of the agent's"));
  }
  absl::StatusOr<TraceSummary> summary = InspectOpenTraceFile(fd.release(), display);
  if (!summary.ok()) {
    return absl::Status(summary.status().code(),
                        absl::StrCat("sidecar of ", display, ": ", summary.status().message()));
  }
  if (!summary->digest.has_value()) {
    return absl::UnavailableError(absl::StrCat("sidecar of ", display, ": cannot hash it"));
  }
  nlohmann::json json = FileFactsToJson(name, *summary);
  json["ringside_sidecar"] = kSidecarVersion;
  const std::string final_name = SidecarName(name);
  const std::string temp_name = SidecarTempName(name);
  // One a killed agent left is ours (the directory is the agent's alone).
  unlinkat(dir.fd(), temp_name.c_str(), 0);
  if (absl::Status s = WriteNew(dir.fd(), temp_name, dir.Join(temp_name),
                                absl::StrCat(base::JsonText(json), "\n"), group);
      !s.ok()) {
    return s;
  }
  {
    std::optional<absl::MutexLock> lock;
    if (publish_mu != nullptr) lock.emplace(publish_mu);
    // The trace it describes, still there (the file hashed, by inode):
    // checked under the lock retention holds too, so that a trace it
    // deletes never gets a sidecar after it. A shipper that takes the trace
    // meanwhile leaves a sidecar that it takes next.
    struct stat now;
    if (fstatat(dir.fd(), name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0 ||
        now.st_ino != st.st_ino || now.st_dev != st.st_dev) {
      unlinkat(dir.fd(), temp_name.c_str(), 0);
      return absl::NotFoundError(absl::StrCat("sidecar of ", display, ": the trace is gone"));
    }
    if (renameat2(dir.fd(), temp_name.c_str(), dir.fd(), final_name.c_str(), RENAME_NOREPLACE) !=
        0) {
      const absl::Status s =
          SidecarFailure(absl::StrCat("renaming ", dir.Join(temp_name), " to ", final_name));
      unlinkat(dir.fd(), temp_name.c_str(), 0);
      return s;
    }
  }
  fsync(dir.fd());  // Outside the lock: retention on the drain never waits on it.
  return *std::move(summary);
}

std::vector<std::string> TracesWithoutSidecar(
    const OutputDir& dir, const std::function<bool(absl::string_view)>& is_trace) {
  std::vector<std::string> names;
  const base::DirStream d = base::OpenDirStream(dir.fd());
  if (d == nullptr) return names;
  while (const dirent* e = readdir(d.get())) {
    const std::string name = e->d_name;
    if (!is_trace(name)) continue;
    struct stat st;
    if (fstatat(dir.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    if (fstatat(dir.fd(), SidecarName(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) continue;
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

SidecarWriter::SidecarWriter() : thread_([this] { Loop(); }) {}

SidecarWriter::~SidecarWriter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void SidecarWriter::Queue(std::shared_ptr<const OutputDir> dir, std::string name,
                          std::optional<gid_t> group) {
  absl::MutexLock lock(&mu_);
  queue_.push_back({std::move(dir), std::move(name), group});
}

void SidecarWriter::WaitIdle() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](SidecarWriter* w)
           ABSL_NO_THREAD_SAFETY_ANALYSIS { return w->queue_.empty() && !w->busy_; },
      this));
}

SidecarWriter::Stats SidecarWriter::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void SidecarWriter::Loop() {
  pthread_setname_np(pthread_self(), "rs-sidecar");
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](SidecarWriter* w)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return !w->queue_.empty() || w->stopping_; },
          this));
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    const absl::Status st = WriteSidecar(*job.dir, job.name, job.group, &publish_mu_).status();
    absl::MutexLock lock(&mu_);
    busy_ = false;
    if (st.ok()) {
      stats_.written++;
    } else if (absl::IsNotFound(st)) {
      stats_.gone++;
    } else {
      stats_.failed++;
      stats_.last_error = std::string(st.message());
    }
  }
}

}  // namespace ringside::agent
