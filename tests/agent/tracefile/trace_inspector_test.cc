#include "agent/tracefile/trace_inspector.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ringside/trace/trace.pb.h"
#include "tests/testing/paths.h"

namespace ringside::agent {
namespace {

using trace::Trace;
using trace::TracePacket;

// Every path handed out, removed when the test binary ends.
std::set<std::string>& PathsHandedOut() {
  static auto* paths = new std::set<std::string>();
  return *paths;
}

class RemoveTempFiles : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const std::string& path : PathsHandedOut()) unlink(path.c_str());
  }
};
::testing::Environment* const kRemoveTempFiles =
    ::testing::AddGlobalTestEnvironment(new RemoveTempFiles);

std::string TempPath(const std::string& name) {
  std::string path =
      ::testing::TempDir() + "ringside_inspect_" + std::to_string(getpid()) + "_" + name;
  PathsHandedOut().insert(path);
  return path;
}

std::string WriteFile(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

// A small trace with every kind of content inspect reports on:
//   seq 1: 3 packets (ftrace bundle with 2 events + compact sched, a
//          process tree, a dropped-marked bundle)
//   seq 2: 2 packets (clock snapshot, trace_stats)
//   no seq: 1 packet (system_info)
Trace SampleTrace() {
  Trace trace;

  TracePacket* p = trace.add_packet();
  p->set_trusted_packet_sequence_id(1);
  auto* bundle = p->mutable_ftrace_events();
  bundle->set_cpu(0);
  auto* e1 = bundle->add_event();
  e1->set_timestamp(2'000'000'000);
  e1->set_pid(10);
  e1->mutable_sched_switch()->set_next_pid(11);
  auto* e2 = bundle->add_event();
  e2->set_timestamp(2'500'000'000);
  e2->mutable_print()->set_buf("hello");
  auto* compact = bundle->mutable_compact_sched();
  compact->add_switch_timestamp(1'500'000'000);  // Absolute...
  compact->add_switch_timestamp(100);            // ...then deltas.
  compact->add_waking_timestamp(3'000'000'000);

  p = trace.add_packet();
  p->set_trusted_packet_sequence_id(1);
  p->set_timestamp(1'800'000'000);
  auto* tree = p->mutable_process_tree();
  auto* proc = tree->add_processes();
  proc->set_pid(10);
  proc->add_cmdline("/usr/bin/worker");
  proc->add_cmdline("--fast");
  auto* proc2 = tree->add_processes();
  proc2->set_pid(1);
  proc2->add_cmdline("init");
  auto* thread = tree->add_threads();
  thread->set_tid(11);
  thread->set_tgid(10);
  thread->set_name("worker-io");

  p = trace.add_packet();
  p->set_trusted_packet_sequence_id(1);
  p->set_previous_packet_dropped(65);
  p->mutable_ftrace_events()->set_cpu(1);
  p->mutable_ftrace_events()->set_lost_events(true);

  p = trace.add_packet();
  p->set_trusted_packet_sequence_id(2);
  p->set_timestamp(1'000'000'000);
  p->mutable_clock_snapshot()->add_clocks()->set_clock_id(6);

  p = trace.add_packet();
  p->set_trusted_packet_sequence_id(2);
  p->set_timestamp(4'000'000'000);
  auto* stats = p->mutable_trace_stats();
  auto* buf = stats->add_buffer_stats();
  buf->set_buffer_size(4096);
  buf->set_chunks_overwritten(3);
  buf->set_bytes_read(0);  // Present but zero: not reported.
  stats->set_producers_connected(2);

  p = trace.add_packet();
  p->mutable_system_info()->set_page_size(4096);
  // A timestamp in another clock domain does not count towards the range.
  p->set_timestamp(9'000'000'000);
  p->set_timestamp_clock_id(1);
  return trace;
}

TEST(TraceInspectorTest, SummarizesEveryPartOfATrace) {
  const std::string bytes = SampleTrace().SerializeAsString();
  const std::string path = WriteFile("sample", bytes);
  absl::StatusOr<TraceSummary> s = InspectTraceFile(path);
  ASSERT_TRUE(s.ok()) << s.status();

  EXPECT_FALSE(s->error.has_value());
  EXPECT_EQ(s->packets, 6u);
  EXPECT_EQ(s->bytes, bytes.size());
  const std::map<std::string, uint64_t> types = {{"ftrace_events", 2},
                                                 {"process_tree", 1},
                                                 {"clock_snapshot", 1},
                                                 {"trace_stats", 1},
                                                 {"system_info", 1}};
  EXPECT_EQ(s->packets_by_type, types);

  ASSERT_EQ(s->sequences.size(), 3u);
  EXPECT_EQ(s->sequences.at(0).packets, 1u);
  EXPECT_EQ(s->sequences.at(1).packets, 3u);
  EXPECT_EQ(s->sequences.at(1).dropped_marks, 1u);
  EXPECT_EQ(s->sequences.at(2).packets, 2u);
  EXPECT_EQ(s->sequences.at(2).dropped_marks, 0u);

  EXPECT_EQ(s->first_timestamp_ns, 1'000'000'000u);
  EXPECT_EQ(s->last_timestamp_ns, 4'000'000'000u);

  EXPECT_EQ(s->ftrace_events, 5u);  // 2 full events + 2 switches + 1 waking.
  EXPECT_EQ(s->ftrace_bundles_with_lost_events, 1u);

  const std::map<int32_t, std::string> processes = {{1, "init"}, {10, "/usr/bin/worker"}};
  EXPECT_EQ(s->processes, processes);
  ASSERT_EQ(s->threads.size(), 1u);
  EXPECT_EQ(s->threads.at(11).tgid, 10);
  EXPECT_EQ(s->threads.at(11).name, "worker-io");

  ASSERT_EQ(s->nonzero_stats.size(), 3u);
  EXPECT_EQ(s->nonzero_stats[0].first, "trace_stats.buffer_stats[0].chunks_overwritten");
  EXPECT_EQ(std::get<uint64_t>(s->nonzero_stats[0].second), 3u);
  EXPECT_EQ(s->nonzero_stats[1].first, "trace_stats.buffer_stats[0].buffer_size");
  EXPECT_EQ(s->nonzero_stats[2].first, "trace_stats.producers_connected");
  EXPECT_EQ(std::get<uint64_t>(s->nonzero_stats[2].second), 2u);
}

// The machine a file comes from, and its packets by machine id: a file
// whose packets do not all carry the machine's id is seen to.
TEST(TraceInspectorTest, NamesTheMachineAndCountsPacketsByMachineId) {
  Trace trace;
  TracePacket* p = trace.add_packet();
  p->set_machine_id(0x3d1219c7);
  trace::SystemInfo* si = p->mutable_system_info();
  si->set_machine_name("db-1");
  si->set_boot_id("2b80db8d-68fb-4d46-8582-629db27d8174");
  si->mutable_utsname()->set_sysname("Linux");
  si->mutable_utsname()->set_release("6.1.0-50-amd64");
  trace.add_packet()->set_machine_id(0x3d1219c7);
  trace.add_packet()->set_timestamp(1);
  const std::string path = WriteFile("machine", trace.SerializeAsString());
  absl::StatusOr<TraceSummary> s = InspectTraceFile(path);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->machine.has_value());
  EXPECT_EQ(s->machine->name, "db-1");
  EXPECT_EQ(s->machine->kernel, "Linux 6.1.0-50-amd64");
  const std::map<uint32_t, uint64_t> ids = {{0, 1}, {0x3d1219c7, 2}};
  EXPECT_EQ(s->packets_by_machine_id, ids);
  EXPECT_NE(
      SummaryToText(path, *s).find("machine: db-1, id none (1 packets) and 3d1219c7, boot "
                                   "2b80db8d-68fb-4d46-8582-629db27d8174, Linux 6.1.0-50-amd64\n"),
      std::string::npos)
      << SummaryToText(path, *s);
  const nlohmann::json j = SummaryToJson(path, *s);
  EXPECT_EQ(j["machine"]["name"], "db-1");
  EXPECT_EQ(j["machine"]["ids"][1]["id"], 0x3d1219c7u);
  EXPECT_EQ(j["machine"]["ids"][1]["packets"], 2u);
}

TEST(TraceInspectorTest, LaterStatsPacketReplacesEarlierOne) {
  Trace trace;
  trace.add_packet()->mutable_trace_stats()->add_buffer_stats()->set_chunks_written(5);
  trace.add_packet()->mutable_trace_stats()->add_buffer_stats()->set_chunks_written(9);
  auto* ftrace = trace.add_packet()->mutable_ftrace_stats();
  ftrace->add_cpu_stats()->set_overrun(4);
  ftrace->add_cpu_stats()->set_overrun(0);
  const std::string path = WriteFile("stats", trace.SerializeAsString());
  absl::StatusOr<TraceSummary> s = InspectTraceFile(path);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->nonzero_stats.size(), 2u);
  EXPECT_EQ(s->nonzero_stats[0].first, "trace_stats.buffer_stats[0].chunks_written");
  EXPECT_EQ(std::get<uint64_t>(s->nonzero_stats[0].second), 9u);
  EXPECT_EQ(s->nonzero_stats[1].first, "ftrace_stats.cpu_stats[0].overrun");
}

// A snapshot's trigger tally reads by trigger name, and the triggers it
// answers are listed, not taken for figures.
TEST(TraceInspectorTest, SnapshotTriggersAreNamedAmongTheStats) {
  Trace trace;
  auto* stats = trace.add_packet()->mutable_trace_stats();
  auto* crash = stats->add_ringside_triggers();
  crash->set_name("crash");
  crash->set_fired(1);
  crash->set_joined(49);
  for (int i = 0; i < 2; i++) {
    auto* t = stats->add_ringside_snapshot_triggers();
    t->set_trigger_name("crash");
    t->set_producer_name("linux.bpf");
    t->set_timestamp(1'500'000'000 + i);
  }
  const std::string path = WriteFile("triggers", trace.SerializeAsString());
  absl::StatusOr<TraceSummary> s = InspectTraceFile(path);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->nonzero_stats.size(), 2u);
  EXPECT_EQ(s->nonzero_stats[0].first, "trace_stats.ringside_triggers[crash].fired");
  EXPECT_EQ(s->nonzero_stats[1].first, "trace_stats.ringside_triggers[crash].joined");
  EXPECT_EQ(std::get<uint64_t>(s->nonzero_stats[1].second), 49u);
  ASSERT_EQ(s->snapshot_triggers.size(), 2u);
  const std::string text = SummaryToText(path, *s);
  EXPECT_NE(text.find("Snapshot of 2 trigger(s):\n  crash"), std::string::npos) << text;
  EXPECT_NE(text.find("by linux.bpf (uid 0) at 1.500000001 s"), std::string::npos) << text;
  const nlohmann::json j = SummaryToJson(path, *s);
  ASSERT_EQ(j["snapshot_triggers"].size(), 2u);
  EXPECT_EQ(j["snapshot_triggers"][1]["timestamp_ns"], 1'500'000'001u);
  EXPECT_EQ(j["nonzero_stats"]["trace_stats.ringside_triggers[crash].joined"], 49u);
}

// A loss is found by what was lost and where: its source, event, stage and
// CPU label the entry, in text and JSON, and are not figures of their own.
TEST(TraceInspectorTest, LossesAreKeyedBySourceEventStageAndCpu) {
  Trace trace;
  auto* stats = trace.add_packet()->mutable_trace_stats();
  auto* staging = stats->add_ringside_staging_loss();
  staging->set_data_source("linux.bpf");
  staging->set_cpu(1);
  staging->set_kind("sched_switch");
  staging->set_events_lost(7);
  auto* loss = stats->add_ringside_event_loss();
  loss->set_data_source("linux.bpf");
  loss->set_cpu(1);
  loss->set_kind("sched_switch");
  loss->set_stage("chunk_pool");
  loss->set_events_lost(6976);
  auto* cpu0 = stats->add_ringside_event_loss();
  cpu0->set_data_source("linux.ftrace");
  cpu0->set_kind("generic");
  cpu0->set_stage("buffer");
  cpu0->set_events_lost(3);
  const std::string path = WriteFile("losses", trace.SerializeAsString());
  absl::StatusOr<TraceSummary> s = InspectTraceFile(path);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->nonzero_stats.size(), 3u);
  EXPECT_EQ(s->nonzero_stats[0].first,
            "trace_stats.ringside_staging_loss[linux.bpf/sched_switch/cpu1].events_lost");
  EXPECT_EQ(s->nonzero_stats[1].first,
            "trace_stats.ringside_event_loss[linux.bpf/sched_switch/chunk_pool/cpu1].events_lost");
  EXPECT_EQ(s->nonzero_stats[2].first,
            "trace_stats.ringside_event_loss[linux.ftrace/generic/buffer/cpu0].events_lost");
  EXPECT_EQ(std::get<uint64_t>(s->nonzero_stats[1].second), 6976u);
  const std::string text = SummaryToText(path, *s);
  EXPECT_NE(text.find("ringside_event_loss[linux.bpf/sched_switch/chunk_pool/cpu1].events_lost"),
            std::string::npos)
      << text;
  const nlohmann::json j = SummaryToJson(path, *s);
  EXPECT_EQ(
      j["nonzero_stats"]["trace_stats.ringside_event_loss[linux.bpf/sched_switch/chunk_pool/cpu1]"
                         ".events_lost"],
      6976u);
}

// Processes of Kubernetes pods: their namespace, pod and container names in
// the text and the JSON, and the pods the file covers (the sidecar's too).
TEST(TraceInspectorTest, PodsAreShownByTheirKubernetesNames) {
  const std::string uid = "0c7e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b";
  const std::string nginx(64, 'a');
  const std::string pause(64, 'b');
  Trace trace;
  auto* tree = trace.add_packet()->mutable_process_tree();
  auto add = [&](int32_t pid, const std::string& name, const std::string& id,
                 const std::string& container) {
    auto* p = tree->add_processes();
    p->set_pid(pid);
    p->add_cmdline(name);
    p->set_cgroup_id(50);
    p->set_container_id(id);
    p->set_pod_uid(uid);
    p->set_k8s_namespace("shop");
    p->set_k8s_pod("web-7d4b9");
    if (!container.empty()) p->set_k8s_container(container);
  };
  add(10, "nginx", nginx, "nginx");
  add(11, "nginx", nginx, "nginx");
  add(12, "/pause", pause, "");
  const std::string path = WriteFile("pods", trace.SerializeAsString());
  absl::StatusOr<TraceSummary> s = InspectTraceFile(path);
  ASSERT_TRUE(s.ok());

  const std::string text = SummaryToText(path, *s);
  EXPECT_NE(text.find("      10  nginx  [pod shop/web-7d4b9 container nginx]\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("      12  /pause  [pod shop/web-7d4b9]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  aaaaaaaaaaaa  " + uid + "  -                   2  shop/web-7d4b9/nginx\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  bbbbbbbbbbbb  " + uid + "  -                   1  shop/web-7d4b9/-\n"),
            std::string::npos)
      << text;

  const nlohmann::json j = SummaryToJson(path, *s);
  for (const auto& p : j["processes"]) {
    EXPECT_EQ(p["pod_namespace"], "shop");
    EXPECT_EQ(p["pod_name"], "web-7d4b9");
    EXPECT_EQ(p.value("container_name", ""), p["pid"] == 12 ? "" : "nginx") << p;
  }
  ASSERT_EQ(j["containers"].size(), 2u);
  EXPECT_EQ(j["containers"][0]["container_name"], "nginx");
  EXPECT_EQ(j["containers"][1]["container_name"], nullptr);
  EXPECT_EQ(j["pods"], nlohmann::json::parse(R"([{"uid": ")" + uid + R"(", "namespace": "shop",
      "name": "web-7d4b9", "containers": ["nginx"], "processes": 3}])"));
  // What the sidecar says of the file.
  EXPECT_EQ(FileFactsToJson(path, *s)["pods"], j["pods"]);
}

// Processes in containers: each container with its pod, runtime and how
// many processes it has (a later descriptor of a process replaces its
// earlier one), in the text (short ids) and the JSON (full ids).
TEST(TraceInspectorTest, ContainersAreCountedByTheirProcesses) {
  const std::string a(64, 'a');
  const std::string b = "b" + std::string(63, '0');
  Trace trace;
  auto* tree = trace.add_packet()->mutable_process_tree();
  auto add = [tree](int32_t pid, const std::string& name, uint64_t cgroup, const std::string& id,
                    const std::string& pod) {
    auto* p = tree->add_processes();
    p->set_pid(pid);
    p->add_cmdline(name);
    if (cgroup != 0) p->set_cgroup_id(cgroup);
    if (!id.empty()) {
      p->set_container_id(id);
      p->set_container_runtime("containerd");
    }
    if (!pod.empty()) p->set_pod_uid(pod);
  };
  add(1, "/sbin/init", 1, "", "");
  add(10, "nginx", 50, a, "0c7e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b");
  add(11, "nginx", 50, a, "0c7e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b");
  add(12, "redis", 60, b, "");
  add(13, "worker", 0, "", "");  // An older trace's descriptor: no cgroup.
  // pid 12 moved out of its container and exec'd again.
  add(12, "sh", 1, "", "");
  const std::string path = WriteFile("containers", trace.SerializeAsString());
  absl::StatusOr<TraceSummary> s = InspectTraceFile(path);
  ASSERT_TRUE(s.ok());
  const auto containers = s->Containers();
  ASSERT_EQ(containers.size(), 1u);
  EXPECT_EQ(containers.at(a).processes, 2u);
  EXPECT_EQ(containers.at(a).pod_uid, "0c7e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b");

  const std::string text = SummaryToText(path, *s);
  EXPECT_NE(text.find("      10  nginx  [container aaaaaaaaaaaa]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Containers (1):\n"), std::string::npos) << text;
  EXPECT_NE(
      text.find("  aaaaaaaaaaaa  0c7e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b  containerd          2  -\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("  2 processes in no container, 1 of unknown cgroup\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find(a), std::string::npos) << "the text shows short ids";

  const nlohmann::json j = SummaryToJson(path, *s);
  ASSERT_EQ(j["containers"].size(), 1u);
  EXPECT_EQ(j["containers"][0]["container_id"], a);
  EXPECT_EQ(j["containers"][0]["pod_uid"], "0c7e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b");
  EXPECT_EQ(j["containers"][0]["runtime"], "containerd");
  EXPECT_EQ(j["containers"][0]["processes"], 2u);
  for (const auto& p : j["processes"]) {
    if (p["pid"] == 10) {
      EXPECT_EQ(p["container_id"], a);
      EXPECT_EQ(p["cgroup_id"], 50u);
    }
    if (p["pid"] == 12) {
      EXPECT_FALSE(p.contains("container_id"));
    }
    if (p["pid"] == 13) {
      EXPECT_FALSE(p.contains("cgroup_id"));
    }
  }
}

TEST(TraceInspectorTest, EmptyFileIsAnEmptyTrace) {
  absl::StatusOr<TraceSummary> s = InspectTraceFile(WriteFile("empty", ""));
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->error.has_value());
  EXPECT_EQ(s->packets, 0u);
  EXPECT_FALSE(s->first_timestamp_ns.has_value());
}

TEST(TraceInspectorTest, TruncatedFileReportsWhatWasReadableAndWhereItBroke) {
  const Trace trace = SampleTrace();
  std::string bytes = trace.SerializeAsString();
  Trace all_but_last = trace;
  all_but_last.mutable_packet()->RemoveLast();
  const size_t last_packet_offset = all_but_last.SerializeAsString().size();
  bytes.resize(bytes.size() - 2);  // Cut into the last packet.

  absl::StatusOr<TraceSummary> s = InspectTraceFile(WriteFile("truncated", bytes));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->error.has_value());
  EXPECT_EQ(s->error->offset, last_packet_offset);
  EXPECT_NE(s->error->message.find("truncated packet"), std::string::npos) << s->error->message;
  EXPECT_EQ(s->packets, 5u);
  EXPECT_EQ(s->bytes, last_packet_offset);
  EXPECT_EQ(s->packets_by_type.count("system_info"), 0u);
  EXPECT_EQ(s->packets_by_type.at("trace_stats"), 1u);
}

TEST(TraceInspectorTest, FileEndingInsideALengthVarintIsTruncated) {
  absl::StatusOr<TraceSummary> s =
      InspectTraceFile(WriteFile("varint", std::string("\x0a\x80", 2)));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->error.has_value());
  EXPECT_EQ(s->error->offset, 1u);  // Where the length varint starts.
  EXPECT_NE(s->error->message.find("packet length"), std::string::npos) << s->error->message;
}

TEST(TraceInspectorTest, GarbageIsRejectedAtItsFirstByte) {
  absl::StatusOr<TraceSummary> s = InspectTraceFile(WriteFile("garbage", "hello, I am text\n"));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->error.has_value());
  EXPECT_EQ(s->error->offset, 0u);
  EXPECT_TRUE(s->error->not_a_trace);
  EXPECT_NE(s->error->message.find("not a Perfetto trace: it is text"), std::string::npos)
      << s->error->message;
  EXPECT_EQ(s->packets, 0u);
}

TEST(TraceInspectorTest, GarbageAfterValidPacketsNamesItsOffset) {
  const std::string good = SampleTrace().SerializeAsString();
  absl::StatusOr<TraceSummary> s =
      InspectTraceFile(WriteFile("tail", good + std::string("\x12\x01\x00", 3)));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->error.has_value());
  EXPECT_EQ(s->error->offset, good.size());
  EXPECT_EQ(s->packets, 6u);
}

TEST(TraceInspectorTest, PacketThatIsNotATracePacketIsCorrupt) {
  // A well-framed packet whose body is an invalid protobuf (a field with wire
  // type 7, which does not exist).
  const std::string first = SampleTrace().SerializeAsString();
  absl::StatusOr<TraceSummary> s =
      InspectTraceFile(WriteFile("badbody", first + std::string("\x0a\x02\x0f\x01", 4)));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->error.has_value());
  EXPECT_EQ(s->error->offset, first.size());
  EXPECT_NE(s->error->message.find("corrupt packet #7"), std::string::npos) << s->error->message;
}

TEST(TraceInspectorTest, AbsurdLengthIsRejectedWithoutAllocatingIt) {
  // Declares a 200 MiB packet in a 7-byte file.
  absl::StatusOr<TraceSummary> s =
      InspectTraceFile(WriteFile("absurd", std::string("\x0a\x80\x80\x80\x64\x00\x00", 7)));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->error.has_value());
  EXPECT_NE(s->error->message.find("declares 209715200 bytes"), std::string::npos)
      << s->error->message;
}

TEST(TraceInspectorTest, MissingFileIsNotFound) {
  absl::StatusOr<TraceSummary> s = InspectTraceFile(TempPath("does-not-exist"));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("does-not-exist"), std::string::npos);
}

TEST(TraceInspectorTest, JsonCarriesTheSameFigures) {
  const std::string path = WriteFile("json", SampleTrace().SerializeAsString());
  absl::StatusOr<TraceSummary> s = InspectTraceFile(path);
  ASSERT_TRUE(s.ok());
  nlohmann::json j = SummaryToJson(path, *s);
  EXPECT_EQ(j["packets"], 6);
  EXPECT_EQ(j["packets_by_type"]["ftrace_events"], 2);
  EXPECT_EQ(j["sequences"][1]["id"], 1);
  EXPECT_EQ(j["sequences"][1]["previous_packet_dropped"], 1);
  EXPECT_EQ(j["time_range"]["duration_ns"], 3'000'000'000u);
  EXPECT_EQ(j["processes"][1]["name"], "/usr/bin/worker");
  EXPECT_EQ(j["threads"][0]["tgid"], 10);
  EXPECT_EQ(j["nonzero_stats"]["trace_stats.buffer_stats[0].chunks_overwritten"], 3);
  EXPECT_TRUE(j["error"].is_null());
}

// --- The CLI: exit codes and output streams. ---

struct CommandResult {
  int exit_code = -1;
  std::string out;
};

CommandResult RunRingside(const std::string& args) {
  const std::string command =
      ringside::testing::RingsideBinary() + " " + args + " 2>" + TempPath("stderr");
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) result.out.append(buf, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string LastStderr() {
  std::ifstream in(TempPath("stderr"));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(InspectCommandTest, ValidFileExitsZeroWithSummary) {
  const std::string path = WriteFile("cli_ok", SampleTrace().SerializeAsString());
  CommandResult r = RunRingside("inspect " + path);
  EXPECT_EQ(r.exit_code, 0) << LastStderr();
  EXPECT_NE(r.out.find("6 packets"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/usr/bin/worker"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chunks_overwritten"), std::string::npos) << r.out;
}

TEST(InspectCommandTest, JsonFlagPrintsOneParsableObject) {
  const std::string path = WriteFile("cli_json", SampleTrace().SerializeAsString());
  CommandResult r = RunRingside("inspect --json " + path);
  ASSERT_EQ(r.exit_code, 0) << LastStderr();
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["packets"], 6);
}

// Process and thread names are whatever bytes a program put in its argv or
// comm, UTF-8 or not; JSON output must carry them, not die on them.
TEST(InspectCommandTest, JsonCarriesNamesThatAreNotUtf8) {
  Trace trace = SampleTrace();
  auto* tree = trace.add_packet()->mutable_process_tree();
  auto* proc = tree->add_processes();
  proc->set_pid(77);
  proc->add_cmdline("caf\xe9-latin1");  // Latin-1, not UTF-8.
  auto* thread = tree->add_threads();
  thread->set_tid(78);
  thread->set_tgid(77);
  thread->set_name("cut\xe2\x82");  // A UTF-8 sequence cut short, as comm truncation does.
  const std::string path = WriteFile("cli_latin1", trace.SerializeAsString());
  CommandResult r = RunRingside("inspect --json " + path);
  ASSERT_EQ(r.exit_code, 0) << LastStderr();
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  const std::string dump = j.dump();
  EXPECT_NE(dump.find("caf\xef\xbf\xbd-latin1"), std::string::npos) << dump;  // U+FFFD
  EXPECT_NE(dump.find("cut\xef\xbf\xbd"), std::string::npos) << dump;
  r = RunRingside("inspect " + path);  // The text output passes the bytes through.
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("caf\xe9-latin1"), std::string::npos);
  EXPECT_EQ(LastStderr().find("libprotobuf"), std::string::npos) << LastStderr();
}

TEST(InspectCommandTest, CorruptFileExitsOneAfterPrintingWhatWasRead) {
  std::string bytes = SampleTrace().SerializeAsString();
  bytes.resize(bytes.size() - 1);
  const std::string path = WriteFile("cli_trunc", bytes);
  CommandResult r = RunRingside("inspect " + path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("5 packets"), std::string::npos) << r.out;
  EXPECT_NE(LastStderr().find("byte offset"), std::string::npos) << LastStderr();
}

// A script reading --json decides on "error", not on the exit code alone:
// whenever inspect fails, the object says why, in the words stderr uses.
TEST(InspectCommandTest, JsonOfAnEmptyFileCarriesTheErrorItExitsOneFor) {
  const std::string path = WriteFile("cli_empty_json", "");
  CommandResult r = RunRingside("inspect --json " + path);
  EXPECT_EQ(r.exit_code, 1);
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  ASSERT_TRUE(j["error"].is_object()) << r.out;
  const std::string message = j["error"]["message"];
  EXPECT_NE(message.find("the file is empty"), std::string::npos) << message;
  EXPECT_NE(LastStderr().find(message), std::string::npos) << LastStderr();
}

TEST(InspectCommandTest, JsonOfAMissingFileCarriesTheErrorItExitsTwoFor) {
  CommandResult r = RunRingside("inspect --json " + TempPath("nope_json"));
  EXPECT_EQ(r.exit_code, 2);
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  ASSERT_TRUE(j["error"].is_object()) << r.out;
  const std::string message = j["error"]["message"];
  EXPECT_NE(message.find("No such file"), std::string::npos) << message;
  EXPECT_NE(LastStderr().find(message), std::string::npos) << LastStderr();
}

// As trace_processor does: a trace piped in (`-`) or gzip'd, known by its
// magic bytes rather than its name.
TEST(InspectCommandTest, ReadsStandardInputAndGzippedTraces) {
  const std::string path = WriteFile("cli_plain", SampleTrace().SerializeAsString());
  const std::string gz = TempPath("cli_gz");
  ASSERT_EQ(std::system(("gzip -c " + path + " > " + gz).c_str()), 0);
  for (const std::string& args :
       {"inspect - < " + path, "inspect " + gz, "inspect - < " + gz, "inspect --json - < " + gz}) {
    CommandResult r = RunRingside(args);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << LastStderr();
    EXPECT_TRUE(r.out.find("6 packets") != std::string::npos ||
                r.out.find("\"packets\": 6,") != std::string::npos)
        << args << ": " << r.out;
  }
}

// A machine_name (or a comm, a trigger's name) is the file author's text:
// printed, its terminal escapes are text too (issue 52).
TEST(InspectCommandTest, ControlCharactersFromTheFileAreEscaped) {
  Trace trace = SampleTrace();
  for (TracePacket& p : *trace.mutable_packet()) {
    if (p.has_system_info())
      p.mutable_system_info()->set_machine_name("node\x1b]0;owned\x07\x1b[2J");
  }
  auto* thread = trace.add_packet()->mutable_process_tree()->add_threads();
  thread->set_tid(90);
  thread->set_name(
      "t\xc2\x9b"
      "31m");
  const std::string path = WriteFile("cli_escapes", trace.SerializeAsString());
  CommandResult r = RunRingside("inspect " + path);
  ASSERT_EQ(r.exit_code, 0) << LastStderr();
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x07'), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("machine: node\\x1b]0;owned\\x07\\x1b[2J"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("t\\xc2\\x9b31m"), std::string::npos) << r.out;
  r = RunRingside("inspect --json " + path);
  ASSERT_EQ(r.exit_code, 0) << LastStderr();
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\xc2\x9b"), std::string::npos) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["machine"]["name"], "node\x1b]0;owned\x07\x1b[2J");  // Still the same name.
}

// A file that is no trace gets no report of zeros, and the error says what
// it is rather than which protobuf field it began with (issue 52).
TEST(InspectCommandTest, AFileThatIsNoTraceIsNamedForWhatItIs) {
  struct Case {
    std::string bytes;
    std::string says;
  };
  for (const Case& c :
       {Case{"{\"perfetto_manifest\": {}}\n", "not a Perfetto trace: it is JSON text"},
        Case{"\x28\xb5\x2f\xfd\x00\x00", "it is zstd-compressed data: decompress it first"},
        Case{"hello, I am text\n", "not a Perfetto trace: it is text"},
        Case{std::string("\x72\x01\x00\x00", 4), "it begins with bytes 72 01 00 00"}}) {
    const std::string path = WriteFile("cli_not_trace", c.bytes);
    CommandResult r = RunRingside("inspect " + path);
    EXPECT_EQ(r.exit_code, 1) << c.says;
    EXPECT_EQ(r.out, "") << c.says;
    EXPECT_NE(LastStderr().find(path + ": " + "not a Perfetto trace: it "), std::string::npos)
        << LastStderr();
    EXPECT_NE(LastStderr().find(c.says), std::string::npos) << LastStderr();
    EXPECT_EQ(LastStderr().find("wire type"), std::string::npos) << LastStderr();
  }
}

// "in N bytes" is what the file holds on disk, gzip'd or with compressed
// packets alike; what that inflates to is said beside it (issue 52).
TEST(InspectCommandTest, AGzippedFileIsMeasuredOnDiskAsAZstdOneIs) {
  const std::string path = WriteFile("cli_size_plain", SampleTrace().SerializeAsString());
  const std::string gz = TempPath("cli_size_gz");
  ASSERT_EQ(std::system(("gzip -9 -c " + path + " > " + gz).c_str()), 0);
  struct stat plain_st, gz_st;
  ASSERT_EQ(stat(path.c_str(), &plain_st), 0);
  ASSERT_EQ(stat(gz.c_str(), &gz_st), 0);
  ASSERT_NE(plain_st.st_size, gz_st.st_size);
  CommandResult r = RunRingside("inspect " + gz);
  ASSERT_EQ(r.exit_code, 0) << LastStderr();
  EXPECT_NE(r.out.find(absl::StrCat("6 packets in ", gz_st.st_size, " bytes\n")), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(absl::StrCat("compressed: gzip (the whole file); ", gz_st.st_size,
                                    " bytes hold ", plain_st.st_size, " bytes of packets")),
            std::string::npos)
      << r.out;
  r = RunRingside("inspect --json " + gz);
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["bytes"], gz_st.st_size);
  EXPECT_EQ(j["compression"]["gzip"]["inflated_bytes"], plain_st.st_size);
}

TEST(InspectCommandTest, MissingFileExitsTwo) {
  CommandResult r = RunRingside("inspect " + TempPath("nope"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(LastStderr().find("No such file"), std::string::npos) << LastStderr();
}

TEST(InspectCommandTest, UnknownCommandExitsTwo) {
  EXPECT_EQ(RunRingside("frobnicate").exit_code, 2);
  EXPECT_EQ(RunRingside("inspect").exit_code, 2);
}

}  // namespace
}  // namespace ringside::agent

namespace ringside::agent {
namespace {

// A snapshot's file: its session started at 1 s, CPU 0's events from 2 s,
// CPU 1's from 3 s, the clone at 10 s, asked to hold two windows.
std::string SnapshotOfWindows(bool ring_wrapped) {
  Trace t;
  TracePacket* p = t.add_packet();
  p->set_timestamp(1'000'000'000);
  p->mutable_service_event()->set_tracing_started(true);
  for (uint32_t cpu : {0u, 1u}) {
    p = t.add_packet();
    auto* bundle = p->mutable_ftrace_events();
    bundle->set_cpu(cpu);
    auto* e = bundle->add_event();
    e->set_timestamp(2'000'000'000 + cpu * 1'000'000'000ull);
    e->mutable_sched_switch()->set_next_pid(5);
    bundle->mutable_compact_sched()->add_switch_timestamp(5'000'000'000);
  }
  p = t.add_packet();
  p->set_timestamp(10'000'000'000);
  auto* boot = p->mutable_clock_snapshot()->add_clocks();
  boot->set_clock_id(6);
  boot->set_timestamp(10'000'000'000);
  auto* real = p->mutable_clock_snapshot()->add_clocks();
  real->set_clock_id(1);
  real->set_timestamp(1'795'806'410'000'000'000);
  p = t.add_packet();
  p->set_timestamp(10'000'000'000);
  auto* stats = p->mutable_trace_stats();
  auto* buffer = stats->add_buffer_stats();
  buffer->set_buffer_size(1 << 20);
  buffer->set_bytes_written(ring_wrapped ? 3 << 20 : 1 << 19);
  stats->add_ringside_snapshot_triggers()->set_trigger_name("around");
  auto* w = stats->add_ringside_snapshot_windows();
  w->set_first_ns(2'500'000'000);
  w->set_last_ns(4'000'000'000);
  w = stats->add_ringside_snapshot_windows();
  w->set_first_ns(3'500'000'000);
  w->set_last_ns(9'000'000'000);
  return t.SerializeAsString();
}

TEST(TraceInspectorWindowTest, AnUnwrappedRingHoldsEverythingSinceTracingStarted) {
  absl::StatusOr<TraceSummary> s =
      InspectTraceFile(WriteFile("unwrapped", SnapshotOfWindows(false)));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->HeldFrom(), 1'000'000'000u);
  ASSERT_EQ(s->snapshot_windows.size(), 2u);
  EXPECT_TRUE(s->Holds(s->snapshot_windows[0]));
  EXPECT_TRUE(s->Holds(s->snapshot_windows[1]));
  // A window past the clone is not held.
  EXPECT_FALSE(s->Holds({9'000'000'000, 11'000'000'000}));
}

TEST(TraceInspectorWindowTest, AFileThatIsNotASnapshotHoldsFromItsEventsOnly) {
  // A rotated file carries its session's tracing_started too, but holds
  // only what came since the file before it.
  Trace t;
  ASSERT_TRUE(t.ParseFromString(SnapshotOfWindows(false)));
  t.mutable_packet(t.packet_size() - 1)->mutable_trace_stats()->clear_ringside_snapshot_triggers();
  absl::StatusOr<TraceSummary> s = InspectTraceFile(WriteFile("rotated", t.SerializeAsString()));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->HeldFrom(), 3'000'000'000u);
}

TEST(TraceInspectorWindowTest, AWrappedRingHoldsFromTheLatestCpusFirstEvent) {
  const std::string path = WriteFile("wrapped", SnapshotOfWindows(true));
  absl::StatusOr<TraceSummary> s = InspectTraceFile(path);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->HeldFrom(), 3'000'000'000u);
  EXPECT_FALSE(s->Holds(s->snapshot_windows[0]));  // CPU 0 alone before 3 s.
  EXPECT_TRUE(s->Holds(s->snapshot_windows[1]));

  const nlohmann::json j = SummaryToJson(path, *s);
  EXPECT_EQ(j["held"]["from"]["boottime_ns"], 3'000'000'000u);
  EXPECT_EQ(j["held"]["from"]["realtime"], "2026-11-27T19:06:43.000000Z");
  EXPECT_EQ(j["held"]["ring_wrapped"], true);
  ASSERT_EQ(j["snapshot_windows"].size(), 2u);
  EXPECT_EQ(j["snapshot_windows"][0]["held"], false);
  EXPECT_EQ(j["snapshot_windows"][1]["first"]["realtime"], "2026-11-27T19:06:43.500000Z");
  const std::string text = SummaryToText(path, *s);
  EXPECT_NE(text.find("Window asked: 2026-11-27T19:06:42.500000Z .. "
                      "2026-11-27T19:06:44.000000Z, NOT held whole"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace ringside::agent
