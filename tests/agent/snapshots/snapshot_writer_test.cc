#include "agent/snapshots/snapshot_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/civil_time.h"
#include "agent/config/config_loader.h"
#include "agent/session/machine_identity.h"
#include "agent/tracefile/trace_inspector.h"
#include "ftrace/event_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/open_gate.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/ftrace/testing/fake_page.h"
#include "tests/ftrace/testing/kernel_formats.h"

namespace ringside::agent {
namespace {

using testing::ScratchDir;

// `more`: config text added to a small ring's.
std::unique_ptr<TracingSession> StartedSession(const std::string& more = "") {
  absl::StatusOr<config::TraceConfig> cfg =
      ParseConfig("buffers { size_kb: 1024 }\ndurable_buffer_size_kb: 512\n" + more, "t.pbtxt");
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  absl::StatusOr<std::unique_ptr<TracingSession>> s = TracingSession::Create(*cfg);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Start().ok());
  return std::move(*s);
}

// A writer's `on_done` that holds the writer's thread after every file
// until Release(): requests made meanwhile queue behind the one written.
class HoldAfterEachFile {
 public:
  std::function<void(const SnapshotWriter::Result&)> OnDone() {
    return [this](const SnapshotWriter::Result&) {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&released_));
    };
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }

 private:
  absl::Mutex mu_;
  bool released_ = false;
};

TEST(SnapshotFileNameTest, IsHostTimeAndReasonWithNothingThatLeavesTheDirectory) {
  const absl::Time t =
      absl::FromCivil(absl::CivilSecond(2026, 11, 23, 9, 5, 7), absl::UTCTimeZone());
  EXPECT_EQ(SnapshotFileName("node-1", t, "oom-kill"), "node-1-20261123T090507Z-oom-kill.pftrace");
  EXPECT_EQ(SnapshotFileName("h", t, "../../etc/x y"), "h-20261123T090507Z-r.._.._etc_x_y.pftrace");
  EXPECT_EQ(SnapshotFileName("h", t, ".."), "h-20261123T090507Z-r...pftrace");
  EXPECT_EQ(SnapshotFileName("h", t, ""), "h-20261123T090507Z-r.pftrace");
  EXPECT_EQ(SnapshotFileName("h", t, std::string(300, 'a')),
            "h-20261123T090507Z-" + std::string(48, 'a') + ".pftrace");
  EXPECT_EQ(SnapshotFileName("h", t, "d\xc3\xa9j\xc3\xa0"), "h-20261123T090507Z-d__j__.pftrace");
}

TEST(SnapshotWriterTest, WritesAWholeTraceUnderItsFinalNameOnly) {
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  SnapshotWriter writer(session.get(), dir.Join("snaps/deep"), nullptr);
  absl::StatusOr<std::string> path = writer.Take("manual");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_TRUE(absl::StartsWith(*path, dir.Join("snaps/deep/"))) << *path;
  ASSERT_TRUE(writer.Wait(*path, absl::Seconds(30)).ok());
  struct stat st;
  ASSERT_EQ(stat(path->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(dir.Join("snaps").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750u);
  const trace::Trace t = testing::ReadTraceFile(*path);
  ASSERT_GT(t.packet_size(), 0);
  EXPECT_TRUE(t.packet(0).has_trace_uuid());
  EXPECT_EQ(writer.stats().written, 1u);
  EXPECT_EQ(writer.stats().last_path, *path);
  EXPECT_EQ(writer.stats().last_reason, "manual");
}

// A shipper takes a snapshot once its sidecar is there: by the time Wait()
// (and so `ringside snapshot`) returns, it is, describing the file whole.
TEST(SnapshotWriterTest, ASnapshotIsFinishedWithItsSidecarBeforeWaitReturns) {
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  SnapshotWriter writer(session.get(), dir.path(), nullptr);
  absl::StatusOr<std::string> path = writer.Take("manual");
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_TRUE(writer.Wait(*path, absl::Seconds(30)).ok());
  std::ifstream in(*path + ".json");
  const nlohmann::json sidecar =
      nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  struct stat st;
  ASSERT_EQ(stat(path->c_str(), &st), 0);
  EXPECT_EQ(sidecar["size_bytes"], static_cast<uint64_t>(st.st_size));
  EXPECT_EQ(sidecar["file"], path->substr(path->find_last_of('/') + 1));
  ASSERT_EQ(sidecar["snapshot_triggers"].size(), 1u);
  EXPECT_EQ(sidecar["snapshot_triggers"][0]["trigger_name"], "manual");
  EXPECT_EQ(writer.stats().sidecars_failed, 0u) << writer.stats().last_error;
}

TEST(SnapshotWriterTest, TheSidecarsAKilledAgentDidNotWriteAreWrittenAtTheNextStart) {
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  std::string left;
  {
    SnapshotWriter first(session.get(), dir.path(), nullptr);
    absl::StatusOr<std::string> path = first.Take("crash");
    ASSERT_TRUE(path.ok()) << path.status();
    ASSERT_TRUE(first.Wait(*path, absl::Seconds(30)).ok());
    left = *path;
  }
  ASSERT_EQ(unlink((left + ".json").c_str()), 0);  // As if killed before it.
  SnapshotWriter next(session.get(), dir.path(), nullptr);
  next.FinishOldSnapshots(/*stream_files=*/false);
  // On the writer's thread, before the next snapshot: so after it.
  absl::StatusOr<std::string> path = next.Take("manual");
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_TRUE(next.Wait(*path, absl::Seconds(30)).ok());
  struct stat st;
  EXPECT_EQ(stat((left + ".json").c_str(), &st), 0);
  EXPECT_EQ(stat((*path + ".json").c_str(), &st), 0);
}

// Named after the config's machine_name: a DaemonSet passes the node's
// (the pod's host name is new with every pod), so the next pod finds them.
// The files named after the host name before machine_name was set are
// still this machine's: finished at a start, counted by retention.
TEST(SnapshotWriterTest, FilesAreNamedAfterTheMachineAndTheHostNamedOnesStillCount) {
  ScratchDir dir;
  std::string earlier;
  {
    std::unique_ptr<TracingSession> unnamed = StartedSession();
    SnapshotWriter first(unnamed.get(), dir.path(), nullptr);
    absl::StatusOr<std::string> path = first.Take("crash");
    ASSERT_TRUE(path.ok()) << path.status();
    ASSERT_TRUE(first.Wait(*path, absl::Seconds(30)).ok());
    earlier = path->substr(dir.path().size() + 1);
  }
  ASSERT_TRUE(absl::StartsWith(earlier, LocalHostname() + "-")) << earlier;
  ASSERT_EQ(unlink(dir.Join(earlier + ".json").c_str()), 0);  // As if killed before it.

  std::unique_ptr<TracingSession> session = StartedSession("machine_name: \"node-7\"\n");
  SnapshotWriter writer(session.get(), dir.path(), nullptr);
  writer.set_retention(/*max_files=*/2, /*max_bytes=*/0);
  writer.FinishOldSnapshots(/*stream_files=*/false);
  std::set<std::string> written;
  for (int i = 0; i < 2; i++) {
    absl::StatusOr<std::string> path = writer.Take("manual");
    ASSERT_TRUE(path.ok()) << path.status();
    ASSERT_TRUE(writer.Wait(*path, absl::Seconds(30)).ok());
    const std::string name = path->substr(dir.path().size() + 1);
    EXPECT_TRUE(absl::StartsWith(name, "node-7-")) << name;
    written.insert(name);
    if (i == 0) {
      // Finished before the first snapshot: it is this machine's.
      struct stat st;
      EXPECT_EQ(stat(dir.Join(earlier + ".json").c_str(), &st), 0) << earlier;
    }
  }
  // Two kept of three: the host-named one, the oldest, went.
  EXPECT_EQ(testing::ListTraces(dir.path()), written);
  EXPECT_EQ(writer.stats().deleted_files, 1u);
}

// output_group: the group reads the files and reaches them through every
// directory the writer made.
TEST(SnapshotWriterTest, WithAGroupFilesAre0640AndNewDirectories0750OfThatGroup) {
  if (geteuid() != 0) GTEST_SKIP() << "giving files to another group needs root";
  const gid_t adm = 4;  // Debian's adm; any group but ours will do.
  ASSERT_NE(getegid(), adm);
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  SnapshotWriter writer(session.get(), dir.Join("snaps/deep"), nullptr);
  writer.set_output_group(adm);
  absl::StatusOr<std::string> path = writer.Take("manual");
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_TRUE(writer.Wait(*path, absl::Seconds(30)).ok());
  struct stat st;
  ASSERT_EQ(stat(path->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(st.st_gid, adm);
  for (const char* d : {"snaps", "snaps/deep"}) {
    ASSERT_EQ(stat(dir.Join(d).c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_mode & 0777, 0750u) << d;
    EXPECT_EQ(st.st_gid, adm) << d;
  }
  // The scratch directory existed: not the writer's to change.
  ASSERT_EQ(stat(dir.path().c_str(), &st), 0);
  EXPECT_NE(st.st_gid, adm);
}

TEST(SnapshotWriterTest, TheFileIsNamedForTheReasonAndCarriesTheTriggerGiven) {
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  SnapshotWriter writer(session.get(), dir.Join("snaps"), nullptr);
  absl::StatusOr<std::string> path =
      writer.Take("segv", SnapshotTrigger{"fatal_signal", "bpf.incidents", 0, 123456789});
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_TRUE(absl::EndsWith(*path, "-segv.pftrace")) << *path;
  ASSERT_TRUE(writer.Wait(*path, absl::Seconds(30)).ok());
  int triggers = 0;
  const trace::Trace t = testing::ReadTraceFile(*path);
  for (const trace::TracePacket& p : t.packet()) {
    if (!p.has_clone_snapshot_trigger()) continue;
    triggers++;
    EXPECT_EQ(p.clone_snapshot_trigger().trigger_name(), "fatal_signal");
    EXPECT_EQ(p.clone_snapshot_trigger().producer_name(), "bpf.incidents");
    EXPECT_EQ(p.timestamp(), 123456789u);
  }
  EXPECT_EQ(triggers, 1);
}

// A request by hand is tallied in the row it is taken as ("request"),
// never under its trigger's name, which is the client's reason: the file
// keeps the reason, the tally and the metrics cannot be forged with it.
TEST(SnapshotWriterTest, ARequestIsTalliedAsItsRowAndItsReasonStaysInTheFile) {
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  TriggerTally tally;
  SnapshotWriter writer(session.get(), dir.path(), nullptr, &tally);
  absl::StatusOr<std::string> path = writer.Take(
      "request-oom_kill", SnapshotTrigger{"oom_kill", "ringside snapshot", 1000, BoottimeNowNs()},
      {}, std::nullopt, "request");
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_TRUE(writer.Wait(*path, absl::Seconds(30)).ok());
  const std::vector<TriggerTally::Counts> counts = tally.counts();
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts[0].name, "request");
  EXPECT_EQ(counts[0].fired, 1u);
  trace::TraceStats stats;
  const trace::Trace t = testing::ReadTraceFile(*path);
  for (const trace::TracePacket& p : t.packet()) {
    if (p.has_trace_stats()) stats = p.trace_stats();
  }
  ASSERT_EQ(stats.ringside_snapshot_triggers_size(), 1);
  EXPECT_EQ(stats.ringside_snapshot_triggers(0).trigger_name(), "oom_kill");
  EXPECT_EQ(stats.ringside_snapshot_triggers(0).producer_name(), "ringside snapshot");
  ASSERT_EQ(stats.ringside_triggers_size(), 1);
  EXPECT_EQ(stats.ringside_triggers(0).name(), "request");
}

// What the writer keeps of a written file for its waiters is the span it
// holds, as the file's own summary says, not the summary itself.
TEST(SnapshotWriterTest, AnOutcomeKeepsTheSpanTheFileHoldsWhole) {
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  SnapshotWriter writer(session.get(), dir.path(), nullptr);
  absl::StatusOr<std::string> path = writer.Take("manual");
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_TRUE(writer.Wait(*path, absl::Seconds(30)).ok());
  const std::optional<SnapshotWriter::Result> outcome = writer.Outcome(*path);
  ASSERT_TRUE(outcome.has_value());
  ASSERT_TRUE(outcome->held.has_value());
  const absl::StatusOr<TraceSummary> summary = InspectTraceFile(*path);
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_TRUE(summary->HeldFrom().has_value());
  EXPECT_EQ(outcome->held->from_ns, summary->HeldFrom());
  EXPECT_EQ(outcome->held->until_ns, summary->last_timestamp_ns);
  EXPECT_EQ(outcome->held->realtime_offset_ns, summary->realtime_offset_last_ns);
  const TraceSummary::Window inside{*summary->HeldFrom(), *summary->last_timestamp_ns};
  const TraceSummary::Window past{*summary->HeldFrom(), *summary->last_timestamp_ns + 1};
  EXPECT_TRUE(outcome->held->Holds(inside));
  EXPECT_FALSE(outcome->held->Holds(past));
}

// With compression set (the agent's shipped config: zstd), every packet of
// the file is in a compressed packet, the file reads back whole, and the
// writer's stats count what it compressed and the CPU it took.
TEST(SnapshotWriterTest, CompressedSnapshotsReadBackWholeAndAreCounted) {
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  SnapshotWriter writer(session.get(), dir.path(), nullptr);
  writer.set_compression({PacketCodec::kZstd, 0});
  absl::StatusOr<std::string> path =
      writer.Take("z", SnapshotTrigger{"fatal_signal", "bpf.incidents", 0, 42});
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_TRUE(writer.Wait(*path, absl::Seconds(30)).ok());
  std::ifstream in(*path, std::ios::binary);
  trace::Trace raw;
  ASSERT_TRUE(raw.ParseFromString(std::string((std::istreambuf_iterator<char>(in)), {})));
  ASSERT_GT(raw.packet_size(), 0);
  for (const trace::TracePacket& p : raw.packet()) EXPECT_TRUE(p.has_zstd_compressed_packets());
  const trace::Trace t = testing::ReadTraceFile(*path);
  int triggers = 0, stats = 0;
  for (const trace::TracePacket& p : t.packet()) {
    triggers += p.has_clone_snapshot_trigger();
    stats += p.has_trace_stats();
  }
  EXPECT_EQ(triggers, 1);
  EXPECT_EQ(stats, 1);
  const SnapshotWriter::Stats st = writer.stats();
  EXPECT_EQ(st.codec, PacketCodec::kZstd);
  EXPECT_GT(st.compressed_in_bytes, st.compressed_out_bytes);
  struct stat file;
  ASSERT_EQ(stat(path->c_str(), &file), 0);
  EXPECT_EQ(st.compressed_out_bytes, static_cast<uint64_t>(file.st_size));
}

TEST(SnapshotWriterTest, TwoSnapshotsInOneSecondGetTwoNames) {
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  SnapshotWriter writer(session.get(), dir.path(), nullptr);
  absl::StatusOr<std::string> a = writer.Take("same");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(writer.Wait(*a, absl::Seconds(30)).ok());
  absl::StatusOr<std::string> b = writer.Take("same");
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(writer.Wait(*b, absl::Seconds(30)).ok());
  EXPECT_NE(*a, *b);
}

TEST(SnapshotWriterTest, AnOutputDirThatIsAFileIsAnErrorNamingIt) {
  ScratchDir dir;
  const std::string file = dir.Join("f");
  close(open(file.c_str(), O_CREAT | O_WRONLY, 0644));
  std::unique_ptr<TracingSession> session = StartedSession();
  SnapshotWriter writer(session.get(), file, nullptr);
  absl::StatusOr<std::string> path = writer.Take("x");
  EXPECT_EQ(path.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(path.status().message(), file + " is not a directory"))
      << path.status();
}

// The agent runs as root and names its next snapshot in advance: one who
// could write output_dir could plant a symlink at that name and have the
// agent write through it. The directory is refused unless only the agent's
// user can write it, whoever owns it otherwise, and a symlink is not one.
TEST(SnapshotWriterTest, AnOutputDirOthersCanChangeIsRefusedNamingItAndWhy) {
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  struct Case {
    std::string name;
    mode_t mode;
    uid_t owner;
    std::string why;
  };
  for (const Case& c : {Case{"group", 0770, 0, "can be written by others (mode 0770)"},
                        Case{"all", 0777, 0, "can be written by others (mode 0777)"},
                        Case{"sticky", 01777, 0, "can be written by others (mode 1777)"},
                        Case{"nobody", 0755, 65534, "belongs to uid 65534"}}) {
    const std::string out = dir.Join(c.name);
    ASSERT_EQ(mkdir(out.c_str(), 0700), 0);
    ASSERT_EQ(chmod(out.c_str(), c.mode), 0);
    ASSERT_EQ(chown(out.c_str(), c.owner, static_cast<gid_t>(-1)), 0);
    SnapshotWriter writer(session.get(), out, nullptr);
    absl::StatusOr<std::string> path = writer.Take("x");
    EXPECT_EQ(path.status().code(), absl::StatusCode::kFailedPrecondition) << c.name;
    EXPECT_TRUE(absl::StrContains(path.status().message(), "output_dir " + out + " " + c.why))
        << path.status();
    EXPECT_EQ(testing::ListDir(out).size(), 0u) << c.name;
  }
  ASSERT_EQ(mkdir(dir.Join("real").c_str(), 0700), 0);
  ASSERT_EQ(symlink(dir.Join("real").c_str(), dir.Join("link").c_str()), 0);
  SnapshotWriter writer(session.get(), dir.Join("link"), nullptr);
  absl::StatusOr<std::string> path = writer.Take("x");
  EXPECT_EQ(path.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(path.status().message(), dir.Join("link") + " is a symlink"))
      << path.status();
  EXPECT_EQ(testing::ListDir(dir.Join("real")).size(), 0u);
}

// The name of a snapshot is chosen when it is taken, and the file written
// later (behind another one): what appears at that name meanwhile, a
// symlink to a file of the system say, is neither followed nor replaced;
// the snapshot takes the next free name, which Wait() reports.
TEST(SnapshotWriterTest, ASymlinkPlantedAtAWaitingSnapshotsNameIsNeitherFollowedNorReplaced) {
  ScratchDir dir, elsewhere;
  const std::string victim = elsewhere.Join("passwd");
  ASSERT_TRUE(testing::WriteTextFile(victim, "root:x:0:0\n"));
  ASSERT_EQ(chmod(victim.c_str(), 0644), 0);
  std::unique_ptr<TracingSession> session = StartedSession();
  HoldAfterEachFile hold;
  SnapshotWriter writer(session.get(), dir.path(), hold.OnDone());
  absl::StatusOr<std::string> first = writer.Take("first");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(writer.Wait(*first, absl::Seconds(30)).ok());
  // The writer's thread is held: this one waits, its name chosen.
  absl::StatusOr<std::string> planted = writer.Take("planted");
  ASSERT_TRUE(planted.ok()) << planted.status();
  ASSERT_EQ(symlink(victim.c_str(), planted->c_str()), 0);
  hold.Release();
  absl::StatusOr<std::string> written = writer.Wait(*planted, absl::Seconds(30));
  ASSERT_TRUE(written.ok()) << written.status();
  writer.Finish();
  std::ifstream in(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "root:x:0:0\n");
  struct stat st;
  ASSERT_EQ(stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(testing::ListDir(elsewhere.path()).size(), 1u);
  ASSERT_EQ(lstat(planted->c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(*written, planted->substr(0, planted->size() - 8) + "-2.pftrace");
  EXPECT_EQ(writer.stats().last_path, *written);
  const trace::Trace t = testing::ReadTraceFile(*written);
  EXPECT_GT(t.packet_size(), 0);
}

TEST(SnapshotWriterTest, FinishWritesWhatIsQueuedThenRefusesMore) {
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  int done = 0;
  SnapshotWriter writer(session.get(), dir.path(),
                        [&](const SnapshotWriter::Result& r) { done += r.status.ok(); });
  absl::StatusOr<std::string> path = writer.Take("last");
  ASSERT_TRUE(path.ok());
  writer.Finish();
  EXPECT_EQ(done, 1);
  struct stat st;
  EXPECT_EQ(stat(path->c_str(), &st), 0);
  EXPECT_EQ(writer.Take("late").status().code(), absl::StatusCode::kFailedPrecondition);
}

// While one file is written, a request whose trigger came before the
// waiting clone joins it as it is; one whose trigger came after it gets a
// fresh clone into the same file, so the file holds the trigger's moment.
TEST(SnapshotWriterTest, ARequestJoinsTheWaitingCloneOrRefreshesItWhenItsTriggerIsNewer) {
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  HoldAfterEachFile hold;  // After the first file, so the next waits.
  SnapshotWriter writer(session.get(), dir.path(), hold.OnDone());
  absl::StatusOr<std::string> first = writer.Take("first");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(writer.Wait(*first, absl::Seconds(30)).ok());

  const int64_t before_waiting = BoottimeNowNs();
  absl::StatusOr<std::string> waiting =
      writer.Take("waiting", SnapshotTrigger{"waiting", "test", 0, BoottimeNowNs()});
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  absl::StatusOr<std::string> older =
      writer.Take("older", SnapshotTrigger{"older", "test", 0, before_waiting});
  ASSERT_TRUE(older.ok()) << older.status();
  EXPECT_EQ(*older, *waiting);
  const int64_t newer_at = BoottimeNowNs();
  absl::StatusOr<std::string> newer =
      writer.Take("newer", SnapshotTrigger{"newer", "test", 0, newer_at});
  ASSERT_TRUE(newer.ok()) << newer.status();
  EXPECT_EQ(*newer, *waiting);
  EXPECT_EQ(writer.stats().joined, 2u);
  hold.Release();
  ASSERT_TRUE(writer.Wait(*waiting, absl::Seconds(30)).ok());
  writer.Finish();

  // The file is the fresh clone: taken after the newer trigger, and it
  // names that trigger.
  const trace::Trace t = testing::ReadTraceFile(*waiting);
  int triggers = 0;
  uint64_t stats_at = 0;
  for (const trace::TracePacket& p : t.packet()) {
    if (p.has_clone_snapshot_trigger()) {
      triggers++;
      EXPECT_EQ(p.clone_snapshot_trigger().trigger_name(), "newer");
    }
    if (p.has_trace_stats()) stats_at = p.timestamp();
  }
  EXPECT_EQ(triggers, 1);
  EXPECT_GE(stats_at, static_cast<uint64_t>(newer_at));
}

// An earlier boot's events (BootRing's, at the agent's start) go into a
// file named for the time they are of, with its sidecar, counted as its
// trigger; a request that comes while that file waits gets a file of its
// own, never that boot's.
TEST(SnapshotWriterTest, AnEarlierBootsSnapshotIsNamedForItsTimeAndNeverJoined) {
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  HoldAfterEachFile hold;
  TriggerTally tally;
  SnapshotWriter writer(session.get(), dir.path(), hold.OnDone(), &tally);
  absl::StatusOr<std::string> first = writer.Take("first");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(writer.Wait(*first, absl::Seconds(30)).ok());

  // That boot ran for days: its last event's BOOTTIME is far beyond this
  // boot's clock, so a join by time would take it.
  std::vector<std::unique_ptr<ftrace::CpuReader>> readers;
  readers.push_back(ftrace::testing::CpuReaderOfPages(
      0, {ftrace::testing::FakePage(uint64_t{300'000} * 1'000'000'000)
              .Data(1, ftrace::testing::SchedSwitchRecord(1, "a", 2, "b"))
              .Finish()}));
  std::unique_ptr<PreviousBootReader> reader = PreviousBootReader::ForTesting(
      ftrace::testing::SchedSwitchAndPrintTable(),
      ftrace::PageParser(ftrace::PageHeaderFormat{}, ftrace::EventHeaderFormat{}),
      std::move(readers));
  PreviousBootReader::Stats stats;
  absl::StatusOr<std::unique_ptr<SessionSnapshot>> previous = SessionSnapshot::OfPreviousBoot(
      reader.get(), {"earlier-boot", "", "node-7", 0, 0}, 64, ReadMachineIdentity(""), &stats);
  ASSERT_TRUE(previous.ok()) << previous.status();
  const absl::Time when =
      absl::FromCivil(absl::CivilSecond(2026, 12, 3, 10, 0, 5), absl::UTCTimeZone());
  absl::StatusOr<std::string> put = writer.Put("previous-boot", std::move(*previous), when);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_TRUE(absl::StrContains(*put, "-20261203T100005Z-previous-boot.pftrace")) << *put;
  absl::StatusOr<std::string> manual = writer.Take("manual");
  ASSERT_TRUE(manual.ok()) << manual.status();
  EXPECT_NE(*manual, *put);
  EXPECT_EQ(writer.stats().joined, 0u);
  hold.Release();
  ASSERT_TRUE(writer.Wait(*put, absl::Seconds(30)).ok());
  ASSERT_TRUE(writer.Wait(*manual, absl::Seconds(30)).ok());
  writer.Finish();
  EXPECT_EQ(writer.stats().written, 3u);
  std::ifstream in(*put + ".json");
  const nlohmann::json sidecar =
      nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  EXPECT_EQ(sidecar["machine"]["boot_id"], "earlier-boot");
  EXPECT_EQ(sidecar["machine"]["name"], "node-7");
  ASSERT_EQ(sidecar["snapshot_triggers"].size(), 1u);
  EXPECT_EQ(sidecar["snapshot_triggers"][0]["trigger_name"], "previous_boot");
  bool counted = false;
  for (const TriggerTally::Counts& c : tally.counts()) {
    counted |= c.name == "previous_boot" && c.fired == 1;
  }
  EXPECT_TRUE(counted);
}

// A burst of requests while a slow file is written: the waiting file's
// clone is refreshed for a newer trigger, but freed before the fresh one is
// taken, so memory never holds more than two clones (the arithmetic behind
// the unit's MemoryMax: the ring and two copies).
TEST(SnapshotWriterTest, ANewerRequestWhileOneIsWrittenAndOneWaitsHoldsAtMostTwoClones) {
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  absl::StatusOr<std::unique_ptr<testing::OpenGate>> gate =
      testing::OpenGate::Create(dir.path(), getpid());
  if (!gate.ok()) GTEST_SKIP() << "holding a file's open needs CAP_SYS_ADMIN: " << gate.status();
  SnapshotWriter writer(session.get(), dir.path(), nullptr);
  absl::StatusOr<std::string> first = writer.Take("first");
  ASSERT_TRUE(first.ok()) << first.status();
  // The writer holds the first clone, its file's open held by the gate.
  ASSERT_TRUE((*gate)->WaitHeld(absl::Seconds(30)).ok());
  absl::StatusOr<std::string> waiting =
      writer.Take("waiting", SnapshotTrigger{"waiting", "test", 0, BoottimeNowNs()});
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(writer.peak_clones_held_ForTesting(), 2);
  absl::StatusOr<std::string> newer =
      writer.Take("newer", SnapshotTrigger{"newer", "test", 0, BoottimeNowNs()});
  ASSERT_TRUE(newer.ok()) << newer.status();
  EXPECT_EQ(*newer, *waiting);
  EXPECT_EQ(writer.stats().joined, 1u);
  EXPECT_EQ(writer.peak_clones_held_ForTesting(), 2);
  (*gate)->Release(true);
  ASSERT_TRUE(writer.Wait(*first, absl::Seconds(30)).ok());
  ASSERT_TRUE(writer.Wait(*waiting, absl::Seconds(30)).ok());
  writer.Finish();
  int triggers = 0;
  const trace::Trace t = testing::ReadTraceFile(*waiting);
  for (const trace::TracePacket& p : t.packet()) {
    triggers += p.has_clone_snapshot_trigger();
  }
  EXPECT_EQ(triggers, 1);
}

// A file names every trigger it answers (the one that made it, those that
// joined it before and after it was taken) and carries the tally of all
// requests up to its write, in its trace_stats.
TEST(SnapshotWriterTest, AFileListsTheTriggersItAnswersAndTheTallyAsOfItsWrite) {
  ScratchDir dir;
  std::unique_ptr<TracingSession> session = StartedSession();
  TriggerTally tally;
  HoldAfterEachFile hold;
  SnapshotWriter writer(session.get(), dir.path(), hold.OnDone(), &tally);
  absl::StatusOr<std::string> first = writer.Take("first");
  ASSERT_TRUE(first.ok()) << first.status();
  // Written; the writer's thread is now held, so the next requests queue.
  ASSERT_TRUE(writer.Wait(*first, absl::Seconds(30)).ok());

  const int64_t early = BoottimeNowNs();
  // "crash" was joined by another crash while it waited for its delay.
  absl::StatusOr<std::string> crash =
      writer.Take("crash", SnapshotTrigger{"crash", "linux.bpf", 0, early},
                  {SnapshotTrigger{"crash", "linux.bpf", 0, early + 1}});
  ASSERT_TRUE(crash.ok()) << crash.status();
  absl::StatusOr<std::string> manual =
      writer.Take("control", SnapshotTrigger{"control", "ringside snapshot", 1000, early});
  ASSERT_TRUE(manual.ok()) << manual.status();
  EXPECT_EQ(*manual, *crash);
  hold.Release();
  ASSERT_TRUE(writer.Wait(*crash, absl::Seconds(30)).ok());
  writer.Finish();

  auto stats_of = [](const std::string& path) {
    trace::TraceStats stats;
    const trace::Trace t = testing::ReadTraceFile(path);
    for (const trace::TracePacket& p : t.packet()) {
      if (p.has_trace_stats()) stats = p.trace_stats();
    }
    return stats;
  };
  const trace::TraceStats first_stats = stats_of(*first);
  ASSERT_EQ(first_stats.ringside_snapshot_triggers_size(), 1);
  EXPECT_EQ(first_stats.ringside_snapshot_triggers(0).trigger_name(), "first");
  EXPECT_GT(first_stats.buffer_stats_size(), 0) << "the session's own stats are gone";

  const trace::TraceStats stats = stats_of(*crash);
  EXPECT_GT(stats.buffer_stats_size(), 0) << "the session's own stats are gone";
  ASSERT_EQ(stats.ringside_snapshot_triggers_size(), 3);
  EXPECT_EQ(stats.ringside_snapshot_triggers(0).trigger_name(), "crash");
  EXPECT_EQ(stats.ringside_snapshot_triggers(0).timestamp(), static_cast<uint64_t>(early));
  EXPECT_EQ(stats.ringside_snapshot_triggers(1).trigger_name(), "crash");
  EXPECT_EQ(stats.ringside_snapshot_triggers(1).timestamp(), static_cast<uint64_t>(early + 1));
  EXPECT_EQ(stats.ringside_snapshot_triggers(2).trigger_name(), "control");
  EXPECT_EQ(stats.ringside_snapshot_triggers(2).producer_name(), "ringside snapshot");
  EXPECT_EQ(stats.ringside_snapshot_triggers(2).trusted_producer_uid(), 1000);
  // The request that joined before the clone was counted by whoever took
  // it (the agent's trigger rules); the writer counts what it decided.
  ASSERT_EQ(stats.ringside_triggers_size(), 3);
  EXPECT_EQ(stats.ringside_triggers(0).name(), "first");
  EXPECT_EQ(stats.ringside_triggers(0).fired(), 1u);
  EXPECT_EQ(stats.ringside_triggers(1).name(), "crash");
  EXPECT_EQ(stats.ringside_triggers(1).fired(), 1u);
  EXPECT_EQ(stats.ringside_triggers(2).name(), "control");
  EXPECT_EQ(stats.ringside_triggers(2).joined(), 1u);
}

}  // namespace
}  // namespace ringside::agent
