// The loader of the BPF program groups against the real kernel (root with
// BTF here): which objects load, what it reports of the groups and
// programs left out. Nothing is attached.

#include "bpf/loaded_groups.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "base/scoped_fd.h"
#include "bpf/common_events.h"
#include "bpf/drop_counters.h"
#include "bpf/kernel_tracepoints.h"
#include "bpf/sched_events.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside::bpf {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// A kernel whose BTF has only the tracepoints given, each with its
// arguments (true: a pointer), as a btf_trace_<name> typedef.
absl::StatusOr<KernelTracepoints> KernelWith(
    const std::vector<std::pair<std::string, std::vector<bool>>>& tracepoints) {
  btf* b = btf__new_empty();
  if (b == nullptr) return absl::InternalError("btf__new_empty");
  const int int_id = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
  const int void_ptr = btf__add_ptr(b, 0);
  for (const auto& [name, args] : tracepoints) {
    const int proto = btf__add_func_proto(b, int_id);
    btf__add_func_param(b, "__data", void_ptr);
    for (bool pointer : args) btf__add_func_param(b, "arg", pointer ? void_ptr : int_id);
    btf__add_typedef(b, ("btf_trace_" + name).c_str(), btf__add_ptr(b, proto));
  }
  uint32_t size = 0;
  const void* raw = btf__raw_data(b, &size);
  absl::StatusOr<KernelTracepoints> out =
      KernelTracepoints::FromRawBtf(absl::string_view(static_cast<const char*>(raw), size));
  btf__free(b);
  return out;
}

uint32_t MapId(int fd) {
  bpf_map_info info;
  std::memset(&info, 0, sizeof(info));
  uint32_t len = sizeof(info);
  return bpf_obj_get_info_by_fd(fd, &info, &len) == 0 ? info.id : 0;
}

// The names of an object's programs that loaded.
std::vector<std::string> LoadedPrograms(bpf_object* obj) {
  std::vector<std::string> names;
  bpf_program* prog;
  bpf_object__for_each_program(prog, obj) {
    if (bpf_program__fd(prog) >= 0) names.emplace_back(bpf_program__name(prog));
  }
  return names;
}

// The maps EventSource shares between the objects, made the same way, and
// the running kernel's tracepoints.
class LoadedGroupsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct stat st;
    if (stat("/sys/kernel/btf/vmlinux", &st) != 0) GTEST_SKIP() << "needs the kernel's BTF";
    const int cpus = libbpf_num_possible_cpus();
    ASSERT_GT(cpus, 0);
    ring_size_ = static_cast<size_t>(sysconf(_SC_PAGESIZE)) * 16;
    const uint32_t ring_size = static_cast<uint32_t>(ring_size_);
    base::ScopedFd ring_template(
        bpf_map_create(BPF_MAP_TYPE_RINGBUF, "rs_ring_tmpl", 0, 0, ring_size, nullptr));
    if (!ring_template.valid()) {
      if (errno == EPERM) GTEST_SKIP() << "needs BPF: " << std::strerror(errno);
      FAIL() << "creating a ring buffer: " << std::strerror(errno);
    }
    LIBBPF_OPTS(bpf_map_create_opts, outer_opts,
                .inner_map_fd = static_cast<__u32>(ring_template.get()));
    rings_.reset(bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, "rs_rings", sizeof(uint32_t),
                                sizeof(uint32_t), static_cast<uint32_t>(cpus), &outer_opts));
    absl::StatusOr<DropCounters> drops = DropCounters::Create(cpus);
    ASSERT_TRUE(drops.ok()) << drops.status();
    drops_ = std::move(*drops);
    seen_.reset(bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "rs_seen", sizeof(uint32_t),
                               sizeof(uint64_t) * RS_EV_MAX, 1, nullptr));
    filter_cgroups_.reset(bpf_map_create(BPF_MAP_TYPE_HASH, "rs_filter_cg", sizeof(uint64_t),
                                         sizeof(uint8_t), RS_MAX_FILTER_CGROUPS, nullptr));
    ASSERT_TRUE(rings_.valid() && drops_.fd() >= 0 && seen_.valid() && filter_cgroups_.valid())
        << std::strerror(errno);
    for (int cpu = 0; cpu < cpus; cpu++) {
      base::ScopedFd ring(
          bpf_map_create(BPF_MAP_TYPE_RINGBUF, "rs_ring", 0, 0, ring_size, nullptr));
      ASSERT_TRUE(ring.valid()) << std::strerror(errno);
      const uint32_t key = static_cast<uint32_t>(cpu);
      const int fd = ring.get();
      ASSERT_EQ(bpf_map_update_elem(rings_.get(), &key, &fd, BPF_ANY), 0) << std::strerror(errno);
      rings_per_cpu_.push_back(std::move(ring));
    }
    absl::StatusOr<KernelTracepoints> running = KernelTracepoints::Running();
    ASSERT_TRUE(running.ok()) << running.status();
    running_ = std::make_unique<KernelTracepoints>(std::move(*running));
  }

  LoadedGroups::Target Target() const {
    LoadedGroups::Target target;
    target.rings_fd = rings_.get();
    target.drops_fd = drops_.fd();
    target.seen_fd = seen_.get();
    target.filter_cgroups_fd = filter_cgroups_.get();
    target.ring_size = ring_size_;
    return target;
  }

  absl::StatusOr<std::unique_ptr<LoadedGroups>> Load(const LoadedGroups::Request& request) {
    return LoadedGroups::Load(request, Target(), *running_);
  }

  size_t ring_size_ = 0;
  base::ScopedFd rings_;
  DropCounters drops_;
  base::ScopedFd seen_;
  base::ScopedFd filter_cgroups_;
  std::vector<base::ScopedFd> rings_per_cpu_;
  std::unique_ptr<KernelTracepoints> running_;
};

TEST_F(LoadedGroupsTest, AllThreeGroupsLoadAsOneObject) {
  absl::StatusOr<std::unique_ptr<LoadedGroups>> groups = Load({});
  ASSERT_TRUE(groups.ok()) << groups.status();
  const LoadedGroups& g = **groups;
  EXPECT_TRUE(g.one_object());
  EXPECT_EQ(g.one_object_refused(), "");
  EXPECT_EQ(g.objects().size(), 1u);
  EXPECT_TRUE(g.has_sched() && g.has_process() && g.has_incidents());
  EXPECT_THAT(g.refused(), IsEmpty());
  EXPECT_GE(g.sched().flush_sched_batch_fd, 0);
  EXPECT_NE(g.sched().batch_waiting, nullptr);
  EXPECT_NE(g.sched().sched_batches, nullptr);
}

TEST_F(LoadedGroupsTest, EachGroupLoadsAsItsOwnObjectWhenAsked) {
  LoadedGroups::Request request;
  request.one_object = false;
  absl::StatusOr<std::unique_ptr<LoadedGroups>> groups = Load(request);
  ASSERT_TRUE(groups.ok()) << groups.status();
  const LoadedGroups& g = **groups;
  EXPECT_FALSE(g.one_object());
  EXPECT_EQ(g.one_object_refused(), "");  // Not tried.
  EXPECT_EQ(g.objects().size(), 3u);
  EXPECT_TRUE(g.has_sched() && g.has_process() && g.has_incidents());
  EXPECT_THAT(g.refused(), IsEmpty());
  EXPECT_GE(g.sched().flush_sched_batch_fd, 0);
}

// The one object holds all three groups: with fewer asked for, each loads
// as its own.
TEST_F(LoadedGroupsTest, FewerThanThreeGroupsLoadEachAsItsOwnObject) {
  LoadedGroups::Request request;
  request.sched = false;
  absl::StatusOr<std::unique_ptr<LoadedGroups>> groups = Load(request);
  ASSERT_TRUE(groups.ok()) << groups.status();
  const LoadedGroups& g = **groups;
  EXPECT_FALSE(g.one_object());
  EXPECT_EQ(g.one_object_refused(), "");
  EXPECT_EQ(g.objects().size(), 2u);
  EXPECT_FALSE(g.has_sched());
  EXPECT_TRUE(g.has_process() && g.has_incidents());
  EXPECT_EQ(g.sched().flush_sched_batch_fd, -1);
  EXPECT_EQ(g.sched().batch_waiting, nullptr);
  EXPECT_EQ(g.sched_batch_bytes(), 0u);
}

TEST_F(LoadedGroupsTest, AOneObjectThatCannotLoadFallsBackToEachGroupsOwn) {
  LoadedGroups::Request request;
  request.refuse_one_object_for_testing = true;
  absl::StatusOr<std::unique_ptr<LoadedGroups>> groups = Load(request);
  ASSERT_TRUE(groups.ok()) << groups.status();
  const LoadedGroups& g = **groups;
  EXPECT_FALSE(g.one_object());
  EXPECT_EQ(g.one_object_refused(), "refused for testing");
  EXPECT_EQ(g.objects().size(), 3u);
  EXPECT_TRUE(g.has_sched() && g.has_process() && g.has_incidents());
  EXPECT_THAT(g.refused(), IsEmpty());
  EXPECT_GT(g.sched_batch_bytes(), 0u);
}

// A group the kernel refuses takes the one object with it; the others load
// each as its own, and it is named with why.
TEST_F(LoadedGroupsTest, ARefusedGroupIsNamedAndTheOthersLoad) {
  LoadedGroups::Request request;
  request.refuse_groups_for_testing = {Group::kIncidents};
  absl::StatusOr<std::unique_ptr<LoadedGroups>> groups = Load(request);
  ASSERT_TRUE(groups.ok()) << groups.status();
  const LoadedGroups& g = **groups;
  EXPECT_FALSE(g.one_object());
  EXPECT_EQ(g.one_object_refused(), "refused for testing");
  ASSERT_EQ(g.refused().size(), 1u);
  EXPECT_EQ(g.refused()[0].group, "incidents");
  EXPECT_EQ(g.refused()[0].why.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(g.refused()[0].why.message()), HasSubstr("loading bpf/incidents"));
  EXPECT_TRUE(g.has_sched() && g.has_process());
  EXPECT_FALSE(g.has_incidents());
  EXPECT_EQ(g.objects().size(), 2u);
}

TEST_F(LoadedGroupsTest, ARefusedSchedulingGroupLeavesNoBatches) {
  LoadedGroups::Request request;
  request.refuse_groups_for_testing = {Group::kSched};
  absl::StatusOr<std::unique_ptr<LoadedGroups>> groups = Load(request);
  ASSERT_TRUE(groups.ok()) << groups.status();
  const LoadedGroups& g = **groups;
  ASSERT_EQ(g.refused().size(), 1u);
  EXPECT_EQ(g.refused()[0].group, "sched");
  EXPECT_FALSE(g.has_sched());
  EXPECT_EQ(g.sched_batch_bytes(), 0u);
  EXPECT_EQ(g.sched().flush_sched_batch_fd, -1);
}

// When no group asked for loads, Load() fails with the first one's error
// and the others' after it.
TEST_F(LoadedGroupsTest, WhenNoGroupLoadsItFailsWithEachGroupsError) {
  LoadedGroups::Request request;
  request.sched = false;
  request.refuse_groups_for_testing = {Group::kProcess, Group::kIncidents};
  absl::StatusOr<std::unique_ptr<LoadedGroups>> groups = Load(request);
  ASSERT_FALSE(groups.ok());
  EXPECT_EQ(groups.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(groups.status().message(),
            "loading bpf/process: refused for testing; loading bpf/incidents: refused for testing");
}

TEST_F(LoadedGroupsTest, SchedulingRecordsAreBatchedOnlyWhenAsked) {
  absl::StatusOr<std::unique_ptr<LoadedGroups>> batched = Load({});
  ASSERT_TRUE(batched.ok()) << batched.status();
  const uint32_t bytes = (*batched)->sched_batch_bytes();
  EXPECT_GT(bytes, 0u);
  EXPECT_LE(bytes, static_cast<uint32_t>(RS_SCHED_BATCH_BYTES));
  EXPECT_LE(bytes, ring_size_ / 8);
  EXPECT_EQ(bytes % sizeof(rs_sched_switch), 0u);

  LoadedGroups::Request request;
  request.batch_sched = false;
  absl::StatusOr<std::unique_ptr<LoadedGroups>> unbatched = Load(request);
  ASSERT_TRUE(unbatched.ok()) << unbatched.status();
  EXPECT_EQ((*unbatched)->sched_batch_bytes(), 0u);
}

// Every object writes into the rings, drop and seen counters and cgroup set
// it was given, not maps of its own.
TEST_F(LoadedGroupsTest, EveryObjectSharesTheTargetsMaps) {
  LoadedGroups::Request request;
  request.one_object = false;
  absl::StatusOr<std::unique_ptr<LoadedGroups>> groups = Load(request);
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ((*groups)->objects().size(), 3u);
  for (const LoadedGroups::Object& o : (*groups)->objects()) {
    std::vector<uint32_t> ids;
    bpf_map* map;
    bpf_object__for_each_map(map, o.obj) ids.push_back(MapId(bpf_map__fd(map)));
    EXPECT_THAT(ids, Contains(MapId(rings_.get())));
    EXPECT_THAT(ids, Contains(MapId(drops_.fd())));
    EXPECT_THAT(ids, Contains(MapId(seen_.get())));
    EXPECT_THAT(ids, Contains(MapId(filter_cgroups_.get())));
  }
}

TEST_F(LoadedGroupsTest, SetStoppingFlagsOnlyThatGroupsTypesInEveryObject) {
  LoadedGroups::Request request;
  request.one_object = false;
  absl::StatusOr<std::unique_ptr<LoadedGroups>> groups = Load(request);
  ASSERT_TRUE(groups.ok()) << groups.status();
  LoadedGroups& g = **groups;
  g.SetStopping(Group::kSched, true);
  for (const LoadedGroups::Object& o : g.objects()) {
    EXPECT_EQ(o.stopping[RS_EV_SCHED_SWITCH], 1);
    EXPECT_EQ(o.stopping[RS_EV_SCHED_WAKING], 1);
    EXPECT_EQ(o.stopping[RS_EV_PROCESS_FORK], 0);
    EXPECT_EQ(o.stopping[RS_EV_OOM_KILL], 0);
  }
  g.SetStopping(Group::kSched, false);
  for (const LoadedGroups::Object& o : g.objects()) EXPECT_EQ(o.stopping[RS_EV_SCHED_SWITCH], 0);
}

// A program whose tracepoint the kernel lacks is left out and named; the
// others load.
TEST_F(LoadedGroupsTest, AProgramWhoseTracepointTheKernelLacksIsSkipped) {
  absl::StatusOr<KernelTracepoints> kernel =
      KernelWith({{"sched_switch", {false, true, true, false}}, {"sched_waking", {true}}});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  LoadedGroups::Request request;
  request.process = false;
  request.incidents = false;
  absl::StatusOr<std::unique_ptr<LoadedGroups>> groups =
      LoadedGroups::Load(request, Target(), *kernel);
  ASSERT_TRUE(groups.ok()) << groups.status();
  const LoadedGroups& g = **groups;
  EXPECT_THAT(g.skipped(), Contains("handle_sched_wakeup_new (tp_btf/sched_wakeup_new)"));
  EXPECT_THAT(g.skipped(), Contains("handle_sched_migrate_task (tp_btf/sched_migrate_task)"));
  for (const std::string& s : g.skipped()) {
    EXPECT_THAT(s, Not(HasSubstr("sched_switch")));
    EXPECT_THAT(s, Not(HasSubstr("sched_waking")));
    EXPECT_THAT(s, Not(HasSubstr("_raw")));  // Not this kernel's flavour: not missing.
  }
  ASSERT_EQ(g.objects().size(), 1u);
  const std::vector<std::string> loaded = LoadedPrograms(g.objects()[0].obj);
  EXPECT_THAT(loaded, Contains("handle_sched_switch"));
  EXPECT_THAT(loaded, Contains("handle_sched_waking"));
  EXPECT_THAT(loaded, Contains("flush_sched_batch"));
  EXPECT_THAT(loaded, Not(Contains("handle_sched_wakeup_new")));
}

// sched_switch's flavour follows the kernel's arguments: with prev_state
// (5.18+) or without.
TEST_F(LoadedGroupsTest, TheSchedSwitchFlavourFollowsTheKernelsArguments) {
  LoadedGroups::Request request;
  request.process = false;
  request.incidents = false;
  absl::StatusOr<KernelTracepoints> old_kernel =
      KernelWith({{"sched_switch", {false, true, true}}});
  ASSERT_TRUE(old_kernel.ok()) << old_kernel.status();
  absl::StatusOr<std::unique_ptr<LoadedGroups>> old_groups =
      LoadedGroups::Load(request, Target(), *old_kernel);
  ASSERT_TRUE(old_groups.ok()) << old_groups.status();
  const std::vector<std::string> old_loaded = LoadedPrograms((*old_groups)->objects()[0].obj);
  EXPECT_THAT(old_loaded, Contains("handle_sched_switch_pre_5_18"))
      << absl::StrJoin(old_loaded, ", ");
  EXPECT_THAT(old_loaded, Not(Contains("handle_sched_switch")));

  absl::StatusOr<std::unique_ptr<LoadedGroups>> running = Load(request);
  ASSERT_TRUE(running.ok()) << running.status();
  const std::vector<std::string> loaded = LoadedPrograms((*running)->objects()[0].obj);
  EXPECT_EQ(std::count(loaded.begin(), loaded.end(), "handle_sched_switch") +
                std::count(loaded.begin(), loaded.end(), "handle_sched_switch_pre_5_18"),
            1);
  EXPECT_THAT(loaded,
              Contains(running_->NumArgs("sched_switch") >= 4 ? "handle_sched_switch"
                                                              : "handle_sched_switch_pre_5_18"));
}

}  // namespace
}  // namespace ringside::bpf
