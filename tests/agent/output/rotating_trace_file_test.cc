#include "agent/output/rotating_trace_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/output/file_retention.h"
#include "agent/snapshots/snapshot_retention.h"
#include "agent/snapshots/snapshot_writer.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"

namespace ringside::agent {
namespace {

using testing::ListDir;
using testing::ScratchDir;

// A framed packet of `size` payload bytes (Trace.packet, field 1).
std::string Packet(size_t size) {
  std::string p = "\x0a";
  p.push_back(static_cast<char>(size));  // size < 128.
  p.append(size, 'p');
  return p;
}

class RotatingTraceFileTest : public ::testing::Test {
 protected:
  RotatingTraceFile::Options Opts() {
    RotatingTraceFile::Options o;
    o.dir = dir_.path();
    o.hostname = "h";
    o.now = [this] { return now_; };
    return o;
  }
  // The traces in the directory, without the sidecars (written on a
  // thread of their own: SidecarsOf says which are there).
  std::set<std::string> Files() {
    std::set<std::string> out;
    for (const std::string& n : testing::ListTraces(dir_.path())) out.insert(n);
    return out;
  }
  std::set<std::string> Sidecars() {
    std::set<std::string> out;
    for (const std::string& n : ListDir(dir_.path())) {
      if (absl::EndsWith(n, kSidecarSuffix)) out.insert(n);
    }
    return out;
  }
  ScratchDir dir_;
  absl::Time now_ = absl::FromUnixSeconds(1795000000);
};

TEST_F(RotatingTraceFileTest, AFileIsPartialUntilFinishedThenRenamedWhole) {
  RotatingTraceFile::Options o = Opts();
  o.max_file_bytes = 100;
  auto f = RotatingTraceFile::Open(o);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string first = AgentFileStem("h", now_) + "-000001.pftrace";
  EXPECT_EQ(Files(), (std::set<std::string>{first + ".partial"}));
  struct stat st;
  ASSERT_EQ(stat(dir_.Join(first + ".partial").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_TRUE((*f)->Write(Packet(60)).ok());
  EXPECT_FALSE((*f)->FileDue());
  ASSERT_TRUE((*f)->Write(Packet(60)).ok());
  EXPECT_TRUE((*f)->FileDue());
  ASSERT_TRUE((*f)->NextFile().ok());
  const std::string second = AgentFileStem("h", now_) + "-000002.pftrace";
  EXPECT_EQ(Files(), (std::set<std::string>{first, second + ".partial"}));
  ASSERT_TRUE((*f)->Finish().ok());
  EXPECT_EQ(Files(), (std::set<std::string>{first, second}));
  EXPECT_EQ((*f)->stats().files_finished, 2u);
  EXPECT_EQ((*f)->stats().bytes_finished, 124u);
}

TEST_F(RotatingTraceFileTest, AFileIsDueOnceItIsOldEnough) {
  RotatingTraceFile::Options o = Opts();
  o.max_file_age = absl::Minutes(10);
  auto f = RotatingTraceFile::Open(o);
  ASSERT_TRUE(f.ok());
  now_ += absl::Minutes(9);
  EXPECT_FALSE((*f)->FileDue());
  now_ += absl::Minutes(1);
  EXPECT_TRUE((*f)->FileDue());
}

TEST_F(RotatingTraceFileTest, RetentionKeepsMaxFilesOfThisHostsStreamAndNothingElse) {
  RotatingTraceFile::Options o = Opts();
  o.max_files = 2;
  // Not the stream's: another host's, a snapshot, a file of someone else.
  const std::set<std::string> others = {AgentFileStem("other", now_) + "-000001.pftrace",
                                        AgentFileStem("h", now_) + "-oom_kill.pftrace",
                                        "notes.txt"};
  for (const std::string& n : others) std::ofstream(dir_.Join(n)) << "x";
  auto f = RotatingTraceFile::Open(o);
  ASSERT_TRUE(f.ok());
  for (int i = 0; i < 5; i++) {
    now_ += absl::Seconds(1);
    ASSERT_TRUE((*f)->Write(Packet(10)).ok());
    ASSERT_TRUE((*f)->NextFile().ok());
    int finished = 0;
    for (const std::string& n : Files()) finished += IsStreamFileName(n, "h");
    EXPECT_LE(finished, 2);
  }
  std::set<std::string> want = others;
  want.insert(AgentFileStem("h", now_ - absl::Seconds(2)) + "-000004.pftrace");
  want.insert(AgentFileStem("h", now_ - absl::Seconds(1)) + "-000005.pftrace");
  want.insert(AgentFileStem("h", now_) + "-000006.pftrace.partial");
  EXPECT_EQ(Files(), want);
  EXPECT_EQ((*f)->stats().files_deleted, 3u);
  // The files kept have their sidecars; the deleted ones left none behind.
  (*f)->WaitForSidecars();
  EXPECT_EQ(Sidecars(), (std::set<std::string>{
                            AgentFileStem("h", now_ - absl::Seconds(2)) + "-000004.pftrace.json",
                            AgentFileStem("h", now_ - absl::Seconds(1)) + "-000005.pftrace.json"}));
}

// Named after machine_name (FileHost::Local), with the files an agent
// wrote under the host name before still its own: a killed one's ".partial"
// is kept, finished files get their sidecars, and retention counts them,
// oldest first by time whichever name they have.
TEST_F(RotatingTraceFileTest, TheStreamOfAMachineNameTakesItsHostNamedFilesAsItsOwn) {
  RotatingTraceFile::Options o = Opts();
  o.hostname = FileHost("node-7", "h");
  o.max_files = 2;
  const std::string renamed = AgentFileStem("h", now_) + "-000001.pftrace";
  const std::string partial = AgentFileStem("h", now_) + "-000002.pftrace";
  std::ofstream(dir_.Join(renamed)) << Packet(20);
  std::ofstream(dir_.Join(partial + ".partial")) << Packet(20);
  ASSERT_EQ(RecoverPartialStreamFiles(dir_.path(), o.hostname).files, 1u);
  now_ += absl::Seconds(1);
  auto f = RotatingTraceFile::Open(o);
  ASSERT_TRUE(f.ok()) << f.status();
  (*f)->WaitForSidecars();
  EXPECT_EQ(Sidecars(), (std::set<std::string>{renamed + ".json", partial + ".json"}));
  const std::string first = AgentFileStem("node-7", now_) + "-000001.pftrace";
  EXPECT_EQ(Files(), (std::set<std::string>{renamed, partial, first + ".partial"}));
  ASSERT_TRUE((*f)->Write(Packet(10)).ok());
  ASSERT_TRUE((*f)->NextFile().ok());
  // Room for `first` among two: the oldest, the host-named `renamed`, went.
  const std::string second = AgentFileStem("node-7", now_) + "-000002.pftrace";
  EXPECT_EQ(Files(), (std::set<std::string>{partial, first, second + ".partial"}));
  EXPECT_EQ((*f)->stats().files_deleted, 1u);
}

TEST_F(RotatingTraceFileTest, AFileIsFinishedOnceItsSidecarFollowsIt) {
  RotatingTraceFile::Options o = Opts();
  auto f = RotatingTraceFile::Open(o);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string first = AgentFileStem("h", now_) + "-000001.pftrace";
  ASSERT_TRUE((*f)->Write(Packet(10)).ok());
  ASSERT_TRUE((*f)->NextFile().ok());
  (*f)->WaitForSidecars();
  // The finished file has one; the one being written has none.
  EXPECT_EQ(Sidecars(), (std::set<std::string>{first + ".json"}));
  ASSERT_TRUE((*f)->Finish().ok());
  f->reset();  // Writes what is queued.
  const std::string second = AgentFileStem("h", now_) + "-000002.pftrace";
  EXPECT_EQ(Sidecars(), (std::set<std::string>{first + ".json", second + ".json"}));
}

TEST_F(RotatingTraceFileTest, TheNextAgentWritesTheSidecarsAKilledOneDidNot) {
  // Killed between renaming a file and writing its sidecar, and while
  // writing another: both are finished by the next agent's stream.
  const std::string renamed = AgentFileStem("h", now_) + "-000001.pftrace";
  const std::string partial = AgentFileStem("h", now_) + "-000002.pftrace";
  std::ofstream(dir_.Join(renamed)) << Packet(20);
  std::ofstream(dir_.Join(partial + ".partial")) << Packet(20);
  std::ofstream(dir_.Join("notes.txt")) << "not ours";
  ASSERT_EQ(RecoverPartialStreamFiles(dir_.path(), "h").files, 1u);
  auto f = RotatingTraceFile::Open(Opts());
  ASSERT_TRUE(f.ok()) << f.status();
  (*f)->WaitForSidecars();
  EXPECT_EQ(Sidecars(), (std::set<std::string>{renamed + ".json", partial + ".json"}));
  EXPECT_EQ((*f)->sidecar_stats().written, 2u);
}

TEST_F(RotatingTraceFileTest, APlantedSymlinkIsNeitherFollowedNorReplaced) {
  const std::string target = dir_.Join("precious");
  std::ofstream(target) << "keep";
  const std::string planted = AgentFileStem("h", now_) + "-000001.pftrace.partial";
  ASSERT_EQ(symlink(target.c_str(), dir_.Join(planted).c_str()), 0);
  auto f = RotatingTraceFile::Open(Opts());
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE((*f)->Write(Packet(10)).ok());
  EXPECT_TRUE(absl::EndsWith((*f)->display_name(), "-000002.pftrace.partial"));
  std::ifstream in(target);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "keep");
}

TEST_F(RotatingTraceFileTest, AKilledWritersPartialFileIsCutToItsLastWholePacketAndKept) {
  const std::string name = AgentFileStem("h", now_) + "-000007.pftrace";
  std::ofstream(dir_.Join(name + ".partial")) << Packet(20) << Packet(30) << "\x0a\x40half";
  const RecoveredFiles r = RecoverPartialStreamFiles(dir_.path(), "h");
  EXPECT_EQ(r.files, 1u);
  EXPECT_EQ(r.bytes_cut, 6u);
  struct stat st;
  ASSERT_EQ(stat(dir_.Join(name).c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 54);
  EXPECT_EQ(Files(), (std::set<std::string>{name}));
}

TEST(StreamFileNameTest, StreamAndSnapshotNamesNeverOverlap) {
  const absl::Time t = absl::FromUnixSeconds(1795000000);
  const std::string stream = AgentFileStem("h", t) + "-000012.pftrace";
  EXPECT_TRUE(IsStreamFileName(stream, "h"));
  EXPECT_FALSE(IsSnapshotFileName(stream, "h"));
  // A reason of digits only does not make a snapshot look like a stream file.
  const std::string snap = SnapshotFileName("h", t, "000012");
  EXPECT_TRUE(IsSnapshotFileName(snap, "h"));
  EXPECT_FALSE(IsStreamFileName(snap, "h"));
  EXPECT_FALSE(IsStreamFileName(stream + ".partial", "h"));
}

}  // namespace
}  // namespace ringside::agent
