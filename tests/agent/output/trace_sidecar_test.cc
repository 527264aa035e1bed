#include "agent/output/trace_sidecar.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/output/file_retention.h"
#include "agent/tracefile/trace_inspector.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ringside/trace/trace.pb.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"

namespace ringside::agent {
namespace {

using testing::ListDir;
using testing::ScratchDir;
using testing::WriteTextFile;

constexpr uint32_t kMachineId = 0x5eedf00d;

// A trace as a node writes one: its machine, a clock snapshot holding both
// BOOTTIME and REALTIME, scheduling, and the stats' losses.
std::string NodeTrace() {
  trace::Trace t;
  trace::TracePacket* p = t.add_packet();
  p->set_machine_id(kMachineId);
  p->mutable_system_info()->set_machine_name("node-a");
  p->mutable_system_info()->mutable_utsname()->set_sysname("Linux");
  p->mutable_system_info()->mutable_utsname()->set_release("6.1.0-test");
  p = t.add_packet();
  p->set_machine_id(kMachineId);
  p->set_trusted_packet_sequence_id(1);
  p->set_timestamp(5'000'000'000);
  auto* clocks = p->mutable_clock_snapshot();
  auto* boot = clocks->add_clocks();
  boot->set_clock_id(6);
  boot->set_timestamp(5'000'000'000);
  auto* real = clocks->add_clocks();
  real->set_clock_id(1);
  real->set_timestamp(1'795'000'000'000'000'000);
  p = t.add_packet();
  p->set_machine_id(kMachineId);
  p->set_trusted_packet_sequence_id(2);
  p->set_previous_packet_dropped(true);
  auto* bundle = p->mutable_ftrace_events();
  bundle->set_cpu(0);
  auto* e = bundle->add_event();
  e->set_timestamp(6'000'000'000);
  e->set_pid(10);
  e->mutable_sched_switch()->set_next_pid(11);
  p = t.add_packet();
  p->set_machine_id(kMachineId);
  p->set_trusted_packet_sequence_id(1);
  p->set_timestamp(7'000'000'000);
  auto* stats = p->mutable_trace_stats();
  stats->add_buffer_stats()->set_chunks_overwritten(4);
  auto* staging = stats->add_ringside_staging_loss();
  staging->set_events_lost(17);
  return t.SerializeAsString();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// What coreutils' sha256sum says of the file: a digest from another
// implementation than ours.
std::string Sha256sum(const std::string& path) {
  FILE* f = popen(absl::StrCat("sha256sum '", path, "'").c_str(), "r");
  if (f == nullptr) return "";
  char line[256] = {};
  const bool read = fgets(line, sizeof(line), f) != nullptr;
  pclose(f);
  return read ? std::string(line).substr(0, 64) : "";
}

class TraceSidecarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = OutputDir::Open(scratch_.path(), std::nullopt);
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
  }
  ScratchDir scratch_;
  std::shared_ptr<const OutputDir> dir_;
};

TEST_F(TraceSidecarTest, SaysWhatTheFileIsAsInspectDoes) {
  const std::string name = "node-a-20261127T120000Z-000001.pftrace";
  ASSERT_TRUE(WriteTextFile(scratch_.Join(name), NodeTrace()));
  ASSERT_TRUE(WriteSidecar(*dir_, name, std::nullopt).ok());

  const std::string sidecar_path = scratch_.Join(name + ".json");
  const nlohmann::json sidecar = nlohmann::json::parse(ReadAll(sidecar_path));
  EXPECT_EQ(sidecar["ringside_sidecar"], 1);
  EXPECT_EQ(sidecar["file"], name);
  EXPECT_EQ(sidecar["size_bytes"], NodeTrace().size());
  EXPECT_EQ(sidecar["sha256"], Sha256sum(scratch_.Join(name)));
  EXPECT_EQ(sidecar["machine"]["name"], "node-a");
  EXPECT_EQ(sidecar["machine"]["id"], "5eedf00d");
  EXPECT_EQ(sidecar["machine"]["kernel"], "Linux 6.1.0-test");
  EXPECT_EQ(sidecar["time_range"]["first_ns"], 5'000'000'000u);
  EXPECT_EQ(sidecar["time_range"]["events_first_ns"], 6'000'000'000u);
  EXPECT_EQ(sidecar["time_range"]["events_realtime_first"], "2026-11-18T11:06:41.000000Z");
  EXPECT_EQ(sidecar["compression"]["codec"], "none");
  EXPECT_EQ(sidecar["losses"]["staging_events"], 17u);
  EXPECT_EQ(sidecar["losses"]["buffer_chunks_overwritten"], 4u);
  EXPECT_EQ(sidecar["losses"]["packets_after_a_gap"], 1u);
  EXPECT_TRUE(sidecar["error"].is_null());

  // `inspect --json` has every field the sidecar has, with the same value.
  absl::StatusOr<TraceSummary> summary = InspectTraceFile(scratch_.Join(name));
  ASSERT_TRUE(summary.ok()) << summary.status();
  const nlohmann::json inspected = SummaryToJson(name, *summary);
  for (const auto& [key, value] : sidecar.items()) {
    if (key == "ringside_sidecar") continue;
    EXPECT_EQ(inspected[key], value) << key;
  }

  struct stat st;
  ASSERT_EQ(stat(sidecar_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // No temporary file is left behind.
  EXPECT_EQ(ListDir(scratch_.path()), (std::set<std::string>{name, name + ".json"}));
}

TEST_F(TraceSidecarTest, NeverFollowsASymlinkNorReplacesWhatIsAtItsName) {
  ASSERT_TRUE(WriteTextFile(scratch_.Join("real.pftrace"), NodeTrace()));
  ASSERT_EQ(symlink(scratch_.Join("real.pftrace").c_str(), scratch_.Join("link.pftrace").c_str()),
            0);
  EXPECT_FALSE(WriteSidecar(*dir_, "link.pftrace", std::nullopt).ok());
  EXPECT_EQ(ListDir(scratch_.path()).count("link.pftrace.json"), 0u);

  ASSERT_TRUE(WriteTextFile(scratch_.Join("real.pftrace.json"), "planted"));
  const absl::Status st = WriteSidecar(*dir_, "real.pftrace", std::nullopt).status();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("real.pftrace.json"), std::string::npos) << st;
  EXPECT_EQ(ReadAll(scratch_.Join("real.pftrace.json")), "planted");
  EXPECT_EQ(ListDir(scratch_.path()),
            (std::set<std::string>{"real.pftrace", "link.pftrace", "real.pftrace.json"}));
}

TEST_F(TraceSidecarTest, ATraceThatIsGoneGetsNone) {
  const absl::Status st = WriteSidecar(*dir_, "gone.pftrace", std::nullopt).status();
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  EXPECT_TRUE(ListDir(scratch_.path()).empty());
}

TEST_F(TraceSidecarTest, AGroupReadsItWhenTheTraceIsShared) {
  ASSERT_TRUE(WriteTextFile(scratch_.Join("t.pftrace"), NodeTrace()));
  ASSERT_TRUE(WriteSidecar(*dir_, "t.pftrace", getegid()).ok());
  struct stat st;
  ASSERT_EQ(stat(scratch_.Join("t.pftrace.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(st.st_gid, getegid());
}

TEST_F(TraceSidecarTest, ListsTheTracesThatLackOne) {
  for (const char* name : {"a.pftrace", "b.pftrace", "c.pftrace", "notes.txt"}) {
    ASSERT_TRUE(WriteTextFile(scratch_.Join(name), NodeTrace()));
  }
  ASSERT_TRUE(WriteSidecar(*dir_, "b.pftrace", std::nullopt).ok());
  ASSERT_EQ(mkdir(scratch_.Join("d.pftrace").c_str(), 0700), 0);
  const auto is_trace = [](absl::string_view name) {
    return name.size() > 8 && name.substr(name.size() - 8) == ".pftrace";
  };
  EXPECT_EQ(TracesWithoutSidecar(*dir_, is_trace),
            (std::vector<std::string>{"a.pftrace", "c.pftrace"}));
}

TEST_F(TraceSidecarTest, TheWriterWritesWhatWasQueuedAndCountsTracesGone) {
  SidecarWriter writer;
  for (const char* name : {"a.pftrace", "b.pftrace"}) {
    ASSERT_TRUE(WriteTextFile(scratch_.Join(name), NodeTrace()));
    writer.Queue(dir_, name, std::nullopt);
  }
  writer.Queue(dir_, "taken-by-a-shipper.pftrace", std::nullopt);
  writer.WaitIdle();
  EXPECT_EQ(ListDir(scratch_.path()),
            (std::set<std::string>{"a.pftrace", "a.pftrace.json", "b.pftrace", "b.pftrace.json"}));
  const SidecarWriter::Stats stats = writer.stats();
  EXPECT_EQ(stats.written, 2u);
  EXPECT_EQ(stats.gone, 1u);
  EXPECT_EQ(stats.failed, 0u) << stats.last_error;
}

TEST_F(TraceSidecarTest, RetentionDeletesASidecarWithItsTrace) {
  const std::string old_name = "h-20261127T120000Z-000001.pftrace";
  const std::string new_name = "h-20261127T120100Z-000002.pftrace";
  for (const std::string& name : {old_name, new_name}) {
    ASSERT_TRUE(WriteTextFile(scratch_.Join(name), NodeTrace()));
    ASSERT_TRUE(WriteSidecar(*dir_, name, std::nullopt).ok());
  }
  const PruneResult r = PruneOldestFiles(
      *dir_, "h",
      [](absl::string_view name) -> std::optional<int> {
        if (AgentFileRest(name, "h").has_value()) return 0;
        return std::nullopt;
      },
      /*max_files=*/1, /*max_bytes=*/0, "");
  EXPECT_EQ(r.files_deleted, 1u);
  // Sidecars are not counted as files: one trace is kept, with its sidecar.
  EXPECT_EQ(ListDir(scratch_.path()), (std::set<std::string>{new_name, new_name + ".json"}));
}

}  // namespace
}  // namespace ringside::agent
