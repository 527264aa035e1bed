// The sched BPF source against the real kernel (root with BTF here).

#include "bpf/sched_source.h"

#include <bpf/bpf.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "bpf/sched_events.h"
#include "gtest/gtest.h"

namespace ringside::bpf {
namespace {

std::unique_ptr<SchedSource> LoadOrSkipReason(SchedSource::Options options, std::string* skip) {
  absl::StatusOr<std::unique_ptr<SchedSource>> s = SchedSource::Load(options);
  if (s.ok()) return std::move(*s);
  if (s.status().code() == absl::StatusCode::kPermissionDenied ||
      s.status().code() == absl::StatusCode::kUnavailable) {
    *skip = std::string(s.status().message());
    return nullptr;
  }
  ADD_FAILURE() << s.status();
  return nullptr;
}

// Names of the BPF programs loaded in the system.
std::vector<std::string> LoadedProgramNames() {
  std::vector<std::string> names;
  uint32_t id = 0;
  while (bpf_prog_get_next_id(id, &id) == 0) {
    const int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0) continue;
    bpf_prog_info info;
    std::memset(&info, 0, sizeof(info));
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) names.emplace_back(info.name);
    close(fd);
  }
  return names;
}

// Makes context switches: a child that sleeps briefly many times.
pid_t SwitchStorm(int sleeps) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < sleeps; i++) usleep(100);
    _exit(0);
  }
  return pid;
}

TEST(SchedSourceTest, RecordsSchedSwitchesPerCpuInOrderAndDetachesCompletely) {
  std::string skip;
  {
    auto source = LoadOrSkipReason(SchedSource::Options{}, &skip);
    if (!source) GTEST_SKIP() << "needs BPF: " << skip;
    ASSERT_TRUE(source->Attach().ok());
    const pid_t child = SwitchStorm(500);
    std::vector<uint64_t> last_ts(static_cast<size_t>(source->num_cpus()), 0);
    uint64_t records = 0, child_switches = 0;
    auto on_record = [&](uint32_t cpu, const void* data, size_t size) {
      ASSERT_EQ(size, sizeof(rs_sched_switch));
      rs_sched_switch e;
      std::memcpy(&e, data, sizeof(e));
      ASSERT_EQ(e.h.type, RS_EV_SCHED_SWITCH);
      ASSERT_EQ(e.h.cpu, cpu);
      EXPECT_GE(e.h.ts_ns, last_ts[cpu]);  // Each CPU's records stay in order.
      last_ts[cpu] = e.h.ts_ns;
      if (e.prev_pid == child || e.next_pid == child) child_switches++;
      records++;
    };
    int status = 0;
    while (waitpid(child, &status, WNOHANG) == 0) ASSERT_TRUE(source->Poll(10, on_record).ok());
    ASSERT_TRUE(source->Poll(10, on_record).ok());
    EXPECT_GT(records, 500u);
    EXPECT_GE(child_switches, 500u);  // Every usleep switches the child out and back in.
    EXPECT_EQ(source->drops(RS_EV_SCHED_SWITCH), 0u);
    bool attached = false;
    for (const std::string& n : LoadedProgramNames()) attached |= n == "handle_sched_sw";
    EXPECT_TRUE(attached);
  }
  // Destroyed: nothing of ours stays loaded (the kernel frees programs after
  // an RCU grace period, so give it a moment).
  bool gone = false;
  for (int i = 0; i < 200 && !gone; i++) {
    gone = true;
    for (const std::string& n : LoadedProgramNames()) gone &= n != "handle_sched_sw";
    if (!gone) usleep(10 * 1000);
  }
  EXPECT_TRUE(gone) << "handle_sched_switch is still loaded after the source was destroyed";
}

TEST(SchedSourceTest, TinyRingUnderAStormCountsDrops) {
  std::string skip;
  auto source = LoadOrSkipReason(SchedSource::Options{.ring_size_per_cpu = 4096}, &skip);
  if (!source) GTEST_SKIP() << "needs BPF: " << skip;
  ASSERT_TRUE(source->Attach().ok());
  // Nobody reads while the storm runs: the 4 KiB rings overflow.
  const pid_t child = SwitchStorm(3000);
  waitpid(child, nullptr, 0);
  uint64_t records = 0;
  ASSERT_TRUE(source->Poll(0, [&](uint32_t, const void*, size_t) { records++; }).ok());
  EXPECT_GT(source->drops(RS_EV_SCHED_SWITCH), 0u);
  EXPECT_LT(records, 6000u);
}

TEST(SchedSourceTest, DetachedSourceRecordsNothingNew) {
  std::string skip;
  auto source = LoadOrSkipReason(SchedSource::Options{}, &skip);
  if (!source) GTEST_SKIP() << "needs BPF: " << skip;
  ASSERT_TRUE(source->Attach().ok());
  source->Detach();
  ASSERT_TRUE(source->Poll(0, [](uint32_t, const void*, size_t) {}).ok());
  const pid_t child = SwitchStorm(200);
  waitpid(child, nullptr, 0);
  uint64_t records = 0;
  ASSERT_TRUE(source->Poll(0, [&](uint32_t, const void*, size_t) { records++; }).ok());
  EXPECT_EQ(records, 0u);
}

}  // namespace
}  // namespace ringside::bpf
