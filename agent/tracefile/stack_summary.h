#ifndef RINGSIDE_AGENT_TRACEFILE_STACK_SUMMARY_H_
#define RINGSIDE_AGENT_TRACEFILE_STACK_SUMMARY_H_

#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "nlohmann/json.hpp"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {

// One frame of a summarized stack: its function's name, or, when it has
// none, "MAPPING+0xREL_PC" (the mapping's file name, "?" when unknown).
// Text from the file, untrusted.
struct StackFrame {
  std::string name;
  bool kernel = false;
  auto operator<=>(const StackFrame&) const = default;
};

// What `ringside inspect` reports of a file's stack samples (StackSample
// packets, ringside's "linux.bpf" source or any writer of the same form):
// the blocked stacks (counter "blocked_time", weighing ns off the CPU) and
// the CPU samples (counter "cpu_time", ns of one sampling period), their
// totals and their heaviest stacks, with the frames and names resolved
// from the interned data of each sample's sequence.
struct StackSummary {
  // A thread's part of a stack's weight.
  struct Thread {
    int32_t tid = 0;
    int32_t tgid = 0;
    uint64_t samples = 0;
    uint64_t weight_ns = 0;
  };
  struct Stack {
    std::vector<StackFrame> frames;  // The innermost (where it was) first.
    uint64_t samples = 0;
    uint64_t weight_ns = 0;
    // The heaviest threads first (at most kMaxThreadsKept), and how many
    // threads and processes the stack's samples came from in all.
    std::vector<Thread> threads;
    uint64_t thread_count = 0;
    uint64_t process_count = 0;
  };
  struct Kind {
    uint64_t samples = 0;
    uint64_t weight_ns = 0;
    uint64_t distinct_stacks = 0;
    std::vector<Stack> top;  // The heaviest first (ties: more samples).
  };
  static constexpr size_t kMaxThreadsKept = 8;

  Kind blocked;
  Kind cpu;
  // Samples weighed in a counter that is neither, or in one the file does
  // not describe.
  uint64_t other_samples = 0;
  // Frames interned (each entry once), and those without a function name.
  uint64_t frames_interned = 0;
  uint64_t frames_unnamed = 0;
  // Ids the file refers to but does not hold (on the sample's sequence,
  // since its last clear): samples of an unknown callstack (counted in
  // their kind's totals, in no stack), frames of a callstack, function
  // names of a frame.
  uint64_t samples_without_callstack = 0;
  uint64_t frame_ids_unresolved = 0;
  uint64_t name_ids_unresolved = 0;
  // The stacks' losses from the last trace_stats: events_lost of the
  // ringside_staging_loss entries whose kind starts with "stack_", summed
  // by kind over data sources, stages and CPUs.
  std::map<std::string, uint64_t> losses;
  // How blocked stacks were taken, from the last trace_stats
  // (ringside_stack_stats, summed over data sources): the sampling period
  // (the largest; 0: every block), and the shorter blocks not taken.
  uint64_t blocked_period_ns = 0;
  bool blocked_at_switch = false;
  uint64_t blocked_unsampled = 0;
  uint64_t blocked_unsampled_ns = 0;
  // Naming user frames, from the same entries (summed): frames in no
  // mapping, maps read and unreadable, binaries unreadable.
  uint64_t user_frames_unmapped = 0;
  uint64_t maps_reads = 0;
  uint64_t maps_unreadable = 0;
  uint64_t binaries_unreadable = 0;

  bool empty() const {
    return blocked.samples + cpu.samples + other_samples + frames_interned == 0 && losses.empty() &&
           blocked_period_ns == 0 && !blocked_at_switch && maps_reads == 0;
  }
};

// Builds a StackSummary one packet at a time. Interned entries are kept per
// trusted_packet_sequence_id and dropped when a packet of that sequence
// clears its incremental state; samples are resolved against the tables
// their sequence held until then (so interned data that follows a sample
// in the same stretch still names it). Ids a file does not hold are
// counted, never trusted.
class StackSummarizer {
 public:
  void AddPacket(const trace::TracePacket& packet);
  // The summary, with the `top_n` heaviest stacks of each kind.
  StackSummary Finish(size_t top_n);

  static constexpr std::string_view kBlockedCounter = "blocked_time";
  static constexpr std::string_view kCpuCounter = "cpu_time";

 private:
  struct Frame {
    uint64_t name_id = 0;
    uint64_t mapping_id = 0;
    uint64_t rel_pc = 0;
    bool kernel = false;
  };
  struct Weight {
    uint64_t samples = 0;
    uint64_t weight_ns = 0;
    // By tid: {tgid, samples, weight}.
    std::map<int32_t, StackSummary::Thread> threads;
    void Add(const Weight& other);
  };
  enum class Counter { kBlocked, kCpu, kOther };
  struct Sequence {
    absl::flat_hash_map<uint64_t, std::string> function_names;
    absl::flat_hash_map<uint64_t, std::string> mapping_paths;
    absl::flat_hash_map<uint64_t, uint64_t> mappings;  // iid -> its last path id.
    absl::flat_hash_map<uint64_t, Frame> frames;
    absl::flat_hash_map<uint64_t, std::vector<uint64_t>> callstacks;
    absl::flat_hash_map<uint64_t, Counter> counters;
    // Samples not yet resolved, by {counter iid, callstack iid}.
    std::map<std::pair<uint64_t, uint64_t>, Weight> pending;
  };
  void Intern(Sequence& seq, const trace::InternedData& data);
  void AddSample(Sequence& seq, const trace::StackSample& sample);
  // Resolves `seq`'s pending samples into stacks_ and empties it.
  void Resolve(Sequence& seq);
  StackFrame ResolveFrame(const Sequence& seq, uint64_t frame_id);
  void AddLosses(const trace::TraceStats& stats);

  absl::flat_hash_map<uint32_t, Sequence> sequences_;
  std::map<std::vector<StackFrame>, Weight> stacks_[2];  // By Counter: blocked, CPU.
  StackSummary summary_;
};

// Renderings of the summary. `names` gives a task's thread and process
// names (empty: unknown), from the file's process tree.
struct TaskNames {
  std::string thread;
  std::string process;
};
using TaskNamer = absl::FunctionRef<TaskNames(int32_t tid, int32_t tgid)>;
// The text of `ringside inspect`, names escaped (PrintableText); a line
// saying there are none when the file has no stack samples.
std::string StacksToText(const StackSummary& stacks, TaskNamer names);
nlohmann::json StacksToJson(const StackSummary& stacks, TaskNamer names);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_TRACEFILE_STACK_SUMMARY_H_
