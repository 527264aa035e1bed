#ifndef RINGSIDE_AGENT_METRICS_METRICS_TEXTFILE_H_
#define RINGSIDE_AGENT_METRICS_METRICS_TEXTFILE_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <sys/types.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "agent/metrics/prometheus_text.h"
#include "base/scoped_fd.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// The agent's metrics for node_exporter's textfile collector
// (metrics_textfile): every period, on a thread of its own (a slow disk
// never holds up the service loop or its watchdog), the status rendered by
// PrometheusText goes to a hidden temporary file of a new random name in
// the directory (CreateTemporaryIn: created O_EXCL, never through a
// symlink), which is then renamed over `ringside.prom`, so the collector
// never reads half a file. The directory is not the agent's: nothing but
// those names is ever written, relative to the directory's descriptor, and
// nothing planted there (at any name) stops a write. A directory others can
// write is warned of at the start. Stopping removes `ringside.prom` (if it
// is still the file written last), so a stopped agent's counts do not
// linger as current; the start removes a temporary file a killed agent left.
class MetricsTextfile {
 public:
  static constexpr char kFileName[] = "ringside.prom";

  struct Options {
    std::string dir;  // An absolute path to an existing directory.
    absl::Duration period = absl::Seconds(15);
    MetricsOptions metrics;
    // The agent's status, from the writer's thread.
    std::function<control::StatusReply()> status;
    // A directory others can write (at the start), a write that failed,
    // and the first that succeeded after failures.
    std::function<void(const std::string&)> warn;
    std::function<void(const std::string&)> notice;
  };

  // Opens the directory and writes the file once, then every period.
  // Fails, naming the directory, when it cannot be opened; a first write
  // that fails is only warned of (and tried again each period): metrics
  // never stop a recording.
  static absl::StatusOr<std::unique_ptr<MetricsTextfile>> Start(Options options);
  ~MetricsTextfile();  // Stops the thread; removes the file.

  MetricsTextfile(const MetricsTextfile&) = delete;
  MetricsTextfile& operator=(const MetricsTextfile&) = delete;

  struct Stats {
    uint64_t written = 0;
    uint64_t failed = 0;
    std::string last_error;
  };
  Stats stats() const;

  // Writes the file now (the thread does so every period).
  absl::Status WriteOnce();

 private:
  explicit MetricsTextfile(Options options) : options_(std::move(options)) {}
  // The temporary file, then the rename.
  absl::Status Write(const std::string& text);

  Options options_;
  base::ScopedFd dir_fd_;  // The textfile directory; none if it did not open.
  // The inode written last: removed at the end only if still there.
  ino_t written_ino_ ABSL_GUARDED_BY(write_mu_) = 0;
  dev_t written_dev_ ABSL_GUARDED_BY(write_mu_) = 0;
  absl::Notification stop_;
  std::thread thread_;
  absl::Mutex write_mu_;  // One write at a time (the thread, WriteOnce()).
  mutable absl::Mutex mu_;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_METRICS_METRICS_TEXTFILE_H_
