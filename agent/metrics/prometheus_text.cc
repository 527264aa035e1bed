#include "agent/metrics/prometheus_text.h"

#include <sys/utsname.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace ringside::agent {
namespace {

using Labels = std::vector<std::pair<absl::string_view, std::string>>;

// A label value as the format quotes it: backslash, double quote and line
// feed escaped. (Bytes that are not UTF-8 cannot come from the bounded
// sets the labels are made of.)
std::string Quoted(absl::string_view value) {
  std::string out = "\"";
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

// Counters and sizes exactly, as integers; seconds and ratios in enough
// digits for a microsecond over a year.
std::string Value(uint64_t v) { return absl::StrCat(v); }
std::string Value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return absl::StrFormat("%.15g", v);
}

// One metric family: its HELP and TYPE lines, then its samples, together
// (the format wants a family's samples in one group). A family without
// samples is left out.
class Family {
 public:
  Family(std::string* out, absl::string_view name, absl::string_view type, absl::string_view help)
      : out_(out), name_(name), type_(type), help_(help) {}
  ~Family() {
    if (samples_.empty()) return;
    absl::StrAppend(out_, "# HELP ", name_, " ", help_, "\n# TYPE ", name_, " ", type_, "\n",
                    samples_);
  }
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  template <typename T>
  Family& Add(const Labels& labels, T value) {
    absl::StrAppend(&samples_, name_);
    if (!labels.empty()) {
      samples_ += '{';
      for (size_t i = 0; i < labels.size(); i++) {
        absl::StrAppend(&samples_, i > 0 ? "," : "", labels[i].first, "=",
                        Quoted(labels[i].second));
      }
      samples_ += '}';
    }
    absl::StrAppend(&samples_, " ", Value(value), "\n");
    return *this;
  }
  template <typename T>
  Family& Add(T value) {
    return Add(Labels{}, value);
  }

 private:
  std::string* out_;
  absl::string_view name_, type_, help_;
  std::string samples_;
};

constexpr char kCounter[] = "counter";
constexpr char kGauge[] = "gauge";

double Seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

void Sources(const control::StatusReply& s, const MetricsOptions& o, std::string* out) {
  {
    Family f(out, "ringside_source_up", kGauge,
             "Whether the data source records (1) or has not started, stopped or failed (0).");
    for (const control::SourceStatus& src : s.sources()) {
      f.Add({{"source", src.name()}}, uint64_t{src.state() == control::SourceStatus::RUNNING});
    }
  }
  {
    Family f(out, "ringside_events_total", kCounter,
             "Events the data source recorded since it started.");
    for (const control::SourceStatus& src : s.sources()) {
      f.Add({{"source", src.name()}}, src.events());
    }
  }
  {
    // Always there, 0 before the first loss, so that increase() sees it.
    Family f(out, "ringside_events_lost_total", kCounter,
             "Events the data source lost, by stage: staging, the kernel-side rings (all CPUs "
             "and kinds).");
    for (const control::SourceStatus& src : s.sources()) {
      uint64_t lost = 0;
      for (const control::SourceStatus::Loss& l : src.losses()) lost += l.events();
      f.Add({{"source", src.name()}, {"stage", "staging"}}, lost);
    }
  }
  {
    // By kind (and CPU, when asked): only the counters that are not 0.
    Family f(out, "ringside_staging_events_lost_total", kCounter,
             o.per_cpu ? "Events lost in the staging rings, by source, kind (the record type "
                         "whose ring was full, bpf_missed_runs, ftrace_overrun, stack_*: stacks "
                         "lost) and CPU."
                       : "Events lost in the staging rings, by source and kind (the record type "
                         "whose ring was full, bpf_missed_runs, ftrace_overrun, stack_*: stacks "
                         "lost).");
    for (const control::SourceStatus& src : s.sources()) {
      std::map<std::pair<std::string, int32_t>, uint64_t> lost;
      for (const control::SourceStatus::Loss& l : src.losses()) {
        lost[{l.kind(), o.per_cpu ? l.cpu() : 0}] += l.events();
      }
      for (const auto& [key, events] : lost) {
        Labels labels = {{"source", src.name()}, {"kind", key.first}};
        if (o.per_cpu) {
          labels.emplace_back("cpu", absl::StrCat(key.second));
        }
        f.Add(labels, events);
      }
    }
  }
  {
    Family f(out, "ringside_reader_cpu_seconds_total", kCounter,
             "CPU time the data source's reader thread used.");
    for (const control::SourceStatus& src : s.sources()) {
      f.Add({{"source", src.name()}}, src.reader_cpu_seconds());
    }
  }
  {
    Family f(out, "ringside_reader_paused_seconds_total", kCounter,
             "Time max_consumer_cpu_percent paused the data source's reader (its staging rings "
             "fill meanwhile).");
    for (const control::SourceStatus& src : s.sources()) {
      f.Add({{"source", src.name()}}, src.reader_paused_seconds());
    }
  }
}

// Only the sources that record stacks.
void Stacks(const control::StatusReply& s, std::string* out) {
  std::vector<const control::SourceStatus*> sources;
  for (const control::SourceStatus& src : s.sources()) {
    if (src.has_stacks()) sources.push_back(&src);
  }
  if (sources.empty()) return;
  {
    Family f(out, "ringside_stack_samples_total", kCounter,
             "Stack samples written, by the counter they weigh in: blocked_time (a thread that "
             "blocked) or cpu_time (a CPU sample).");
    for (const control::SourceStatus* src : sources) {
      f.Add({{"source", src->name()}, {"counter", "blocked_time"}}, src->stacks().blocked_samples())
          .Add({{"source", src->name()}, {"counter", "cpu_time"}}, src->stacks().cpu_samples());
    }
  }
  {
    Family f(out, "ringside_stack_blocked_unsampled_total", kCounter,
             "Blocks shorter than the sampling period (bpf_config.stacks.blocked_period_us) "
             "whose stacks were not taken; the sampled ones stand for them.");
    for (const control::SourceStatus* src : sources) {
      f.Add({{"source", src->name()}}, src->stacks().blocked_unsampled());
    }
  }
  {
    Family f(out, "ringside_stack_maps_reads_total", kCounter,
             "Reads of a process's /proc/PID/maps to name its user frames: read, or unreadable "
             "(the process gone before its stacks were read).");
    for (const control::SourceStatus* src : sources) {
      const control::StackStatus& st = src->stacks();
      f.Add({{"source", src->name()}, {"result", "read"}}, st.maps_reads() - st.maps_unreadable())
          .Add({{"source", src->name()}, {"result", "unreadable"}}, st.maps_unreadable());
    }
  }
  {
    Family f(out, "ringside_stack_user_frames_unnamed_total", kCounter,
             "User frames left unnamed, by why: in no mapping of their process (mostly a "
             "frame-pointer chain broken past its first frames), or in a binary that could not "
             "be read; each distinct frame once per process.");
    for (const control::SourceStatus* src : sources) {
      f.Add({{"source", src->name()}, {"reason", "unmapped"}}, src->stacks().user_frames_unmapped())
          .Add({{"source", src->name()}, {"reason", "binary_unreadable"}},
               src->stacks().binaries_unreadable());
    }
  }
  {
    Family f(out, "ringside_stack_frames_interned_total", kCounter,
             "Frames of stacks interned, named or not (an unnamed one keeps its build id and "
             "rel_pc); each once per generation.");
    for (const control::SourceStatus* src : sources) {
      f.Add({{"source", src->name()}, {"result", "named"}}, src->stacks().frames_named())
          .Add({{"source", src->name()}, {"result", "unnamed"}}, src->stacks().frames_unnamed());
    }
  }
  {
    Family f(out, "ringside_stack_callstacks_interned_total", kCounter,
             "Callstacks interned; each once per generation.");
    for (const control::SourceStatus* src : sources) {
      f.Add({{"source", src->name()}}, src->stacks().callstacks());
    }
  }
  {
    Family f(out, "ringside_stack_interned_bytes", kGauge,
             "Bytes the current generation of the stacks' interned data takes in the durable "
             "store.");
    for (const control::SourceStatus* src : sources) {
      f.Add({{"source", src->name()}}, src->stacks().interned_bytes());
    }
  }
  {
    Family f(out, "ringside_stack_generations_total", kCounter,
             "Generations of the stacks' interned data begun, the first included.");
    for (const control::SourceStatus* src : sources) {
      f.Add({{"source", src->name()}}, src->stacks().generations());
    }
  }
}

void Buffers(const control::StatusReply& s, std::string* out) {
  const auto each = [&s](Family& f, auto value) {
    for (int i = 0; i < s.buffers_size(); i++)
      f.Add({{"buffer", absl::StrCat(i)}}, value(s.buffers(i)));
  };
  using B = control::BufferStatus;
  {
    Family f(out, "ringside_buffer_size_bytes", kGauge, "Size of the central ring buffer.");
    each(f, [](const B& b) { return b.size_bytes(); });
  }
  {
    Family f(out, "ringside_buffer_used_bytes", kGauge,
             "Bytes of the central buffer that hold data.");
    each(f, [](const B& b) {
      return static_cast<uint64_t>(
          std::llround(b.fill_percent() / 100.0 * static_cast<double>(b.size_bytes())));
    });
  }
  {
    Family f(out, "ringside_buffer_written_bytes_total", kCounter,
             "Bytes of chunks committed into the central buffer.");
    each(f, [](const B& b) { return b.bytes_written(); });
  }
  {
    Family f(out, "ringside_buffer_overwritten_bytes_total", kCounter,
             "Bytes of chunks the ring overwrote before anyone read them (its oldest events, "
             "as a ring keeps the newest).");
    each(f, [](const B& b) { return b.bytes_overwritten(); });
  }
  {
    Family f(out, "ringside_buffer_wraps_total", kCounter,
             "Times the central buffer's write position went back to its start.");
    each(f, [](const B& b) { return b.write_wraps(); });
  }
  if (s.has_durable()) {
    const control::DurableStatus& d = s.durable();
    Family(out, "ringside_durable_entries", kGauge,
           "Process and thread descriptors the durable buffer holds.")
        .Add(d.entries());
    Family(out, "ringside_durable_used_bytes", kGauge,
           "Bytes the durable buffer's descriptors take.")
        .Add(d.bytes());
    Family(out, "ringside_durable_size_bytes", kGauge, "The durable buffer's capacity.")
        .Add(d.capacity());
    Family(out, "ringside_durable_evicted_total", kCounter,
           "Descriptors evicted from the durable buffer to make room, of processes alive or "
           "ended.")
        .Add({{"process", "alive"}}, d.evicted_live())
        .Add({{"process", "ended"}}, d.evicted_ended());
  }
}

// Compression of snapshots or of streamed files.
struct FileCompression {
  const char* file;
  uint64_t in, out, cpu_ns;
};

void Snapshots(const control::SnapshotStatus& snap, std::string* out) {
  {
    // Rows by the tally's names; every row of kind "request" (there is
    // one) is the label "request".
    std::map<std::string, std::array<uint64_t, 3>> by_trigger;
    for (const control::SnapshotStatus::Trigger& t : snap.triggers()) {
      std::array<uint64_t, 3>& n =
          by_trigger[t.kind() == "request" ? std::string("request") : t.name()];
      n[0] += t.fired();
      n[1] += t.joined();
      n[2] += t.suppressed();
    }
    Family f(out, "ringside_snapshots_total", kCounter,
             "Snapshot requests by trigger (a config trigger's name; request: ringside snapshot; "
             "signal: SIGUSR1; other: triggers removed by reloads, past 64 of them) and what "
             "became of them: fired (a file of "
             "its own), joined (into one of its trigger pending), suppressed (held back by a "
             "limit).");
    for (const auto& [trigger, n] : by_trigger) {
      f.Add({{"trigger", trigger}, {"result", "fired"}}, n[0])
          .Add({{"trigger", trigger}, {"result", "joined"}}, n[1])
          .Add({{"trigger", trigger}, {"result", "suppressed"}}, n[2]);
    }
  }
  Family(out, "ringside_snapshot_files_total", kCounter,
         "Snapshot files written, and snapshots taken that could not be written (no file).")
      .Add({{"result", "written"}}, snap.count())
      .Add({{"result", "failed"}}, snap.failed());
  Family(out, "ringside_triggers_suppressed_total", kCounter,
         "Triggers and requests that made no snapshot of their own: held back by a rate limit, "
         "or joined to one already pending.")
      .Add(snap.suppressed());
}

void StreamFiles(const control::StreamingStatus& st, std::string* out) {
  Family(out, "ringside_stream_files_total", kCounter,
         "Streamed files finished (renamed to their final names) and deleted by retention.")
      .Add({{"result", "finished"}}, st.files_finished())
      .Add({{"result", "deleted"}}, st.files_deleted());
  Family(out, "ringside_stream_file_bytes_total", kCounter,
         "Bytes in the streamed files finished, and in those retention deleted.")
      .Add({{"result", "finished"}}, st.bytes_finished())
      .Add({{"result", "deleted"}}, st.bytes_deleted());
  Family(out, "ringside_stream_current_file_bytes", kGauge,
         "Bytes written into the streamed file being written.")
      .Add(st.bytes());
  Family(out, "ringside_stream_lost_bytes_total", kCounter,
         "Bytes the central buffer overwrote before the stream's drain wrote them: lost to "
         "the files.")
      .Add(st.bytes_lost());
  Family(out, "ringside_stream_write_errors_total", kCounter,
         "Writes, renames and file creations of the stream that failed (each retried).")
      .Add(st.write_errors());
  Family(out, "ringside_sidecars_written_total", kCounter,
         "Sidecars written after finished streamed files.")
      .Add({{"file", "stream"}}, st.sidecars_written());
}

void Compression(const std::vector<FileCompression>& compression, std::string* out) {
  {
    Family f(out, "ringside_compression_input_bytes_total", kCounter,
             "Bytes of packets compressed, by file kind.");
    for (const FileCompression& c : compression) f.Add({{"file", c.file}}, c.in);
  }
  {
    Family f(out, "ringside_compression_output_bytes_total", kCounter,
             "Bytes written for the packets compressed, by file kind.");
    for (const FileCompression& c : compression) f.Add({{"file", c.file}}, c.out);
  }
  {
    Family f(out, "ringside_compression_cpu_seconds_total", kCounter,
             "CPU time compression took, by file kind.");
    for (const FileCompression& c : compression) f.Add({{"file", c.file}}, Seconds(c.cpu_ns));
  }
}

void Files(const control::StatusReply& s, std::string* out) {
  const control::SnapshotStatus& snap = s.snapshots();
  Snapshots(snap, out);
  std::vector<FileCompression> compression = {{"snapshot", snap.compressed_in_bytes(),
                                               snap.compressed_out_bytes(),
                                               snap.compression_cpu_ns()}};
  {
    Family f(out, "ringside_sidecars_failed_total", kCounter,
             "Finished files whose sidecar (<file>.json) could not be written; shippers leave "
             "them until the agent's next start.");
    f.Add({{"file", "snapshot"}}, snap.sidecars_failed());
    if (s.has_streaming()) f.Add({{"file", "stream"}}, s.streaming().sidecars_failed());
  }
  if (s.has_streaming()) {
    const control::StreamingStatus& st = s.streaming();
    compression.push_back(
        {"stream", st.compressed_in_bytes(), st.compressed_out_bytes(), st.compression_cpu_ns()});
    StreamFiles(st, out);
  }
  Compression(compression, out);
}

void Process(const control::StatusReply& s, std::string* out) {
  Family(out, "ringside_process_cpu_seconds_total", kCounter,
         "CPU time (user and system) the agent used since it started.")
      .Add(s.cpu_seconds());
  Family(out, "ringside_uptime_seconds", kGauge, "Time since the agent started.")
      .Add(static_cast<double>(s.uptime_ms()) / 1000.0);
  const control::MemoryStatus& m = s.memory();
  if (!m.cgroup().empty()) {
    Family(out, "ringside_memory_cgroup_bytes", kGauge,
           "Memory the agent's memory cgroup counts (what its limit kills on; it counts other "
           "processes of the cgroup too, see status).")
        .Add(m.cgroup_bytes());
    if (m.cgroup_limit_bytes() > 0) {
      Family(out, "ringside_memory_cgroup_limit_bytes", kGauge,
             "The memory limit of the agent's memory cgroup.")
          .Add(m.cgroup_limit_bytes());
    }
  }
  Family(out, "ringside_memory_proportional_bytes", kGauge,
         "The agent's own pages, each counted once (Pss): the BPF rings the kernel maps twice "
         "count once.")
      .Add(m.proportional_bytes());
  Family(out, "ringside_memory_bytes", kGauge,
         "Memory the agent's parts take, all CPUs: the BPF staging rings, the chunk pools, the "
         "ftrace per-CPU buffers, the central and durable buffers, and for stacks the symbol "
         "caches and the interning tables (approximate).")
      .Add({{"part", "bpf_rings"}}, m.bpf_ring_bytes())
      .Add({{"part", "chunk_pools"}}, m.chunk_pool_bytes())
      .Add({{"part", "ftrace_buffers"}}, m.ftrace_buffer_bytes())
      .Add({{"part", "buffers"}}, m.buffer_bytes())
      .Add({{"part", "symbol_caches"}}, m.symbol_bytes())
      .Add({{"part", "stack_interning"}}, m.stack_interning_bytes());
  const control::ReloadStatus& r = s.reload();
  Family(out, "ringside_config_reloads_total", kCounter,
         "Config reloads (SIGHUP) applied, and refused (the running config kept).")
      .Add({{"result", "applied"}}, r.count() - std::min(r.count(), r.refused()))
      .Add({{"result", "refused"}}, r.refused());
}

// Only when a trigger has a pressure threshold.
void Pressure(const control::StatusReply& s, std::string* out) {
  if (!s.has_pressure()) return;
  const control::PressureStatus& p = s.pressure();
  Family(out, "ringside_pressure_files", kGauge,
         "The kernel's pressure (PSI) files the agent's pressure triggers watch: armed, and "
         "not armed (a cgroup still to come, a kernel without PSI, a refused threshold: the log "
         "says why).")
      .Add({{"state", "watching"}}, uint64_t{p.watching()})
      .Add({{"state", "waiting"}}, uint64_t{p.waiting()});
  Family(out, "ringside_pressure_events_total", kCounter,
         "Pressure thresholds the kernel said were crossed, each a fire of its trigger (before "
         "the trigger's limits).")
      .Add(p.events());
}

// Only when a trigger has an event rule.
void EventTriggers(const control::StatusReply& s, std::string* out) {
  if (!s.has_event_triggers()) return;
  const control::EventTriggerStatus& e = s.event_triggers();
  Family(out, "ringside_event_trigger_rules", kGauge,
         "The event triggers' tracepoints: watched, and failed (no such event, a refused "
         "filter: the log says why).")
      .Add({{"state", "watching"}}, uint64_t{e.watching()})
      .Add({{"state", "failed"}}, uint64_t{e.failed()});
  Family(out, "ringside_event_trigger_events_total", kCounter,
         "Events that passed an event trigger's filter (hit), and the fires of their triggers "
         "they made (fired: at most one a read pass, before the trigger's limits).")
      .Add({{"result", "hit"}}, e.hits())
      .Add({{"result", "fired"}}, e.fired());
}

// Only when metrics_listen is set: through the listener itself, up is
// always 1; the textfile and `status --prometheus` see a failed one.
void Listener(const control::StatusReply& s, std::string* out) {
  if (!s.has_metrics_listener()) return;
  const control::MetricsListenerStatus& l = s.metrics_listener();
  Family(out, "ringside_metrics_listener_up", kGauge,
         "Whether the metrics_listen listener serves (1) or could not start (0; status says "
         "why).")
      .Add(uint64_t{!l.listening().empty()});
  Family(out, "ringside_metrics_listener_requests_total", kCounter,
         "HTTP requests the metrics listener answered, of every kind.")
      .Add(l.requests());
  Family(out, "ringside_metrics_listener_connections_ended_total", kCounter,
         "Connections the metrics listener ended: at their deadline, displaced by a newer one "
         "with every slot taken, and refused with every slot taken by young ones.")
      .Add({{"reason", "deadline"}}, l.ended_at_deadline())
      .Add({{"reason", "displaced"}}, l.displaced())
      .Add({{"reason", "refused"}}, l.refused());
}

}  // namespace

std::string PrometheusText(const control::StatusReply& status, const MetricsOptions& options) {
  std::string out;
  Family(&out, "ringside_build_info", kGauge,
         "Always 1: the agent's ringside version and the kernel it runs on, as labels.")
      .Add({{"version", status.version()}, {"kernel", options.kernel}}, uint64_t{1});
  Sources(status, options, &out);
  Stacks(status, &out);
  Buffers(status, &out);
  Files(status, &out);
  Process(status, &out);
  Pressure(status, &out);
  EventTriggers(status, &out);
  Listener(status, &out);
  return out;
}

std::string RunningKernelRelease() {
  utsname u;
  return uname(&u) == 0 ? std::string(u.release) : std::string();
}

}  // namespace ringside::agent
