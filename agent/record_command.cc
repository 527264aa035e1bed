#include "agent/record_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/config_loader.h"
#include "agent/recording.h"

ABSL_FLAG(std::string, c, "", "record: config file (protobuf text format); default: embedded");
ABSL_FLAG(std::string, o, "",
          "record: output trace file; default: the config's output_path, else ringside.pftrace");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "record: how long to record (e.g. 10s); default: the config's duration_ms");

namespace ringside::agent {
namespace {

// Starts `args` as a child process; returns its pid or -1.
pid_t Spawn(const std::vector<std::string>& args) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  // The child gets the default signal mask back.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::fprintf(stderr, "ringside record: cannot run %s: %s\n", argv[0], std::strerror(errno));
  _exit(127);
}

// What went wrong (or right again) while recording, each on its own line
// (on a terminal, first ending the progress line).
void PrintNotices(Recording* recording, bool tty) {
  for (const std::string& n : recording->TakeNotices()) {
    std::fprintf(stderr, "%sringside record: warning: %s\n", tty ? "\n" : "", n.c_str());
  }
}

std::string Size(uint64_t bytes) {
  if (bytes < (1 << 20)) return absl::StrFormat("%.1f KiB", static_cast<double>(bytes) / 1024);
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

// The closing lines: what the file holds, and what was lost on the way
// (perf and Perfetto say the same at the end of a recording).
void PrintSummary(const Recording::Summary& s, const char* why, const std::string& output) {
  std::fprintf(stderr,
               "ringside record: %s; wrote %s (%s, %llu packets, %llu events). Open it in "
               "https://ui.perfetto.dev or summarize it with 'ringside inspect %s'.\n",
               why, output.c_str(), Size(s.file_bytes).c_str(),
               static_cast<unsigned long long>(s.packets),
               static_cast<unsigned long long>(s.events), output.c_str());
  std::vector<std::string> lost;
  if (s.events_lost > 0) {
    lost.push_back(absl::StrFormat(
        "%llu events in the staging rings (larger: bpf_config.ring_size_kb, buffer_size_kb)",
        static_cast<unsigned long long>(s.events_lost)));
  }
  if (s.chunks_dropped > 0) {
    lost.push_back(absl::StrFormat("%llu chunks, their pool empty",
                                   static_cast<unsigned long long>(s.chunks_dropped)));
  }
  if (!lost.empty()) {
    std::fprintf(stderr,
                 "ringside record: warning: lost %s; trace_stats has them per source and CPU\n",
                 absl::StrJoin(lost, " and ").c_str());
  }
  if (s.bytes_overwritten > 0) {
    std::fprintf(stderr,
                 "ringside record: the buffers wrapped: their oldest %s were overwritten "
                 "(a flight recorder keeps the newest; larger buffers or write_into_file keep "
                 "more)\n",
                 Size(s.bytes_overwritten).c_str());
  }
}

}  // namespace

int RunRecordCommand(const std::vector<std::string>& args) {
  config::TraceConfig config;
  const std::string config_path = absl::GetFlag(FLAGS_c);
  if (config_path.empty()) {
    config = DefaultRecordConfig();
  } else {
    absl::StatusOr<config::TraceConfig> loaded = LoadConfigFile(config_path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "ringside record: %s\n", std::string(loaded.status().message()).c_str());
      return 2;
    }
    config = *loaded;
  }
  absl::Duration duration = absl::GetFlag(FLAGS_duration);
  if (duration == absl::ZeroDuration()) duration = absl::Milliseconds(config.duration_ms());
  std::string output = absl::GetFlag(FLAGS_o);
  if (output.empty()) output = config.output_path();
  if (output.empty()) output = "ringside.pftrace";

  // Signals are taken synchronously by this thread; every thread started
  // from here on inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGCHLD);
  sigprocmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<Recording>> recording = Recording::Create(config, output);
  if (!recording.ok()) {
    std::fprintf(stderr, "ringside record: %s\n",
                 std::string(recording.status().message()).c_str());
    return 1;
  }
  // Start() can add warnings (a source that loaded but would not start).
  const absl::Status started = (*recording)->Start();
  for (const std::string& w : (*recording)->warnings()) {
    std::fprintf(stderr, "ringside record: warning: %s\n", w.c_str());
  }
  if (!started.ok()) {
    std::fprintf(stderr, "ringside record: %s\n", std::string(started.message()).c_str());
    return 1;
  }

  pid_t child = -1;
  int child_status = 0;
  if (!args.empty()) child = Spawn(args);
  const bool tty = isatty(STDERR_FILENO);
  const absl::Time deadline = child > 0 || duration == absl::ZeroDuration()
                                  ? absl::InfiniteFuture()
                                  : absl::Now() + duration;
  const char* why = "duration reached";
  for (;;) {
    if (absl::Now() >= deadline) break;
    if ((*recording)->file_limit_reached()) {
      why = "max_file_size_bytes reached";
      break;
    }
    const absl::Duration wait = std::min(absl::Milliseconds(500), deadline - absl::Now());
    timespec ts = absl::ToTimespec(wait);
    const int sig = sigtimedwait(&signals, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) {
      why = sig == SIGINT ? "interrupted" : "terminated";
      break;
    }
    if (sig == SIGCHLD && child > 0 && waitpid(child, &child_status, WNOHANG) == child) {
      why = "command exited";
      break;
    }
    PrintNotices(recording->get(), tty);
    if (tty) {
      const Recording::Progress p = (*recording)->progress();
      const double fill =
          p.buffer_size ? 100.0 * static_cast<double>(std::min(p.bytes_written, p.buffer_size)) /
                              static_cast<double>(p.buffer_size)
                        : 0;
      std::fprintf(stderr,
                   "\r[ringside] %6.1f s  %9.0f events/s  buffer %5.1f%% full  "
                   "lost: %llu events, %.1f MiB overwritten   ",
                   p.elapsed_s, p.elapsed_s > 0 ? static_cast<double>(p.events) / p.elapsed_s : 0,
                   fill, static_cast<unsigned long long>(p.events_lost),
                   static_cast<double>(p.bytes_lost) / (1 << 20));
    }
  }
  if (tty) std::fprintf(stderr, "\n");
  if (child > 0 && std::strcmp(why, "command exited") != 0) {
    kill(child, SIGTERM);
    waitpid(child, &child_status, 0);
  }

  absl::StatusOr<Recording::Summary> summary = (*recording)->StopAndWrite();
  PrintNotices(recording->get(), /*tty=*/false);
  if (!summary.ok()) {
    std::fprintf(stderr, "ringside record: %s\n", std::string(summary.status().message()).c_str());
    return 1;
  }
  PrintSummary(*summary, why, output);
  if (child > 0) {
    if (WIFEXITED(child_status)) return WEXITSTATUS(child_status);
    if (WIFSIGNALED(child_status)) return 128 + WTERMSIG(child_status);
  }
  return 0;
}

}  // namespace ringside::agent
