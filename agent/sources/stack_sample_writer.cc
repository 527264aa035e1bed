#include "agent/sources/stack_sample_writer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bpf/stack_maps.h"
#include "ringside/trace/interned_data.pb.h"
#include "ringside/trace/stack_sample.pb.h"

namespace ringside::agent {

using trace::StackSample;
using trace::TracePacket;

namespace {

// The kernel's frames above __schedule are the tracing of the switch
// itself (the tracepoint, the BPF trampoline or raw_tp glue, the helper
// that took the stack): not where the thread waited, and they differ
// between kernels. A stack without __schedule is kept whole.
constexpr std::string_view kSwitchFunction = "__schedule";

// Bytes an entry of a table costs the durable store, roughly: its fields
// and their framing.
size_t EntryBytes(size_t payload) { return payload + 8; }

// The heap a string holds past its inline buffer.
size_t HeapBytes(const std::string& s) {
  return s.capacity() > std::string().capacity() ? s.capacity() + 1 : 0;
}

// The heap a table's slots take (a flat map's slot and its control byte).
template <typename Map>
size_t SlotBytes(const Map& m) {
  return m.capacity() * (sizeof(typename Map::value_type) + 1);
}

}  // namespace

StackSampleWriter::StackSampleWriter(Config config, TraceWriter* writer, DescriptorTracker* tracker,
                                     FrameNamer* namer)
    : config_(config), writer_(writer), tracker_(tracker), namer_(namer) {
  writer_->LeaveIncrementalStateToOthers();
}

void StackSampleWriter::Write(absl::Span<const bpf::Record> records) {
  samples_.clear();
  // A stack whose process exits later in the batch is read after the exit:
  // the namer hears of the exit first (its maps are gone by now).
  exits_ahead_.clear();
  for (const bpf::Record& r : records) {
    if (r.type == RS_EV_PROCESS_EXIT && r.exit().group_dead) exits_ahead_.push_back(r.exit().tgid);
  }
  const auto tell_if_exiting = [this](int32_t tgid) {
    if (std::find(exits_ahead_.begin(), exits_ahead_.end(), tgid) != exits_ahead_.end()) {
      namer_->ProcessExited(tgid);
    }
  };
  for (const bpf::Record& r : records) {
    if (r.type == RS_EV_STACK_BLOCKED) {
      const rs_stack_blocked& b = r.stack_blocked();
      tell_if_exiting(b.tgid);
      const bpf::StackFrames f = bpf::FramesOf(b, b.h.size);
      const uint64_t callstack = CallstackOf(f.kernel, f.user, b.tgid);
      if (callstack == 0) continue;  // Counted (stacks_unreadable; the kernel's losses).
      samples_.push_back({b.h.ts_ns, b.h.cpu, b.pid, b.tgid, true, kBlockedTimeCounterIid,
                          b.weight_ns, callstack});
    } else if (r.type == RS_EV_STACK_CPU_SAMPLE && config_.cpu_hz > 0) {
      const rs_stack_cpu_sample& c = r.stack_cpu_sample();
      tell_if_exiting(c.tgid);
      const bpf::StackFrames f = bpf::FramesOf(c, c.h.size);
      const uint64_t callstack = CallstackOf(f.kernel, f.user, c.tgid);
      if (callstack == 0) continue;
      samples_.push_back({c.h.ts_ns, c.h.cpu, c.pid, c.tgid, !f.kernel.empty(), kCpuTimeCounterIid,
                          1'000'000'000 / config_.cpu_hz, callstack});
    } else if (r.type == RS_EV_PROCESS_FORK) {
      // In the order of the stacks around it: a child's stacks are named
      // from its parent's maps until it execs.
      const rs_process_fork& f = r.fork();
      if (f.child_pid == f.child_tgid) namer_->ProcessForked(f.parent_tgid, f.child_tgid);
    } else if (r.type == RS_EV_PROCESS_EXEC) {
      namer_->ProcessExeced(r.exec().tgid);
    } else if (r.type == RS_EV_PROCESS_EXIT && r.exit().group_dead) {
      namer_->ProcessExited(r.exit().tgid);  // For its stacks in other CPUs' batches.
      auto ahead = std::find(exits_ahead_.begin(), exits_ahead_.end(), r.exit().tgid);
      if (ahead != exits_ahead_.end()) exits_ahead_.erase(ahead);
    }
  }
  // What the samples refer to reaches the store before they reach a chunk.
  PutPending();
  for (const Sample& s : samples_) {
    auto packet = writer_->NewTracePacket();
    packet->AppendVarInt(TracePacket::kTimestampFieldNumber, s.ts);
    ProtoMessage* sample = packet->BeginNested(TracePacket::kStackSampleFieldNumber);
    ProtoMessage* task = sample->BeginNested(StackSample::kTaskContextFieldNumber);
    task->AppendVarInt(StackSample::TaskContext::kPidFieldNumber, static_cast<uint32_t>(s.tgid));
    task->AppendVarInt(StackSample::TaskContext::kTidFieldNumber, static_cast<uint32_t>(s.pid));
    task->EndNested();
    ProtoMessage* exec = sample->BeginNested(StackSample::kExecutionContextFieldNumber);
    exec->AppendVarInt(StackSample::ExecutionContext::kCpuFieldNumber, s.cpu);
    exec->AppendVarInt(StackSample::ExecutionContext::kModeFieldNumber,
                       s.kernel_mode ? StackSample::MODE_KERNEL : StackSample::MODE_USER);
    exec->EndNested();
    sample->AppendVarInt(StackSample::kCallstackIidFieldNumber, s.callstack);
    sample->AppendVarInt(StackSample::kPrimaryDescriptorIidFieldNumber, s.counter_iid);
    sample->AppendVarInt(StackSample::kPrimaryWeightFieldNumber, s.weight);
    sample->EndNested();
    stats_.samples++;
    (s.counter_iid == kCpuTimeCounterIid ? stats_.cpu_samples : stats_.blocked_samples)++;
  }
  if (stats_.interned_bytes > config_.interned_budget_bytes) NewGeneration();
}

uint64_t StackSampleWriter::CallstackOf(absl::Span<const uint64_t> kernel,
                                        absl::Span<const uint64_t> user, int32_t tgid) {
  if (kernel.empty() && user.empty()) {
    stats_.stacks_unreadable++;
    return 0;
  }
  // A user address means something in its address space only; a kernel
  // one anywhere. A stack is remembered for its space when each of its
  // user frames was named as far as its file allows (a function, or
  // Frame::final_name), else for its process in that space alone (another
  // process of the space may name what this one could not). The space is
  // asked again after naming: reading the process's maps anew gives its
  // addresses a new meaning, under which they were named.
  const uint64_t space_before = user.empty() ? 0 : namer_->UserSpace(tgid);
  const uint32_t process = user.empty() ? 0 : static_cast<uint32_t>(tgid) + 1;
  if (space_before != 0) {
    FramesKey(space_before, 0, kernel, user);
    if (auto it = by_frames_.find(frames_key_); it != by_frames_.end()) return it->second;
  }
  FramesKey(space_before, process, kernel, user);
  if (auto it = by_frames_.find(frames_key_); it != by_frames_.end()) return it->second;
  user_frames_.clear();
  kernel_frames_.clear();
  InternStack(user, true, tgid, &user_frames_);
  InternStack(kernel, false, tgid, &kernel_frames_);
  std::vector<uint64_t> frames = user_frames_;
  frames.insert(frames.end(), kernel_frames_.begin(), kernel_frames_.end());
  auto [it, inserted] = callstacks_.try_emplace(std::move(frames), 0);
  if (inserted) {
    it->second = next_iid_++;
    key_bytes_ += it->first.capacity() * sizeof(uint64_t);
    trace::Callstack* c = pending_.mutable_interned_data()->add_callstacks();
    c->set_iid(it->second);
    for (uint64_t f : it->first) c->add_frame_ids(f);
    pending_empty_ = false;
    stats_.callstacks++;
    stats_.interned_bytes += EntryBytes(it->first.size() * 3 + 4);
  }
  if (!user.empty()) {
    const uint64_t space = namer_->UserSpace(tgid);
    if (space != space_before || (space != 0 && user_named_whole_)) {
      FramesKey(space, space != 0 && user_named_whole_ ? 0 : process, kernel, user);
    }
  }
  if (by_frames_.size() >= kMaxRememberedStacks) {
    for (const auto& [key, iid] : by_frames_) key_bytes_ -= HeapBytes(key);
    by_frames_.clear();
  }
  auto [remembered, added] = by_frames_.try_emplace(frames_key_, it->second);
  if (added) key_bytes_ += HeapBytes(remembered->first);
  stats_.remembered_stacks = by_frames_.size();
  return it->second;
}

void StackSampleWriter::FramesKey(uint64_t space, uint32_t process,
                                  absl::Span<const uint64_t> kernel,
                                  absl::Span<const uint64_t> user) {
  frames_key_.clear();
  const uint64_t head[3] = {space, process, (uint64_t{kernel.size()} << 32) | user.size()};
  frames_key_.append(reinterpret_cast<const char*>(head), sizeof(head));
  frames_key_.append(reinterpret_cast<const char*>(kernel.data()),
                     kernel.size() * sizeof(uint64_t));
  frames_key_.append(reinterpret_cast<const char*>(user.data()), user.size() * sizeof(uint64_t));
}

void StackSampleWriter::InternKernelStack(absl::Span<const uint64_t> ips,
                                          std::vector<uint64_t>* frame_iids) {
  // Each address named once a generation (Kernel() runs a symbol search
  // and copies strings, InternFrame() builds a key of them): a kernel
  // address means the same in every process, and every new process's
  // stacks repeat the same syscall paths. One named here for the first
  // time keeps its name until it is interned below.
  size_t innermost = 0;
  bool found_switch = false;
  named_.resize(ips.size());
  for (size_t i = 0; i < ips.size(); i++) {
    const uint64_t ip = i == 0 ? ips[i] : ips[i] - 1;
    auto [it, added] = kernel_by_ip_.try_emplace(ip);
    if (added) {
      named_[i] = namer_->Kernel(ip);
      it->second.is_switch = named_[i].function == kSwitchFunction;
    } else {
      named_[i].mapping.clear();  // Not named here.
    }
    if (!found_switch && it->second.is_switch) {
      innermost = i;
      found_switch = true;
    }
  }
  // Outermost first; the frames inside the switch (the tracing's own) left
  // out. No entry is added below: the lookups stay valid.
  for (size_t i = ips.size(); i > innermost; i--) {
    const uint64_t ip = i - 1 == 0 ? ips[0] : ips[i - 1] - 1;
    KernelFrame& k = kernel_by_ip_.find(ip)->second;
    if (k.iid == 0) {
      // Every kernel frame has its mapping: empty says it was not named above.
      const FrameNamer::Frame& f = named_[i - 1];
      k.iid = InternFrame(f.mapping.empty() ? namer_->Kernel(ip) : f, true);
    }
    frame_iids->push_back(k.iid);
  }
}

void StackSampleWriter::InternStack(absl::Span<const uint64_t> ips, bool user, int32_t tgid,
                                    std::vector<uint64_t>* frame_iids) {
  if (ips.empty()) return;
  if (!user) {
    InternKernelStack(ips, frame_iids);
    return;
  }
  if (user_by_ip_.size() >= kMaxUserFrames) user_by_ip_.clear();
  user_named_whole_ = true;
  named_.resize(ips.size());
  cached_.assign(ips.size(), 0);
  for (size_t i = 0; i < ips.size(); i++) {
    // Past the innermost, each address is a return address: the call is
    // the instruction before it (which a function that ends in a call to
    // a function that never returns has only there).
    const uint64_t ip = i == 0 ? ips[i] : ips[i] - 1;
    // The space asked again for each frame: naming the innermost may read
    // the process's maps anew, which gives its addresses a new meaning.
    if (const uint64_t space = namer_->UserSpace(tgid); space != 0) {
      if (auto it = user_by_ip_.find({space, ip}); it != user_by_ip_.end()) {
        cached_[i] = it->second;
        continue;
      }
    }
    named_[i] = namer_->User(tgid, ip, i == 0);
  }
  // Outermost first. Only a frame named as far as its file allows is
  // remembered (a function, or none in a file that was read: a stripped
  // binary's, which would otherwise be named again at every sample, 7 us
  // each beside hackbench): one without may be named through another
  // process of the space, or once its maps are read again.
  for (size_t i = ips.size(); i > 0; i--) {
    uint64_t iid = cached_[i - 1];
    if (iid == 0) {
      const FrameNamer::Frame& f = named_[i - 1];
      iid = InternFrame(f, false);
      const bool final_name = !f.function.empty() || f.final_name;
      if (!final_name) user_named_whole_ = false;
      const uint64_t space = namer_->UserSpace(tgid);
      if (space != 0 && final_name) {
        user_by_ip_.try_emplace({space, i - 1 == 0 ? ips[0] : ips[i - 1] - 1}, iid);
      }
    }
    frame_iids->push_back(iid);
  }
}

uint64_t StackSampleWriter::InternString(absl::flat_hash_map<std::string, uint64_t>* table,
                                         uint64_t* next, const std::string& s, bool function_name) {
  auto [it, inserted] = table->try_emplace(s, 0);
  if (!inserted) return it->second;
  it->second = (*next)++;
  key_bytes_ += HeapBytes(it->first);
  trace::InternedData* d = pending_.mutable_interned_data();
  trace::InternedString* e = nullptr;
  if (function_name) {
    e = d->add_function_names();
  } else if (table == &build_ids_) {
    e = d->add_build_ids();
  } else {
    e = d->add_mapping_paths();
  }
  e->set_iid(it->second);
  e->set_str(s);
  pending_empty_ = false;
  stats_.interned_bytes += EntryBytes(s.size() + 4);
  return it->second;
}

uint64_t StackSampleWriter::InternFrame(const FrameNamer::Frame& f, bool kernel) {
  const std::string mapping_key = absl::StrCat(f.mapping, "\n", f.build_id, "\n", f.start, "\n",
                                               f.end, "\n", f.offset, "\n", f.load_bias);
  auto [m, new_mapping] = mappings_.try_emplace(mapping_key, 0);
  if (new_mapping) {
    m->second = next_iid_++;
    key_bytes_ += HeapBytes(m->first);
    trace::Mapping* mapping = pending_.mutable_interned_data()->add_mappings();
    mapping->set_iid(m->second);
    if (!f.build_id.empty()) {
      mapping->set_build_id(InternString(&build_ids_, &next_iid_, f.build_id, false));
    }
    mapping->set_start(f.start);
    mapping->set_end(f.end);
    // start_offset is where the ELF file starts in the mapped file: 0 (it
    // is not inside an APK). Perfetto's offline symbolizer takes the
    // mapping's offset in the ELF as exact_offset - start_offset to check
    // load_bias; with both the mapping's offset it found a bias of p_vaddr
    // (0x1000 for a GNU ld PIE) and shifted every rel_pc by it: frames of
    // a stripped binary named, later, wrongly.
    mapping->set_start_offset(0);
    mapping->set_exact_offset(f.offset);
    mapping->set_load_bias(f.load_bias);
    if (!f.mapping.empty()) {
      mapping->add_path_string_ids(InternString(&mapping_paths_, &next_iid_, f.mapping, false));
    }
    pending_empty_ = false;
    stats_.interned_bytes += EntryBytes(48);
  }
  const std::string frame_key = absl::StrCat(m->second, "\n", f.rel_pc, "\n", f.function);
  auto [it, inserted] = frames_.try_emplace(frame_key, 0);
  if (!inserted) return it->second;
  it->second = next_iid_++;
  key_bytes_ += HeapBytes(it->first);
  trace::Frame* frame = pending_.mutable_interned_data()->add_frames();
  frame->set_iid(it->second);
  frame->set_mapping_id(m->second);
  frame->set_rel_pc(f.rel_pc);
  frame->set_kind(kernel ? trace::Frame::KIND_KERNEL : trace::Frame::KIND_NATIVE);
  if (!f.function.empty()) {
    frame->set_function_name_id(InternString(&function_names_, &next_iid_, f.function, true));
    stats_.frames_named++;
  } else {
    stats_.frames_unnamed++;
  }
  pending_empty_ = false;
  stats_.interned_bytes += EntryBytes(24);
  return it->second;
}

void StackSampleWriter::PutPending() {
  if (pending_empty_) return;
  if (generation_entries_.empty()) {
    // A generation's first entry: the counter its samples weigh in.
    StackSample::CounterDescriptor* c =
        pending_.mutable_interned_data()->add_stack_sample_counter_descriptors();
    c->set_iid(kBlockedTimeCounterIid);
    c->set_name(kBlockedTimeCounter);
    c->set_unit(StackSample::UNIT_NANOSECONDS);
    c->set_description("time a thread stayed off the CPU after blocking here");
    if (config_.cpu_hz > 0) {
      StackSample::CounterDescriptor* cpu =
          pending_.mutable_interned_data()->add_stack_sample_counter_descriptors();
      cpu->set_iid(kCpuTimeCounterIid);
      cpu->set_name(kCpuTimeCounter);
      cpu->set_unit(StackSample::UNIT_NANOSECONDS);
      cpu->set_description("CPU time, sampled: each sample weighs one sampling period");
    }
    // And the profiler's name, which trace_processor gives the session.
    pending_.mutable_trace_packet_defaults()->mutable_stack_sample_defaults()->set_source(
        "linux.bpf");
  }
  const uint32_t entry = next_entry_++;
  tracker_->PutInterned(config_.producer, config_.writer, entry, pending_.SerializeAsString());
  generation_entries_.push_back(entry);
  pending_.Clear();
  pending_empty_ = true;
}

void StackSampleWriter::NewGeneration() {
  for (uint32_t entry : generation_entries_) {
    tracker_->EndInterned(config_.producer, config_.writer, entry);
  }
  generation_entries_.clear();
  function_names_.clear();
  build_ids_.clear();
  mapping_paths_.clear();
  mappings_.clear();
  frames_.clear();
  callstacks_.clear();
  by_frames_.clear();
  kernel_by_ip_.clear();
  user_by_ip_.clear();
  key_bytes_ = 0;
  stats_.remembered_stacks = 0;
  stats_.interned_bytes = 0;
  stats_.generations++;
}

size_t StackSampleWriter::memory_bytes() const {
  return key_bytes_ + SlotBytes(function_names_) + SlotBytes(build_ids_) +
         SlotBytes(mapping_paths_) + SlotBytes(mappings_) + SlotBytes(frames_) +
         SlotBytes(callstacks_) + SlotBytes(by_frames_) + SlotBytes(kernel_by_ip_) +
         SlotBytes(user_by_ip_) + named_.capacity() * sizeof(FrameNamer::Frame) +
         cached_.capacity() * sizeof(uint64_t) +
         (user_frames_.capacity() + kernel_frames_.capacity()) * sizeof(uint64_t) +
         frames_key_.capacity() + samples_.capacity() * sizeof(Sample);
}

}  // namespace ringside::agent
