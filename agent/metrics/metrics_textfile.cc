#include "agent/metrics/metrics_textfile.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/output/output_file.h"
#include "base/file_io.h"
#include "base/status.h"

namespace ringside::agent {
namespace {

// Who besides the agent (and root) may write the directory `st`, or "":
// "every user", "group 100", "its owner, uid 1000".
std::string OtherWriters(const struct stat& st) {
  std::vector<std::string> who;
  if (st.st_mode & S_IWOTH) who.push_back("every user");
  if ((st.st_mode & S_IWGRP) && st.st_gid != 0) who.push_back(absl::StrCat("group ", st.st_gid));
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    who.push_back(absl::StrCat("its owner, uid ", st.st_uid));
  }
  return absl::StrJoin(who, " and ");
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsTextfile>> MetricsTextfile::Start(Options options) {
  std::unique_ptr<MetricsTextfile> m(new MetricsTextfile(std::move(options)));
  m->dir_fd_.reset(open(m->options_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!m->dir_fd_.valid()) {
    return base::ErrnoStatus(
        absl::StrCat("metrics_textfile: opening the directory ", m->options_.dir));
  }
  // The agent writes there as root; others who may write there too can put
  // series of their own beside ringside's, or plant names under it (which
  // stop nothing: the temporary name is new each time, never followed).
  struct stat st;
  if (fstat(m->dir_fd_.get(), &st) == 0 && m->options_.warn) {
    if (const std::string others = OtherWriters(st); !others.empty()) {
      m->options_.warn(absl::StrFormat(
          "metrics_textfile %s is writable by %s (mode %04o): they can put series beside "
          "ringside's; let only root write it (chmod go-w, chown root)",
          m->options_.dir, others, st.st_mode & 07777));
    }
  }
  // The temporary file a killed agent left (a new random name each time).
  RemoveDeadTemporaryFiles(m->options_.dir);
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
  if (!dir_fd_.valid()) return;
  absl::MutexLock lock(&write_mu_);
  struct stat now;
  if (written_ino_ != 0 && fstatat(dir_fd_.get(), kFileName, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
      now.st_ino == written_ino_ && now.st_dev == written_dev_) {
    unlinkat(dir_fd_.get(), kFileName, 0);
  }
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
  // Hidden, and not ending in .prom: the collector reads only *.prom.
  TemporaryFile temp;
  if (const int err = CreateTemporaryIn(dir_fd_.get(), 0644, &temp); err != 0) {
    errno = err;
    return base::ErrnoStatus(absl::StrCat(where, "a temporary file"));
  }
  const std::string temp_name = absl::StrCat(where, temp.name);
  // A failure closes the temporary file and removes it.
  auto fail = [&](absl::Status status) {
    temp.fd.reset();
    unlinkat(dir_fd_.get(), temp.name.c_str(), 0);
    return status;
  };
  // node_exporter reads it as its own user, whatever the agent's umask.
  fchmod(temp.fd.get(), 0644);
  if (const base::IoResult w = base::WriteAll(temp.fd.get(), text); !w.ok()) {
    return fail(base::ErrnoToStatus(w.err, temp_name));
  }
  struct stat st;
  if (fstat(temp.fd.get(), &st) != 0) return fail(base::ErrnoStatus(temp_name));
  // Renamed while still open (and so locked): a clean-up never takes it
  // for one a dead writer left.
  if (renameat(dir_fd_.get(), temp.name.c_str(), dir_fd_.get(), kFileName) != 0) {
    return fail(base::ErrnoStatus(absl::StrCat(temp_name, " renamed to ", kFileName)));
  }
  written_ino_ = st.st_ino;
  written_dev_ = st.st_dev;
  // A write the filesystem reports only at close is a file node_exporter
  // reads short: an error like the others.
  if (const int err = temp.fd.Close(); err != 0) {
    return base::ErrnoToStatus(err, absl::StrCat(where, kFileName));
  }
  return absl::OkStatus();
}

}  // namespace ringside::agent
