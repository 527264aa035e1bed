// `ringside merge` on files built here: what it writes, what it refuses.
// (Two machines' real recordings through trace_processor:
// trace_processor_import_test.cc.)

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ringside/trace/trace.pb.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/ringside_cli.h"

namespace ringside::agent::testing {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;
// 2026-11-27T16:00:00Z.
constexpr uint64_t kWallBase = 1'795'795'200 * kSecond;

// A machine's file: its system info, a clock snapshot tying BOOTTIME `boot`
// to REALTIME kWallBase + `wall_s` s (none when `realtime` is false), and
// packets at BOOTTIME boot .. boot + `span_s` s; every packet with
// machine id `id`.
std::string MachineFile(const std::string& path, const std::string& name, uint32_t id,
                        uint64_t boot, uint64_t wall_s, uint64_t span_s, bool realtime = true) {
  trace::Trace t;
  trace::TracePacket* p = t.add_packet();
  p->mutable_system_info()->set_machine_name(name);
  p = t.add_packet();
  p->set_timestamp(boot);
  auto* clocks = p->mutable_clock_snapshot();
  auto* c = clocks->add_clocks();
  c->set_clock_id(6);
  c->set_timestamp(boot);
  if (realtime) {
    c = clocks->add_clocks();
    c->set_clock_id(1);
    c->set_timestamp(kWallBase + wall_s * kSecond);
  }
  t.add_packet()->set_timestamp(boot + span_s * kSecond);
  for (trace::TracePacket& packet : *t.mutable_packet()) {
    packet.set_machine_id(id);
    packet.set_trusted_packet_sequence_id(1);
  }
  std::ofstream(path, std::ios::binary) << t.SerializeAsString();
  return path;
}

// Appends to the file at `path` a bundle of CPU `cpu`'s sched_switch
// events at BOOTTIME `from_s` .. `to_s` s, one a second, on `sequence`.
void AddEvents(const std::string& path, uint32_t cpu, uint64_t from_s, uint64_t to_s,
               uint32_t sequence = 3) {
  trace::Trace t;
  {
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(t.ParseFromIstream(&in));
  }
  trace::TracePacket* p = t.add_packet();
  p->set_machine_id(t.packet(0).machine_id());
  p->set_trusted_packet_sequence_id(sequence);
  p->mutable_ftrace_events()->set_cpu(cpu);
  for (uint64_t s = from_s; s <= to_s; s++) {
    auto* e = p->mutable_ftrace_events()->add_event();
    e->set_timestamp(s * kSecond);
    e->set_pid(100 + static_cast<uint32_t>(s));
    e->mutable_sched_switch()->set_next_pid(200 + static_cast<int32_t>(s));
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << t.SerializeAsString();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::vector<std::string> Members(const std::string& tar) {
  int code = -1;
  const std::string out = RunProgramCapture("/bin/tar", {"tf", tar}, &code);
  EXPECT_EQ(code, 0) << tar;
  std::vector<std::string> names;
  size_t at = 0;
  for (size_t nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1) {
    names.push_back(out.substr(at, nl - at));
  }
  return names;
}

class MergeCommandTest : public ::testing::Test {
 protected:
  std::string Merge(const std::vector<std::string>& files, int* code) {
    std::vector<std::string> args = {"merge", "-o", out_};
    args.insert(args.end(), files.begin(), files.end());
    return RunRingsideCaptureStderr(args, code);
  }
  bool OutExists() const {
    struct stat st;
    return stat(out_.c_str(), &st) == 0;
  }
  ScratchDir dir_;
  std::string out_ = dir_.Join("incident.tar");
};

// Two nodes booted 4,000 s apart, their files overlapping by 20 s of wall
// time: one archive, the manifest first, and the common range said.
TEST_F(MergeCommandTest, TwoMachinesGoIntoOneArchiveWithTheManifestFirst) {
  const std::string a =
      MachineFile(dir_.Join("node-a.pftrace"), "node-a", 0xa, 100 * kSecond, 0, 60);
  const std::string b =
      MachineFile(dir_.Join("node-b.pftrace"), "node-b", 0xb, 4100 * kSecond, 40, 60);
  int code = -1;
  const std::string err = Merge({a, b}, &code);
  ASSERT_EQ(code, 0) << err;
  EXPECT_EQ(Members(out_), (std::vector<std::string>{"perfetto_manifest.json", "node-a.pftrace",
                                                     "node-b.pftrace"}))
      << err;
  EXPECT_NE(err.find("2 files of 2 machines, on REALTIME"), std::string::npos) << err;
  EXPECT_NE(err.find("node-a.pftrace  node-a           0000000a  2026-11-27T16:00:00.000000Z .. "
                     "2026-11-27T16:01:00.000000Z"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("all files cover 2026-11-27T16:00:40.000000Z .. "
                     "2026-11-27T16:01:00.000000Z (20.000 s)"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("warning"), std::string::npos) << err;
}

TEST_F(MergeCommandTest, AFileWithoutRealtimeIsRefusedAndNothingIsWritten) {
  const std::string a = MachineFile(dir_.Join("a.pftrace"), "node-a", 0xa, kSecond, 0, 1);
  const std::string b =
      MachineFile(dir_.Join("b.pftrace"), "node-b", 0xb, kSecond, 0, 1, /*realtime=*/false);
  int code = -1;
  const std::string err = Merge({a, b}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find(b + " has no clock snapshot with both BOOTTIME and REALTIME"),
            std::string::npos)
      << err;
  EXPECT_FALSE(OutExists());
}

TEST_F(MergeCommandTest, ACorruptFileIsRefusedNamingWhereItBreaks) {
  const std::string a = MachineFile(dir_.Join("a.pftrace"), "node-a", 0xa, kSecond, 0, 1);
  const std::string bad = dir_.Join("bad.pftrace");
  std::ofstream(bad) << std::string("\x0a\x80\x01xyz", 6);
  int code = -1;
  const std::string err = Merge({a, bad}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find(bad + ": byte offset 0:"), std::string::npos) << err;
  EXPECT_FALSE(OutExists());
}

// Per-node default names (a/ringside.pftrace, b/ringside.pftrace), the
// common case: each member is named by its machine (issue 52), and a name
// that is still taken gets a number.
TEST_F(MergeCommandTest, FilesOfOneNameAreToldApartByTheirMachines) {
  for (const char* sub : {"a", "b", "c"}) ASSERT_EQ(mkdir(dir_.Join(sub).c_str(), 0700), 0);
  const std::string a = MachineFile(dir_.Join("a/t.pftrace"), "node-a", 0xa, kSecond, 0, 1);
  const std::string b = MachineFile(dir_.Join("b/t.pftrace"), "node/b\x1b", 0xb, kSecond, 0, 1);
  const std::string c = MachineFile(dir_.Join("c/t.pftrace"), "node-a", 0xa, 90 * kSecond, 90, 1);
  const std::string manifest =
      MachineFile(dir_.Join("perfetto_manifest.json"), "node-c", 0xc, kSecond, 0, 1);
  int code = -1;
  const std::string err = Merge({a, b, c, manifest}, &code);
  ASSERT_EQ(code, 0) << err;
  EXPECT_EQ(Members(out_), (std::vector<std::string>{"perfetto_manifest.json", "node-a-t.pftrace",
                                                     "node_b_-t.pftrace", "node-a-t-2.pftrace",
                                                     "node-c-perfetto_manifest.json"}))
      << err;
  EXPECT_NE(err.find(b + " is node_b_-t.pftrace in the archive"), std::string::npos) << err;
}

// Nodes cloned from one image keep one /etc/machine-id: the importer would
// show them as one machine, and merge says so.
TEST_F(MergeCommandTest, OneMachineIdWithTwoNamesIsWarnedOf) {
  const std::string a = MachineFile(dir_.Join("a.pftrace"), "web-1", 0x3d1219c7, kSecond, 0, 1);
  const std::string b = MachineFile(dir_.Join("b.pftrace"), "web-2", 0x3d1219c7, kSecond, 0, 1);
  int code = -1;
  const std::string err = Merge({a, b}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(err.find("warning: " + a + " (web-1) and " + b +
                     " (web-2) have one machine id, 3d1219c7: the importer shows them as one "
                     "machine"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("2 files of 1 machines"), std::string::npos) << err;
}

TEST_F(MergeCommandTest, FilesThatShareNoMomentAreWarnedOf) {
  const std::string a = MachineFile(dir_.Join("a.pftrace"), "node-a", 0xa, kSecond, 0, 10);
  const std::string b = MachineFile(dir_.Join("b.pftrace"), "node-b", 0xb, kSecond, 3600, 10);
  int code = -1;
  const std::string err = Merge({a, b}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(err.find("warning: the files share no moment: b.pftrace begins at "
                     "2026-11-27T17:00:00.000000Z, after a.pftrace ended at "
                     "2026-11-27T16:00:10.000000Z"),
            std::string::npos)
      << err;
}

// An output that is one of the inputs would be replaced by the archive.
TEST_F(MergeCommandTest, AnOutputThatIsAnInputIsRefused) {
  const std::string a = MachineFile(dir_.Join("a.pftrace"), "node-a", 0xa, kSecond, 0, 1);
  const std::string b = MachineFile(dir_.Join("b.pftrace"), "node-b", 0xb, kSecond, 0, 1);
  const std::string before = ReadFile(a);
  int code = -1;
  const std::string err = RunRingsideCaptureStderr({"merge", "-o", a, a, b}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find("-o " + a + " is one of the files to merge"), std::string::npos) << err;
  EXPECT_EQ(ReadFile(a), before);
  EXPECT_NE(RunRingsideCaptureStderr({"merge", "-o", out_, "-"}, &code).find("not standard input"),
            std::string::npos);
  EXPECT_EQ(code, 2);
}

// Two files of one machine over the same time (a snapshot and the streamed
// file of the same minutes) hold the same events twice.
TEST_F(MergeCommandTest, FilesOfOneMachineHoldingTheSameEventsAreWarnedOf) {
  const std::string a = MachineFile(dir_.Join("snap.pftrace"), "node-a", 0xa, kSecond, 0, 60);
  const std::string b = MachineFile(dir_.Join("stream.pftrace"), "node-a", 0xa, kSecond, 0, 60);
  AddEvents(a, 0, 10, 40);
  AddEvents(b, 0, 31, 60, /*sequence=*/5);  // Another reader numbers sequences its own way.
  int code = -1;
  const std::string err = Merge({a, b}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(err.find("warning: " + a + " and " + b +
                     " are of one machine (0000000a) and hold 10 of the same kernel events: the "
                     "archive has them twice"),
            std::string::npos)
      << err;
}

// Consecutive rotated files of one stream: each CPU's events are cut at
// its own moment, so the first file's last event (CPU 1's, at 12 s) comes
// after the second's first (CPU 0's, at 11 s), yet no event is in both.
// Merging them is what rotation is for: no warning (issue 52).
TEST_F(MergeCommandTest, RotatedFilesWhoseEndsInterleaveAreNotAnOverlap) {
  const std::string a = MachineFile(dir_.Join("n-1.pftrace"), "node-a", 0xa, kSecond, 0, 12);
  const std::string b = MachineFile(dir_.Join("n-2.pftrace"), "node-a", 0xa, 11 * kSecond, 10, 10);
  AddEvents(a, 0, 1, 10);
  AddEvents(a, 1, 1, 12);
  AddEvents(b, 0, 11, 20);
  AddEvents(b, 1, 13, 20);
  // A third file, after a gap: the machine's files cover the whole, and
  // that they share no moment with each other is no news.
  const std::string c = MachineFile(dir_.Join("n-3.pftrace"), "node-a", 0xa, 40 * kSecond, 39, 10);
  AddEvents(c, 0, 40, 50);
  int code = -1;
  const std::string err = Merge({a, b, c}, &code);
  EXPECT_EQ(code, 0) << err;
  EXPECT_EQ(err.find("warning"), std::string::npos) << err;
  EXPECT_NE(err.find("all files cover 2026-11-27T16:00:00.000000Z .. 2026-11-27T16:00:49"),
            std::string::npos)
      << err;
}

// `inspect` of what merge wrote: each trace in it summarized, the manifest
// named for what it is (issue 52).
TEST_F(MergeCommandTest, InspectSummarizesEachFileOfTheArchive) {
  const std::string a =
      MachineFile(dir_.Join("node-a.pftrace"), "node-a", 0xa, 100 * kSecond, 0, 60);
  const std::string b =
      MachineFile(dir_.Join("node-b.pftrace"), "node-b", 0xb, 4100 * kSecond, 40, 60);
  int code = -1;
  std::string err = Merge({a, b}, &code);
  ASSERT_EQ(code, 0) << err;
  const std::string out = RunRingsideCapture({"inspect", out_}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find(out_ + ": a TAR archive of 3 files"), std::string::npos) << out;
  EXPECT_NE(out.find(out_ + "[perfetto_manifest.json]: 75 bytes, not a Perfetto trace: it is "
                            "JSON text"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(out_ + "[node-a.pftrace]: 3 packets in"), std::string::npos) << out;
  EXPECT_NE(out.find("machine: node-a"), std::string::npos) << out;
  EXPECT_NE(out.find(out_ + "[node-b.pftrace]: 3 packets in"), std::string::npos) << out;
  EXPECT_NE(out.find("machine: node-b"), std::string::npos) << out;
  const std::string json = RunRingsideCapture({"inspect", "--json", out_}, &code);
  EXPECT_EQ(code, 0) << json;
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << json;
  ASSERT_EQ(j["members"].size(), 3u) << json;
  EXPECT_EQ(j["members"][1]["member"], "node-a.pftrace");
  EXPECT_EQ(j["members"][1]["packets"], 3);
  EXPECT_EQ(j["members"][2]["machine"]["name"], "node-b");
  EXPECT_TRUE(j["error"].is_null()) << json;
}

// A machine name is the file's text: merge prints it escaped (issue 52).
TEST_F(MergeCommandTest, MachineNamesArePrintedWithTheirControlCharactersEscaped) {
  const std::string a =
      MachineFile(dir_.Join("a.pftrace"), "node\x1b]0;owned\x07", 0xa, kSecond, 0, 1);
  int code = -1;
  const std::string err = Merge({a}, &code);
  EXPECT_EQ(code, 0) << err;
  EXPECT_EQ(err.find('\x1b'), std::string::npos) << err;
  EXPECT_NE(err.find("node\\x1b]0;owned\\x07"), std::string::npos) << err;
}

// A snapshot's preamble is stamped with its session's start, maybe days
// before what it recorded: the range merge prints is its events'.
TEST_F(MergeCommandTest, TheRangeIsThatOfTheKernelEvents) {
  const std::string a = MachineFile(dir_.Join("a.pftrace"), "node-a", 0xa, 100 * kSecond, 0, 1);
  trace::Trace t;
  {
    std::ifstream in(a, std::ios::binary);
    ASSERT_TRUE(t.ParseFromIstream(&in));
  }
  t.add_packet()->set_timestamp(10 * kSecond);  // The session's start, 90 s before.
  trace::TracePacket* p = t.add_packet();
  p->mutable_ftrace_events()->set_cpu(0);
  p->mutable_ftrace_events()->add_event()->set_timestamp(130 * kSecond);
  p->mutable_ftrace_events()->add_event()->set_timestamp(140 * kSecond);
  for (trace::TracePacket& packet : *t.mutable_packet()) packet.set_machine_id(0xa);
  std::ofstream(a, std::ios::binary | std::ios::trunc) << t.SerializeAsString();
  int code = -1;
  const std::string err = Merge({a}, &code);
  EXPECT_EQ(code, 0) << err;
  EXPECT_NE(err.find("2026-11-27T16:00:30.000000Z .. 2026-11-27T16:00:40.000000Z"),
            std::string::npos)
      << err;
}

// Clocks of an untrusted file may be anything: no crash, no undefined
// arithmetic (the sanitizer build runs this).
TEST_F(MergeCommandTest, AbsurdClocksAreMergedWithoutHarm) {
  trace::Trace t;
  trace::TracePacket* p = t.add_packet();
  auto* clocks = p->mutable_clock_snapshot();
  auto* c = clocks->add_clocks();
  c->set_clock_id(6);
  c->set_timestamp(1);
  c = clocks->add_clocks();
  c->set_clock_id(1);
  c->set_timestamp(UINT64_MAX);
  t.add_packet()->set_timestamp(UINT64_MAX);
  t.add_packet()->set_timestamp(0);
  const std::string a = dir_.Join("absurd.pftrace");
  std::ofstream(a, std::ios::binary) << t.SerializeAsString();
  const std::string b = MachineFile(dir_.Join("b.pftrace"), "node-b", 0xb, kSecond, 0, 1);
  int code = -1;
  const std::string err = Merge({a, b}, &code);
  EXPECT_EQ(code, 0) << err;
}

// Issue 52's reproduction: root merges into a directory another user owns,
// where that user planted a symlink at the output name pointing at a file
// of root's. The file stays as it was unless root asks to follow the link.
TEST_F(MergeCommandTest, AnotherUsersSymlinkAtTheOutputIsNotFollowed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as two users";
  const std::string theirs = dir_.Join("theirs");
  ASSERT_EQ(mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
  const std::string precious = dir_.Join("precious.conf");
  std::ofstream(precious) << "root's";
  ASSERT_EQ(chmod(precious.c_str(), 0644), 0);
  const std::string link = theirs + "/incident.tar";
  ASSERT_EQ(symlink(precious.c_str(), link.c_str()), 0);
  ASSERT_EQ(lchown(link.c_str(), 65534, 65534), 0);
  const std::string a = MachineFile(dir_.Join("a.pftrace"), "node-a", 0xa, kSecond, 0, 1);
  int code = -1;
  std::string err = RunRingsideCaptureStderr({"merge", "-o", link, a}, &code);
  EXPECT_EQ(code, 1) << err;
  EXPECT_NE(err.find("owned by uid 65534, not by you"), std::string::npos) << err;
  EXPECT_EQ(ReadFile(precious), "root's");
  err = RunRingsideCaptureStderr({"merge", "--follow-symlink", "-o", link, a}, &code);
  EXPECT_EQ(code, 0) << err;
  EXPECT_EQ(Members(precious), (std::vector<std::string>{"perfetto_manifest.json", "a.pftrace"}));
}

TEST_F(MergeCommandTest, WithoutOutputOrFilesItIsAUsageError) {
  int code = -1;
  std::string err = RunRingsideCaptureStderr({"merge", "a.pftrace"}, &code);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("needs -o OUT.tar"), std::string::npos) << err;
  err = RunRingsideCaptureStderr({"merge", "-o", out_}, &code);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("needs one FILE or more"), std::string::npos) << err;
}

}  // namespace
}  // namespace ringside::agent::testing
