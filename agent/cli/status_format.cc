#include "agent/cli/status_format.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/json_text.h"

namespace ringside::agent {
namespace {

using control::SourceStatus;
using nlohmann::json;

// Labels of the key/value lines, and the indentation of their continuation.
constexpr int kLabelWidth = 12;

std::string HumanBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    unit++;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string Uptime(uint64_t ms) {
  const uint64_t s = ms / 1000, m = s / 60, h = m / 60, d = h / 24;
  if (d > 0) return absl::StrFormat("%dd %02dh %02dm", d, h % 24, m % 60);
  if (h > 0) return absl::StrFormat("%dh %02dm %02ds", h, m % 60, s % 60);
  if (m > 0) return absl::StrFormat("%dm %02ds", m, s % 60);
  return absl::StrFormat("%.1fs", static_cast<double>(ms) / 1000);
}

// The name of a state, or its number when this build does not know it.
std::string StateName(SourceStatus::State state) {
  const std::string& name = SourceStatus::State_Name(state);
  return name.empty() ? absl::StrCat(static_cast<int>(state)) : name;
}

uint64_t TotalLosses(const SourceStatus& source) {
  uint64_t total = 0;
  for (const SourceStatus::Loss& loss : source.losses()) {
    total = loss.events() > std::numeric_limits<uint64_t>::max() - total
                ? std::numeric_limits<uint64_t>::max()
                : total + loss.events();
  }
  return total;
}

void AppendLine(std::string* out, const char* label, const std::string& value) {
  absl::StrAppendFormat(out, "%-*s%s\n", kLabelWidth, label, value);
}

// "compressed (zstd): 12.0 MiB into 3.1 MiB (0.26x), 21 ms of CPU" under a
// snapshots or streaming section, once something was compressed.
template <typename Files>
void AppendCompressionLine(const Files& files, std::string* out) {
  if (files.codec().empty() || files.compressed_in_bytes() == 0) return;
  AppendLine(out, "",
             absl::StrFormat("compressed (%s): %s into %s (%.2fx), %.0f ms of CPU", files.codec(),
                             HumanBytes(files.compressed_in_bytes()),
                             HumanBytes(files.compressed_out_bytes()),
                             static_cast<double>(files.compressed_out_bytes()) /
                                 static_cast<double>(files.compressed_in_bytes()),
                             static_cast<double>(files.compression_cpu_ns()) / 1e6));
}

// A source's stack samples, and what their interning holds.
void AppendStacks(const control::StackStatus& st, std::string* out) {
  absl::StrAppend(out, "  stack samples: ", st.blocked_samples(), " blocked, ", st.cpu_samples(),
                  " CPU; ", st.callstacks(), " callstacks\n");
  absl::StrAppend(out, "  frames: ", st.frames_named() + st.frames_unnamed(), " (",
                  st.frames_unnamed(), " unnamed); interned ", HumanBytes(st.interned_bytes()),
                  ", generation ", st.generations(), "\n");
  // Why user frames go unnamed, once the maps of a process were read.
  if (st.maps_reads() > 0) {
    absl::StrAppend(out, "  user frames in no mapping: ", st.user_frames_unmapped(),
                    "; binaries unreadable: ", st.binaries_unreadable(), "\n");
    absl::StrAppend(out, "  maps read: ", st.maps_reads(), ", ", st.maps_unreadable(),
                    " unreadable (the process gone)\n");
  }
}

void AppendSources(const control::StatusReply& s, std::string* out) {
  if (s.sources().empty()) {
    AppendLine(out, "sources", "none");
    return;
  }
  absl::StrAppendFormat(out, "%-16s %-8s %14s %10s %10s\n", "source", "state", "events", "events/s",
                        "lost");
  for (const SourceStatus& source : s.sources()) {
    absl::StrAppendFormat(out, "%-16s %-8s %14d %10.1f %10d\n", source.name(),
                          StateName(source.state()), source.events(), source.events_per_s(),
                          TotalLosses(source));
    for (const SourceStatus::Loss& loss : source.losses()) {
      if (loss.events() == 0) continue;
      const std::string where = loss.cpu() >= 0 ? absl::StrCat(", cpu ", loss.cpu()) : "";
      absl::StrAppend(out, "  lost ", loss.events(), ": ", loss.kind(), where, "\n");
    }
    if (source.has_stacks()) AppendStacks(source.stacks(), out);
    if (source.reader_paused_seconds() > 0) {
      absl::StrAppendFormat(out,
                            "  reader used %.2f s CPU, paused %.2f s by max_consumer_cpu_percent\n",
                            source.reader_cpu_seconds(), source.reader_paused_seconds());
    }
    if (source.state() == SourceStatus::FAILED || !source.error().empty()) {
      absl::StrAppend(out, "  error: ", source.error().empty() ? "(none given)" : source.error(),
                      "\n");
    }
  }
}

void AppendBuffers(const control::StatusReply& s, std::string* out) {
  if (s.buffers().empty()) {
    AppendLine(out, "buffers", "none");
    return;
  }
  absl::StrAppendFormat(out, "%-7s %10s %7s %12s %12s %10s\n", "buffer", "size", "fill", "written",
                        "overwritten", "wraps");
  for (int i = 0; i < s.buffers_size(); i++) {
    const control::BufferStatus& b = s.buffers(i);
    absl::StrAppendFormat(out, "%-7s %10s %6.1f%% %12s %12s %10d\n", absl::StrCat("#", i),
                          HumanBytes(b.size_bytes()), b.fill_percent(),
                          HumanBytes(b.bytes_written()), HumanBytes(b.bytes_overwritten()),
                          b.write_wraps());
  }
}

// What a memory limit counts (the cgroup's), the agent's own pages, and
// the staging's share, with the kernel memory outside the cgroup named
// apart. Not RSS: it counts each BPF ring twice.
void AppendMemory(const control::MemoryStatus& m, std::string* out) {
  const std::string own = absl::StrCat(HumanBytes(m.proportional_bytes()), " its own pages");
  if (m.cgroup().empty()) {
    AppendLine(out, "memory", absl::StrCat(own, " (its memory cgroup cannot be read here)"));
  } else {
    AppendLine(out, "memory",
               absl::StrCat(HumanBytes(m.cgroup_bytes()), " in its cgroup (",
                            m.cgroup_limit_bytes() > 0
                                ? absl::StrCat("limit ", HumanBytes(m.cgroup_limit_bytes()))
                                : "no limit",
                            m.cgroup_other_processes() > 0
                                ? absl::StrCat("; ", m.cgroup_other_processes(), " other processes")
                                : "",
                            "); ", own));
    AppendLine(out, "", absl::StrCat("cgroup ", m.cgroup()));
  }
  AppendLine(out, "",
             absl::StrCat("BPF rings ", HumanBytes(m.bpf_ring_bytes()), ", chunk pools ",
                          HumanBytes(m.chunk_pool_bytes()), ", ring and store ",
                          HumanBytes(m.buffer_bytes())));
  if (m.symbol_bytes() + m.stack_interning_bytes() > 0) {
    AppendLine(out, "",
               absl::StrCat("symbol caches ", HumanBytes(m.symbol_bytes()), ", stack interning ",
                            HumanBytes(m.stack_interning_bytes())));
  }
  if (m.ftrace_buffer_bytes() > 0) {
    AppendLine(out, "",
               absl::StrCat("ftrace rings ", HumanBytes(m.ftrace_buffer_bytes()),
                            ": kernel memory outside the cgroup"));
  }
}

// "boot ring   recording, 11.9 MiB kept across a warm reboot, 13 events"
// and the instance, or the state and why; then the previous boot, when
// there was one: its id, its events' span and where they went (or that they
// were gone).
void AppendBootInstance(const control::BootInstanceStatus& b, std::string* out) {
  if (b.state() == "recording") {
    AppendLine(
        out, "boot ring",
        absl::StrCat("recording, ", HumanBytes(b.buffer_kb() << 10), " kept across a warm reboot, ",
                     b.events_size(), " events", b.resumed() ? ", resumed" : ""));
    AppendLine(out, "", absl::StrCat("into ", b.instance()));
  } else {
    AppendLine(out, "boot ring", absl::StrCat(b.state(), ": ", b.detail()));
  }
  if (!b.previous_boot_lost().empty()) {
    AppendLine(out, "", absl::StrCat("previous boot ", b.previous_boot_lost(), ": events gone"));
    AppendLine(out, "", "(a cold reboot, or KASLR moved the reservation)");
  }
  if (!b.has_previous_boot_snapshot()) return;
  const control::PreviousBootSnapshot& p = b.previous_boot_snapshot();
  const absl::TimeZone utc = absl::UTCTimeZone();
  AppendLine(out, "", absl::StrCat("previous boot ", b.previous_boot_id(), ":"));
  if (p.events() > 0) {
    AppendLine(
        out, "",
        absl::StrCat(
            p.events(), " events, ",
            absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixNanos(p.first_realtime_ns()), utc),
            " to ",
            absl::FormatTime("%H:%M:%S UTC", absl::FromUnixNanos(p.last_realtime_ns()), utc)));
  }
  AppendLine(out, "",
             !p.error().empty() ? absl::StrCat("not written: ", p.error())
             : p.path().empty() ? std::string("being written")
                                : absl::StrCat("in ", p.path()));
  if (p.pages_malformed() > 0) {
    AppendLine(out, "",
               absl::StrCat(p.pages_malformed(), " malformed pages skipped, the first ",
                            p.first_malformed()));
  }
}

void AppendPressure(const control::PressureStatus& p, std::string* out) {
  AppendLine(out, "pressure",
             absl::StrCat(p.watching(), " PSI files watched, ", p.waiting(), " waiting",
                          p.waiting() > 0 ? " (the log says why)" : "", "; ", p.events(),
                          " thresholds crossed"));
}

void AppendEventTriggers(const control::EventTriggerStatus& e, std::string* out) {
  AppendLine(out, "events",
             absl::StrCat(e.watching(), " trigger tracepoints watched, ", e.failed(), " failed",
                          e.failed() > 0 ? " (the log says why)" : "", "; ", e.hits(),
                          " events passed their filters, ", e.fired(), " fires"));
}

void AppendMetricsListener(const control::MetricsListenerStatus& l, std::string* out) {
  if (l.listening().empty()) {
    AppendLine(out, "metrics",
               absl::StrCat("failed: ", l.error().empty() ? "(no reason given)" : l.error(),
                            "; not served, the agent records on"));
    return;
  }
  AppendLine(out, "metrics",
             absl::StrCat("listening on ", l.listening(), " (metrics_listen ", l.listen(), "), ",
                          l.requests(), " requests"));
  if (l.ended_at_deadline() + l.displaced() + l.refused() > 0) {
    AppendLine(out, "",
               absl::StrCat("ended ", l.ended_at_deadline(), " at the deadline, ", l.displaced(),
                            " displaced, ", l.refused(), " refused (slow clients)"));
  }
}

// "agent", "config" and "cost" with the memory lines.
void AppendAgent(const control::StatusReply& s, std::string* out) {
  AppendLine(out, "agent",
             absl::StrCat("ringside ", s.version().empty() ? "(version unknown)" : s.version(),
                          ", pid ", s.pid(), ", up ", Uptime(s.uptime_ms())));
  AppendLine(out, "config", s.config_path().empty() ? "embedded default" : s.config_path());
  if (s.has_memory()) {
    AppendLine(out, "cost", absl::StrFormat("%.2f s CPU", s.cpu_seconds()));
    AppendMemory(s.memory(), out);
  } else {
    // An agent from before `memory`: what it reported then.
    AppendLine(
        out, "cost",
        absl::StrFormat("%.2f s CPU, %s resident", s.cpu_seconds(), HumanBytes(s.rss_bytes())));
  }
}

void AppendSnapshots(const control::SnapshotStatus& snap, std::string* out) {
  AppendLine(out, "snapshots",
             absl::StrCat(snap.count(), " taken, ", snap.failed(), " failed, ", snap.suppressed(),
                          " suppressed"));
  if (!snap.last_path().empty()) {
    AppendLine(out, "", absl::StrCat("last: ", snap.last_path()));
    AppendLine(out, "", absl::StrCat("reason: ", snap.last_reason()));
  }
  if (snap.sidecars_failed() > 0) {
    AppendLine(out, "",
               absl::StrCat(
                   snap.sidecars_failed(),
                   " without a sidecar (shippers leave them); last: ", snap.last_sidecar_error()));
  }
  if (!snap.last_error().empty()) {
    AppendLine(out, "", absl::StrCat("last failure: ", snap.last_error()));
  }
  AppendCompressionLine(snap, out);
}

// Nothing before the first reload.
void AppendReloads(const control::ReloadStatus& r, std::string* out) {
  if (r.count() == 0) return;
  AppendLine(out, "reloads", absl::StrCat(r.count(), " (SIGHUP), ", r.refused(), " refused"));
  if (!r.last_error().empty()) {
    AppendLine(out, "", absl::StrCat("last refused, running config kept: ", r.last_error()));
  }
  if (r.waiting_for_restart_size() > 0) {
    AppendLine(
        out, "",
        absl::StrCat("waiting for a restart: ", absl::StrJoin(r.waiting_for_restart(), ", ")));
  }
}

void AppendStreaming(const control::StreamingStatus& st, std::string* out) {
  AppendLine(out, "streaming",
             st.path().empty() ? std::string("no file open (see the last error)")
                               : absl::StrCat(st.path(), ", ", HumanBytes(st.bytes()), " written"));
  AppendLine(out, "",
             absl::StrCat(st.files_finished(), " files finished (", HumanBytes(st.bytes_finished()),
                          "), ", st.files_deleted(), " deleted by retention (",
                          HumanBytes(st.bytes_deleted()), ")"));
  if (st.bytes_lost() > 0) {
    AppendLine(out, "",
               absl::StrCat(HumanBytes(st.bytes_lost()),
                            " overwritten in the buffers before they could be written"));
  }
  if (st.write_errors() > 0) {
    AppendLine(out, "", absl::StrCat(st.write_errors(), " write errors; last: ", st.last_error()));
  }
  if (st.sidecars_failed() > 0) {
    AppendLine(
        out, "",
        absl::StrCat(st.sidecars_failed(), " files without a sidecar (shippers leave them); last: ",
                     st.last_sidecar_error()));
  }
  AppendCompressionLine(st, out);
}

json MemoryJson(const control::MemoryStatus& m) {
  return {{"cgroup", m.cgroup()},
          {"cgroup_bytes", m.cgroup_bytes()},
          {"cgroup_limit_bytes", m.cgroup_limit_bytes()},
          {"cgroup_other_processes", m.cgroup_other_processes()},
          {"proportional_bytes", m.proportional_bytes()},
          {"bpf_ring_bytes", m.bpf_ring_bytes()},
          {"chunk_pool_bytes", m.chunk_pool_bytes()},
          {"ftrace_buffer_bytes", m.ftrace_buffer_bytes()},
          {"buffer_bytes", m.buffer_bytes()},
          {"symbol_bytes", m.symbol_bytes()},
          {"stack_interning_bytes", m.stack_interning_bytes()}};
}

// All 0 for a source that records no stacks.
json StacksJson(const control::StackStatus& st) {
  return {{"blocked_samples", st.blocked_samples()},
          {"cpu_samples", st.cpu_samples()},
          {"frames_named", st.frames_named()},
          {"frames_unnamed", st.frames_unnamed()},
          {"callstacks", st.callstacks()},
          {"interned_bytes", st.interned_bytes()},
          {"generations", st.generations()},
          {"remembered_stacks", st.remembered_stacks()},
          {"symbol_bytes", st.symbol_bytes()},
          {"interning_bytes", st.interning_bytes()},
          {"blocked_period_ns", st.blocked_period_ns()},
          {"blocked_at_switch", st.blocked_at_switch()},
          {"blocked_unsampled", st.blocked_unsampled()},
          {"blocked_unsampled_ns", st.blocked_unsampled_ns()},
          {"user_frames_unmapped", st.user_frames_unmapped()},
          {"maps_reads", st.maps_reads()},
          {"maps_unreadable", st.maps_unreadable()},
          {"binaries_unreadable", st.binaries_unreadable()}};
}

json SourceJson(const SourceStatus& source) {
  json losses = json::array();
  for (const SourceStatus::Loss& loss : source.losses()) {
    losses.push_back({{"cpu", loss.cpu()}, {"kind", loss.kind()}, {"events", loss.events()}});
  }
  return {{"name", source.name()},
          {"state", StateName(source.state())},
          {"error", source.error()},
          {"events", source.events()},
          {"events_per_s", source.events_per_s()},
          {"reader_cpu_seconds", source.reader_cpu_seconds()},
          {"reader_paused_seconds", source.reader_paused_seconds()},
          {"losses", std::move(losses)},
          {"stacks", StacksJson(source.stacks())}};
}

json BufferJson(const control::BufferStatus& b) {
  return {{"size_bytes", b.size_bytes()},
          {"bytes_written", b.bytes_written()},
          {"bytes_overwritten", b.bytes_overwritten()},
          {"write_wraps", b.write_wraps()},
          {"fill_percent", b.fill_percent()}};
}

json DurableJson(const control::DurableStatus& d) {
  return {{"entries", d.entries()},
          {"bytes", d.bytes()},
          {"capacity", d.capacity()},
          {"evicted_live", d.evicted_live()},
          {"evicted_ended", d.evicted_ended()}};
}

json SnapshotsJson(const control::SnapshotStatus& snap) {
  json j = {{"count", snap.count()},
            {"last_path", snap.last_path()},
            {"last_reason", snap.last_reason()},
            {"suppressed", snap.suppressed()},
            {"failed", snap.failed()},
            {"last_error", snap.last_error()},
            {"codec", snap.codec()},
            {"compressed_in_bytes", snap.compressed_in_bytes()},
            {"compressed_out_bytes", snap.compressed_out_bytes()},
            {"compression_cpu_ns", snap.compression_cpu_ns()},
            {"sidecars_failed", snap.sidecars_failed()},
            {"last_sidecar_error", snap.last_sidecar_error()},
            {"triggers", json::array()}};
  for (const control::SnapshotStatus::Trigger& t : snap.triggers()) {
    j["triggers"].push_back({{"name", t.name()},
                             {"kind", t.kind()},
                             {"fires_on", t.fires_on()},
                             {"fired", t.fired()},
                             {"joined", t.joined()},
                             {"suppressed", t.suppressed()}});
  }
  return j;
}

json ReloadJson(const control::ReloadStatus& r) {
  json j = {{"count", r.count()},
            {"refused", r.refused()},
            {"last_error", r.last_error()},
            {"waiting_for_restart", json::array()}};
  for (const std::string& field : r.waiting_for_restart()) {
    j["waiting_for_restart"].push_back(field);
  }
  return j;
}

json StreamingJson(const control::StreamingStatus& st) {
  return {{"path", st.path()},
          {"bytes", st.bytes()},
          {"files_finished", st.files_finished()},
          {"bytes_finished", st.bytes_finished()},
          {"files_deleted", st.files_deleted()},
          {"bytes_deleted", st.bytes_deleted()},
          {"bytes_lost", st.bytes_lost()},
          {"write_errors", st.write_errors()},
          {"last_error", st.last_error()},
          {"codec", st.codec()},
          {"compressed_in_bytes", st.compressed_in_bytes()},
          {"compressed_out_bytes", st.compressed_out_bytes()},
          {"compression_cpu_ns", st.compression_cpu_ns()},
          {"sidecars_written", st.sidecars_written()},
          {"sidecars_failed", st.sidecars_failed()},
          {"last_sidecar_error", st.last_sidecar_error()}};
}

json PreviousBootJson(const control::PreviousBootSnapshot& p) {
  return {{"path", p.path()},
          {"error", p.error()},
          {"events", p.events()},
          {"pages", p.pages()},
          {"first_realtime_ns", p.first_realtime_ns()},
          {"last_realtime_ns", p.last_realtime_ns()},
          {"pages_malformed", p.pages_malformed()},
          {"first_malformed", p.first_malformed()},
          {"pages_after_gap", p.pages_after_gap()},
          {"unknown_events", p.unknown_events()}};
}

json BootInstanceJson(const control::BootInstanceStatus& b) {
  return {{"instance", b.instance()},
          {"state", b.state()},
          {"detail", b.detail()},
          {"previous_boot_id", b.previous_boot_id()},
          {"events", json(std::vector<std::string>(b.events().begin(), b.events().end()))},
          {"buffer_kb", b.buffer_kb()},
          {"resumed", b.resumed()},
          {"previous_boot_lost", b.previous_boot_lost()},
          {"previous_boot_snapshot", b.has_previous_boot_snapshot()
                                         ? PreviousBootJson(b.previous_boot_snapshot())
                                         : json(nullptr)}};
}

json MetricsListenerJson(const control::MetricsListenerStatus& l) {
  return {{"listen", l.listen()},
          {"listening", l.listening()},
          {"error", l.error()},
          {"requests", l.requests()},
          {"ended_at_deadline", l.ended_at_deadline()},
          {"displaced", l.displaced()},
          {"refused", l.refused()}};
}

}  // namespace

std::string StatusText(const control::StatusReply& s) {
  std::string out;
  AppendAgent(s, &out);
  out += "\n";
  AppendSources(s, &out);
  out += "\n";
  AppendBuffers(s, &out);
  out += "\n";
  const control::DurableStatus& d = s.durable();
  AppendLine(&out, "durable",
             absl::StrCat(d.entries(), " entries, ", HumanBytes(d.bytes()), " of ",
                          HumanBytes(d.capacity()), "; evicted ", d.evicted_live(), " live, ",
                          d.evicted_ended(), " ended"));
  AppendSnapshots(s.snapshots(), &out);
  AppendReloads(s.reload(), &out);
  if (s.has_pressure()) AppendPressure(s.pressure(), &out);
  if (s.has_event_triggers()) AppendEventTriggers(s.event_triggers(), &out);
  if (s.has_metrics_listener()) AppendMetricsListener(s.metrics_listener(), &out);
  if (s.has_boot_instance()) AppendBootInstance(s.boot_instance(), &out);
  if (s.has_streaming()) AppendStreaming(s.streaming(), &out);
  return out;
}

json StatusJsonValue(const control::StatusReply& s) {
  json j;
  j["schema_version"] = kStatusJsonSchemaVersion;
  j["uptime_ms"] = s.uptime_ms();
  j["config_path"] = s.config_path();
  j["pid"] = s.pid();
  j["version"] = s.version();
  j["cpu_seconds"] = s.cpu_seconds();
  j["rss_bytes"] = s.rss_bytes();
  j["memory"] = MemoryJson(s.memory());
  j["sources"] = json::array();
  for (const SourceStatus& source : s.sources()) j["sources"].push_back(SourceJson(source));
  j["buffers"] = json::array();
  for (const control::BufferStatus& b : s.buffers()) j["buffers"].push_back(BufferJson(b));
  j["durable"] = DurableJson(s.durable());
  j["snapshots"] = SnapshotsJson(s.snapshots());
  j["reload"] = ReloadJson(s.reload());
  j["streaming"] = s.has_streaming() ? StreamingJson(s.streaming()) : json(nullptr);
  j["metrics_listener"] =
      s.has_metrics_listener() ? MetricsListenerJson(s.metrics_listener()) : json(nullptr);
  j["boot_instance"] = s.has_boot_instance() ? BootInstanceJson(s.boot_instance()) : json(nullptr);
  j["pressure"] = s.has_pressure() ? json{{"watching", s.pressure().watching()},
                                          {"waiting", s.pressure().waiting()},
                                          {"events", s.pressure().events()}}
                                   : json(nullptr);
  const control::EventTriggerStatus& e = s.event_triggers();
  j["event_triggers"] = s.has_event_triggers() ? json{{"watching", e.watching()},
                                                      {"failed", e.failed()},
                                                      {"hits", e.hits()},
                                                      {"fired", e.fired()}}
                                               : json(nullptr);
  return j;
}

std::string StatusJson(const control::StatusReply& status) {
  return base::JsonText(StatusJsonValue(status));
}

}  // namespace ringside::agent
