#include "agent/sources/boot_recorder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_io.h"
#include "base/scoped_fd.h"
#include "ftrace/tracefs.h"

namespace ringside::agent {
namespace {

using State = BootRecorder::Report::State;
constexpr absl::string_view kMarkerTag(PreviousBootReader::kMarkerPrefix,
                                       sizeof(PreviousBootReader::kMarkerPrefix) - 1);

int64_t ClockNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::string KernelRelease() {
  utsname u;
  return uname(&u) == 0 ? std::string(u.release) : std::string();
}

// The newest ringside marker in the instance's text `trace` (the events of
// every CPU, oldest first), read line by line: a 12 MiB buffer is some
// megabytes of text.
std::optional<BootRecorder::Marker> NewestMarker(const std::string& trace_path) {
  const base::ScopedFd fd(open(trace_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::optional<BootRecorder::Marker> newest;
  std::string pending;
  char buf[65536];
  auto scan = [&](std::string_view line) {
    if (line.find(std::string_view(kMarkerTag.data(), kMarkerTag.size())) ==
        std::string_view::npos) {
      return;
    }
    if (std::optional<BootRecorder::Marker> m = BootRecorder::ParseMarkerLine(line)) newest = m;
  };
  for (;;) {
    const ssize_t n = base::RetryOnEintr([&] { return read(fd.get(), buf, sizeof(buf)); });
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      scan(std::string_view(pending).substr(start, nl - start));
    }
    pending.erase(0, start);
  }
  scan(pending);
  return newest;
}

// Whether every CPU's buffer of the instance (each per_cpu/cpuN it has)
// is empty; false when one cannot be read.
bool BuffersEmpty(const ftrace::Instance& instance) {
  const std::string per_cpu = instance.path() + "/per_cpu";
  DIR* dir = opendir(per_cpu.c_str());
  if (dir == nullptr) return false;
  bool empty = true;
  int cpus = 0;
  while (const dirent* entry = readdir(dir)) {
    int cpu = 0;
    absl::string_view name(entry->d_name);
    if (!absl::ConsumePrefix(&name, "cpu") || !absl::SimpleAtoi(name, &cpu)) continue;
    cpus++;
    absl::StatusOr<ftrace::Instance::CpuStats> stats = instance.ReadCpuStats(cpu);
    if (!stats.ok() || stats->entries > 0) empty = false;
  }
  closedir(dir);
  return empty && cpus > 0;
}

// The events set in the instance (set_event: "group:name" lines) and its
// tracer; nullopt when they cannot be read.
struct InstanceSettings {
  std::set<std::string> events;
  std::string tracer;
};
std::optional<InstanceSettings> ReadSettings(const ftrace::Tracefs& tracefs,
                                             const std::string& rel) {
  absl::StatusOr<std::string> events = tracefs.Read(rel + "/set_event");
  absl::StatusOr<std::string> tracer = tracefs.Read(rel + "/current_tracer");
  if (!events.ok() || !tracer.ok()) return std::nullopt;
  InstanceSettings out;
  for (absl::string_view line : absl::StrSplit(*events, '\n', absl::SkipWhitespace())) {
    std::string event(absl::StripAsciiWhitespace(line));
    std::replace(event.begin(), event.end(), ':', '/');
    out.events.insert(std::move(event));
  }
  out.tracer = std::string(absl::StripAsciiWhitespace(*tracer));
  return out;
}

// Whether only ringside's events (or none) and no tracer are set.
bool OnlyOurs(const InstanceSettings& settings) {
  if (settings.tracer != "nop") return false;
  const std::vector<std::string>& ours = BootRecorder::Events();
  return std::all_of(settings.events.begin(), settings.events.end(), [&](const std::string& e) {
    return std::find(ours.begin(), ours.end(), e) != ours.end();
  });
}

}  // namespace

const std::vector<std::string>& BootRecorder::Events() {
  // Who ran where and woke whom, processes coming and going, how they died
  // (OOM kills, fatal signals), the console (the panic message and the
  // oops backtrace), hung tasks and machine checks.
  static const auto* events = new std::vector<std::string>{"sched/sched_switch",
                                                           "sched/sched_waking",
                                                           "sched/sched_wakeup_new",
                                                           "sched/sched_process_fork",
                                                           "sched/sched_process_exec",
                                                           "sched/sched_process_exit",
                                                           "task/task_newtask",
                                                           "task/task_rename",
                                                           "oom/mark_victim",
                                                           "signal/signal_deliver",
                                                           "printk/console",
                                                           "sched/sched_process_hang",
                                                           "mce/mce_record"};
  return *events;
}

const char* BootRecorder::StateName(Report::State state) {
  switch (state) {
    case State::kOff:
      return "off";
    case State::kUnavailable:
      return "unavailable";
    case State::kRecording:
      return "recording";
    case State::kPreviousBoot:
      return "previous_boot";
    case State::kOtherTool:
      return "other_tool";
  }
  return "unknown";
}

std::optional<BootRecorder::Marker> BootRecorder::ParseMarkerLine(std::string_view text) {
  absl::string_view line(text.data(), text.size());
  const size_t tag = line.find(kMarkerTag);
  if (tag == absl::string_view::npos) return std::nullopt;
  line.remove_prefix(tag + kMarkerTag.size());
  Marker m;
  // The machine's name, which may hold spaces, is the rest of the line.
  if (const size_t at = line.find(" machine="); at != absl::string_view::npos) {
    m.machine = std::string(absl::StripTrailingAsciiWhitespace(line.substr(at + 9)));
    line = line.substr(0, at);
  }
  bool boottime = false, realtime = false;
  for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(field, '=');
    if (kv.first == "boot_id") m.boot_id = std::string(kv.second);
    if (kv.first == "kernel") m.kernel = std::string(kv.second);
    if (kv.first == "boottime_ns") boottime = absl::SimpleAtoi(kv.second, &m.boottime_ns);
    if (kv.first == "realtime_ns") realtime = absl::SimpleAtoi(kv.second, &m.realtime_ns);
  }
  if (m.boot_id.empty() || !boottime || !realtime) return std::nullopt;
  return m;
}

std::string BootRecorder::MarkerText(const Marker& m) {
  return absl::StrCat(kMarkerTag, "boot_id=", m.boot_id, " kernel=", m.kernel,
                      " boottime_ns=", m.boottime_ns, " realtime_ns=", m.realtime_ns,
                      " machine=", m.machine);
}

BootRecorder::BootRecorder(std::unique_ptr<ftrace::Instance> instance, Options options)
    : instance_(std::move(instance)), options_(std::move(options)) {}

BootRecorder::~BootRecorder() {
  // Kept for the next agent of this boot; nothing left running meanwhile.
  if (recording_) StopRecording();
  instance_.reset();  // Its lock fd, which would keep the mount busy.
  if (mounted_ != nullptr) (void)mounted_->Unmount();
}

void BootRecorder::StopRecording() {
  (void)instance_->SetTracingOn(false);
  // Ours alone: the events this recorder enabled, never the instance's
  // other settings.
  for (const std::string& e : Events()) {
    if (instance_->tracefs().Exists(absl::StrCat(instance_->relative_path(), "/events/", e))) {
      (void)instance_->tracefs().Write(
          absl::StrCat(instance_->relative_path(), "/events/", e, "/enable"), "0");
    }
  }
}

std::unique_ptr<BootRecorder> BootRecorder::Start(const Options& options, Report* report) {
  *report = Report();
  if (options.name.empty()) return nullptr;
  absl::StatusOr<ftrace::Tracefs> tracefs = ftrace::Tracefs::Open();
  if (!tracefs.ok()) {
    report->state = State::kUnavailable;
    report->detail = absl::StrCat("no tracefs: ", tracefs.status().message());
    return nullptr;
  }
  std::unique_ptr<BootRecorder> recorder = Start(*tracefs, options, report);
  if (tracefs->mounted_by_us()) {
    if (recorder == nullptr) {
      (void)tracefs->Unmount();
    } else {
      recorder->mounted_ = std::make_unique<ftrace::Tracefs>(*std::move(tracefs));
    }
  }
  return recorder;
}

std::unique_ptr<BootRecorder> BootRecorder::Start(const ftrace::Tracefs& tracefs,
                                                  const Options& options, Report* report) {
  *report = Report();
  if (options.name.empty()) return nullptr;
  const std::string rel = absl::StrCat("instances/", options.name);
  report->instance = absl::StrCat(tracefs.root(), "/", rel);
  report->state = State::kUnavailable;
  if (!tracefs.Exists(rel)) {
    report->detail =
        absl::StrCat("no ", report->instance,
                     ": Linux 6.12 and later make it at boot with `reserve_mem=12M:4096:trace "
                     "trace_instance=",
                     options.name, "^traceoff@trace` on the kernel command line");
    return nullptr;
  }
  if (!tracefs.Exists(rel + "/last_boot_info")) {
    report->detail = absl::StrCat(report->instance,
                                  " is not a persistent (boot-mapped) instance: it has no "
                                  "last_boot_info, so a reboot would not keep it");
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<ftrace::Instance>> adopted = ftrace::Instance::Adopt(tracefs, rel);
  if (!adopted.ok()) {
    report->detail = std::string(adopted.status().message());
    return nullptr;
  }
  if (absl::StatusOr<std::string> kb = tracefs.Read(rel + "/buffer_total_size_kb"); kb.ok()) {
    (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(*kb), &report->buffer_kb);
  }
  const absl::StatusOr<std::string> on = tracefs.Read(rel + "/tracing_on");
  const bool tracing = !on.ok() || absl::StripAsciiWhitespace(*on) != "0";
  const std::optional<InstanceSettings> settings = ReadSettings(tracefs, rel);
  const bool untouched =
      !tracing && settings.has_value() && settings->events.empty() && settings->tracer == "nop";
  const bool empty = untouched && BuffersEmpty(**adopted);
  const std::optional<Marker> marker =
      empty ? std::nullopt : NewestMarker(report->instance + "/trace");
  const bool this_boot = marker.has_value() && marker->boot_id == options.boot_id &&
                         settings.has_value() && OnlyOurs(*settings);
  const bool previous_boot = !empty && !this_boot && marker.has_value() && untouched;
  if (!empty && !this_boot && !previous_boot) {
    report->state = State::kOtherTool;
    report->detail =
        absl::StrCat(!untouched ? "another tool set it up (tracing on, events or a tracer set)"
                                : "it holds events another tool recorded (no ringside marker)",
                     ": left alone; once that tool is done with it, clear it (`echo > ",
                     report->instance, "/trace`, and `echo > ", report->instance,
                     "/set_event`) and restart the agent for it to record this boot");
    return nullptr;
  }
  std::unique_ptr<BootRecorder> recorder(new BootRecorder(std::move(*adopted), options));
  if (previous_boot && !recorder->TakePreviousBootEvents(*marker, report)) return nullptr;
  if (!recorder->Record(/*resumed=*/this_boot, report)) return nullptr;
  return recorder;
}

bool BootRecorder::TakePreviousBootEvents(const Marker& marker, Report* report) {
  report->previous_boot_id = marker.boot_id;
  const std::string instance = instance_->path();
  auto leave = [&](const std::string& why) {
    report->state = State::kPreviousBoot;
    report->detail = absl::StrCat("it holds ringside's events of an earlier boot (", marker.boot_id,
                                  "), left as they are: ", why, ". Read them with `cat ", instance,
                                  "/trace`, then clear it (`echo > ", instance,
                                  "/trace`) and restart the agent for it to record this boot");
    return false;
  };
  if (!options_.take_previous_boot) return leave("nothing here writes them into a snapshot");
  // Another kernel's records: this kernel's event ids and layouts could
  // misread them. Not read; the ring goes on recording (a flight recorder
  // that stopped at every kernel upgrade would miss the next panic).
  if (const std::string here = KernelRelease(); !marker.kernel.empty() && marker.kernel != here) {
    report->previous_boot_error =
        absl::StrCat("kernel ", marker.kernel, " recorded them and this is ", here,
                     ", whose event formats could misread them: cleared unread");
  } else {
    absl::StatusOr<std::unique_ptr<PreviousBootReader>> reader =
        PreviousBootReader::Open(*instance_, Events());
    if (!reader.ok()) {
      return leave(absl::StrCat("they cannot be read: ", reader.status().message()));
    }
    // From here on their pages are read (and gone from the instance): this
    // boot is recorded whatever became of them.
    if (absl::Status st = options_.take_previous_boot(reader->get(), marker, report->buffer_kb);
        !st.ok()) {
      report->previous_boot_error = std::string(st.message());
    }
  }
  if (absl::Status st = instance_->Clear(); !st.ok()) {
    report->state = State::kUnavailable;
    report->detail =
        absl::StrCat("cannot clear it after reading the earlier boot's events: ", st.message());
    return false;
  }
  report->previous_boot_taken = true;
  return true;
}

bool BootRecorder::Mark() {
  const Marker marker{options_.boot_id, KernelRelease(), options_.machine, ClockNs(CLOCK_BOOTTIME),
                      ClockNs(CLOCK_REALTIME)};
  return instance_->tracefs()
      .Write(instance_->relative_path() + "/trace_marker", MarkerText(marker))
      .ok();
}

bool BootRecorder::Record(bool resumed, Report* report) {
  // A change of clock clears the buffer: made on an empty one only (this
  // boot's earlier agent set it already).
  if (const absl::StatusOr<std::string> now = instance_->TraceClock();
      !now.ok() || *now != "boot") {
    if (absl::StatusOr<std::string> clock = instance_->SetTraceClock("boot"); !clock.ok()) {
      report->state = State::kUnavailable;
      report->detail =
          absl::StrCat("cannot set its trace clock to boot: ", clock.status().message());
      return false;
    }
  }
  std::vector<ftrace::Instance::EventSpec> specs;
  for (const std::string& e : Events()) specs.push_back({e, ""});
  const ftrace::Instance::EnableResult enabled = instance_->EnableEvents(specs);
  if (enabled.enabled.empty()) {
    report->state = State::kUnavailable;
    report->detail = "none of its events could be enabled";
    return false;
  }
  if (absl::Status st = instance_->SetTracingOn(true); !st.ok()) {
    report->state = State::kUnavailable;
    report->detail = absl::StrCat("cannot switch tracing on: ", st.message());
    StopRecording();
    return false;
  }
  // Without its marker the next boot would take the events for another
  // tool's.
  if (!Mark()) {
    report->state = State::kUnavailable;
    report->detail = "cannot write its marker (trace_marker)";
    StopRecording();
    return false;
  }
  recording_ = true;
  report->state = State::kRecording;
  report->resumed = resumed;
  report->events = enabled.enabled;
  return true;
}

}  // namespace ringside::agent
