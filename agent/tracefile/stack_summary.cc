#include "agent/tracefile/stack_summary.h"

#include <algorithm>
#include <set>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "ringside/trace/interned_data.pb.h"
#include "ringside/trace/stack_sample.pb.h"
#include "ringside/trace/trace_stats.pb.h"

namespace ringside::agent {
namespace {

// The file name of a mapping's path ("/usr/lib/libc.so.6" -> "libc.so.6").
std::string_view BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool ClearsIncrementalState(const trace::TracePacket& p) {
  return (p.sequence_flags() & trace::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED) != 0 ||
         p.incremental_state_cleared();
}

}  // namespace

void StackSummarizer::Weight::Add(const Weight& other) {
  samples += other.samples;
  weight_ns += other.weight_ns;
  for (const auto& [tid, t] : other.threads) {
    StackSummary::Thread& mine = threads[tid];
    mine.tid = tid;
    mine.tgid = t.tgid;
    mine.samples += t.samples;
    mine.weight_ns += t.weight_ns;
  }
}

void StackSummarizer::AddPacket(const trace::TracePacket& packet) {
  if (packet.has_trace_stats()) AddLosses(packet.trace_stats());
  const bool clears = ClearsIncrementalState(packet);
  if (!clears && !packet.has_interned_data() && !packet.has_stack_sample()) return;
  Sequence& seq = sequences_[packet.trusted_packet_sequence_id()];
  if (clears) {
    // What was sampled so far is named by the tables being dropped.
    Resolve(seq);
    seq = Sequence();
  }
  if (packet.has_interned_data()) Intern(seq, packet.interned_data());
  if (packet.has_stack_sample()) AddSample(seq, packet.stack_sample());
}

void StackSummarizer::Intern(Sequence& seq, const trace::InternedData& data) {
  for (const trace::InternedString& s : data.function_names()) {
    seq.function_names[s.iid()] = s.str();
  }
  for (const trace::InternedString& s : data.mapping_paths()) {
    seq.mapping_paths[s.iid()] = s.str();
  }
  for (const trace::Mapping& m : data.mappings()) {
    seq.mappings[m.iid()] = m.path_string_ids().empty() ? 0 : *m.path_string_ids().rbegin();
  }
  for (const trace::Frame& f : data.frames()) {
    seq.frames[f.iid()] = Frame{f.function_name_id(), f.mapping_id(), f.rel_pc(),
                                f.kind() == trace::Frame::KIND_KERNEL};
    summary_.frames_interned++;
    if (f.function_name_id() == 0) summary_.frames_unnamed++;
  }
  for (const trace::Callstack& c : data.callstacks()) {
    seq.callstacks[c.iid()].assign(c.frame_ids().begin(), c.frame_ids().end());
  }
  for (const trace::StackSample::CounterDescriptor& d : data.stack_sample_counter_descriptors()) {
    seq.counters[d.iid()] = d.name() == kBlockedCounter ? Counter::kBlocked
                            : d.name() == kCpuCounter   ? Counter::kCpu
                                                        : Counter::kOther;
  }
}

void StackSummarizer::AddSample(Sequence& seq, const trace::StackSample& sample) {
  Weight& w = seq.pending[{sample.primary_descriptor_iid(), sample.callstack_iid()}];
  w.samples++;
  w.weight_ns += sample.primary_weight();
  // The task context's pid is the process's (tgid), its tid the thread's.
  const auto tid = static_cast<int32_t>(sample.task_context().tid());
  StackSummary::Thread& t = w.threads[tid];
  t.tid = tid;
  t.tgid = static_cast<int32_t>(sample.task_context().pid());
  t.samples++;
  t.weight_ns += sample.primary_weight();
}

StackFrame StackSummarizer::ResolveFrame(const Sequence& seq, uint64_t frame_id) {
  const auto frame = seq.frames.find(frame_id);
  if (frame == seq.frames.end()) {
    summary_.frame_ids_unresolved++;
    return StackFrame{"[frame not in the file]", false};
  }
  const Frame& f = frame->second;
  if (f.name_id != 0) {
    const auto name = seq.function_names.find(f.name_id);
    if (name == seq.function_names.end()) {
      summary_.name_ids_unresolved++;
    } else if (!name->second.empty()) {
      return StackFrame{name->second, f.kernel};
    }
  }
  // Unnamed: where it was, as perf shows a frame it cannot name.
  std::string_view file = "?";
  if (const auto mapping = seq.mappings.find(f.mapping_id); mapping != seq.mappings.end()) {
    const auto path = seq.mapping_paths.find(mapping->second);
    if (path != seq.mapping_paths.end() && !BaseName(path->second).empty()) {
      file = BaseName(path->second);
    }
  }
  return StackFrame{absl::StrFormat("%s+0x%x", file, f.rel_pc), f.kernel};
}

void StackSummarizer::Resolve(Sequence& seq) {
  for (const auto& [key, weight] : seq.pending) {
    const auto [counter_iid, callstack_iid] = key;
    const auto counter = seq.counters.find(counter_iid);
    if (counter == seq.counters.end() || counter->second == Counter::kOther) {
      summary_.other_samples += weight.samples;
      continue;
    }
    const bool blocked = counter->second == Counter::kBlocked;
    StackSummary::Kind& kind = blocked ? summary_.blocked : summary_.cpu;
    kind.samples += weight.samples;
    kind.weight_ns += weight.weight_ns;
    const auto callstack = seq.callstacks.find(callstack_iid);
    if (callstack == seq.callstacks.end()) {
      summary_.samples_without_callstack += weight.samples;
      continue;
    }
    // A Callstack lists the outermost frame first.
    std::vector<StackFrame> frames;
    frames.reserve(callstack->second.size());
    for (auto it = callstack->second.rbegin(); it != callstack->second.rend(); ++it) {
      frames.push_back(ResolveFrame(seq, *it));
    }
    stacks_[blocked ? 0 : 1][std::move(frames)].Add(weight);
  }
  seq.pending.clear();
}

void StackSummarizer::AddLosses(const trace::TraceStats& stats) {
  // Each trace_stats holds the session's figures so far: the last one's.
  summary_.losses.clear();
  for (const trace::TraceStats::StagingLoss& l : stats.ringside_staging_loss()) {
    if (absl::StartsWith(l.kind(), "stack_") && l.events_lost() > 0) {
      summary_.losses[l.kind()] += l.events_lost();
    }
  }
  summary_.blocked_period_ns = summary_.blocked_unsampled = summary_.blocked_unsampled_ns = 0;
  summary_.user_frames_unmapped = summary_.maps_reads = summary_.maps_unreadable =
      summary_.binaries_unreadable = 0;
  summary_.blocked_at_switch = false;
  for (const trace::TraceStats::StackStats& s : stats.ringside_stack_stats()) {
    summary_.blocked_period_ns = std::max(summary_.blocked_period_ns, s.blocked_period_ns());
    summary_.blocked_at_switch |= s.blocked_at_switch();
    summary_.blocked_unsampled += s.blocked_unsampled();
    summary_.blocked_unsampled_ns += s.blocked_unsampled_ns();
    summary_.user_frames_unmapped += s.user_frames_unmapped();
    summary_.maps_reads += s.maps_reads();
    summary_.maps_unreadable += s.maps_unreadable();
    summary_.binaries_unreadable += s.binaries_unreadable();
  }
}

StackSummary StackSummarizer::Finish(size_t top_n) {
  for (auto& [id, seq] : sequences_) Resolve(seq);
  for (int k = 0; k < 2; k++) {
    StackSummary::Kind& kind = k == 0 ? summary_.blocked : summary_.cpu;
    using Entry = std::map<std::vector<StackFrame>, Weight>::const_iterator;
    std::vector<Entry> entries;
    for (Entry it = stacks_[k].begin(); it != stacks_[k].end(); ++it) entries.push_back(it);
    // Heaviest first; ties by more samples, then by the frames (the map's
    // order), so that the output does not depend on the file's order.
    auto heavier = [](Entry a, Entry b) {
      if (a->second.weight_ns != b->second.weight_ns) {
        return a->second.weight_ns > b->second.weight_ns;
      }
      if (a->second.samples != b->second.samples) return a->second.samples > b->second.samples;
      return a->first < b->first;
    };
    const size_t n = std::min(top_n, entries.size());
    std::partial_sort(entries.begin(), entries.begin() + static_cast<ptrdiff_t>(n), entries.end(),
                      heavier);
    kind.distinct_stacks = entries.size();
    kind.top.clear();
    for (size_t i = 0; i < n; i++) {
      const Weight& w = entries[i]->second;
      StackSummary::Stack stack{entries[i]->first, w.samples, w.weight_ns, {}, w.threads.size(), 0};
      std::set<int32_t> processes;
      for (const auto& [tid, t] : w.threads) {
        stack.threads.push_back(t);
        processes.insert(t.tgid);
      }
      stack.process_count = processes.size();
      std::sort(stack.threads.begin(), stack.threads.end(), [](const auto& a, const auto& b) {
        return a.weight_ns != b.weight_ns ? a.weight_ns > b.weight_ns : a.tid < b.tid;
      });
      if (stack.threads.size() > StackSummary::kMaxThreadsKept) {
        stack.threads.resize(StackSummary::kMaxThreadsKept);
      }
      kind.top.push_back(std::move(stack));
    }
  }
  return summary_;
}

}  // namespace ringside::agent
