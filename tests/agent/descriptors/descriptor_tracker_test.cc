#include "agent/descriptors/descriptor_tracker.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "buffer/durable_store.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

struct Named {
  std::map<int32_t, trace::ProcessTree::Process> processes;
  std::map<int32_t, trace::ProcessTree::Thread> threads;
  std::map<int32_t, trace::TrackDescriptor> labels;  // By pid.
};

// The tracker's updates as the buffer owner applies them, and what the
// store then holds (all of it, or what changed since the last such visit).
Named Descriptors(DescriptorTracker& t, buffer::DurableStore& store, bool changed_only = false) {
  t.ApplyTo(&store);
  Named n;
  store.ForEach(
      [&](buffer::DurableStore::Kind, uint64_t, std::string_view bytes) {
        trace::TracePacket p;
        ASSERT_TRUE(p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
        for (const auto& pr : p.process_tree().processes()) n.processes[pr.pid()] = pr;
        for (const auto& th : p.process_tree().threads()) n.threads[th.tid()] = th;
        if (p.has_track_descriptor()) {
          n.labels[p.track_descriptor().process().pid()] = p.track_descriptor();
        }
      },
      changed_only, /*mark_read=*/changed_only);
  return n;
}

trace::TracePacket Scan() {
  trace::TracePacket p;
  p.set_timestamp(100);
  auto* init = p.mutable_process_tree()->add_processes();
  init->set_pid(1);
  init->add_cmdline("/sbin/init");
  auto* sh = p.mutable_process_tree()->add_processes();
  sh->set_pid(50);
  sh->set_ppid(1);
  sh->set_uid(1000);
  sh->add_cmdline("/bin/sh");
  sh->add_cmdline("-c");
  auto* t = p.mutable_process_tree()->add_threads();
  t->set_tid(50);
  t->set_tgid(50);
  t->set_name("sh");
  return p;
}

TEST(DescriptorTrackerTest, ForkExecRenameExitKeepEveryTaskNamed) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  // sh forks a child: it starts as a copy of sh...
  t.OnFork(200, 50, 50, 60, 60, "sh");
  Named n = Descriptors(t, store);
  ASSERT_TRUE(n.processes.count(60));
  EXPECT_EQ(n.processes[60].ppid(), 50);
  EXPECT_EQ(n.processes[60].cmdline(0), "/bin/sh");
  EXPECT_EQ(n.processes[60].uid(), 1000);
  // ...which execs: one entry, replaced, with the new command line.
  t.OnExec(300, 60, 60, "/usr/bin/python3", std::string_view("python3\0x.py\0", 13), "python3", 50,
           1000);
  n = Descriptors(t, store);
  ASSERT_EQ(n.processes[60].cmdline_size(), 2);
  EXPECT_EQ(n.processes[60].cmdline(1), "x.py");
  EXPECT_EQ(n.threads[60].name(), "python3");
  // A thread, renamed.
  t.OnFork(400, 60, 60, 61, 60, "python3");
  t.OnRename(410, 61, "worker");
  n = Descriptors(t, store);
  EXPECT_EQ(n.threads[61].tgid(), 60);
  EXPECT_EQ(n.threads[61].name(), "worker");
  EXPECT_FALSE(n.processes.count(61));  // A thread is not a process.
  // Everything exits; the entries stay while the ring may refer to them...
  t.OnExit(500, 61, 60, 0);
  t.OnExit(510, 60, 60, 1);
  t.ApplyTo(&store);
  store.Drained(0);
  store.Drained(5000);  // The ends are pinned here, at 5000.
  n = Descriptors(t, store);
  EXPECT_TRUE(n.processes.count(60));
  EXPECT_TRUE(n.threads.count(61));
  EXPECT_EQ(t.live_processes(), 2u);  // init and sh
  // ...and go once the ring has moved more than its size past the exit.
  store.Drained(5000 + (1 << 20) + (1 << 17) + 1);
  n = Descriptors(t, store);
  EXPECT_FALSE(n.processes.count(60));
  EXPECT_FALSE(n.threads.count(61));
  EXPECT_TRUE(n.processes.count(50));
  EXPECT_EQ(store.stats().compacted, 3u);  // Process 60, threads 60 and 61.
}

// Records are read per CPU: a child's exec (or a thread's rename) on
// another CPU may be read before its fork, which must not undo it.
TEST(DescriptorTrackerTest, AnExecReadBeforeItsForkIsNotUndone) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  t.OnExec(300, 60, 60, "/bin/true", {}, "true", 50, 0);
  t.OnRename(310, 61, "worker");
  t.OnFork(200, 50, 50, 60, 60, "sh");
  t.OnFork(210, 60, 60, 61, 60, "true");
  const Named n = Descriptors(t, store);
  EXPECT_EQ(n.processes.at(60).cmdline(0), "/bin/true");
  EXPECT_EQ(n.threads.at(60).name(), "true");
  EXPECT_EQ(n.threads.at(61).name(), "worker");
  EXPECT_EQ(n.threads.at(61).tgid(), 60);
}

// A new thread that renames itself on another CPU: its rename may be read
// before its fork. Until the fork says which process it is in, it is not
// described at all (the importer would make it a process of its own).
TEST(DescriptorTrackerTest, ARenameReadBeforeItsForkWaitsForItsProcess) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  t.OnRename(310, 51, "worker");
  Named n = Descriptors(t, store);
  EXPECT_FALSE(n.threads.count(51));
  t.OnFork(300, 50, 50, 51, 50, "sh");
  n = Descriptors(t, store);
  EXPECT_EQ(n.threads.at(51).tgid(), 50);
  EXPECT_EQ(n.threads.at(51).name(), "worker");
  EXPECT_FALSE(n.processes.count(51));
  // One whose fork never comes (its record lost) is named at its exit,
  // which says its process.
  t.OnRename(320, 52, "lost-fork");
  t.OnExit(330, 52, 50, 0);
  n = Descriptors(t, store);
  EXPECT_EQ(n.threads.at(52).tgid(), 50);
  EXPECT_EQ(n.threads.at(52).name(), "lost-fork");
}

// A process that lived shorter than a read: its exit, on the CPU it ran
// on, may be read before its fork and exec. It is still described (its
// records are in the ring), as ended: nothing of it stays live.
TEST(DescriptorTrackerTest, AProcessWhoseExitIsReadFirstIsDescribedAndEnded) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  t.OnExit(400, 70, 70, 1);
  t.OnExec(300, 70, 70, "/bin/true", {}, "true", 50, 0);
  t.OnFork(200, 50, 50, 70, 70, "sh");
  Named n = Descriptors(t, store);
  EXPECT_EQ(n.processes.at(70).cmdline(0), "/bin/true");
  EXPECT_EQ(n.processes.at(70).ppid(), 50);
  EXPECT_EQ(n.threads.at(70).name(), "true");
  EXPECT_EQ(t.live_processes(), 2u);     // init and sh
  EXPECT_EQ(store.stats().entries, 5u);  // The scan's three, process and thread 70.
  // Ended, so compacted once the ring moves on: one entry each, no leak.
  store.Drained(0);
  store.Drained(1);
  store.Drained(2 << 20);
  n = Descriptors(t, store);
  EXPECT_FALSE(n.processes.count(70));
  EXPECT_FALSE(n.threads.count(70));
  EXPECT_EQ(store.stats().compacted, 2u);

  // The pid reused by a later fork: a new, live process; a stale record of
  // the old one read after that changes nothing.
  t.OnFork(500, 50, 50, 70, 70, "sh");
  t.OnRename(390, 70, "old-name");
  n = Descriptors(t, store);
  EXPECT_EQ(n.processes.at(70).cmdline(0), "/bin/sh");
  EXPECT_EQ(n.threads.at(70).name(), "sh");
  EXPECT_EQ(t.live_processes(), 3u);
}

// A process born before the sources ran and gone before the scan: only
// its exit (and its scheduling) is recorded. Its exit names it; an earlier
// record of it read later still replaces that.
TEST(DescriptorTrackerTest, ATaskKnownOnlyByItsExitIsNamedByItsComm) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  t.OnExit(400, 80, 80, 1, "short");
  t.OnExit(410, 82, 81, 0, "worker");  // A thread of an unknown process.
  Named n = Descriptors(t, store);
  EXPECT_EQ(n.processes.at(80).cmdline(0), "short");
  EXPECT_EQ(n.threads.at(80).name(), "short");
  EXPECT_EQ(n.threads.at(80).tgid(), 80);
  EXPECT_EQ(n.threads.at(82).tgid(), 81);
  EXPECT_EQ(t.live_processes(), 2u);
  const uint64_t entries = store.stats().entries;
  t.OnExec(300, 80, 80, "/usr/bin/short-lived", {}, "short-lived", 50, 0);
  n = Descriptors(t, store);
  EXPECT_EQ(n.processes.at(80).cmdline(0), "/usr/bin/short-lived");
  EXPECT_EQ(n.threads.at(80).name(), "short-lived");
  EXPECT_EQ(store.stats().entries, entries);
}

// A task already exiting when recording began: its exit is not recorded,
// but its last switch is, and names it. Tasks already known are left alone.
TEST(DescriptorTrackerTest, AFinalSwitchNamesATaskWhoseExitWasNotRecorded) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  t.OnFinalSwitch(400, 90, 90, "dying");
  Named n = Descriptors(t, store);
  EXPECT_EQ(n.threads.at(90).name(), "dying");
  EXPECT_EQ(n.processes.at(90).cmdline(0), "dying");
  EXPECT_EQ(t.live_processes(), 2u);

  const uint64_t writes = store.stats().writes;
  t.OnFork(500, 50, 50, 91, 91, "sh");
  t.OnExit(600, 91, 91, 1, "sh");
  t.OnFinalSwitch(610, 91, 91, "sh");
  t.OnFinalSwitch(620, 50, 50, "not-sh");  // Known from the scan.
  n = Descriptors(t, store);
  EXPECT_EQ(store.stats().writes, writes + 2);  // The fork's two descriptors.
  EXPECT_EQ(n.threads.at(50).name(), "sh");
}

// A task freed whose exit came before recording began is named by its
// free, as ended. A free never touches a task the tracker has: the id is
// free from the reap on, so a new task may already hold it.
TEST(DescriptorTrackerTest, AFreeNamesAnUnknownTaskAndLeavesAKnownIdAlone) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  t.OnFree(400, 90, 90, "gone");
  Named n = Descriptors(t, store);
  EXPECT_EQ(n.threads.at(90).name(), "gone");
  EXPECT_EQ(n.processes.at(90).cmdline(0), "gone");
  EXPECT_EQ(t.live_processes(), 2u) << "the freed task is not live";

  // Task 91 exits and is reaped; a new task takes id 91 before the old one
  // is freed. The free ends nothing and renames nothing.
  t.OnFork(500, 50, 50, 91, 91, "old");
  t.OnExit(600, 91, 91, 1, "old");
  t.OnFork(700, 50, 50, 91, 91, "new");
  Descriptors(t, store);
  const uint64_t writes = store.stats().writes;
  const size_t live = t.live_processes();
  t.OnFree(800, 91, 91, "old");
  n = Descriptors(t, store);
  EXPECT_EQ(store.stats().writes, writes) << "the free wrote a descriptor";
  EXPECT_EQ(t.live_processes(), live);
  EXPECT_EQ(n.threads.at(91).name(), "new");
  // A free of a task known live (its exit unread) ends nothing either.
  t.OnFree(900, 50, 50, "not-sh");
  EXPECT_EQ(t.live_processes(), live);
}

// Exits are remembered for late records, but not without bound.
// Records are read CPU by CPU: a child's switch on CPU 1 can be read while
// its fork waits unread in CPU 0's ring. Its switch names it at once, and
// the fork, read later, replaces that description.
TEST(DescriptorTrackerTest, ATaskSeenBeforeItsForkIsNamedAndTheForkReplacesIt) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  t.OnSeen(210, 60, 60, "child");
  Named n = Descriptors(t, store);
  ASSERT_TRUE(n.threads.count(60));
  EXPECT_EQ(n.threads[60].tgid(), 60);
  EXPECT_EQ(n.threads[60].name(), "child");
  ASSERT_TRUE(n.processes.count(60));
  ASSERT_EQ(n.processes[60].cmdline_size(), 1);
  EXPECT_EQ(n.processes[60].cmdline(0), "child");
  // The fork, earlier than the switch but read after it.
  t.OnFork(200, 50, 50, 60, 60, "sh");
  n = Descriptors(t, store);
  EXPECT_EQ(n.processes[60].ppid(), 50);
  EXPECT_EQ(n.processes[60].cmdline(0), "/bin/sh");
  EXPECT_EQ(n.threads[60].name(), "sh");
}

TEST(DescriptorTrackerTest, ASeenTaskDoesNotChangeWhatIsKnownOrReviveAnExit) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  t.OnSeen(200, 50, 50, "other");  // Known from the scan: unchanged.
  Named n = Descriptors(t, store);
  EXPECT_EQ(n.threads[50].name(), "sh");
  EXPECT_EQ(n.processes[50].cmdline(0), "/bin/sh");
  // A switch of a task read after its exit, from before it or after it
  // (a task is scheduled until it switches out dead): nothing changes, and
  // it stays ended.
  t.OnFork(300, 50, 50, 70, 70, "sh");
  t.OnExit(400, 70, 70, 1, "sh");
  t.OnSeen(350, 70, 70, "late");
  t.OnSeen(450, 70, 70, "sh");
  n = Descriptors(t, store);
  EXPECT_EQ(n.threads[70].name(), "sh");
  EXPECT_EQ(n.processes[70].cmdline(0), "/bin/sh");
  EXPECT_EQ(t.live_processes(), 2u);  // init and sh; 70 ended.
  // Long after its exit: a new task under the id (a reused pid whose fork
  // was not read).
  t.OnSeen(400 + DescriptorTracker::kSeenAfterExitNs + 1, 70, 70, "reused");
  n = Descriptors(t, store);
  EXPECT_EQ(n.threads[70].name(), "reused");
  EXPECT_EQ(n.processes[70].cmdline(0), "reused");
  // A thread renamed before its fork was read: the rename's name stays,
  // and the switch gives it its process.
  t.OnRename(600, 81, "worker");
  t.OnSeen(610, 81, 50, "sh");
  n = Descriptors(t, store);
  EXPECT_EQ(n.threads[81].tgid(), 50);
  EXPECT_EQ(n.threads[81].name(), "worker");
  // Ids that name no task are ignored (the idle task, a missing tgid).
  t.OnSeen(700, 0, 0, "swapper/0");
  t.OnSeen(700, 90, -1, "x");
  n = Descriptors(t, store);
  EXPECT_FALSE(n.threads.count(0));
  EXPECT_FALSE(n.threads.count(90));
}

// A task described by its switches only, whose exit was not recorded (a
// filtered recording, a dropped record), is ended by its final switch, as
// a task nothing described is.
TEST(DescriptorTrackerTest, ATaskOnlySeenIsEndedByItsFinalSwitch) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  t.OnSeen(200, 90, 90, "worker");
  EXPECT_EQ(t.live_processes(), 3u);  // init, sh and it.
  t.OnFinalSwitch(300, 90, 90, "worker");
  EXPECT_EQ(t.live_processes(), 2u);
  Named n = Descriptors(t, store);
  EXPECT_EQ(n.threads[90].name(), "worker");
}

// A pid reused within a second of its task's exit, by a task whose fork
// was not read (not recorded: it moved into the cgroup a recording is
// filtered to): its first switch is left alone, as the dying task's could
// be, and the tracker says so, so that the source asks again at a later
// one; once the second has passed, that one describes it.
TEST(DescriptorTrackerTest, ASwitchLeftAloneAfterAnExitAsksToBeToldAgain) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  EXPECT_TRUE(t.OnSeen(150, 90, 90, "first"));  // Described.
  EXPECT_TRUE(t.OnSeen(160, 90, 90, "first"));  // Known and live.
  t.OnExit(200, 90, 90, 1, "first");
  EXPECT_FALSE(t.OnSeen(300, 90, 90, "second"));
  const uint64_t later = 200 + DescriptorTracker::kSeenAfterExitNs + 1;
  EXPECT_TRUE(t.OnSeen(later, 90, 90, "second"));
  Named n = Descriptors(t, store);
  EXPECT_EQ(n.threads.at(90).name(), "second");
  EXPECT_EQ(t.live_processes(), 3u);                // init, sh and the second task.
  EXPECT_TRUE(t.OnSeen(later, 0, 0, "swapper/0"));  // Nothing to describe.
}

// A thread's pid is free from its exit on, before its last switch: a fork
// can take it first. The dying thread's final switch, read after the new
// task was described, must not end the new task: it is of another process,
// or (for a task known only from its switches) older than its first sight.
TEST(DescriptorTrackerTest, AnEarlierTasksFinalSwitchDoesNotEndTheTaskThatReusedItsId) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  // A thread 91 of sh (50) exits; a new process takes pid 91 at once.
  t.OnFork(200, 50, 50, 91, 50, "sh");
  t.OnExit(300, 91, 50, 0, "sh");
  t.OnFork(310, 50, 50, 91, 91, "sh");
  t.OnFinalSwitch(320, 91, 50, "sh");  // The thread's, on another CPU.
  EXPECT_EQ(t.live_processes(), 3u);   // init, sh and the new process.
  Named n = Descriptors(t, store);
  ASSERT_TRUE(n.processes.count(91));
  EXPECT_EQ(n.threads.at(91).tgid(), 91);
  store.Drained(0);
  store.Drained(1);
  store.Drained(4 << 20);  // Long past any end: only live entries are left.
  n = Descriptors(t, store);
  EXPECT_TRUE(n.processes.count(91)) << "the new process was ended";
  EXPECT_TRUE(n.threads.count(91)) << "the new thread was ended";

  // A task known only from its switches, seen at 500; a final switch of
  // its id from before that is another task's (read late).
  t.OnSeen(500, 92, 92, "new");
  t.OnFinalSwitch(450, 92, 92, "old");
  EXPECT_EQ(t.live_processes(), 4u);
  // Its own final switch ends it.
  t.OnFinalSwitch(600, 92, 92, "new");
  EXPECT_EQ(t.live_processes(), 3u);
}

// A task whose exit record was dropped (a full ring) is ended by its final
// switch: left live, such tasks piled up in the store under a storm until
// it pushed live tasks out.
TEST(DescriptorTrackerTest, AFinalSwitchEndsAKnownTaskWhoseExitWasNotRead) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  t.OnFork(300, 50, 50, 60, 60, "sh");
  t.OnFork(310, 60, 60, 61, 60, "sh");  // A thread of it.
  EXPECT_EQ(t.live_processes(), 3u);
  // The leader goes first: its process lives on in its thread.
  t.OnFinalSwitch(400, 60, 60, "sh");
  EXPECT_EQ(t.live_processes(), 3u);
  t.OnFinalSwitch(410, 61, 60, "sh");
  EXPECT_EQ(t.live_processes(), 2u);
  // The exit records, read late, change nothing.
  t.OnExit(390, 60, 60, 0, "sh");
  t.OnExit(405, 61, 60, 1, "sh");
  EXPECT_EQ(t.live_processes(), 2u);
  Named n = Descriptors(t, store);
  EXPECT_EQ(n.processes[60].cmdline(0), "/bin/sh");
}

TEST(DescriptorTrackerTest, RememberedExitsAreBoundedInNumberAndTime) {
  DescriptorTracker t;
  t.Seed(Scan());
  const int32_t n = static_cast<int32_t>(DescriptorTracker::kMaxRememberedExits) + 100;
  for (int32_t i = 0; i < n; i++) {
    t.OnFork(1000 + i, 50, 50, 1000 + i, 1000 + i, "sh");
    t.OnExit(1000 + i, 1000 + i, 1000 + i, 1);
  }
  EXPECT_EQ(t.remembered_exits_for_testing(), DescriptorTracker::kMaxRememberedExits);
  t.OnExit(1000 + n + DescriptorTracker::kExitMemoryNs, 50, 50, 1);
  EXPECT_EQ(t.remembered_exits_for_testing(), 2u);  // Thread and process 50.
  EXPECT_EQ(t.live_processes(), 1u);                // init
}

// The ftrace path: task_newtask says thread or process by CLONE_THREAD,
// exec gives only the filename, exit does not say whether the group died.
TEST(DescriptorTrackerTest, FtraceEventsWithLessInformation) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  t.OnNewTask(200, 50, 70, "sh", /*clone_flags=*/0x11);            // A process (SIGCHLD).
  t.OnNewTask(210, 50, 71, "sh", /*clone_flags=*/0x10000 | 0x11);  // A thread of sh.
  t.OnExec(220, 70, -1, "/bin/true", {}, {}, -1, -1);
  Named n = Descriptors(t, store);
  EXPECT_EQ(n.processes[70].ppid(), 50);
  EXPECT_EQ(n.processes[70].cmdline(0), "/bin/true");
  EXPECT_EQ(n.threads[70].name(), "true");
  EXPECT_EQ(n.threads[71].tgid(), 50);
  EXPECT_FALSE(n.processes.count(71));
  t.OnExit(230, 70, -1, -1);  // The leader: the process ends.
  EXPECT_EQ(t.live_processes(), 2u);
}

// The scan is taken after the sources start: a task that exited in between
// is in the scan but must not come back to life.
TEST(DescriptorTrackerTest, TheScanDoesNotReviveATaskThatAlreadyExited) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.OnExit(90, 50, 50, 1);
  t.Seed(Scan());
  EXPECT_EQ(t.live_processes(), 1u);  // init only
  EXPECT_FALSE(Descriptors(t, store).processes.count(50));
}

TEST(DescriptorTrackerTest, ChangedOnlyHandsOutEachUpdateOnce) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  EXPECT_EQ(Descriptors(t, store, true).processes.size(), 2u);
  EXPECT_EQ(Descriptors(t, store, true).processes.size(), 0u);
  t.OnRename(300, 50, "sh2");
  const Named n = Descriptors(t, store, true);
  EXPECT_EQ(n.threads.size(), 1u);
  EXPECT_EQ(n.processes.size(), 0u);
}

// The owner's passes reuse the queue's memory: each pass applies what was
// reported since the last one, and nothing twice, whether the queue was
// short or longer than what is kept.
TEST(DescriptorTrackerTest, EachPassAppliesWhatCameSinceTheLastOne) {
  buffer::DurableStore store(64 << 20, 64 << 20);
  DescriptorTracker t;
  t.Seed(Scan());
  Descriptors(t, store, true);
  int32_t pid = 1000;
  for (size_t forks : {size_t{3}, DescriptorUpdates::kMaxKept, size_t{5}, size_t{2}}) {
    const int32_t first = pid;
    for (size_t i = 0; i < forks; i++, pid++) t.OnFork(200 + pid, 50, 50, pid, pid, "sh");
    const Named n = Descriptors(t, store, true);
    EXPECT_EQ(n.processes.size(), forks);
    EXPECT_EQ(n.threads.size(), forks);
    EXPECT_EQ(n.processes.begin()->first, first);
    EXPECT_EQ(n.processes.rbegin()->first, pid - 1);
  }
}

// A containerd container's cgroup, as the fake /proc of the tests below has
// it: pid 80's cgroup, id 4242.
constexpr char kContainerId[] = "3f4b1c2d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809";
const std::string kContainerPath =
    std::string(
        "/kubepods.slice/kubepods-besteffort.slice/"
        "kubepods-besteffort-pod0c7e1a2b_3c4d_4e5f_8a9b_0c1d2e3f4a5b.slice/"
        "cri-containerd-") +
    kContainerId + ".scope";

struct FakeCgroups {
  std::map<int32_t, std::string> path_of_pid;
  std::map<std::string, uint64_t> id_of_path;
  std::map<std::string, PodNames> pods;  // By cgroup path.
  int pid_reads = 0;

  DescriptorTracker::CgroupLookup Lookup() {
    return {[this](int32_t pid) -> std::optional<std::string> {
              pid_reads++;
              auto it = path_of_pid.find(pid);
              if (it == path_of_pid.end()) return std::nullopt;
              return it->second;
            },
            [this](const std::string& path) -> std::optional<uint64_t> {
              auto it = id_of_path.find(path);
              if (it == id_of_path.end()) return std::nullopt;
              return it->second;
            },
            [this](const std::string& path) -> std::optional<PodNames> {
              auto it = pods.find(path);
              if (it == pods.end()) return std::nullopt;
              return it->second;
            }};
  }
};

// Pid 80 in the containerd container of kContainerPath, cgroup id 4242.
FakeCgroups ProcessInContainer() {
  FakeCgroups fake;
  fake.path_of_pid[80] = kContainerPath;
  fake.id_of_path[kContainerPath] = 4242;
  return fake;
}

TEST(DescriptorTrackerTest, ExecCarriesTheCgroupAndTheContainerItNames) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  FakeCgroups fake = ProcessInContainer();
  DescriptorTracker t(fake.Lookup());
  t.Seed(Scan());
  t.OnFork(200, 50, 50, 80, 80, "sh");
  t.OnExec(210, 80, 80, "/bin/sleep", {}, "sleep", 50, 0, /*cgroup_id=*/4242);
  const Named n = Descriptors(t, store);
  const trace::ProcessTree::Process& p = n.processes.at(80);
  EXPECT_EQ(p.cgroup_id(), 4242u);
  EXPECT_EQ(p.cgroup_path(), kContainerPath);
  EXPECT_EQ(p.container_id(), kContainerId);
  EXPECT_EQ(p.pod_uid(), "0c7e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b");
  EXPECT_EQ(p.container_runtime(), "containerd");
}

std::vector<std::string> Labels(const trace::TrackDescriptor& track) {
  return {track.process().process_labels().begin(), track.process().process_labels().end()};
}

TEST(DescriptorTrackerTest, AProcessOfAPodCarriesItsKubernetesNamesAndLabels) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  FakeCgroups fake = ProcessInContainer();
  fake.pods[kContainerPath] = PodNames{"shop", "web-7d4b9", "nginx"};
  DescriptorTracker t(fake.Lookup());
  t.Seed(Scan());
  t.OnExec(210, 80, 80, "/usr/sbin/nginx", {}, "nginx", 50, 0, 4242);
  t.OnFork(220, 80, 80, 81, 81, "nginx");
  const Named n = Descriptors(t, store);
  for (int32_t pid : {80, 81}) {
    const trace::ProcessTree::Process& p = n.processes.at(pid);
    EXPECT_EQ(p.k8s_namespace(), "shop") << pid;
    EXPECT_EQ(p.k8s_pod(), "web-7d4b9") << pid;
    EXPECT_EQ(p.k8s_container(), "nginx") << pid;
    ASSERT_TRUE(n.labels.count(pid)) << pid;
    EXPECT_EQ(Labels(n.labels.at(pid)),
              (std::vector<std::string>{"namespace=shop", "pod=web-7d4b9", "container=nginx"}));
  }
  // A track per process, the same one however often it is described.
  EXPECT_NE(n.labels.at(80).uuid(), n.labels.at(81).uuid());
  t.OnExec(230, 81, 81, "/bin/true", {}, "true", 80, 0, 4242);
  EXPECT_EQ(Descriptors(t, store).labels.at(81).uuid(), n.labels.at(81).uuid());
  // Processes outside pods have none.
  EXPECT_FALSE(n.labels.count(50));
  EXPECT_FALSE(n.processes.at(50).has_k8s_pod());
}

// Each descriptor is a TracePacket as protobuf itself would serialize it,
// with its own event's time and its own fields only: the tracker fills one
// message over and over, and a field left from the one before (a pod, a
// longer command line) would misname a process in every file.
TEST(DescriptorTrackerTest, EachDescriptorIsACanonicalPacketOfItsOwnFields) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  FakeCgroups fake = ProcessInContainer();
  fake.pods[kContainerPath] = PodNames{"shop", "web-7d4b9", "nginx"};
  DescriptorTracker t(fake.Lookup());
  t.OnExec(210, 80, 80, "/usr/sbin/nginx", std::string_view("nginx\0-g\0daemon off;\0", 22),
           "nginx", 1, 101, 4242);
  // Then one outside any cgroup known, of unknown uid and parent.
  t.OnExec(220, 90, 90, "/bin/true", std::string_view("true\0", 5), "true", -1, -1);
  t.OnFork(230, 90, 90, 91, 90, "true");
  t.ApplyTo(&store);
  std::map<int32_t, uint64_t> process_ts, thread_ts;
  Named n;
  store.ForEach([&](buffer::DurableStore::Kind, uint64_t, std::string_view bytes) {
    trace::TracePacket p;
    ASSERT_TRUE(p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
    EXPECT_EQ(p.SerializeAsString(), bytes);
    for (const auto& pr : p.process_tree().processes()) {
      n.processes[pr.pid()] = pr;
      process_ts[pr.pid()] = p.timestamp();
    }
    for (const auto& th : p.process_tree().threads()) {
      n.threads[th.tid()] = th;
      thread_ts[th.tid()] = p.timestamp();
    }
  });
  ASSERT_TRUE(n.processes.count(80) && n.processes.count(90));
  EXPECT_EQ(process_ts[80], 210u);
  EXPECT_EQ(n.processes[80].k8s_pod(), "web-7d4b9");
  EXPECT_EQ(n.processes[80].uid(), 101);
  const trace::ProcessTree::Process& p = n.processes[90];
  EXPECT_EQ(process_ts[90], 220u);
  EXPECT_EQ(std::vector<std::string>(p.cmdline().begin(), p.cmdline().end()),
            std::vector<std::string>{"true"});
  EXPECT_FALSE(p.has_uid());
  EXPECT_FALSE(p.has_cgroup_id() || p.has_cgroup_path() || p.has_container_id());
  EXPECT_FALSE(p.has_k8s_namespace() || p.has_k8s_pod() || p.has_k8s_container());
  EXPECT_EQ(p.ppid(), 0);
  EXPECT_EQ(thread_ts[90], 220u);
  EXPECT_EQ(n.threads[90].name(), "true");
  EXPECT_EQ(thread_ts[91], 230u);
  EXPECT_EQ(n.threads[91].tgid(), 90);
  EXPECT_EQ(n.threads[91].name(), "true");
}

// The kubelet names a container (its log's symlink) only after starting it:
// the names of its first process are looked up again until found.
TEST(DescriptorTrackerTest, AContainerNamedAfterItsFirstExecIsNamedAtARefresh) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  FakeCgroups fake = ProcessInContainer();
  fake.pods[kContainerPath] = PodNames{"shop", "web-7d4b9", ""};
  DescriptorTracker t(fake.Lookup());
  t.Seed(Scan());
  t.OnExec(1'000'000'000, 80, 80, "/usr/sbin/nginx", {}, "nginx", 50, 0, 4242);
  Named n = Descriptors(t, store);
  EXPECT_FALSE(n.processes.at(80).has_k8s_container());
  EXPECT_EQ(Labels(n.labels.at(80)), (std::vector<std::string>{"namespace=shop", "pod=web-7d4b9"}));
  EXPECT_EQ(t.pod_names_waiting_for_testing(), 1u);
  Descriptors(t, store, /*changed_only=*/true);  // All handed out.
  // Not yet: nothing changes.
  t.RefreshPodNames(2'000'000'000);
  EXPECT_TRUE(Descriptors(t, store, /*changed_only=*/true).processes.empty());
  fake.pods[kContainerPath].container = "nginx";
  t.RefreshPodNames(3'000'000'000);
  n = Descriptors(t, store);
  EXPECT_EQ(n.processes.at(80).k8s_container(), "nginx");
  EXPECT_EQ(Labels(n.labels.at(80)).back(), "container=nginx");
  EXPECT_EQ(t.pod_names_waiting_for_testing(), 0u);
}

TEST(DescriptorTrackerTest, PodNamesAreAwaitedUntilTheProcessEndsOrTheWaitIsOver) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  FakeCgroups fake;
  fake.path_of_pid[80] = kContainerPath;
  fake.path_of_pid[90] = kContainerPath;
  fake.id_of_path[kContainerPath] = 4242;
  DescriptorTracker t(fake.Lookup());
  t.Seed(Scan());
  const uint64_t ts = 1'000'000'000;
  t.OnExec(ts, 80, 80, "/bin/sleep", {}, "sleep", 50, 0, 4242);
  t.OnExec(ts, 90, 90, "/bin/sleep", {}, "sleep", 50, 0, 4242);
  EXPECT_EQ(t.pod_names_waiting_for_testing(), 2u);
  t.OnExit(ts + 1, 90, 90, 1);
  t.RefreshPodNames(ts + 2);
  EXPECT_EQ(t.pod_names_waiting_for_testing(), 1u);
  t.RefreshPodNames(ts + PodNamesWaitlist::kWaitNs + 1);
  EXPECT_EQ(t.pod_names_waiting_for_testing(), 0u);
  // Outside a pod, nothing is awaited.
  fake.path_of_pid[95] = "/system.slice/cron.service";
  t.OnExec(ts, 95, 95, "/usr/sbin/cron", {}, "cron", 1, 0, 0);
  EXPECT_EQ(t.pod_names_waiting_for_testing(), 0u);
}

TEST(DescriptorTrackerTest, ForksInheritTheParentsCgroup) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  FakeCgroups fake = ProcessInContainer();
  DescriptorTracker t(fake.Lookup());
  t.Seed(Scan());
  t.OnExec(210, 80, 80, "/bin/sh", {}, "sh", 50, 0, 4242);
  t.OnFork(220, 80, 80, 81, 81, "sh");
  const Named n = Descriptors(t, store);
  EXPECT_EQ(n.processes.at(81).cgroup_id(), 4242u);
  EXPECT_EQ(n.processes.at(81).container_id(), kContainerId);
}

// The process exited before its exec record was read: its id alone.
TEST(DescriptorTrackerTest, AnExecOfAProcessAlreadyGoneKeepsTheIdAlone) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  FakeCgroups fake;
  DescriptorTracker t(fake.Lookup());
  t.Seed(Scan());
  t.OnExec(210, 80, 80, "/bin/true", {}, "true", 50, 0, 4242);
  const Named n = Descriptors(t, store);
  EXPECT_EQ(n.processes.at(80).cgroup_id(), 4242u);
  EXPECT_FALSE(n.processes.at(80).has_cgroup_path());
  EXPECT_FALSE(n.processes.at(80).has_container_id());
}

// The process moved on before its exec record was read: its path now is not
// the one of the id its exec reported, so it is not taken.
TEST(DescriptorTrackerTest, APathOfAnotherCgroupThanTheExecsIsNotTaken) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  FakeCgroups fake;
  fake.path_of_pid[80] = kContainerPath;
  fake.id_of_path[kContainerPath] = 4343;
  DescriptorTracker t(fake.Lookup());
  t.OnExec(210, 80, 80, "/bin/true", {}, "true", 50, 0, 4242);
  const Named n = Descriptors(t, store);
  EXPECT_EQ(n.processes.at(80).cgroup_id(), 4242u);
  EXPECT_FALSE(n.processes.at(80).has_cgroup_path());
}

// A cgroup's path is read once per id, also for a later process whose
// /proc entry is gone by the time its exec is read.
TEST(DescriptorTrackerTest, PathsAreRememberedPerCgroupId) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  FakeCgroups fake = ProcessInContainer();
  DescriptorTracker t(fake.Lookup());
  t.OnExec(210, 80, 80, "/bin/true", {}, "true", 50, 0, 4242);
  t.OnExec(220, 90, 90, "/bin/true", {}, "true", 50, 0, 4242);
  EXPECT_EQ(fake.pid_reads, 1);
  EXPECT_EQ(Descriptors(t, store).processes.at(90).container_id(), kContainerId);
}

TEST(DescriptorTrackerTest, TheScansCgroupsAreRememberedToo) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  FakeCgroups fake;
  DescriptorTracker t(fake.Lookup());
  trace::TracePacket scan = Scan();
  scan.mutable_process_tree()->mutable_processes(1)->set_cgroup_id(4242);
  scan.mutable_process_tree()->mutable_processes(1)->set_cgroup_path(kContainerPath);
  t.Seed(scan);
  t.OnExec(220, 90, 90, "/bin/true", {}, "true", 50, 0, 4242);
  EXPECT_EQ(fake.pid_reads, 0);
  const Named n = Descriptors(t, store);
  EXPECT_EQ(n.processes.at(50).container_id(), kContainerId);
  EXPECT_EQ(n.processes.at(90).cgroup_path(), kContainerPath);
}

TEST(DescriptorTrackerTest, RememberedCgroupsAreBounded) {
  FakeCgroups fake;
  const size_t n = DescriptorTracker::kMaxRememberedCgroups + 10;
  for (size_t i = 0; i < n; i++) {
    const std::string path = "/c" + std::to_string(i);
    fake.path_of_pid[static_cast<int32_t>(1000 + i)] = path;
    fake.id_of_path[path] = 10 + i;
  }
  DescriptorTracker t(fake.Lookup());
  for (size_t i = 0; i < n; i++) {
    t.OnExec(200 + i, static_cast<int32_t>(1000 + i), static_cast<int32_t>(1000 + i), "/bin/true",
             {}, "true", 1, 0, 10 + i);
  }
  EXPECT_EQ(t.remembered_cgroups_for_testing(), DescriptorTracker::kMaxRememberedCgroups);
}

// ftrace's exec has no cgroup id: it comes from the path.
TEST(DescriptorTrackerTest, AnExecWithoutACgroupIdTakesItFromThePath) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  FakeCgroups fake;
  fake.path_of_pid[70] = kContainerPath;
  fake.id_of_path[kContainerPath] = 4242;
  DescriptorTracker t(fake.Lookup());
  t.Seed(Scan());
  t.OnExec(220, 70, -1, "/bin/true", {}, {}, -1, -1);
  const Named n = Descriptors(t, store);
  EXPECT_EQ(n.processes.at(70).cgroup_id(), 4242u);
  EXPECT_EQ(n.processes.at(70).container_id(), kContainerId);
}

// exec moves a task to the least busy CPU, so a process's second exec may
// be read before its first: the first must not undo it. (A shell that
// moved into a container and exec'd showed as the shell, outside it.)
TEST(DescriptorTrackerTest, AnExecReadAfterALaterExecIsNotApplied) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  FakeCgroups fake;
  fake.path_of_pid[60] = kContainerPath;
  fake.id_of_path[kContainerPath] = 4242;
  fake.id_of_path["/"] = 1;
  DescriptorTracker t(fake.Lookup());
  t.Seed(Scan());
  t.OnFork(200, 50, 50, 60, 60, "sh");
  t.OnExec(300, 60, 60, "/bin/sleep", {}, "sleep", 50, 0, /*cgroup_id=*/4242);
  t.OnExec(250, 60, 60, "/bin/sh", {}, "sh", 50, 0, /*cgroup_id=*/1);
  const Named n = Descriptors(t, store);
  EXPECT_EQ(n.processes.at(60).cmdline(0), "/bin/sleep");
  EXPECT_EQ(n.processes.at(60).cgroup_id(), 4242u);
  EXPECT_EQ(n.threads.at(60).name(), "sleep");
}

}  // namespace
}  // namespace ringside::agent
