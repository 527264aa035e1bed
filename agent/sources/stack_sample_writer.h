#ifndef RINGSIDE_AGENT_SOURCES_STACK_SAMPLE_WRITER_H_
#define RINGSIDE_AGENT_SOURCES_STACK_SAMPLE_WRITER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "agent/descriptors/descriptor_tracker.h"
#include "agent/symbols/user_symbolizer.h"
#include "agent/writer/trace_writer.h"
#include "bpf/records.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {

// What the stack writer asks of the symbolizers (agent/symbols/): a frame's
// function and mapping. Tests fake it.
class FrameNamer {
 public:
  struct Frame {
    std::string function;  // Empty: could not be named (its build id and rel_pc stay).
    std::string mapping;   // The file's path, or "[kernel.kallsyms]".
    std::string build_id;  // Its bytes (the ELF note's), as Perfetto wants them; empty: unknown.
    uint64_t start = 0;    // The mapping, as Perfetto's Mapping has it.
    uint64_t end = 0;
    uint64_t offset = 0;
    uint64_t load_bias = 0;
    uint64_t rel_pc = 0;
    // Named as far as its file allows: the file was read, so `function`
    // stays what it is (empty: no symbol there, a stripped binary) for as
    // long as UserSpace() gives the same value (UserFrame::file_read). False
    // where another process of the space may still read the file, or the
    // mapping is anonymous.
    bool final_name = false;
  };
  virtual ~FrameNamer() = default;
  virtual Frame Kernel(uint64_t ip) = 0;
  // `ip` in process `tgid`'s address space: the address the thread ran
  // (`innermost`), or a caller's return address minus 1.
  virtual Frame User(int32_t tgid, uint64_t ip, bool innermost) = 0;
  // Process `child_tgid` was forked from `parent_tgid`: it maps what its
  // parent did.
  virtual void ProcessForked(int32_t /*parent_tgid*/, int32_t /*child_tgid*/) {}
  // Process `tgid` ran execve: it maps another program.
  virtual void ProcessExeced(int32_t) {}
  // Process `tgid` exited (its last thread did): its addresses are named
  // from what was read of it before, if anything.
  virtual void ProcessExited(int32_t) {}
  // What `tgid`'s addresses mean now: while it gives the same non-zero
  // value (for any process), User() gives an address the same frame
  // wherever it names a function or says Frame::final_name, so the writer
  // names it once. 0: name each time.
  virtual uint64_t UserSpace(int32_t) const { return 0; }
  // Process `tgid` exited: what is kept of it can go.
  virtual void ForgetProcess(int32_t) {}
  // The symbol tables and caches held, for status.
  virtual size_t memory_bytes() const { return 0; }
  // What naming user frames met.
  virtual UserSymbolizerStats user_stats() const { return {}; }
  // Why no user frame is named at all (empty: they are, as far as each
  // can be), said once at setup.
  virtual std::string user_frames_unnamed_reason() const { return ""; }
};

// Writes the stack records of the BPF programs as Perfetto StackSample
// packets on one sequence of their own: the task, the CPU, an interned
// callstack (user frames, then kernel frames, the outermost first) and a
// weight. A blocked stack (RS_EV_STACK_BLOCKED) weighs the nanoseconds the
// thread stayed off the CPU, or the sampling period for a sampled short
// block (the counter "blocked_time"), at the time it blocked; a CPU sample
// (RS_EV_STACK_CPU_SAMPLE) the sampling period ("cpu_time").
//
// Interned data (function names, build ids, mapping paths, mappings,
// frames, callstacks, the counter) never goes into the ring: one packet of
// what a batch added goes to the durable store through the tracker
// (DescriptorTracker::PutInterned), before the batch's samples are written,
// so that every file and snapshot holds everything its samples refer to.
// Once what was interned passes `interned_budget_bytes`, a new generation
// begins: the old entries are ended (kept while the ring may still hold
// samples that refer to them) and interning starts again with new ids.
//
// Not thread-safe; the BPF reader thread's.
class StackSampleWriter {
 public:
  struct Config {
    uint16_t producer = 0;  // The sequence's {ProducerID, WriterID}.
    uint16_t writer = 0;
    size_t interned_budget_bytes = 1 << 20;
    // CPU samples a second per CPU: each weighs 1 s / cpu_hz.
    uint32_t cpu_hz = 0;
  };
  struct Stats {
    uint64_t samples = 0;            // Blocked stacks and CPU samples: the two below.
    uint64_t blocked_samples = 0;    // Weighing in blocked_time.
    uint64_t cpu_samples = 0;        // Weighing in cpu_time.
    uint64_t stacks_unreadable = 0;  // Records with no frame at all.
    uint64_t frames_named = 0;       // Distinct frames, per generation.
    uint64_t frames_unnamed = 0;
    uint64_t callstacks = 0;
    uint64_t interned_bytes = 0;  // Of the current generation.
    uint64_t generations = 1;
    // Entries of the {tgid, frames} -> callstack cache (bounded by
    // kMaxRememberedStacks).
    uint64_t remembered_stacks = 0;
  };
  // Each process that blocks adds its own entries to the cache, though its
  // frames and callstacks are interned once: a fork storm of short-lived
  // processes would grow it without bound. Past this it starts again.
  static constexpr size_t kMaxRememberedStacks = 1 << 16;

  // The writer's sequence is {config.producer, config.writer}; `tracker`
  // takes the interned packets; `namer` names the frames. None may be null.
  StackSampleWriter(Config config, TraceWriter* writer, DescriptorTracker* tracker,
                    FrameNamer* namer);

  // Writes the stack records among `records` (blocked stacks, and CPU
  // samples when cpu_hz is set), and tells the namer of the forks, execs
  // and exits among them in the order of the stacks around them. Other
  // records are skipped.
  void Write(absl::Span<const bpf::Record> records);
  void Flush() { writer_->Flush(); }
  const Stats& stats() const { return stats_; }
  // The heap its interning tables hold, roughly (their slots and the keys'
  // bytes); bounded with them by interned_budget_bytes and
  // kMaxRememberedStacks. O(1).
  size_t memory_bytes() const;

  // The counters samples weigh in: a blocked stack's time off the CPU,
  // a CPU sample's period.
  static constexpr uint64_t kBlockedTimeCounterIid = 1;
  static constexpr const char* kBlockedTimeCounter = "blocked_time";
  static constexpr uint64_t kCpuTimeCounterIid = 2;
  static constexpr const char* kCpuTimeCounter = "cpu_time";

 private:
  // The interned callstack of a record's frames (innermost first); 0 when
  // it has none.
  uint64_t CallstackOf(absl::Span<const uint64_t> kernel, absl::Span<const uint64_t> user,
                       int32_t tgid);
  // The frames of one stack (innermost first), interned outermost first
  // into *frame_iids.
  void InternStack(absl::Span<const uint64_t> ips, bool user, int32_t tgid,
                   std::vector<uint64_t>* frame_iids);
  void InternKernelStack(absl::Span<const uint64_t> ips, std::vector<uint64_t>* frame_iids);
  uint64_t InternFrame(const FrameNamer::Frame& f, bool kernel);
  uint64_t InternString(absl::flat_hash_map<std::string, uint64_t>* table, uint64_t* next,
                        const std::string& s, bool function_name);
  // Sends what this batch interned to the durable store.
  void PutPending();
  // Ends every entry of the current generation and starts a new one.
  void NewGeneration();

  Config config_;
  TraceWriter* writer_;
  DescriptorTracker* tracker_;
  FrameNamer* namer_;
  Stats stats_;

  // Interning tables of the current generation. Ids only grow, across
  // generations too, so an old sample never meets a new entry's id.
  absl::flat_hash_map<std::string, uint64_t> function_names_;
  absl::flat_hash_map<std::string, uint64_t> build_ids_;
  absl::flat_hash_map<std::string, uint64_t> mapping_paths_;
  absl::flat_hash_map<std::string, uint64_t> mappings_;  // By a key of its fields.
  absl::flat_hash_map<std::string, uint64_t> frames_;    // By a key of its fields.
  absl::flat_hash_map<std::vector<uint64_t>, uint64_t> callstacks_;
  // {address space, process, frame counts, frames} as bytes -> callstack
  // iid: a stack seen before is neither named nor interned again. The
  // space is the namer's UserSpace (processes forked from one another
  // share it; an exec changes it; 0: unknown), the process its tgid + 1,
  // or 0 for a stack remembered for its whole space. A stack of kernel
  // frames only means the same in every process: {0, 0}.
  absl::flat_hash_map<std::string, uint64_t> by_frames_;
  std::string frames_key_;  // Scratch.
  void FramesKey(uint64_t space, uint32_t process, absl::Span<const uint64_t> kernel,
                 absl::Span<const uint64_t> user);
  // Kernel addresses (return addresses less 1) named this generation:
  // whether the frame is the switch's, and its frame iid once interned (0:
  // not yet; one inside the switch never is).
  struct KernelFrame {
    uint64_t iid = 0;
    bool is_switch = false;
  };
  absl::flat_hash_map<uint64_t, KernelFrame> kernel_by_ip_;
  // User addresses (return addresses less 1) named as far as their files
  // allow (a function, or Frame::final_name) this generation, by
  // FrameNamer::UserSpace(): their frame iid. Processes forked from one
  // another share a space, so a new process's stacks are named without the
  // namer; at most kMaxUserFrames, then cleared.
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, uint64_t> user_by_ip_;
  static constexpr size_t kMaxUserFrames = 1 << 16;
  std::vector<FrameNamer::Frame> named_;  // Scratch: a stack's frames, named.
  std::vector<uint64_t> cached_;          // Scratch: their iids where known (else 0).
  // The last user stack interned was named as far as its files allow.
  bool user_named_whole_ = false;
  uint64_t next_iid_ = 1;
  // The heap the tables' keys hold past their inline bytes.
  size_t key_bytes_ = 0;
  // The interned packet being filled, and the durable entries of this
  // generation.
  trace::TracePacket pending_;
  bool pending_empty_ = true;
  uint32_t next_entry_ = 0;
  std::vector<uint32_t> generation_entries_;
  // Scratch, capacity reused.
  std::vector<uint64_t> user_frames_;
  std::vector<uint64_t> kernel_frames_;
  struct Sample {
    uint64_t ts;
    uint32_t cpu;
    int32_t pid;
    int32_t tgid;
    bool kernel_mode;
    uint64_t counter_iid;
    uint64_t weight;
    uint64_t callstack;
  };
  std::vector<Sample> samples_;
  // The processes whose exit the rest of the batch holds, once per exit (a
  // member, to keep its capacity from batch to batch).
  std::vector<int32_t> exits_ahead_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_STACK_SAMPLE_WRITER_H_
