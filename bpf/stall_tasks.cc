#include "bpf/stall_tasks.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <cerrno>

#include <string_view>
#include "absl/container/flat_hash_set.h"

namespace ringside::bpf {
namespace {

// Entries read per system call.
constexpr uint32_t kBatch = 1024;
// The most entries the map holds (kStallTasks), for the walk's bound.
constexpr uint32_t kMaxWalk = 1 << 16;

bool Keep(const rs_stall_task& t, uint64_t now_ns, uint64_t blocked_ns) {
  return t.kind == RS_STALL_BLOCKED && t.since_ns != 0 && now_ns >= t.since_ns &&
         now_ns - t.since_ns >= blocked_ns;
}

}  // namespace

std::vector<StallTasks::Blocked> StallTasks::BlockedSince(uint64_t now_ns) const {
  std::vector<Blocked> out;
  if (map_ == nullptr || blocked_ns_ == 0) return out;
  const int fd = bpf_map__fd(map_);
  std::vector<uint32_t> keys(kBatch);
  std::vector<rs_stall_task> values(kBatch);
  LIBBPF_OPTS(bpf_map_batch_opts, opts);
  uint32_t token = 0;
  bool first = true;
  for (;;) {
    uint32_t count = kBatch;
    const int err = bpf_map_lookup_batch(fd, first ? nullptr : &token, &token, keys.data(),
                                         values.data(), &count, &opts);
    if (err != 0 && err != -ENOENT) break;
    for (uint32_t k = 0; k < count; k++) {
      if (Keep(values[k], now_ns, blocked_ns_)) {
        out.push_back({static_cast<int32_t>(keys[k]), values[k]});
      }
    }
    if (err == -ENOENT) return out;
    first = false;
  }
  // No batches (or a batch the kernel refused part-way): one by one.
  out.clear();
  // A key deleted between two calls starts the walk over: bounded, and the
  // tasks told once each.
  uint32_t key = 0;
  uint32_t last = 0;
  bool started = false;
  absl::flat_hash_set<int32_t> seen;
  for (uint32_t steps = 0;
       steps < 4 * kMaxWalk && bpf_map_get_next_key(fd, started ? &last : nullptr, &key) == 0;
       steps++) {
    rs_stall_task t;
    if (bpf_map_lookup_elem(fd, &key, &t) == 0 && Keep(t, now_ns, blocked_ns_) &&
        seen.insert(static_cast<int32_t>(key)).second) {
      out.push_back({static_cast<int32_t>(key), t});
    }
    last = key;
    started = true;
  }
  return out;
}

void StallTasks::Forget(int32_t tid, uint64_t since_ns) const {
  if (map_ == nullptr) return;
  const int fd = bpf_map__fd(map_);
  const uint32_t key = static_cast<uint32_t>(tid);
  rs_stall_task t;
  if (bpf_map_lookup_elem(fd, &key, &t) == 0 && t.since_ns == since_ns) {
    bpf_map_delete_elem(fd, &key);
  }
}

namespace {

// Whether `btf` has a struct `type` with a member `member`.
bool HasMember(const btf* b, const char* type, std::string_view member) {
  const int id = btf__find_by_name_kind(b, type, BTF_KIND_STRUCT);
  if (id <= 0) return false;
  const btf_type* t = btf__type_by_id(b, id);
  const btf_member* m = btf_members(t);
  for (int k = 0; k < btf_vlen(t); k++) {
    const char* name = btf__name_by_offset(b, m[k].name_off);
    if (name != nullptr && member == name) return true;
  }
  return false;
}

}  // namespace

std::string PlaceRunqueueDelays(const std::string& btf_path, uint64_t* runqueue_ns) {
  if (*runqueue_ns == 0) return "";
  btf* b = btf_path.empty() ? btf__load_vmlinux_btf() : btf__parse(btf_path.c_str(), nullptr);
  std::string why;
  if (b == nullptr) {
    why = "the kernel's BTF could not be read";
  } else if (!HasMember(b, "sched_info", "last_queued")) {
    why =
        "the kernel keeps no sched_info.last_queued (CONFIG_SCHED_INFO: schedstats or delay "
        "accounting)";
  } else if (!HasMember(b, "sched_entity", "cfs_rq") || !HasMember(b, "cfs_rq", "rq")) {
    why = "the kernel's tasks lead to no run queue (CONFIG_FAIR_GROUP_SCHED)";
  }
  btf__free(b);
  if (!why.empty()) *runqueue_ns = 0;
  return why;
}

}  // namespace ringside::bpf
