#include "agent/descriptors/descriptor_tracker.h"

#include <map>
#include <string>

#include "buffer/durable_store.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

struct Named {
  std::map<int32_t, trace::ProcessTree::Process> processes;
  std::map<int32_t, trace::ProcessTree::Thread> threads;
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

}  // namespace
}  // namespace ringside::agent
