#include "agent/tracefile/stack_summary.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "agent/tracefile/trace_inspector.h"
#include "gtest/gtest.h"
#include "ringside/trace/interned_data.pb.h"
#include "ringside/trace/stack_sample.pb.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

using trace::InternedData;
using trace::TracePacket;

constexpr uint64_t kBlocked = 1;  // Counter iids, as ringside's writer has them.
constexpr uint64_t kCpu = 2;
constexpr uint32_t kSeq = 3;
constexpr uint64_t kMs = 1'000'000;

// Builds a sequence's interned data the way the stack writer interns it:
// each function is its own frame of one mapping, named after it.
class Interned {
 public:
  explicit Interned(uint32_t seq, bool clears = true) {
    packet_.set_trusted_packet_sequence_id(seq);
    if (clears) packet_.set_sequence_flags(TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
    AddCounter(kBlocked, "blocked_time");
    AddCounter(kCpu, "cpu_time");
  }
  void AddCounter(uint64_t iid, const std::string& name) {
    auto* c = data()->add_stack_sample_counter_descriptors();
    c->set_iid(iid);
    c->set_name(name);
  }
  // A frame named `name` (none when empty) at `rel_pc` of mapping `path`.
  Interned& Frame(uint64_t iid, const std::string& name, bool kernel = false,
                  const std::string& path = "/usr/bin/prog", uint64_t rel_pc = 0x10) {
    auto* m = data()->add_mappings();
    m->set_iid(iid + 1000);
    m->add_path_string_ids(iid + 2000);
    auto* p = data()->add_mapping_paths();
    p->set_iid(iid + 2000);
    p->set_str(path);
    auto* f = data()->add_frames();
    f->set_iid(iid);
    f->set_mapping_id(iid + 1000);
    f->set_rel_pc(rel_pc);
    f->set_kind(kernel ? trace::Frame::KIND_KERNEL : trace::Frame::KIND_NATIVE);
    if (!name.empty()) {
      auto* n = data()->add_function_names();
      n->set_iid(iid + 3000);
      n->set_str(name);
      f->set_function_name_id(iid + 3000);
    }
    return *this;
  }
  // Frames outermost first, as a Callstack lists them.
  Interned& Callstack(uint64_t iid, const std::vector<uint64_t>& frames) {
    auto* c = data()->add_callstacks();
    c->set_iid(iid);
    for (uint64_t f : frames) c->add_frame_ids(f);
    return *this;
  }
  InternedData* data() { return packet_.mutable_interned_data(); }
  const TracePacket& packet() const { return packet_; }

 private:
  TracePacket packet_;
};

TracePacket Sample(uint64_t callstack, uint64_t counter, uint64_t weight_ns, int32_t tid = 11,
                   int32_t tgid = 10, uint32_t seq = kSeq) {
  TracePacket p;
  p.set_trusted_packet_sequence_id(seq);
  p.set_timestamp(1'000'000'000);
  auto* s = p.mutable_stack_sample();
  s->mutable_task_context()->set_pid(static_cast<uint32_t>(tgid));
  s->mutable_task_context()->set_tid(static_cast<uint32_t>(tid));
  s->set_callstack_iid(callstack);
  s->set_primary_descriptor_iid(counter);
  s->set_primary_weight(weight_ns);
  return p;
}

// The workload of tests/tools/stack_workload.c, in small: a reader that
// waits on a pipe, a napper, a spinner.
Interned Workload() {
  Interned in(kSeq);
  in.Frame(1, "main")
      .Frame(2, "wait_for_pipe_data")
      .Frame(3, "nap_between_polls")
      .Frame(4, "burn_cpu_in_hot_loop")
      .Frame(5, "pipe_read", true)
      .Frame(6, "do_nanosleep", true)
      .Frame(7, "schedule", true)
      .Callstack(100, {1, 2, 5, 7})
      .Callstack(101, {1, 3, 6, 7})
      .Callstack(102, {1, 4});
  return in;
}

std::vector<std::string> Names(const StackSummary::Stack& s) {
  std::vector<std::string> out;
  for (const StackFrame& f : s.frames) out.push_back(f.name);
  return out;
}

TaskNames NoNames(int32_t, int32_t) { return {}; }

TEST(StackSummaryTest, TopBlockedStacksAreTheHeaviestByTimeWaitedInnermostFrameFirst) {
  StackSummarizer s;
  s.AddPacket(Workload().packet());
  for (int i = 0; i < 3; i++) s.AddPacket(Sample(100, kBlocked, 20 * kMs));
  // More often, but for less time in all: second.
  for (int i = 0; i < 10; i++) s.AddPacket(Sample(101, kBlocked, 1 * kMs, 12));
  const StackSummary summary = s.Finish(5);

  EXPECT_EQ(summary.blocked.samples, 13u);
  EXPECT_EQ(summary.blocked.weight_ns, 70 * kMs);
  EXPECT_EQ(summary.blocked.distinct_stacks, 2u);
  ASSERT_EQ(summary.blocked.top.size(), 2u);
  const StackSummary::Stack& top = summary.blocked.top[0];
  EXPECT_EQ(Names(top),
            (std::vector<std::string>{"schedule", "pipe_read", "wait_for_pipe_data", "main"}));
  EXPECT_TRUE(top.frames[0].kernel);
  EXPECT_FALSE(top.frames[2].kernel);
  EXPECT_EQ(top.samples, 3u);
  EXPECT_EQ(top.weight_ns, 60 * kMs);
  EXPECT_EQ(Names(summary.blocked.top[1])[2], "nap_between_polls");
  EXPECT_EQ(summary.cpu.samples, 0u);
  EXPECT_EQ(summary.frames_interned, 7u);
  EXPECT_EQ(summary.frames_unnamed, 0u);
}

TEST(StackSummaryTest, CpuSamplesAreCountedApartFromBlockedStacks) {
  StackSummarizer s;
  s.AddPacket(Workload().packet());
  for (int i = 0; i < 4; i++) s.AddPacket(Sample(102, kCpu, 20 * kMs, 13));
  s.AddPacket(Sample(100, kCpu, 20 * kMs));
  s.AddPacket(Sample(100, kBlocked, 5 * kMs));
  const StackSummary summary = s.Finish(1);

  EXPECT_EQ(summary.cpu.samples, 5u);
  EXPECT_EQ(summary.cpu.weight_ns, 100 * kMs);
  EXPECT_EQ(summary.cpu.distinct_stacks, 2u);
  ASSERT_EQ(summary.cpu.top.size(), 1u);
  EXPECT_EQ(Names(summary.cpu.top[0]), (std::vector<std::string>{"burn_cpu_in_hot_loop", "main"}));
  EXPECT_EQ(summary.cpu.top[0].threads.at(0).tid, 13);
  EXPECT_EQ(summary.blocked.samples, 1u);
  EXPECT_EQ(summary.blocked.weight_ns, 5 * kMs);
}

TEST(StackSummaryTest, EachSequenceResolvesItsIdsAgainstItsOwnTables) {
  StackSummarizer s;
  Interned one(1);
  one.Frame(1, "on_sequence_one").Callstack(9, {1});
  Interned two(2);
  two.Frame(1, "on_sequence_two").Callstack(9, {1});
  s.AddPacket(one.packet());
  s.AddPacket(two.packet());
  s.AddPacket(Sample(9, kBlocked, 5 * kMs, 11, 10, 1));
  s.AddPacket(Sample(9, kBlocked, 7 * kMs, 11, 10, 2));
  const StackSummary summary = s.Finish(5);

  ASSERT_EQ(summary.blocked.top.size(), 2u);
  EXPECT_EQ(Names(summary.blocked.top[0]), std::vector<std::string>{"on_sequence_two"});
  EXPECT_EQ(Names(summary.blocked.top[1]), std::vector<std::string>{"on_sequence_one"});
}

TEST(StackSummaryTest, ClearingASequencesStateEndsItsEntriesButNotWhatWasSampledBefore) {
  StackSummarizer s;
  s.AddPacket(Workload().packet());
  s.AddPacket(Sample(100, kBlocked, 20 * kMs));
  Interned fresh(kSeq);  // Clears; its callstack 100 is another stack.
  fresh.Frame(50, "after_the_clear").Callstack(100, {50});
  s.AddPacket(fresh.packet());
  s.AddPacket(Sample(100, kBlocked, 10 * kMs));
  s.AddPacket(Sample(101, kBlocked, 1 * kMs));  // Ended with the clear.
  const StackSummary summary = s.Finish(5);

  ASSERT_EQ(summary.blocked.top.size(), 2u);
  EXPECT_EQ(Names(summary.blocked.top[0])[2], "wait_for_pipe_data");
  EXPECT_EQ(Names(summary.blocked.top[1]), std::vector<std::string>{"after_the_clear"});
  EXPECT_EQ(summary.blocked.samples, 3u);
  EXPECT_EQ(summary.samples_without_callstack, 1u);
}

TEST(StackSummaryTest, InternedDataAfterASampleInTheSameStretchStillNamesIt) {
  StackSummarizer s;
  s.AddPacket(Interned(kSeq).packet());  // The counters only.
  s.AddPacket(Sample(100, kBlocked, 20 * kMs));
  Interned later(kSeq, /*clears=*/false);
  later.Frame(2, "wait_for_pipe_data").Callstack(100, {2});
  s.AddPacket(later.packet());
  const StackSummary summary = s.Finish(5);
  ASSERT_EQ(summary.blocked.top.size(), 1u);
  EXPECT_EQ(Names(summary.blocked.top[0]), std::vector<std::string>{"wait_for_pipe_data"});
}

TEST(StackSummaryTest, AnUnnamedFrameShowsItsFileAndOffset) {
  StackSummarizer s;
  Interned in(kSeq);
  in.Frame(1, "", false, "/usr/lib/x86_64-linux-gnu/libc.so.6", 0x29d90).Callstack(5, {1});
  s.AddPacket(in.packet());
  s.AddPacket(Sample(5, kCpu, kMs));
  const StackSummary summary = s.Finish(5);
  EXPECT_EQ(summary.frames_unnamed, 1u);
  ASSERT_EQ(summary.cpu.top.size(), 1u);
  EXPECT_EQ(Names(summary.cpu.top[0]), std::vector<std::string>{"libc.so.6+0x29d90"});
}

TEST(StackSummaryTest, IdsTheFileDoesNotHoldAreCountedNotTrusted) {
  StackSummarizer s;
  Interned in(kSeq);
  in.Frame(1, "main").Callstack(5, {1, 77});  // Frame 77: none.
  auto* f = in.data()->add_frames();          // A name that is not there.
  f->set_iid(2);
  f->set_function_name_id(999);
  in.Callstack(6, {2});
  s.AddPacket(in.packet());
  s.AddPacket(Sample(5, kBlocked, kMs));
  s.AddPacket(Sample(6, kBlocked, kMs));
  s.AddPacket(Sample(404, kBlocked, kMs));                   // No such callstack.
  s.AddPacket(Sample(5, 42, kMs));                           // No such counter.
  s.AddPacket(Sample(5, kBlocked, kMs, 11, 10, /*seq=*/9));  // Nothing interned there.
  const StackSummary summary = s.Finish(5);

  EXPECT_EQ(summary.frame_ids_unresolved, 1u);
  EXPECT_EQ(summary.name_ids_unresolved, 1u);
  EXPECT_EQ(summary.samples_without_callstack, 1u);
  EXPECT_EQ(summary.other_samples, 2u);
  EXPECT_EQ(summary.blocked.samples, 3u);
  ASSERT_EQ(summary.blocked.top.size(), 2u);
}

TEST(StackSummaryTest, RandomIdsNeverCrashAndEverySampleIsCountedOnce) {
  for (uint32_t seed = 1; seed <= 200; seed++) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    std::mt19937 rng(seed);
    auto small = [&rng] { return std::uniform_int_distribution<uint64_t>(0, 8)(rng); };
    StackSummarizer s;
    uint64_t samples = 0;
    for (int i = 0; i < 60; i++) {
      const uint32_t seq = static_cast<uint32_t>(small() % 3);
      if (rng() % 3 == 0) {
        Interned in(seq, rng() % 4 == 0);
        in.Frame(small(), rng() % 2 ? "f" : "", rng() % 2, rng() % 2 ? "/a/b" : "/");
        std::vector<uint64_t> frames;
        for (uint64_t n = small(); n > 0; n--) frames.push_back(small());
        in.Callstack(small(), frames);
        in.AddCounter(small(), rng() % 2 ? "cpu_time" : "other");
        s.AddPacket(in.packet());
      } else {
        s.AddPacket(Sample(small(), small() % 4, rng(), static_cast<int32_t>(rng()),
                           static_cast<int32_t>(rng()), seq));
        samples++;
      }
    }
    const StackSummary summary = s.Finish(3);
    EXPECT_EQ(summary.blocked.samples + summary.cpu.samples + summary.other_samples, samples);
    EXPECT_LE(summary.blocked.top.size(), 3u);
    StacksToText(summary, NoNames);
    StacksToJson(summary, NoNames).dump();
  }
}

TEST(StackSummaryTest, OnlyTheStacksLossesOfTheLastStatsAreKept) {
  StackSummarizer s;
  TracePacket stats;
  auto add = [&stats](const char* kind, uint32_t cpu, uint64_t lost) {
    auto* l = stats.mutable_trace_stats()->add_ringside_staging_loss();
    l->set_data_source("linux.bpf");
    l->set_kind(kind);
    l->set_cpu(cpu);
    l->set_events_lost(lost);
  };
  add("stack_user_fault", 0, 1);
  s.AddPacket(stats);
  stats.Clear();
  add("stack_user_fault", 0, 2);
  add("stack_user_fault", 1, 3);
  add("stack_truncated", 0, 0);
  add("sched_switch", 0, 7);
  s.AddPacket(stats);
  const StackSummary summary = s.Finish(5);
  EXPECT_EQ(summary.losses, (std::map<std::string, uint64_t>{{"stack_user_fault", 5}}));
  EXPECT_TRUE(absl::StrContains(StacksToText(summary, NoNames), "lost: stack_user_fault 5"));
}

// How blocked stacks were taken, from the last trace_stats: the sampling
// period and the shorter blocks not taken, or every block at the switch.
TEST(StackSummaryTest, SaysHowBlockedStacksWereTaken) {
  StackSummarizer s;
  TracePacket stats;
  auto* st = stats.mutable_trace_stats()->add_ringside_stack_stats();
  st->set_data_source("linux.bpf");
  st->set_blocked_period_ns(1'000'000);
  st->set_blocked_unsampled(1200);
  st->set_blocked_unsampled_ns(36'500'000);
  s.AddPacket(stats);
  StackSummary summary = s.Finish(5);
  EXPECT_EQ(summary.blocked_unsampled, 1200u);
  EXPECT_TRUE(absl::StrContains(StacksToText(summary, NoNames),
                                "blocked stacks: blocks under 1.000 ms sampled (each taken one "
                                "weighs the period); 1200 shorter blocks (36.500 ms) not taken"))
      << StacksToText(summary, NoNames);
  EXPECT_EQ(StacksToJson(summary, NoNames)["blocked_taken"]["unsampled_ns"], 36'500'000u);

  StackSummarizer at_switch;
  stats.Clear();
  st = stats.mutable_trace_stats()->add_ringside_stack_stats();
  st->set_blocked_at_switch(true);
  at_switch.AddPacket(stats);
  summary = at_switch.Finish(5);
  EXPECT_TRUE(absl::StrContains(StacksToText(summary, NoNames),
                                "blocked stacks: every block, taken as threads left the CPU"));
}

// Why user frames are unnamed, from the last trace_stats, summed over its
// sources.
TEST(StackSummaryTest, SaysWhatNamingUserFramesMet) {
  StackSummarizer s;
  TracePacket stats;
  for (int i = 0; i < 2; i++) {
    auto* st = stats.mutable_trace_stats()->add_ringside_stack_stats();
    st->set_user_frames_unmapped(40);
    st->set_maps_reads(7);
    st->set_maps_unreadable(2);
    st->set_binaries_unreadable(1);
  }
  s.AddPacket(stats);
  const StackSummary summary = s.Finish(5);
  EXPECT_TRUE(absl::StrContains(StacksToText(summary, NoNames),
                                "naming user frames: 80 in no mapping (most, a frame-pointer "
                                "chain broken past its first frames); 14 maps read, 4 unreadable "
                                "(the process gone); 2 binaries unreadable"))
      << StacksToText(summary, NoNames);
  EXPECT_EQ(StacksToJson(summary, NoNames)["user_naming"]["maps_unreadable"], 4u);
}

TEST(StackSummaryTest, TextNamesTheThreadThatWeighsMostAndCutsLongRuns) {
  StackSummarizer s;
  Interned in = Workload();
  std::vector<uint64_t> frames = {1, 2};
  for (uint64_t k = 0; k < 10; k++) {
    in.Frame(20 + k, "kernel_fn_" + std::to_string(k), true);
    frames.push_back(20 + k);
  }
  in.Callstack(200, frames);
  s.AddPacket(in.packet());
  for (int i = 0; i < 9; i++) s.AddPacket(Sample(200, kBlocked, 10 * kMs, 11, 10));
  s.AddPacket(Sample(200, kBlocked, 10 * kMs, 12, 10));
  const StackSummary summary = s.Finish(5);
  const std::string text = StacksToText(summary, [](int32_t tid, int32_t tgid) {
    return TaskNames{tid == 11 ? "pipe-reader" : "", tgid == 10 ? "stack_workload" : ""};
  });
  EXPECT_TRUE(absl::StrContains(text, "10 blocked-stack samples (0.100 s off CPU)")) << text;
  EXPECT_TRUE(absl::StrContains(
      text, "mostly pipe-reader (tid 11) of stack_workload (pid 10) (90%; 2 threads)"))
      << text;
  // The innermost kernel frames, then the count of the rest, then the user
  // frames all the same.
  EXPECT_TRUE(absl::StrContains(text, "[k] kernel_fn_9\n")) << text;
  EXPECT_FALSE(absl::StrContains(text, "kernel_fn_3")) << text;
  EXPECT_TRUE(absl::StrContains(text, "[k] ... 4 more kernel frames\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "[.] wait_for_pipe_data\n")) << text;
}

TEST(StackSummaryTest, NamesFromTheFileAreEscapedInTextAndWholeInJson) {
  StackSummarizer s;
  Interned in(kSeq);
  in.Frame(1, "evil\x1b]0;owned\x07").Callstack(5, {1});
  s.AddPacket(in.packet());
  s.AddPacket(Sample(5, kCpu, kMs));
  const StackSummary summary = s.Finish(5);
  const std::string text = StacksToText(summary, [](int32_t, int32_t) {
    return TaskNames{"t\x1b[2J", "p"};
  });
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_TRUE(absl::StrContains(text, "evil\\x1b]0;owned\\x07")) << text;
  EXPECT_TRUE(absl::StrContains(text, "t\\x1b[2J (tid 11)")) << text;
  const nlohmann::json j = StacksToJson(summary, NoNames);
  EXPECT_EQ(j["cpu"]["top"][0]["frames"][0]["name"], "evil\x1b]0;owned\x07");
}

TEST(StackSummaryTest, InspectSummaryCarriesTheStacksInTextAndJson) {
  TraceSummarizer summarizer;
  TracePacket tree;
  auto* thread = tree.mutable_process_tree()->add_threads();
  thread->set_tid(11);
  thread->set_tgid(10);
  thread->set_name("pipe-reader");
  ASSERT_TRUE(summarizer.AddPacket(tree.SerializeAsString(), 0));
  ASSERT_TRUE(summarizer.AddPacket(Workload().packet().SerializeAsString(), 0));
  ASSERT_TRUE(summarizer.AddPacket(Sample(100, kBlocked, 20 * kMs).SerializeAsString(), 0));
  summarizer.Finish();
  const TraceSummary& summary = summarizer.summary();
  EXPECT_TRUE(absl::StrContains(SummaryToText("t", summary), "pipe-reader (tid 11) of pid 10"));
  const nlohmann::json j = SummaryToJson("t", summary);
  EXPECT_EQ(j["stacks"]["blocked"]["weight_ns"], 20 * kMs);
  EXPECT_EQ(j["stacks"]["blocked"]["top"][0]["frames"][2]["name"], "wait_for_pipe_data");
  EXPECT_EQ(j["stacks"]["blocked"]["top"][0]["threads"][0]["thread_name"], "pipe-reader");
}

}  // namespace
}  // namespace ringside::agent
