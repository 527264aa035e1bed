// Against the real kernel: every test uses its own instance and removes it.

#include "ftrace/tracefs.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ftrace/cpu_reader.h"
#include "ftrace/event_format.h"
#include "ftrace/page_parser.h"
#include "gtest/gtest.h"
#include "tests/testing/kernel_tracefs.h"

namespace ringside::ftrace {
namespace {

using testing::KernelTracefs;

bool DirExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A pid that no process has: a child that already exited and was reaped.
pid_t DeadPid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

int TracefsMounts(const std::string& mounts_file) {
  std::ifstream in(mounts_file);
  std::string dev, dir, type, rest;
  int n = 0;
  while (in >> dev >> dir >> type) {
    std::getline(in, rest);
    n += type == "tracefs";
  }
  return n;
}

// Where tracefs is mounted nowhere, Open() mounts it in a mount namespace
// of its own: nobody else sees the mount, and it goes with the process.
TEST(TracefsTest, MountsOnlyInItsOwnMountNamespace) {
  RINGSIDE_REQUIRE_TRACEFS();  // Root, and a kernel with tracefs.
  const int before = TracefsMounts("/proc/self/mounts");
  int opened[2], done[2];
  ASSERT_EQ(pipe(opened), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  if (child == 0) {
    close(opened[0]);
    close(done[1]);
    // Start from a view with no tracefs (our own namespace, where we may
    // unmount what this test process sees).
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr)) {
      _exit(10);
    }
    for (const char* dir : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
      umount2(dir, MNT_DETACH);
    }
    if (TracefsMounts("/proc/self/mounts") != 0) _exit(11);
    absl::StatusOr<Tracefs> t = Tracefs::Open();
    if (!t.ok()) _exit(12);
    if (t->mounted_by_us()) _exit(13);  // Nothing for anyone to unmount.
    if (TracefsMounts("/proc/self/mounts") != 1) _exit(14);
    char c = 1;
    if (write(opened[1], &c, 1) != 1) _exit(15);
    if (read(done[0], &c, 1) < 0) _exit(16);  // Until the parent has looked.
    _exit(0);
  }
  close(opened[1]);
  close(done[0]);
  char c = 0;
  const bool child_opened = read(opened[0], &c, 1) == 1;
  // The child's mount is not ours to see.
  EXPECT_EQ(TracefsMounts("/proc/self/mounts"), before);
  close(done[1]);
  close(opened[0]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(child_opened);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child exit " << status;
}

TEST(TracefsTest, InstanceIsCreatedAndRemoved) {
  RINGSIDE_REQUIRE_TRACEFS();
  absl::StatusOr<std::unique_ptr<Instance>> instance = Instance::Create(*KernelTracefs(), "t-life");
  ASSERT_TRUE(instance.ok()) << instance.status();
  const std::string path = (*instance)->path();
  EXPECT_NE(path.find("/instances/ringside-t-life-"), std::string::npos) << path;
  EXPECT_TRUE(DirExists(path));
  EXPECT_EQ(*KernelTracefs()->Read((*instance)->relative_path() + "/tracing_on"), "0\n");
  ASSERT_TRUE((*instance)->Remove().ok());
  EXPECT_FALSE(DirExists(path));
}

TEST(TracefsTest, StaleInstancesOfDeadRingsidesAreRemovedLiveOnesKept) {
  RINGSIDE_REQUIRE_TRACEFS();
  const Tracefs& tracefs = *KernelTracefs();
  const std::string stale = absl::StrCat("ringside-crashed-", DeadPid());
  const std::string live = absl::StrCat("ringside-alive-", getppid());
  ASSERT_EQ(mkdir((tracefs.root() + "/instances/" + stale).c_str(), 0700), 0);
  ASSERT_EQ(mkdir((tracefs.root() + "/instances/" + live).c_str(), 0700), 0);
  std::vector<std::string> removed = Instance::RemoveStaleInstances(tracefs);
  EXPECT_EQ(removed, std::vector<std::string>{stale});
  EXPECT_FALSE(DirExists(tracefs.root() + "/instances/" + stale));
  EXPECT_TRUE(DirExists(tracefs.root() + "/instances/" + live));
  rmdir((tracefs.root() + "/instances/" + live).c_str());
}

TEST(TracefsTest, EnablesKnownEventsAndNamesUnknownOnesAndBadFilters) {
  RINGSIDE_REQUIRE_TRACEFS();
  auto instance = Instance::Create(*KernelTracefs(), "t-events");
  ASSERT_TRUE(instance.ok()) << instance.status();
  Instance::EnableResult r = (*instance)->EnableEvents({
      {"sched/sched_switch", ""},
      {"sched/sched_wakeup_new", "pid > 0"},
      {"sched/no_such_event", ""},
      {"no_such_group/*", ""},
      {"sched/sched_waking", "this is not a filter"},
      {"not-an-event", ""},
      {"task/*", ""},
  });
  EXPECT_EQ(r.enabled,
            (std::vector<std::string>{"sched/sched_switch", "sched/sched_wakeup_new", "task/*"}));
  EXPECT_EQ(r.unknown, (std::vector<std::string>{"sched/no_such_event", "no_such_group/*"}));
  ASSERT_EQ(r.failed.size(), 2u);
  EXPECT_EQ(r.failed[0].first, "sched/sched_waking");
  EXPECT_EQ(r.failed[0].second.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.failed[0].second.message().find("bad filter"), std::string::npos);
  EXPECT_EQ(r.failed[1].first, "not-an-event");
  const std::string events = (*instance)->relative_path() + "/events/";
  EXPECT_EQ(*KernelTracefs()->Read(events + "sched/sched_switch/enable"), "1\n");
  EXPECT_EQ(*KernelTracefs()->Read(events + "sched/sched_waking/enable"), "0\n");
  EXPECT_EQ(*KernelTracefs()->Read(events + "task/task_rename/enable"), "1\n");
  // The top-level buffer was not touched.
  EXPECT_EQ(*KernelTracefs()->Read("events/sched/sched_switch/enable"), "0\n");
}

TEST(TracefsTest, RecordsTheBufferSizeAndClockTheKernelApplied) {
  RINGSIDE_REQUIRE_TRACEFS();
  auto instance = Instance::Create(*KernelTracefs(), "t-config");
  ASSERT_TRUE(instance.ok()) << instance.status();
  absl::StatusOr<uint32_t> kb = (*instance)->SetBufferSizeKb(101);
  ASSERT_TRUE(kb.ok()) << kb.status();
  EXPECT_GE(*kb, 100u);
  absl::StatusOr<std::string> clock = (*instance)->SetTraceClock("boot");
  ASSERT_TRUE(clock.ok()) << clock.status();
  EXPECT_EQ(*clock, "boot");
  absl::StatusOr<std::string> bad = (*instance)->SetTraceClock("no-such-clock");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no-such-clock"), std::string::npos);
  absl::StatusOr<Instance::CpuStats> stats = (*instance)->ReadCpuStats(0);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GT(stats->now_ts, 0.0);
}

TEST(TracefsTest, MarkersWrittenOnACpuAreReadBackExactlyInOrder) {
  RINGSIDE_REQUIRE_TRACEFS();
  const Tracefs& tracefs = *KernelTracefs();
  auto instance = Instance::Create(tracefs, "t-markers");
  ASSERT_TRUE(instance.ok()) << instance.status();
  ASSERT_TRUE((*instance)->SetBufferSizeKb(1024).ok());
  ASSERT_TRUE((*instance)->SetTraceClock("boot").ok());

  absl::StatusOr<PageHeaderFormat> page_format =
      ParseHeaderPage(*tracefs.Read("events/header_page"));
  absl::StatusOr<EventHeaderFormat> event_format =
      ParseHeaderEvent(*tracefs.Read("events/header_event"));
  absl::StatusOr<EventFormat> print =
      ParseEventFormat("ftrace", *tracefs.Read("events/ftrace/print/format"));
  ASSERT_TRUE(page_format.ok() && event_format.ok() && print.ok());
  const FieldFormat* buf = print->FindField("buf");
  const FieldFormat* common_pid = print->FindField("common_pid");
  ASSERT_NE(buf, nullptr);
  ASSERT_NE(common_pid, nullptr);

  // Pin this thread to CPU 0 so every marker lands in one per-CPU buffer.
  cpu_set_t old_mask, cpu0;
  ASSERT_EQ(sched_getaffinity(0, sizeof(old_mask), &old_mask), 0);
  CPU_ZERO(&cpu0);
  CPU_SET(0, &cpu0);
  ASSERT_EQ(sched_setaffinity(0, sizeof(cpu0), &cpu0), 0);
  const int marker = open(((*instance)->path() + "/trace_marker").c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(marker, 0);
  ASSERT_TRUE((*instance)->SetTracingOn(true).ok());
  constexpr int kMarkers = 500;
  for (int i = 0; i < kMarkers; i++) {
    const std::string text = absl::StrCat("ringside marker ", i);
    ASSERT_EQ(write(marker, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  ASSERT_TRUE((*instance)->SetTracingOn(false).ok());
  close(marker);
  sched_setaffinity(0, sizeof(old_mask), &old_mask);

  auto reader = CpuReader::Open(**instance, 0, page_format->page_size());
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<uint8_t> pages;
  absl::StatusOr<size_t> n = (*reader)->ReadPages(1000, &pages);
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_GT(*n, 0u);

  PageParser parser(*page_format, *event_format);
  std::vector<RawEvent> events;
  for (size_t p = 0; p < *n; p++) {
    PageParser::PageResult r = parser.Parse(pages.data() + p * page_format->page_size(),
                                            page_format->page_size(), &events);
    ASSERT_EQ(r.error, PageParser::Error::kNone) << PageErrorName(r.error);
    EXPECT_FALSE(r.lost_events);
  }
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  int seen = 0;
  uint64_t last_ts = 0;
  for (const RawEvent& e : events) {
    uint16_t type;
    std::memcpy(&type, e.data, 2);
    if (type != print->id) continue;
    ASSERT_GT(e.size, buf->offset);
    std::string text(reinterpret_cast<const char*>(e.data + buf->offset), e.size - buf->offset);
    text = text.substr(0, text.find('\0'));
    if (!text.empty() && text.back() == '\n') text.pop_back();
    EXPECT_EQ(text, absl::StrCat("ringside marker ", seen));
    int32_t pid;
    std::memcpy(&pid, e.data + common_pid->offset, 4);
    EXPECT_EQ(pid, tid);
    EXPECT_GE(e.timestamp, last_ts);
    last_ts = e.timestamp;
    seen++;
  }
  EXPECT_EQ(seen, kMarkers);
  // The reader must be closed before the instance can be removed.
  reader->reset();
  EXPECT_TRUE((*instance)->Remove().ok());
}

TEST(TracefsTest, ParsesCpuStats) {
  absl::StatusOr<Instance::CpuStats> s = ParseCpuStats(
      "entries: 5\noverrun: 2\ncommit overrun: 0\nbytes: 320\noldest event ts:  3361.5\n"
      "now ts:  3361.667897\ndropped events: 1\nread events: 9\n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->entries, 5u);
  EXPECT_EQ(s->overrun, 2u);
  EXPECT_EQ(s->bytes, 320u);
  EXPECT_DOUBLE_EQ(s->oldest_event_ts, 3361.5);
  EXPECT_EQ(s->dropped_events, 1u);
  EXPECT_EQ(s->read_events, 9u);
  EXPECT_FALSE(ParseCpuStats("entries: many\n").ok());
}

}  // namespace
}  // namespace ringside::ftrace
