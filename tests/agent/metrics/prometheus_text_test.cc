#include "agent/metrics/prometheus_text.h"

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/prometheus_tools.h"

namespace ringside::agent {
namespace {

using testing::SampleValue;
using testing::SumOf;

// An agent's status with something in every part: a BPF source that lost
// events on two CPUs, an ftrace source that failed, a wrapped buffer, the
// durable store, snapshots, a stream, its memory and a refused reload.
control::StatusReply BusyAgent() {
  control::StatusReply s;
  s.set_uptime_ms(90'500);
  s.set_version("0.1.0-dev");
  s.set_cpu_seconds(12.25);
  control::SourceStatus* bpf = s.add_sources();
  bpf->set_name("linux.bpf");
  bpf->set_state(control::SourceStatus::RUNNING);
  bpf->set_events(1'000'000);
  bpf->set_reader_cpu_seconds(3.5);
  bpf->set_reader_paused_seconds(0.25);
  for (const auto& [cpu, kind, events] :
       std::vector<std::tuple<int, const char*, uint64_t>>{{0, "sched_switch", 5},
                                                           {1, "sched_switch", 7},
                                                           {1, "sched_waking", 2},
                                                           {0, "bpf_missed_runs", 1}}) {
    control::SourceStatus::Loss* l = bpf->add_losses();
    l->set_cpu(cpu);
    l->set_kind(kind);
    l->set_events(events);
  }
  control::StackStatus* stacks = bpf->mutable_stacks();
  stacks->set_blocked_samples(5000);
  stacks->set_cpu_samples(700);
  stacks->set_frames_named(900);
  stacks->set_frames_unnamed(40);
  stacks->set_callstacks(310);
  stacks->set_interned_bytes(300 << 10);
  stacks->set_generations(2);
  stacks->set_user_frames_unmapped(120);
  stacks->set_maps_reads(30);
  stacks->set_maps_unreadable(4);
  stacks->set_binaries_unreadable(2);
  s.mutable_memory()->set_symbol_bytes(12 << 20);
  s.mutable_memory()->set_stack_interning_bytes(3 << 19);
  control::SourceStatus* ftrace = s.add_sources();
  ftrace->set_name("linux.ftrace");
  ftrace->set_state(control::SourceStatus::FAILED);
  ftrace->set_error("no tracefs");
  control::BufferStatus* b = s.add_buffers();
  b->set_size_bytes(64 << 20);
  b->set_bytes_written(300 << 20);
  b->set_bytes_overwritten(236 << 20);
  b->set_write_wraps(4);
  b->set_fill_percent(50);
  s.mutable_durable()->set_entries(300);
  s.mutable_durable()->set_capacity(4 << 20);
  s.mutable_snapshots()->set_count(3);
  s.mutable_snapshots()->set_failed(1);
  s.mutable_snapshots()->set_suppressed(9);
  for (const auto& [name, kind, fired, suppressed] :
       std::vector<std::tuple<const char*, const char*, uint64_t, uint64_t>>{
           {"oom_kill", "config", 2, 5},
           {"request", "request", 1, 0},
           {"deploy \"7\"", "request", 2, 0}}) {
    control::SnapshotStatus::Trigger* t = s.mutable_snapshots()->add_triggers();
    t->set_name(name);
    t->set_kind(kind);
    t->set_fired(fired);
    t->set_suppressed(suppressed);
  }
  s.mutable_snapshots()->set_last_path("/var/lib/ringside/snapshots/x-request-\"oops\".pftrace");
  s.mutable_snapshots()->set_compressed_in_bytes(3000);
  s.mutable_snapshots()->set_compressed_out_bytes(1000);
  s.mutable_snapshots()->set_compression_cpu_ns(1'500'000);
  s.mutable_streaming()->set_files_finished(12);
  s.mutable_streaming()->set_bytes_lost(4096);
  s.mutable_memory()->set_cgroup("/system.slice/ringside.service");
  s.mutable_memory()->set_cgroup_bytes(40 << 20);
  s.mutable_memory()->set_cgroup_limit_bytes(512 << 20);
  s.mutable_memory()->set_bpf_ring_bytes(8 << 20);
  s.mutable_reload()->set_count(3);
  s.mutable_reload()->set_refused(1);
  s.mutable_metrics_listener()->set_listen(":9464");
  s.mutable_metrics_listener()->set_listening("[::]:9464");
  s.mutable_metrics_listener()->set_requests(40);
  s.mutable_metrics_listener()->set_ended_at_deadline(3);
  s.mutable_metrics_listener()->set_displaced(2);
  return s;
}

// Each family's TYPE line, by name.
std::map<std::string, std::string> Types(const std::string& text) {
  std::map<std::string, std::string> types;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, "# TYPE ")) continue;
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    EXPECT_EQ(types.count(parts[2]), 0u) << parts[2] << " has two TYPE lines";
    types[parts[2]] = parts[3];
  }
  return types;
}

TEST(PrometheusTextTest, PromtoolAcceptsItWithoutALintProblem) {
  for (const bool per_cpu : {false, true}) {
    SCOPED_TRACE(per_cpu ? "per CPU" : "all CPUs");
    const std::string text =
        PrometheusText(BusyAgent(), {.kernel = "6.1.0-28-amd64", .per_cpu = per_cpu});
    std::string said;
    EXPECT_EQ(testing::PromtoolCheckMetrics(text, &said), 0) << said << "\n" << text;
    EXPECT_EQ(said, "") << text;
  }
  // An agent that has just started: no sources yet, nothing else either.
  const std::string empty = PrometheusText(control::StatusReply(), {});
  std::string said;
  EXPECT_EQ(testing::PromtoolCheckMetrics(empty, &said), 0) << said << "\n" << empty;
}

TEST(PrometheusTextTest, CountsAreTheStatusOwn) {
  const std::string text = PrometheusText(BusyAgent(), {.kernel = "6.1.0-28-amd64"});
  EXPECT_EQ(
      SampleValue(text, R"(ringside_build_info{version="0.1.0-dev",kernel="6.1.0-28-amd64"})"), 1);
  EXPECT_EQ(SampleValue(text, R"(ringside_source_up{source="linux.bpf"})"), 1);
  EXPECT_EQ(SampleValue(text, R"(ringside_source_up{source="linux.ftrace"})"), 0);
  EXPECT_EQ(SampleValue(text, R"(ringside_events_total{source="linux.bpf"})"), 1'000'000);
  // The losses: every kind and CPU summed per source, and by kind.
  EXPECT_EQ(SampleValue(text, R"(ringside_events_lost_total{source="linux.bpf",stage="staging"})"),
            15);
  EXPECT_EQ(
      SampleValue(text, R"(ringside_events_lost_total{source="linux.ftrace",stage="staging"})"), 0)
      << "a source that lost nothing has its series, at 0";
  EXPECT_EQ(
      SampleValue(text,
                  R"(ringside_staging_events_lost_total{source="linux.bpf",kind="sched_switch"})"),
      12);
  EXPECT_EQ(SumOf(text, "ringside_staging_events_lost_total"), 15);
  EXPECT_EQ(SampleValue(text, R"(ringside_reader_paused_seconds_total{source="linux.bpf"})"), 0.25);
  EXPECT_EQ(SampleValue(text, R"(ringside_buffer_used_bytes{buffer="0"})"), 32 << 20);
  EXPECT_EQ(SampleValue(text, R"(ringside_buffer_overwritten_bytes_total{buffer="0"})"), 236 << 20);
  EXPECT_EQ(SampleValue(text, R"(ringside_snapshot_files_total{result="written"})"), 3);
  EXPECT_EQ(SampleValue(text, R"(ringside_snapshot_files_total{result="failed"})"), 1);
  EXPECT_EQ(SampleValue(text, R"(ringside_snapshots_total{trigger="oom_kill",result="fired"})"), 2);
  EXPECT_EQ(
      SampleValue(text, R"(ringside_snapshots_total{trigger="oom_kill",result="suppressed"})"), 5);
  // Manual requests, whatever their reasons, are one trigger.
  EXPECT_EQ(SampleValue(text, R"(ringside_snapshots_total{trigger="request",result="fired"})"), 3);
  EXPECT_EQ(SampleValue(text, "ringside_triggers_suppressed_total"), 9);
  EXPECT_EQ(SampleValue(text, R"(ringside_compression_cpu_seconds_total{file="snapshot"})"),
            0.0015);
  EXPECT_EQ(SampleValue(text, "ringside_stream_lost_bytes_total"), 4096);
  EXPECT_EQ(SampleValue(text, "ringside_process_cpu_seconds_total"), 12.25);
  EXPECT_EQ(SampleValue(text, "ringside_uptime_seconds"), 90.5);
  EXPECT_EQ(SampleValue(text, "ringside_memory_cgroup_limit_bytes"), 512 << 20);
  EXPECT_EQ(SampleValue(text, R"(ringside_memory_bytes{part="bpf_rings"})"), 8 << 20);
  EXPECT_EQ(SampleValue(text, R"(ringside_config_reloads_total{result="applied"})"), 2);

  const std::map<std::string, std::string> types = Types(text);
  EXPECT_EQ(types.at("ringside_events_total"), "counter");
  EXPECT_EQ(types.at("ringside_buffer_used_bytes"), "gauge");
  for (const auto& [name, type] : types) {
    EXPECT_EQ(absl::EndsWith(name, "_total"), type == "counter") << name << " is a " << type;
  }
}

// The listener's state, for the textfile and `status --prometheus` to show
// a listener that could not start; nothing of it without metrics_listen.
TEST(PrometheusTextTest, StackSamplesAndTheSymbolCachesAreMetricsOfTheirSource) {
  const std::string text = PrometheusText(BusyAgent(), {});
  EXPECT_EQ(SampleValue(
                text, R"(ringside_stack_samples_total{source="linux.bpf",counter="blocked_time"})"),
            5000);
  EXPECT_EQ(
      SampleValue(text, R"(ringside_stack_samples_total{source="linux.bpf",counter="cpu_time"})"),
      700);
  EXPECT_EQ(SampleValue(
                text, R"(ringside_stack_frames_interned_total{source="linux.bpf",result="named"})"),
            900);
  EXPECT_EQ(
      SampleValue(text,
                  R"(ringside_stack_frames_interned_total{source="linux.bpf",result="unnamed"})"),
      40);
  EXPECT_EQ(SampleValue(text, R"(ringside_stack_callstacks_interned_total{source="linux.bpf"})"),
            310);
  EXPECT_EQ(SampleValue(text, R"(ringside_stack_interned_bytes{source="linux.bpf"})"), 300 << 10);
  EXPECT_EQ(SampleValue(text, R"(ringside_stack_generations_total{source="linux.bpf"})"), 2);
  EXPECT_EQ(
      SampleValue(text, R"(ringside_stack_maps_reads_total{source="linux.bpf",result="read"})"),
      26);
  EXPECT_EQ(SampleValue(
                text, R"(ringside_stack_maps_reads_total{source="linux.bpf",result="unreadable"})"),
            4);
  EXPECT_EQ(
      SampleValue(
          text,
          R"(ringside_stack_user_frames_unnamed_total{source="linux.bpf",reason="unmapped"})"),
      120);
  EXPECT_EQ(
      SampleValue(
          text,
          R"(ringside_stack_user_frames_unnamed_total{source="linux.bpf",reason="binary_unreadable"})"),
      2);
  EXPECT_EQ(SampleValue(text, R"(ringside_memory_bytes{part="symbol_caches"})"), 12 << 20);
  EXPECT_EQ(SampleValue(text, R"(ringside_memory_bytes{part="stack_interning"})"), 3 << 19);
  // A source that records no stacks has no stack series.
  EXPECT_FALSE(absl::StrContains(text, R"(ringside_stack_samples_total{source="linux.ftrace")"));
  control::StatusReply none = BusyAgent();
  none.mutable_sources(0)->clear_stacks();
  EXPECT_FALSE(absl::StrContains(PrometheusText(none, {}), "ringside_stack_"));
}

// Stacks lost are staging losses like the records': by kind, and by CPU
// when asked.
TEST(PrometheusTextTest, AStackLossIsAStagingLossOfItsKindAndCpu) {
  control::StatusReply s = BusyAgent();
  control::SourceStatus::Loss* l = s.mutable_sources(0)->add_losses();
  l->set_cpu(2);
  l->set_kind("stack_kernel_crowded");
  l->set_events(4);
  const std::string text = PrometheusText(s, {.kernel = "", .per_cpu = true});
  EXPECT_EQ(SampleValue(text, R"(ringside_staging_events_lost_total{source="linux.bpf",)"
                              R"(kind="stack_kernel_crowded",cpu="2"})"),
            4);
  EXPECT_EQ(SampleValue(text, R"(ringside_events_lost_total{source="linux.bpf",stage="staging"})"),
            19);
}

TEST(PrometheusTextTest, TheListenerIsUpOrNotAndCountsTheConnectionsItEnded) {
  control::StatusReply s = BusyAgent();
  std::string text = PrometheusText(s, {});
  EXPECT_EQ(SampleValue(text, "ringside_metrics_listener_up"), 1);
  EXPECT_EQ(SampleValue(text, "ringside_metrics_listener_requests_total"), 40);
  EXPECT_EQ(
      SampleValue(text, R"(ringside_metrics_listener_connections_ended_total{reason="deadline"})"),
      3);
  EXPECT_EQ(
      SampleValue(text, R"(ringside_metrics_listener_connections_ended_total{reason="displaced"})"),
      2);
  s.mutable_metrics_listener()->clear_listening();
  s.mutable_metrics_listener()->set_error("metrics_listen :9464: Address already in use");
  text = PrometheusText(s, {});
  EXPECT_EQ(SampleValue(text, "ringside_metrics_listener_up"), 0);
  EXPECT_FALSE(absl::StrContains(text, "Address already in use")) << "never a reason";
  s.clear_metrics_listener();
  EXPECT_FALSE(absl::StrContains(PrometheusText(s, {}), "ringside_metrics_listener"));
}

TEST(PrometheusTextTest, LabelsAreBoundedSetsNeverPathsOrReasons) {
  const std::string text = PrometheusText(BusyAgent(), {.kernel = "6.1.0"});
  EXPECT_FALSE(absl::StrContains(text, "/var/lib")) << text;
  EXPECT_FALSE(absl::StrContains(text, "oops")) << text;
  EXPECT_FALSE(absl::StrContains(text, "deploy")) << "a request's reason is not a label";
  EXPECT_FALSE(absl::StrContains(text, "no tracefs")) << text;
  EXPECT_FALSE(absl::StrContains(text, "cpu=")) << "per-CPU series only when asked";
  // Without a stream, no stream series.
  control::StatusReply quiet = BusyAgent();
  quiet.clear_streaming();
  EXPECT_FALSE(absl::StrContains(PrometheusText(quiet, {}), "ringside_stream_"));
}

TEST(PrometheusTextTest, PerCpuLossesWhenAsked) {
  const std::string text = PrometheusText(BusyAgent(), {.kernel = "", .per_cpu = true});
  EXPECT_EQ(
      SampleValue(
          text,
          R"(ringside_staging_events_lost_total{source="linux.bpf",kind="sched_switch",cpu="1"})"),
      7);
  EXPECT_EQ(SumOf(text, "ringside_staging_events_lost_total"), 15);
  EXPECT_EQ(SampleValue(text, R"(ringside_events_lost_total{source="linux.bpf",stage="staging"})"),
            15);
}

TEST(PrometheusTextTest, LabelValuesAreEscaped) {
  control::StatusReply s;
  s.set_version("1.0 \"odd\" \\ build\nline");
  const std::string text = PrometheusText(s, {.kernel = "k"});
  EXPECT_TRUE(absl::StrContains(text, R"(version="1.0 \"odd\" \\ build\nline")")) << text;
  std::string said;
  EXPECT_EQ(testing::PromtoolCheckMetrics(text, &said), 0) << said << "\n" << text;
}

}  // namespace
}  // namespace ringside::agent
