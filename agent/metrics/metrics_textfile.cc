#include "agent/metrics/metrics_textfile.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringside::agent {
namespace {

absl::Status Errno(const std::string& what) {
  const int err = errno;
  return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat(what, ": ", std::strerror(err)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsTextfile>> MetricsTextfile::Start(Options options) {
  std::unique_ptr<MetricsTextfile> m(new MetricsTextfile(std::move(options)));
  m->dir_fd_ = open(m->options_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (m->dir_fd_ < 0) {
    return Errno(absl::StrCat("metrics_textfile: opening the directory ", m->options_.dir));
  }
  // Hidden, and not ending in .prom: the collector reads only *.prom. One
  // name for every agent (one runs per machine): one a killed agent left is
  // replaced by the next agent's first write.
  m->temp_name_ = absl::StrCat(".", kFileName, ".tmp");
  const absl::Status first = m->WriteOnce();
  if (!first.ok() && m->options_.warn) m->options_.warn(std::string(first.message()));
  m->thread_ = std::thread([p = m.get(), failing = !first.ok()]() mutable {
    pthread_setname_np(pthread_self(), "rs-metrics");  // In top -H, perf, /proc.
    while (!p->stop_.WaitForNotificationWithTimeout(p->options_.period)) {
      const absl::Status st = p->WriteOnce();
      if (!st.ok() && !failing && p->options_.warn) p->options_.warn(std::string(st.message()));
      if (st.ok() && failing && p->options_.notice) {
        p->options_.notice(
            absl::StrCat("metrics: writing ", p->options_.dir, "/", kFileName, " again"));
      }
      failing = !st.ok();
    }
  });
  return m;
}

MetricsTextfile::~MetricsTextfile() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
  if (dir_fd_ < 0) return;
  absl::MutexLock lock(&write_mu_);
  struct stat now;
  if (written_ino_ != 0 && fstatat(dir_fd_, kFileName, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
      now.st_ino == written_ino_ && now.st_dev == written_dev_) {
    unlinkat(dir_fd_, kFileName, 0);
  }
  unlinkat(dir_fd_, temp_name_.c_str(), 0);
  close(dir_fd_);
}

MetricsTextfile::Stats MetricsTextfile::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Status MetricsTextfile::WriteOnce() {
  // Rendered before the file's lock: the status takes the agent's own
  // locks, and write_mu_ stays a leaf.
  const std::string text = PrometheusText(options_.status(), options_.metrics);
  const absl::Status st = Write(text);
  absl::MutexLock lock(&mu_);
  if (st.ok()) {
    stats_.written++;
  } else {
    stats_.failed++;
    stats_.last_error = std::string(st.message());
  }
  return st;
}

absl::Status MetricsTextfile::Write(const std::string& text) {
  absl::MutexLock lock(&write_mu_);
  const std::string where = absl::StrCat("metrics: ", options_.dir, "/");
  // One a failed write, or a killed agent, left.
  unlinkat(dir_fd_, temp_name_.c_str(), 0);
  const int fd = openat(dir_fd_, temp_name_.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(absl::StrCat(where, temp_name_));
  // node_exporter reads it as its own user, whatever the agent's umask.
  fchmod(fd, 0644);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;  // write() of a regular file makes progress or fails.
      const absl::Status e = Errno(absl::StrCat(where, temp_name_));
      close(fd);
      unlinkat(dir_fd_, temp_name_.c_str(), 0);
      return e;
    }
    done += static_cast<size_t>(n);
  }
  struct stat st;
  const bool stated = fstat(fd, &st) == 0;
  if (close(fd) != 0 || !stated) {
    const absl::Status e = Errno(absl::StrCat(where, temp_name_));
    unlinkat(dir_fd_, temp_name_.c_str(), 0);
    return e;
  }
  if (renameat(dir_fd_, temp_name_.c_str(), dir_fd_, kFileName) != 0) {
    const absl::Status e = Errno(absl::StrCat(where, temp_name_, " renamed to ", kFileName));
    unlinkat(dir_fd_, temp_name_.c_str(), 0);
    return e;
  }
  written_ino_ = st.st_ino;
  written_dev_ = st.st_dev;
  return absl::OkStatus();
}

}  // namespace ringside::agent
