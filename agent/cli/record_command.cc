#include "agent/cli/record_command.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/cli/record_child.h"
#include "agent/cli/record_events.h"
#include "agent/config/config_loader.h"
#include "agent/output/compressing_sink.h"
#include "agent/output/output_file.h"
#include "agent/session/tracing_session.h"
#include "agent/tracefile/packet_compression.h"
#include "base/scoped_fd.h"

namespace ringside::agent {
namespace {

// Stop requests, taken synchronously: Ctrl-C, kill, and a closed terminal
// or ssh connection.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

const char* StopReason(int sig) {
  switch (sig) {
    case SIGINT:
      return "interrupted";
    case SIGTERM:
      return "terminated";
    default:
      return "hung up (SIGHUP)";
  }
}

// What went wrong (or right again) while recording, each on its own line
// (on a terminal, first ending the progress line).
void PrintNotices(TracingSession* recording, bool tty) {
  for (const std::string& n : recording->TakeNotices()) {
    std::fprintf(stderr, "%sringside record: warning: %s\n", tty ? "\n" : "", n.c_str());
  }
}

std::string Size(uint64_t bytes) {
  if (bytes < (1 << 20)) return absl::StrFormat("%.1f KiB", static_cast<double>(bytes) / 1024);
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

std::string Count(uint64_t n) { return absl::StrCat(n); }

// The closing lines: what the file holds, what was lost at each stage and
// the setting that would have kept it (perf and Perfetto say as much at the
// end of a recording).
void PrintSummary(const TracingSession::Summary& s, const std::string& why,
                  const std::string& output, bool reopenable) {
  std::fprintf(stderr, "ringside record: %s; wrote %s (%s, %llu packets): %llu events kept",
               why.c_str(), output.c_str(), Size(s.file_bytes).c_str(),
               static_cast<unsigned long long>(s.packets),
               static_cast<unsigned long long>(s.events_kept));
  if (s.events_seen != s.events_kept) {
    std::fprintf(stderr, " of %llu recorded", static_cast<unsigned long long>(s.events_seen));
  }
  std::fprintf(stderr, ".\n");
  std::vector<std::string> lost;
  if (s.events_lost > 0) {
    lost.push_back(absl::StrCat(Count(s.events_lost),
                                " events in the staging rings before they were read (a larger "
                                "staging_budget_kb or bpf_config.ring_size_kb / "
                                "ftrace_config.buffer_size_kb, or a shorter drain_period_ms)"));
  }
  if (s.chunks_dropped > 0) {
    lost.push_back(absl::StrCat(Count(s.chunks_dropped), " chunks whose pool was empty (",
                                Count(s.events_lost_in_pool),
                                " events; the thread moving chunks into the buffers fell 100 ms "
                                "behind its readers: a loaded machine or a slow disk)"));
  }
  if (s.events_lost_in_buffers > 0) {
    lost.push_back(
        absl::StrCat(Count(s.events_lost_in_buffers),
                     " events in the buffers before they were read, in the chunks below"));
  }
  if (s.chunks_overwritten > 0) {
    lost.push_back(
        absl::StrCat(Count(s.chunks_overwritten), " chunks (", Size(s.bytes_overwritten),
                     ") overwritten when the ring wrapped: the oldest data (a larger buffer: -b / "
                     "buffers.size_kb, or write_into_file to stream it all to the file)"));
  }
  if (s.chunks_discarded > 0) {
    lost.push_back(absl::StrCat(Count(s.chunks_discarded),
                                " chunks refused by the full DISCARD buffer: the newest data (a "
                                "larger buffer: -b / buffers.size_kb, or write_into_file)"));
  }
  for (const std::string& l : lost) std::fprintf(stderr, "ringside record: lost %s\n", l.c_str());
  if (!lost.empty()) {
    std::fprintf(stderr,
                 "ringside record: trace_stats in the file has the losses per source "
                 "and CPU\n");
  }
  // A pipe, FIFO or /dev/fd/N (`-o >(gzip > t.gz)`) cannot be read again:
  // no hint to open what is gone.
  if (reopenable) {
    std::fprintf(stderr,
                 "ringside record: open it in https://ui.perfetto.dev or summarize it with "
                 "'ringside inspect %s'\n",
                 output.c_str());
  }
}

// What the flags and the config ask `record` to do, checked.
struct RecordPlan {
  std::string config_path;  // -c; empty: the embedded config.
  config::TraceConfig config;
  // How long to record; zero: until CMD ends (or a stop signal).
  absl::Duration duration = absl::ZeroDuration();
  std::string output;  // The trace file; "-": standard output.
};

// The config -c names, or the embedded one. nullopt, or the exit status
// when it cannot be loaded.
std::optional<int> LoadRecordConfig(const std::string& config_path, config::TraceConfig* config) {
  if (config_path.empty()) {
    *config = DefaultRecordConfig();
    return std::nullopt;
  }
  absl::StatusOr<config::TraceConfig> loaded = LoadConfigFile(config_path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "ringside record: %s\n", std::string(loaded.status().message()).c_str());
    return kExitUsage;
  }
  *config = *loaded;
  // A flight recorder's config, given to record: its triggers take
  // snapshots in the agent only. Said, not silently dropped
  // (docs/config.md: a program that does not act on a mode says so).
  if (config->trigger_config().triggers_size() > 0) {
    std::fprintf(stderr,
                 "ringside record: note: %s: trigger_config's %d trigger(s) take snapshots in "
                 "'ringside agent' only; record ignores them and records as usual\n",
                 config_path.c_str(), config->trigger_config().triggers_size());
  }
  return std::nullopt;
}

// The flags below add to `config` or change it; each returns nullopt, or
// the exit status of a usage error.

// -e: ftrace events, each of which this kernel must have.
std::optional<int> ApplyEventFlags(const CommandSpec& spec, const ParsedArgs& args,
                                   config::TraceConfig* config) {
  std::vector<std::string> events;
  for (const std::string& e : args.All("event")) {
    if (absl::Status s = AddEvent(e, config, &events.emplace_back()); !s.ok()) {
      return UsageError(spec, std::string(s.message()));
    }
  }
  if (absl::Status s = CheckEventsExist(args.All("event"), events); !s.ok()) {
    return UsageError(spec, std::string(s.message()));
  }
  return std::nullopt;
}

// -b: the size of the first buffer.
std::optional<int> ApplyBufferSizeFlag(const CommandSpec& spec, const ParsedArgs& args,
                                       config::TraceConfig* config) {
  if (!args.Has("buffer-size")) return std::nullopt;
  absl::StatusOr<uint64_t> kb = ParseSizeKb(args.Get("buffer-size"));
  if (!kb.ok()) return UsageError(spec, absl::StrCat("-b: ", kb.status().message()));
  if (*kb < kMinBufferSizeKb || *kb > kMaxBufferSizeKb) {
    return UsageError(spec, absl::StrCat("-b ", args.Get("buffer-size"),
                                         ": a buffer is at least 4 KiB and below 4 GiB"));
  }
  config->mutable_buffers(0)->set_size_kb(static_cast<uint32_t>(*kb));
  return std::nullopt;
}

// -z / --compress: the file's codec.
std::optional<int> ApplyCompressFlag(const CommandSpec& spec, const ParsedArgs& args,
                                     config::TraceConfig* config) {
  if (!args.Has("compress")) return std::nullopt;
  const std::string codec = args.Get("compress");
  // "-z zstd:9" would run zstd:9 as CMD: the codec goes after '='.
  if (codec.empty() && !args.command.empty() && ParsePacketCompression(args.command[0]).ok()) {
    return UsageError(spec, absl::StrCat("-z takes no value: write --compress=", args.command[0],
                                         " (or -z", args.command[0], ")"));
  }
  absl::StatusOr<PacketCompression> c = ParsePacketCompression(codec.empty() ? "zstd" : codec);
  if (!c.ok()) return UsageError(spec, absl::StrCat("--compress: ", c.status().message()));
  SetPacketCompression(*c, config);
  return std::nullopt;
}

// With CMD, a duration bounds the recording only when asked for (the
// flag, or a config file's duration_ms): the embedded 10 s does not.
// The config embedded in the file says what was asked for: the flag's
// duration, or none when only CMD's end stops the recording.
std::optional<int> ApplyDurationFlag(const CommandSpec& spec, const ParsedArgs& args,
                                     RecordPlan* plan) {
  if (args.Has("duration")) {
    absl::StatusOr<absl::Duration> d = ParseDurationFlag("--duration", args.Get("duration"));
    if (!d.ok()) return UsageError(spec, std::string(d.status().message()));
    plan->duration = *d;
    plan->config.set_duration_ms(static_cast<uint32_t>(
        std::min<int64_t>(absl::ToInt64Milliseconds(plan->duration), UINT32_MAX)));
  } else if (args.command.empty() || !plan->config_path.empty()) {
    plan->duration = absl::Milliseconds(plan->config.duration_ms());
  } else {
    plan->config.clear_duration_ms();
  }
  return std::nullopt;
}

// Everything that can be checked before anything is opened or loaded:
// the config with the flags applied, and whether CMD can be run.
// nullopt, or the exit status when the command ends here.
std::optional<int> PlanRecording(const CommandSpec& spec, const ParsedArgs& args,
                                 RecordPlan* plan) {
  plan->config_path = args.Get("config");
  if (auto status = LoadRecordConfig(plan->config_path, &plan->config)) return status;
  if (auto status = ApplyEventFlags(spec, args, &plan->config)) return status;
  if (auto status = ApplyBufferSizeFlag(spec, args, &plan->config)) return status;
  if (auto status = ApplyCompressFlag(spec, args, &plan->config)) return status;
  if (absl::Status s =
          ValidateConfig(plan->config, plan->config_path.empty() ? "flags" : plan->config_path);
      !s.ok()) {
    std::fprintf(stderr, "ringside record: %s\n", std::string(s.message()).c_str());
    return kExitUsage;
  }
  if (auto status = ApplyDurationFlag(spec, args, plan)) return status;
  plan->output = args.Get("output", plan->config.output_path());
  if (plan->output.empty()) plan->output = "ringside.pftrace";
  if (!args.command.empty()) {
    std::string why;
    if (const int code = CheckCommand(args.command[0], &why); code != 0) {
      std::fprintf(stderr, "ringside record: cannot run %s: %s; nothing recorded\n",
                   args.command[0].c_str(), why.c_str());
      return code;
    }
  }
  return std::nullopt;
}

// The trace file, and what the recording writes into: the file itself,
// or a compressing sink in front of it.
struct RecordOutput {
  std::unique_ptr<OutputFile> file;
  std::unique_ptr<CompressingSink> compressing;  // Null: not compressed.
  TraceSink* sink = nullptr;
};

// Opens the plan's output. nullopt, or the exit status when it cannot.
std::optional<int> OpenRecordOutput(const ParsedArgs& args, const RecordPlan& plan,
                                    RecordOutput* out) {
  const config::TraceConfig& config = plan.config;
  absl::StatusOr<std::unique_ptr<OutputFile>> file = OutputFile::Open(
      plan.output,
      config.write_into_file() ? OutputFile::Mode::kStreaming : OutputFile::Mode::kWholeFile,
      config.write_into_file() ? 0 : TracingSession::MaxTraceBytes(config),
      args.Has("follow-symlink") ? OutputFile::Symlinks::kFollowAny
                                 : OutputFile::Symlinks::kFollowOwn);
  if (!file.ok()) {
    std::fprintf(stderr, "ringside record: %s\n", std::string(file.status().message()).c_str());
    return kExitFailure;
  }
  if (!(*file)->warning().empty()) {
    std::fprintf(stderr, "ringside record: warning: %s\n", (*file)->warning().c_str());
  }
  out->file = std::move(*file);
  out->sink = out->file.get();
  if (const PacketCompression c = PacketCompressionOf(config); c.codec != PacketCodec::kNone) {
    absl::StatusOr<std::unique_ptr<PacketCompressor>> compressor = PacketCompressor::Create(c);
    if (!compressor.ok()) {
      std::fprintf(stderr, "ringside record: %s\n",
                   std::string(compressor.status().message()).c_str());
      return kExitUsage;
    }
    out->compressing = std::make_unique<CompressingSink>(out->file.get(), std::move(*compressor));
    out->sink = out->compressing.get();
  }
  return std::nullopt;
}

// Creates the tracing session and starts it into `sink`, printing its
// warnings. nullopt, or the exit status when it cannot start.
std::optional<int> StartRecording(const config::TraceConfig& config, TraceSink* sink, int wake_fd,
                                  std::unique_ptr<TracingSession>* recording) {
  absl::StatusOr<std::unique_ptr<TracingSession>> created = TracingSession::Create(config);
  if (!created.ok()) {
    std::fprintf(stderr, "ringside record: %s\n", std::string(created.status().message()).c_str());
    return kExitFailure;
  }
  *recording = std::move(*created);
  (*recording)->SetAttentionHook([wake_fd] {
    const uint64_t one = 1;
    (void)!write(wake_fd, &one, sizeof(one));
  });
  // Start() can add warnings (a source that loaded but would not start).
  const absl::Status started = (*recording)->Start(sink);
  for (const std::string& w : (*recording)->warnings()) {
    std::fprintf(stderr, "ringside record: warning: %s\n", w.c_str());
  }
  if (!started.ok()) {
    std::fprintf(stderr, "ringside record: %s\n", std::string(started.message()).c_str());
    return kExitFailure;
  }
  return std::nullopt;
}

// The progress line on a terminal, rewritten in place.
void PrintProgress(const TracingSession::Progress& p) {
  const double fill = p.buffer_size
                          ? 100.0 * static_cast<double>(std::min(p.bytes_written, p.buffer_size)) /
                                static_cast<double>(p.buffer_size)
                          : 0;
  std::fprintf(stderr,
               "\r[ringside] %6.1f s  %9.0f events/s  buffer %5.1f%% full  "
               "lost: %llu events, %.1f MiB overwritten   ",
               p.elapsed_s, p.elapsed_s > 0 ? static_cast<double>(p.events) / p.elapsed_s : 0, fill,
               static_cast<unsigned long long>(p.events_lost),
               static_cast<double>(p.bytes_lost) / (1 << 20));
}

// How the recording ended.
struct RecordingEnd {
  std::string why = "duration reached";
  // A stop signal that ends the recording while CMD runs goes on to CMD, as
  // a shell's Ctrl-C reaches the whole job; CMD's fate is then ours.
  int stop_signal = 0;
  bool child_ended = false;  // CMD ended by itself.
  int child_status = 0;      // CMD's, as waitpid() gives it.
};

// Waits for what ends the recording: the duration, the file's size limit,
// a stop signal or CMD's end (`child`; -1: none). Meanwhile prints the
// recording's notices and, on a terminal, its progress twice a second.
// Asleep otherwise: the session wakes it through `wake_fd` (its attention
// hook), and the signals through `signal_fd` (a signalfd of the blocked
// ones: what this does not read stays pending, for StopCommand()). Waking
// every 500 ms to look cost ~0.1-0.2 ms of CPU a second on a 2-CPU VM,
// where a wake-up costs 50-115 us.
RecordingEnd WaitForTheEnd(TracingSession* recording, int signal_fd, int wake_fd,
                           absl::Duration duration, pid_t child, bool tty) {
  const absl::Time deadline =
      duration == absl::ZeroDuration() ? absl::InfiniteFuture() : absl::Now() + duration;
  RecordingEnd end;
  for (;;) {
    const absl::Time now = absl::Now();
    if (now >= deadline) break;
    if (recording->file_limit_reached()) {
      end.why = "max_file_size_bytes reached";
      break;
    }
    absl::Duration wait = deadline - now;
    if (tty) wait = std::min(wait, absl::Milliseconds(500));
    // Rounded up: woken a millisecond early, it would wait again for nothing.
    const int64_t wait_ms = absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1)));
    pollfd fds[2] = {{signal_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    poll(fds, 2, static_cast<int>(std::min<int64_t>(wait_ms, 3'600'000)));
    if (fds[1].revents & POLLIN) {
      uint64_t drained;
      (void)!read(wake_fd, &drained, sizeof(drained));
    }
    signalfd_siginfo info;
    while (read(signal_fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
        end.why = StopReason(sig);
        end.stop_signal = sig;
        return end;
      }
      if (sig == SIGCHLD && child > 0 && waitpid(child, &end.child_status, WNOHANG) == child) {
        end.child_ended = true;
        end.why = DescribeExit(end.child_status);
        return end;
      }
    }
    PrintNotices(recording, tty);
    if (tty) PrintProgress(recording->progress());
  }
  return end;
}

void PrintCompression(const CompressingSink& c) {
  std::fprintf(stderr, "ringside record: %s: %s of packets in %s (%.2fx), %.0f ms of CPU\n",
               PacketCodecName(c.compression().codec), Size(c.bytes_in()).c_str(),
               Size(c.bytes_out()).c_str(),
               c.bytes_in() > 0 ? static_cast<double>(c.bytes_out()) / c.bytes_in() : 0.0,
               static_cast<double>(c.cpu_ns()) / 1e6);
}

// Stops the recording, writes the trace and says what it holds. Returns
// the command's exit status.
int FinishRecording(TracingSession* recording, const RecordOutput& out, const std::string& output,
                    const RecordingEnd& end, pid_t child) {
  absl::StatusOr<TracingSession::Summary> summary =
      recording->Stop().ok() ? recording->WriteTrace(out.sink)
                             : absl::InternalError("the tracing session did not stop");
  PrintNotices(recording, /*tty=*/false);
  if (!summary.ok()) {
    std::fprintf(stderr, "ringside record: %s\n", std::string(summary.status().message()).c_str());
    return kExitFailure;
  }
  struct stat written;
  const bool reopenable =
      output != "-" && stat(output.c_str(), &written) == 0 && S_ISREG(written.st_mode);
  PrintSummary(*summary, end.why, output == "-" ? "standard output" : output, reopenable);
  if (out.compressing != nullptr) PrintCompression(*out.compressing);
  // CMD's status when it ended by itself or with the signal that stopped
  // us (128 + signal, as shells give); when the duration or a file limit
  // ended the recording first and stopped CMD, the recording's.
  if (end.child_ended || (child > 0 && end.stop_signal != 0)) {
    if (WIFEXITED(end.child_status)) return WEXITSTATUS(end.child_status);
    if (WIFSIGNALED(end.child_status)) return 128 + WTERMSIG(end.child_status);
  }
  return kExitOk;
}

}  // namespace

const CommandSpec& RecordCommandSpec() {
  static const CommandSpec* spec = new CommandSpec{
      .name = "record",
      .synopsis =
          "ringside record [-c CONFIG] [-o FILE] [-t D] [-e EVENT]... [-b SIZE] "
          "[-z] [[--] CMD ...]",
      .summary =
          "Records this machine into a Perfetto trace: scheduling, processes and incidents\n"
          "with BPF (ftrace when BPF cannot load), plus any ftrace event asked for. Records\n"
          "for a duration, or while CMD runs (its exit status is passed on, 128 + the\n"
          "signal if one ended it); with both, the first to end stops the recording (a CMD\n"
          "still running gets SIGTERM). Ctrl-C, SIGTERM and SIGHUP stop early, are passed\n"
          "on to CMD (a second one, or 10 s, kills a CMD that goes on), and still write a\n"
          "complete file. Needs root (or CAP_BPF, CAP_PERFMON and tracefs access) for\n"
          "kernel events.",
      .flags =
          {
              {'c', "config", "FILE",
               "config in protobuf text format (docs/config.md); default: embedded", false},
              {'o', "output", "FILE",
               "trace file (a new name or a regular file; a symlink of your own is followed); "
               "'-' for standard output; default: the config's output_path, else "
               "ringside.pftrace",
               false},
              {0, "follow-symlink", "",
               "follow -o's symlink even when another user owns it (refused by default: "
               "it could point anywhere)",
               false},
              {'t', "duration", "D",
               "how long to record (10s, 500ms, 2m); default: the config's duration_ms, "
               "or while CMD runs",
               false},
              {'e', "event", "EVENT",
               "add an ftrace event: group:name, group:* or group:name/filter/ (repeatable); "
               "one this kernel lacks is refused ('ringside list' shows those there are)",
               true},
              {'b', "buffer-size", "SIZE",
               "size of the central ring buffer (64M, 512K, 1G; plain: KiB)", false},
              {'z', "compress", "CODEC",
               "compress the file as Perfetto does: zstd (what -z alone means), zstd:LEVEL "
               "(1-19, default 3), deflate, or none; default: the config's compression",
               false, /*optional_value=*/true},
          },
      .examples =
          "  ringside record                              # 10 s of this machine\n"
          "  ringside record -o boot.pftrace --duration 1m\n"
          "  ringside record -- make -j8                  # while make runs\n"
          "  ringside record -e irq:* -e 'signal:signal_generate/sig == 9/' -b 256M\n"
          "  ringside record -z -- ./load-test           # a zstd-compressed file\n"
          "  ringside record -c my.pbtxt -o - | gzip > trace.pftrace.gz\n",
      .max_positional = 0,
      .rest_is_command = true,
  };
  return *spec;
}

int RunRecordCommand(const ParsedArgs& args) {
  RecordPlan plan;
  if (auto status = PlanRecording(RecordCommandSpec(), args, &plan)) return *status;

  // Signals are taken synchronously by this thread; every thread started
  // from here on inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : kStopSignals) sigaddset(&signals, sig);
  sigaddset(&signals, SIGCHLD);
  sigprocmask(SIG_BLOCK, &signals, nullptr);

  // The output first: a path that cannot work fails before anything loads.
  RecordOutput out;
  if (auto status = OpenRecordOutput(args, plan, &out)) return *status;
  base::ScopedFd wake_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  base::ScopedFd signal_fd;
  if (wake_fd) signal_fd.reset(signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signal_fd) {
    std::fprintf(stderr, "ringside record: %s: %s\n", !wake_fd ? "eventfd" : "signalfd",
                 std::strerror(errno));
    return kExitFailure;
  }
  std::unique_ptr<TracingSession> recording;
  if (auto status = StartRecording(plan.config, out.sink, wake_fd.get(), &recording)) {
    return *status;
  }

  pid_t child = -1;
  if (!args.command.empty()) {
    int err = 0;
    child = SpawnCommand(args.command, &err);
    if (child < 0) {
      // Found before recording, gone or refused since: no trace of nothing.
      std::fprintf(stderr, "ringside record: cannot run %s: %s; nothing recorded\n",
                   args.command[0].c_str(), std::strerror(err));
      recording.reset();
      return err == ENOENT ? 127 : 126;
    }
  }
  const bool tty = isatty(STDERR_FILENO);
  RecordingEnd end =
      WaitForTheEnd(recording.get(), signal_fd.get(), wake_fd.get(), plan.duration, child, tty);
  if (tty) std::fprintf(stderr, "\n");
  if (child > 0 && !end.child_ended) {
    // With the stop signal that ended the recording, else SIGTERM.
    end.child_status =
        StopCommand(child, args.command[0], end.stop_signal != 0 ? end.stop_signal : SIGTERM,
                    signals, kCommandGraceTime, tty);
    end.why += "; " + DescribeExit(end.child_status);
  }
  return FinishRecording(recording.get(), out, plan.output, end, child);
}

}  // namespace ringside::agent
