#include "agent/sources/stack_sample_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/descriptors/descriptor_tracker.h"
#include "agent/session/buffer_reader.h"
#include "agent/writer/producer_buffer.h"
#include "bpf/process_events.h"
#include "bpf/stack_events.h"
#include "buffer/durable_store.h"
#include "buffer/trace_buffer.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "tests/agent/testing/trace_processor_query.h"

namespace ringside::agent {
namespace {

constexpr buffer::WriterID kWriter = 0x7fff;
// A stack id that is no stack (the record says it was not asked for).
constexpr int32_t kNoStack = -1;

// Functions of 8 bytes at the addresses of two tables, kernel and user (an
// address in none is unnamed); user ones are all in one mapping of
// "/usr/bin/prog".
class FakeNamer : public FrameNamer {
 public:
  std::map<uint64_t, std::string> kernel;
  std::map<uint64_t, std::string> user;
  uint64_t user_offset = 0;  // The user mapping's offset in its file.
  // Whether "/usr/bin/prog" was read: its unnamed frames are then final
  // (a stripped binary's), else they may be named later.
  bool file_read = false;
  // Addresses (as User() is asked them) whose file could not be read,
  // whatever file_read says.
  std::set<uint64_t> unread;
  Frame Kernel(uint64_t ip) override {
    kernel_calls++;
    Frame f;
    f.mapping = "[kernel.kallsyms]";
    f.rel_pc = ip;
    f.function = Find(kernel, ip);
    return f;
  }
  Frame User(int32_t tgid, uint64_t ip, bool innermost) override {
    calls.push_back(absl::StrCat("user ", tgid, " ", absl::Hex(ip), innermost ? " innermost" : ""));
    Frame f;
    f.mapping = "/usr/bin/prog";
    f.build_id = std::string("\xab\xcd\xef\x01\x23", 5);
    f.start = 0x400000;
    f.end = 0x500000;
    f.offset = user_offset;
    f.rel_pc = ip - f.start + user_offset;
    f.function = Find(user, ip);
    f.final_name = file_read && !unread.contains(ip);
    return f;
  }
  void ProcessForked(int32_t parent_tgid, int32_t child_tgid) override {
    calls.push_back(absl::StrCat("fork ", parent_tgid, " ", child_tgid));
  }
  void ProcessExeced(int32_t tgid) override { calls.push_back(absl::StrCat("exec ", tgid)); }
  void ProcessExited(int32_t tgid) override { calls.push_back(absl::StrCat("exit ", tgid)); }
  uint64_t UserSpace(int32_t tgid) const override {
    auto it = spaces.find(tgid);
    return it == spaces.end() ? 0 : it->second;
  }
  // How many User() calls were for `tgid`.
  size_t UserCallsOf(int32_t tgid) const {
    const std::string prefix = absl::StrCat("user ", tgid, " ");
    return static_cast<size_t>(std::count_if(calls.begin(), calls.end(), [&](const std::string& c) {
      return absl::StartsWith(c, prefix);
    }));
  }

  std::map<int32_t, uint64_t> spaces;  // UserSpace() by tgid; none: 0.
  std::vector<std::string> calls;      // What User and the process calls were told, in order.
  int kernel_calls = 0;

 private:
  static std::string Find(const std::map<uint64_t, std::string>& table, uint64_t ip) {
    auto it = table.upper_bound(ip);
    if (it == table.begin()) return "";
    --it;
    return ip - it->first < 8 ? it->second : "";
  }
};

// A session's path in small: the writer's chunks go into a ring, its
// interned data through the tracker into the ring's durable store, and a
// BufferPacketReader frames what a file would hold.
class StackSampleWriterTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeRing(1 << 20); }

  void MakeRing(size_t size) {
    ring_ = buffer::TraceBuffer::Create(size);
    ring_->SetDurableStore(std::make_unique<buffer::DurableStore>(1 << 20, ring_->size()));
  }

  void MakeWriter(size_t budget = 1 << 20, uint32_t cpu_hz = 0) {
    trace_writer_ = producer_.CreateTraceWriter(kWriter);
    StackSampleWriter::Config c;
    c.producer = producer_.producer_id();
    c.writer = kWriter;
    c.interned_budget_bytes = budget;
    c.cpu_hz = cpu_hz;
    writer_ = std::make_unique<StackSampleWriter>(c, trace_writer_.get(), &tracker_, &namer_);
  }

  // A record's bytes, 8-byte aligned as the rings hold them: its fixed
  // part, then the frames of stacks_[kernel] and stacks_[user] (none for
  // kNoStack, or an id stacks_ does not have).
  using Words = std::vector<uint64_t>;
  static rs_stack_blocked& Blocked(Words& w) {
    return *reinterpret_cast<rs_stack_blocked*>(w.data());
  }
  // A blocked sample of each process from `first` to `last` (each its own
  // only thread), on kernel stack 7 and user stack `user`, at `ts` + tgid.
  std::vector<Words> BlockedInEach(int32_t first, int32_t last, int32_t user, uint64_t ts) {
    std::vector<Words> records;
    for (int32_t tgid = first; tgid <= last; tgid++) {
      records.push_back(Record(ts + static_cast<uint64_t>(tgid), tgid, 7, user, 1000));
      Blocked(records.back()).tgid = tgid;
    }
    return records;
  }
  Words Record(uint64_t ts, int32_t tid, int32_t kernel, int32_t user, uint64_t off_ns) {
    const std::vector<uint64_t> k = FramesOf(kernel), u = FramesOf(user);
    Words w(sizeof(rs_stack_blocked) / 8 + k.size() + u.size(), 0);
    rs_stack_blocked& r = Blocked(w);
    r.h.type = RS_EV_STACK_BLOCKED;
    r.h.size = static_cast<uint16_t>(w.size() * 8);
    r.h.cpu = 1;
    r.h.ts_ns = ts;
    r.pid = tid;
    r.tgid = 100;
    r.kernel_frames = static_cast<uint16_t>(k.size());
    r.user_frames = static_cast<uint16_t>(u.size());
    r.kernel_status = kernel == kNoStack ? RS_STACK_NOT_ASKED : RS_STACK_TAKEN;
    r.user_status = user == kNoStack ? RS_STACK_NOT_ASKED : RS_STACK_TAKEN;
    r.off_cpu_ns = off_ns;
    r.weight_ns = off_ns;
    r.state = 1;
    std::copy(k.begin(), k.end(), w.begin() + sizeof(rs_stack_blocked) / 8);
    std::copy(u.begin(), u.end(), w.begin() + sizeof(rs_stack_blocked) / 8 + k.size());
    return w;
  }
  std::vector<uint64_t> FramesOf(int32_t id) const {
    auto it = stacks_.find(id);
    return it == stacks_.end() ? std::vector<uint64_t>{} : it->second;
  }

  // Writes `records` as the reader thread would one batch, then commits
  // as the buffer owner does: chunks, then the tracker's updates, under
  // what in the session is one lock; then a drain.
  void WriteBatch(const std::vector<Words>& records) {
    std::vector<bpf::Record> batch;
    for (const Words& r : records) batch.push_back({RS_EV_STACK_BLOCKED, r.data()});
    writer_->Write(batch);
    writer_->Flush();
    producer_.CommitQueuedInto(ring_.get());
    tracker_.ApplyTo(ring_->durable());
    ring_->durable()->Drained(ring_->stats().bytes_written);
  }

  // The distinct callstacks (their frame ids) interned in what a file holds.
  std::set<std::vector<uint64_t>> CallstacksInFile() {
    std::string bytes;
    const trace::Trace t = ReadFile(&bytes);
    std::set<std::vector<uint64_t>> callstacks;
    for (const trace::TracePacket& p : t.packet()) {
      for (const trace::Callstack& c : p.interned_data().callstacks()) {
        callstacks.insert({c.frame_ids().begin(), c.frame_ids().end()});
      }
    }
    return callstacks;
  }

  // What a file holds: every packet read now, framed.
  trace::Trace ReadFile(std::string* bytes) {
    BufferPacketReader reader;
    reader.ReadInto({ring_.get()}, bytes);
    trace::Trace t;
    EXPECT_TRUE(t.ParseFromString(*bytes));
    return t;
  }

  std::string WriteTemp(const std::string& bytes) {
    const std::string path =
        absl::StrCat(::testing::TempDir(), "/stack_samples_", getpid(), ".pftrace");
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  std::unique_ptr<buffer::TraceBuffer> ring_;
  ProducerBuffer producer_{1, {}, ProducerBuffer::Options{}};
  std::unique_ptr<TraceWriter> trace_writer_;
  DescriptorTracker tracker_;
  FakeNamer namer_;
  std::map<int32_t, std::vector<uint64_t>> stacks_;
  std::unique_ptr<StackSampleWriter> writer_;
};

TEST_F(StackSampleWriterTest, ABlockedStackIsOneSampleOfItsTimeOffTheCpuOnItsFramesRootFirst) {
  namer_.kernel = {{0xff10, "bpf_trace_run2"},
                   {0xff20, "__schedule"},
                   {0xff30, "schedule"},
                   {0xff40, "pipe_read"},
                   {0xff50, "vfs_read"}};
  namer_.user = {{0x401000, "wait_for_pipe_data"}, {0x402000, "main"}};
  // Innermost first, as the map has them: the leaf where it is, then return
  // addresses (one past a call at the function's last byte names it).
  stacks_[7] = {0xff12, 0xff28, 0xff31, 0xff48, 0xff58};
  stacks_[9] = {0x401004, 0x402008, 0x4ff000};  // The last one has no name.
  MakeWriter();
  WriteBatch({Record(5'000, 101, 7, 9, 250'000)});

  std::string bytes;
  const trace::Trace t = ReadFile(&bytes);
  ASSERT_EQ(t.packet_size(), 2);
  // The interned data first, starting the sequence's state; then the sample,
  // which never asks for that state (a loss before it must not drop it).
  const trace::TracePacket& interned = t.packet(0);
  const trace::TracePacket& sample = t.packet(1);
  EXPECT_EQ(interned.sequence_flags(), uint32_t{trace::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED});
  EXPECT_EQ(interned.trusted_packet_sequence_id(), sample.trusted_packet_sequence_id());
  EXPECT_FALSE(sample.has_sequence_flags());
  ASSERT_TRUE(sample.has_stack_sample());
  EXPECT_EQ(sample.timestamp(), 5'000u);
  EXPECT_EQ(sample.stack_sample().task_context().pid(), 100u);
  EXPECT_EQ(sample.stack_sample().task_context().tid(), 101u);
  EXPECT_EQ(sample.stack_sample().primary_weight(), 250'000u);

  std::map<uint64_t, std::string> names;
  for (const trace::InternedString& s : interned.interned_data().function_names()) {
    names[s.iid()] = s.str();
  }
  std::map<uint64_t, std::string> frame_names;
  for (const trace::Frame& f : interned.interned_data().frames()) {
    frame_names[f.iid()] = f.function_name_id() == 0 ? "?" : names[f.function_name_id()];
  }
  ASSERT_EQ(interned.interned_data().callstacks_size(), 1);
  const trace::Callstack& c = interned.interned_data().callstacks(0);
  EXPECT_EQ(c.iid(), sample.stack_sample().callstack_iid());
  std::vector<std::string> got;
  for (uint64_t f : c.frame_ids()) got.push_back(frame_names[f]);
  // The tracing frames above __schedule are cut; the unnamed frame stays.
  EXPECT_EQ(got, (std::vector<std::string>{"?", "main", "wait_for_pipe_data", "vfs_read",
                                           "pipe_read", "schedule", "__schedule"}));
  EXPECT_EQ(writer_->stats().frames_unnamed, 1u);
  EXPECT_EQ(writer_->stats().samples, 1u);
  EXPECT_EQ(writer_->stats().blocked_samples, 1u);
  EXPECT_EQ(writer_->stats().cpu_samples, 0u);

  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  const std::string path = WriteTemp(bytes);
  EXPECT_EQ(testing::QueryInt(tp, path,
                              "select count(*) from stats where severity in ('error', "
                              "'data_loss') and value > 0"),
            0);
  EXPECT_EQ(testing::QueryInt(tp, path, "select count(*) from stack_sample"), 1);
  EXPECT_EQ(testing::QueryInt(tp, path, "select cast(sum(value) as int) from stack_sample_counter"),
            250'000);
  // The leaf callsite is __schedule, its root the unnamed frame.
  EXPECT_EQ(testing::Query(tp, path,
                           "select f.name from stack_sample s join stack_profile_callsite c on "
                           "c.id = s.callsite_id join stack_profile_frame f on f.id = c.frame_id"),
            (std::vector<std::vector<std::string>>{{"__schedule"}}));
  std::remove(path.c_str());
}

// A user mapping as Perfetto's Mapping has it: exact_offset the file
// offset of its start, start_offset 0 (the ELF file starts at its file's
// first byte). Perfetto's offline symbolizer checks load_bias against
// exact_offset - start_offset; with the mapping's offset in both, it
// shifted every rel_pc of a GNU ld PIE by 0x1000 and named it wrongly.
TEST_F(StackSampleWriterTest, AUserMappingGivesItsFileOffsetAsExactOffsetAndStartOffsetZero) {
  namer_.user_offset = 0x1000;
  stacks_[9] = {0x401004};
  MakeWriter();
  WriteBatch({Record(5'000, 101, kNoStack, 9, 1'000)});

  std::string bytes;
  const trace::Trace t = ReadFile(&bytes);
  ASSERT_GE(t.packet_size(), 1);
  ASSERT_EQ(t.packet(0).interned_data().mappings_size(), 1);
  const trace::Mapping& m = t.packet(0).interned_data().mappings(0);
  EXPECT_EQ(m.start(), 0x400000u);
  EXPECT_EQ(m.exact_offset(), 0x1000u);
  EXPECT_EQ(m.start_offset(), 0u);
  ASSERT_EQ(t.packet(0).interned_data().frames_size(), 1);
  EXPECT_EQ(t.packet(0).interned_data().frames(0).rel_pc(), 0x2004u);
}

// Processes whose frames the namer names each on its own (no shared
// space) share what they name alike: one mapping for the same fields, one
// frame for the same mapping, rel_pc and function. A mapping that differs
// in one field (here its offset in the file) is another, and its frames
// are others too.
TEST_F(StackSampleWriterTest, MappingsAndFramesAreInternedOnceByTheirFields) {
  namer_.kernel = {{0xff40, "pipe_read"}};
  namer_.user = {{0x401000, "worker"}, {0x402000, "main"}};
  stacks_[7] = {0xff48};
  stacks_[9] = {0x401004, 0x402005};
  MakeWriter();
  WriteBatch(BlockedInEach(1000, 1002, 9, 5'000));
  namer_.user_offset = 0x1000;
  WriteBatch(BlockedInEach(1003, 1003, 9, 6'000));

  std::string bytes;
  const trace::Trace t = ReadFile(&bytes);
  std::map<uint64_t, uint64_t> mapping_offsets;              // By iid.
  std::map<std::pair<uint64_t, uint64_t>, int> user_frames;  // {mapping, rel_pc}: count.
  int kernel_frames = 0, callstacks = 0;
  for (const trace::TracePacket& p : t.packet()) {
    callstacks += p.interned_data().callstacks_size();
    for (const trace::Mapping& m : p.interned_data().mappings()) {
      mapping_offsets[m.iid()] = m.exact_offset();
    }
    for (const trace::Frame& f : p.interned_data().frames()) {
      if (f.kind() == trace::Frame::KIND_KERNEL) {
        kernel_frames++;
      } else {
        user_frames[{f.mapping_id(), f.rel_pc()}]++;
      }
    }
  }
  EXPECT_EQ(namer_.UserCallsOf(1002), 2u) << "each process named its frames";
  ASSERT_EQ(mapping_offsets.size(), 3u);  // The kernel's, and the file's at two offsets.
  EXPECT_EQ(kernel_frames, 1);
  ASSERT_EQ(user_frames.size(), 4u);  // Two frames at each offset.
  for (const auto& [frame, count] : user_frames) {
    EXPECT_EQ(count, 1) << "frame at rel_pc 0x" << std::hex << frame.second << " interned twice";
  }
  EXPECT_EQ(callstacks, 2);
}

// A CPU sample in user mode: its user stack alone, in user mode, weighing
// one sampling period of the counter cpu_time.
TEST_F(StackSampleWriterTest, ACpuSampleWeighsOnePeriodOfCpuTime) {
  namer_.user = {{0x401000, "burn_cpu_in_hot_loop"}, {0x402000, "main"}};
  stacks_[3] = {0x401004, 0x402008};
  MakeWriter(1 << 20, /*cpu_hz=*/50);
  Words w(sizeof(rs_stack_cpu_sample) / 8 + 2, 0);
  rs_stack_cpu_sample& c = *reinterpret_cast<rs_stack_cpu_sample*>(w.data());
  c.h.type = RS_EV_STACK_CPU_SAMPLE;
  c.h.size = static_cast<uint16_t>(w.size() * 8);
  c.h.cpu = 0;
  c.h.ts_ns = 7'000;
  c.pid = 101;
  c.tgid = 100;
  c.kernel_status = RS_STACK_NOT_ASKED;
  c.user_status = RS_STACK_TAKEN;
  c.user_frames = 2;
  w[sizeof(rs_stack_cpu_sample) / 8] = stacks_[3][0];
  w[sizeof(rs_stack_cpu_sample) / 8 + 1] = stacks_[3][1];
  const bpf::Record record{RS_EV_STACK_CPU_SAMPLE, w.data()};
  writer_->Write({&record, 1});
  writer_->Flush();
  producer_.CommitQueuedInto(ring_.get());
  tracker_.ApplyTo(ring_->durable());
  std::string bytes;
  const trace::Trace t = ReadFile(&bytes);
  ASSERT_EQ(t.packet_size(), 2);
  const trace::StackSample& sample = t.packet(1).stack_sample();
  EXPECT_EQ(sample.primary_weight(), 20'000'000u);  // 1 s / 50.
  EXPECT_EQ(sample.primary_descriptor_iid(), StackSampleWriter::kCpuTimeCounterIid);
  EXPECT_EQ(sample.execution_context().mode(), trace::StackSample::MODE_USER);
  bool cpu_time = false;
  for (const auto& d : t.packet(0).interned_data().stack_sample_counter_descriptors()) {
    cpu_time |= d.iid() == StackSampleWriter::kCpuTimeCounterIid && d.name() == "cpu_time";
  }
  EXPECT_TRUE(cpu_time);
  EXPECT_EQ(writer_->stats().cpu_samples, 1u);
  EXPECT_EQ(writer_->stats().blocked_samples, 0u);

  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  const std::string path = WriteTemp(bytes);
  EXPECT_EQ(testing::Query(tp, path,
                           "select k.name, cast(v.value as int) from stack_sample_counter v "
                           "join stack_sample_counter_track k on k.id = v.track_id"),
            (std::vector<std::vector<std::string>>{{"cpu_time", "20000000"}}));
  std::remove(path.c_str());
}

// The namer hears of forks and execs in the order of the stacks around
// them, so that a child's frames are named from its parent's maps until it
// execs; a thread's creation is no new process. Only a stack's innermost
// user frame is the address a thread ran.
TEST_F(StackSampleWriterTest, TheNamerHearsOfForksAndExecsBetweenTheStacksAroundThem) {
  stacks_[1] = {0x401004, 0x402008};
  MakeWriter();
  rs_process_fork fork = {};
  fork.h.type = RS_EV_PROCESS_FORK;
  fork.parent_pid = fork.parent_tgid = 100;
  fork.child_pid = fork.child_tgid = 200;
  rs_process_fork thread = fork;
  thread.parent_pid = thread.parent_tgid = 200;
  thread.child_pid = 201;
  thread.child_tgid = 200;
  rs_process_exec exec = {};
  exec.h.type = RS_EV_PROCESS_EXEC;
  exec.pid = exec.tgid = 200;
  Words before = Record(1'000, 200, kNoStack, 1, 10), after = Record(2'000, 200, kNoStack, 1, 10);
  Blocked(before).tgid = Blocked(after).tgid = 200;
  Blocked(after).h.ts_ns = 3'000;
  after[sizeof(rs_stack_blocked) / 8] = 0x401100;  // another stack: not one remembered
  const std::vector<bpf::Record> batch = {{RS_EV_PROCESS_FORK, &fork},
                                          {RS_EV_PROCESS_FORK, &thread},
                                          {RS_EV_STACK_BLOCKED, before.data()},
                                          {RS_EV_PROCESS_EXEC, &exec},
                                          {RS_EV_STACK_BLOCKED, after.data()}};
  writer_->Write(batch);
  EXPECT_EQ(namer_.calls, (std::vector<std::string>{
                              "fork 100 200", "user 200 401004 innermost", "user 200 402007",
                              "exec 200", "user 200 401100 innermost", "user 200 402007"}));
}

// A stack is read after everything its CPU recorded until the read: when
// its process's exit is among that, the namer hears of the exit before it
// names the frames (the process's maps are gone, or a new process's under
// its id). Only the last thread's exit ends the process; another process's
// exit says nothing of this one's.
TEST_F(StackSampleWriterTest, TheNamerHearsOfAnExitBeforeTheStacksItFollows) {
  stacks_[1] = {0x401004};
  MakeWriter();
  rs_process_exit thread_exit = {};
  thread_exit.h.type = RS_EV_PROCESS_EXIT;
  thread_exit.pid = 301;
  thread_exit.tgid = 300;
  rs_process_exit other_exit = thread_exit;
  other_exit.pid = other_exit.tgid = 400;
  other_exit.group_dead = 1;
  rs_process_exit exit = thread_exit;
  exit.pid = 300;
  exit.group_dead = 1;
  Words first = Record(1'000, 300, kNoStack, 1, 0), second = Record(2'000, 300, kNoStack, 1, 0);
  Words after = Record(3'000, 300, kNoStack, 1, 0), later = Record(4'000, 300, kNoStack, 1, 0);
  Blocked(first).tgid = Blocked(second).tgid = Blocked(after).tgid = Blocked(later).tgid = 300;
  Blocked(first).pid = 301;
  // Other stacks each: a remembered one names no frame.
  second[sizeof(rs_stack_blocked) / 8] = 0x401100;
  after[sizeof(rs_stack_blocked) / 8] = 0x401180;
  later[sizeof(rs_stack_blocked) / 8] = 0x401200;
  const std::vector<bpf::Record> batch = {
      {RS_EV_STACK_BLOCKED, first.data()}, {RS_EV_PROCESS_EXIT, &thread_exit},
      {RS_EV_PROCESS_EXIT, &other_exit},   {RS_EV_STACK_BLOCKED, second.data()},
      {RS_EV_PROCESS_EXIT, &exit},         {RS_EV_STACK_BLOCKED, after.data()}};
  writer_->Write(batch);
  // (A stack after the exit in the batch, as a record read out of order
  // would be, is told nothing more.)
  EXPECT_EQ(namer_.calls,
            (std::vector<std::string>{"exit 300", "user 300 401004 innermost", "exit 400",
                                      "exit 300", "user 300 401100 innermost", "exit 300",
                                      "user 300 401180 innermost"}));
  // The next batch's stacks of it (another CPU's, read later) were told of
  // the exit already; a batch without exits tells nothing.
  namer_.calls.clear();
  writer_->Write(std::vector<bpf::Record>{{RS_EV_STACK_BLOCKED, later.data()}});
  EXPECT_EQ(namer_.calls, (std::vector<std::string>{"user 300 401200 innermost"}));
}

// A kernel address means the same in every process: the stacks of a
// thousand new processes through the same syscall name its frames once,
// and every sample's callstack holds the same frames.
TEST_F(StackSampleWriterTest, KernelFramesAreNamedOnceForEveryProcessThatHasThem) {
  namer_.kernel = {{0xff10, "bpf_trace_run2"}, {0xff20, "__schedule"}, {0xff40, "pipe_read"}};
  namer_.user = {{0x401000, "wait_for_pipe_data"}};
  stacks_[7] = {0xff12, 0xff28, 0xff48};
  stacks_[9] = {0x401004};
  MakeWriter();
  std::vector<Words> records;
  for (int32_t tgid = 1000; tgid < 1050; tgid++) {
    records.push_back(Record(5'000 + tgid, tgid, 7, 9, 1000));
    Blocked(records.back()).tgid = tgid;
  }
  WriteBatch(records);
  // Three addresses, each named once: to find the switch's frame, and that
  // name interned for the two outside it.
  EXPECT_EQ(namer_.kernel_calls, 3);
  const std::set<std::vector<uint64_t>> callstacks = CallstacksInFile();
  // One user frame (the same name and mapping in each) and two kernel ones.
  ASSERT_EQ(callstacks.size(), 1u);
  EXPECT_EQ(callstacks.begin()->size(), 3u);
  EXPECT_EQ(writer_->stats().blocked_samples, 50u);
}

// Processes forked from one another share what their addresses mean (the
// namer's UserSpace): a user address named with a function is named once
// for all of them, not once a process; one without a function is asked
// again (another process of the space, or a new read of its maps, may name
// it); and once a process's addresses mean something new, its frames are
// named anew.
TEST_F(StackSampleWriterTest, UserFramesAreNamedOncePerAddressSpace) {
  namer_.kernel = {{0xff40, "pipe_read"}};
  namer_.user = {{0x401000, "worker"}, {0x402000, "main"}};
  stacks_[7] = {0xff48};
  // Innermost first: worker, then return addresses into main and into
  // something without a name.
  stacks_[9] = {0x401004, 0x402005, 0x403001};
  for (int32_t tgid = 1000; tgid < 1050; tgid++) namer_.spaces[tgid] = 77;
  namer_.spaces[2000] = 88;
  MakeWriter();
  std::vector<Words> records;
  for (int32_t tgid : {1000, 1001, 2000}) {
    records.push_back(Record(5'000 + tgid, tgid, 7, 9, 1000));
    Blocked(records.back()).tgid = tgid;
  }
  for (int32_t tgid = 1002; tgid < 1050; tgid++) {
    records.push_back(Record(6'000 + tgid, tgid, 7, 9, 1000));
    Blocked(records.back()).tgid = tgid;
  }
  WriteBatch(records);
  EXPECT_EQ(namer_.UserCallsOf(1000), 3u);  // The space's first: every frame.
  for (int32_t tgid = 1001; tgid < 1050; tgid++) {
    EXPECT_EQ(namer_.UserCallsOf(tgid), 1u) << tgid << ": only the frame without a name";
  }
  EXPECT_EQ(namer_.UserCallsOf(2000), 3u);  // Another space's addresses.
  // 1000's maps read again: what its addresses mean may have changed, so
  // even a stack it had before is named again.
  namer_.spaces[1000] = 99;
  std::vector<Words> later = {Record(9'000, 1000, 7, 9, 1000)};
  Blocked(later.back()).tgid = 1000;
  WriteBatch(later);
  EXPECT_EQ(namer_.UserCallsOf(1000), 6u);
  // Its stack again, in the same space: remembered whole.
  later = {Record(9'500, 1000, 7, 9, 1000)};
  Blocked(later.back()).tgid = 1000;
  WriteBatch(later);
  EXPECT_EQ(namer_.UserCallsOf(1000), 6u);
  // Every sample resolves to the same three user frames and one kernel frame.
  const std::set<std::vector<uint64_t>> callstacks = CallstacksInFile();
  ASSERT_EQ(callstacks.size(), 1u);
  EXPECT_EQ(callstacks.begin()->size(), 4u);
  EXPECT_EQ(writer_->stats().blocked_samples, 53u);
}

// A stripped binary's frames have no function, and never will while the
// space maps what it does: once its file was read, they are named once a
// space like the others, and a stack of them is remembered for the whole
// space (hackbench's workers: each such frame was otherwise named again at
// every sample).
TEST_F(StackSampleWriterTest, AStrippedFilesFramesAreNamedOncePerAddressSpace) {
  namer_.kernel = {{0xff40, "pipe_read"}};
  namer_.user = {{0x401000, "worker"}};
  namer_.file_read = true;
  stacks_[7] = {0xff44};
  stacks_[9] = {0x401004, 0x403001, 0x403101};  // Two frames without a name.
  for (int32_t tgid = 1000; tgid < 1020; tgid++) namer_.spaces[tgid] = 77;
  MakeWriter();
  WriteBatch(BlockedInEach(1000, 1019, 9, 5'000));
  EXPECT_EQ(namer_.UserCallsOf(1000), 3u);  // The space's first: every frame.
  for (int32_t tgid = 1001; tgid < 1020; tgid++) {
    EXPECT_EQ(namer_.UserCallsOf(tgid), 0u) << tgid << ": the stack is the space's already";
  }
  // The frames keep what Perfetto needs to name them later: the file's
  // build id and their rel_pc, under one callstack of three user frames.
  const std::set<std::vector<uint64_t>> callstacks = CallstacksInFile();
  ASSERT_EQ(callstacks.size(), 1u);
  EXPECT_EQ(callstacks.begin()->size(), 4u);
  EXPECT_EQ(writer_->stats().frames_unnamed, 2u);
  EXPECT_EQ(writer_->stats().blocked_samples, 20u);
  // Another stack through the same stripped frames, from another innermost
  // frame: only that one is named.
  stacks_[11] = {0x401002, 0x403001, 0x403101};
  WriteBatch(BlockedInEach(1005, 1005, 11, 8'000));
  EXPECT_EQ(namer_.UserCallsOf(1005), 1u);
}

// A frame whose file could not be read stays to be named by each process
// (another may read the file), beside stripped frames named once a space:
// such a stack is remembered for its process alone.
TEST_F(StackSampleWriterTest, AFrameOfAFileNotReadIsNamedByEachProcessOfTheSpace) {
  namer_.kernel = {{0xff40, "pipe_read"}};
  namer_.user = {{0x401000, "worker"}};
  namer_.file_read = true;
  namer_.unread = {0x405000};  // The caller 0x405001's call.
  stacks_[7] = {0xff44};
  stacks_[9] = {0x401004, 0x403001, 0x405001};
  for (int32_t tgid = 1000; tgid < 1010; tgid++) namer_.spaces[tgid] = 77;
  MakeWriter();
  WriteBatch(BlockedInEach(1000, 1009, 9, 5'000));
  EXPECT_EQ(namer_.UserCallsOf(1000), 3u);
  for (int32_t tgid = 1001; tgid < 1010; tgid++) {
    EXPECT_EQ(namer_.UserCallsOf(tgid), 1u) << tgid << ": only the frame of the unread file";
  }
  // Its own stack again: remembered for the process.
  WriteBatch(BlockedInEach(1003, 1003, 9, 9'000));
  EXPECT_EQ(namer_.UserCallsOf(1003), 1u);
}

// The proof of "interned data survives the ring": a small ring that wraps
// many times under samples of many stacks, interned with a budget that
// makes several generations: every sample the ring still holds resolves to
// its frames, in Perfetto's importer, with no error.
TEST_F(StackSampleWriterTest, EverySampleResolvesAfterTheRingWrappedManyTimes) {
  MakeRing(64 * 1024);
  for (int32_t id = 0; id < 400; id++) {
    const uint64_t base = 0xffff0000ull + static_cast<uint64_t>(id) * 16;
    namer_.kernel[base] = "__schedule";
    namer_.kernel[base + 8] = absl::StrCat("fn_", id);
    stacks_[id] = {base + 2, base + 8 + 3};
  }
  MakeWriter(/*budget=*/8 * 1024);
  uint64_t ts = 1'000;
  for (int batch = 0; batch < 500; batch++) {
    std::vector<Words> records;
    for (int k = 0; k < 50; k++) {
      const int32_t id = (batch * 7 + k * 13) % 400;
      records.push_back(Record(ts += 1000, 200 + k, id, kNoStack, 1000 + id));
    }
    WriteBatch(records);
  }
  EXPECT_GT(writer_->stats().generations, 3u);
  EXPECT_GT(ring_->stats().bytes_written, 10 * ring_->size());
  std::string bytes;
  const trace::Trace t = ReadFile(&bytes);
  int samples = 0;
  for (const trace::TracePacket& p : t.packet()) samples += p.has_stack_sample();
  ASSERT_GT(samples, 100);
  // The store keeps what the ring may still refer to, not every generation.
  EXPECT_GT(ring_->durable()->stats().compacted, 0u);

  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  const std::string path = WriteTemp(bytes);
  EXPECT_EQ(testing::QueryInt(tp, path,
                              "select count(*) from stats where severity in ('error', "
                              "'data_loss') and value > 0"),
            0);
  EXPECT_EQ(testing::QueryInt(tp, path, "select count(*) from stack_sample"), samples);
  EXPECT_EQ(testing::QueryInt(tp, path,
                              "select count(*) from stack_sample s join stack_profile_callsite "
                              "c on c.id = s.callsite_id join stack_profile_frame f on f.id = "
                              "c.frame_id where f.name = '__schedule'"),
            samples);
  std::remove(path.c_str());
}

// Stacks never seen before, batch after batch, for a long time: the
// interning tables start again at each generation, so the memory they hold
// stays near what one generation's budget takes, however many stacks came.
TEST_F(StackSampleWriterTest, TheInterningTablesMemoryStaysBoundedByTheBudget) {
  constexpr size_t kBudget = 8 * 1024;
  MakeWriter(kBudget);
  size_t most = 0;
  uint64_t ts = 1'000;
  for (int32_t batch = 0; batch < 400; batch++) {
    std::vector<Words> records;
    for (int32_t k = 0; k < 50; k++) {
      const int32_t id = batch * 50 + k;
      const uint64_t base = 0xffff000000ull + static_cast<uint64_t>(id) * 16;
      namer_.kernel[base] = absl::StrCat("function_number_", id, "_of_many");
      stacks_[id] = {base + 2};
      records.push_back(Record(ts += 1000, 200, id, kNoStack, 1000));
    }
    WriteBatch(records);
    most = std::max(most, writer_->memory_bytes());
  }
  EXPECT_EQ(writer_->stats().samples, 20'000u);
  EXPECT_GT(writer_->stats().generations, 10u);
  EXPECT_GT(writer_->memory_bytes(), 0u);
  // 20000 distinct stacks and names held at once would take megabytes.
  EXPECT_LT(most, 32 * kBudget) << "the tables grow with the stacks seen, not the budget";
}

// A fork storm: every short-lived process blocks on the same two stacks.
// Their frames are interned once, and what the writer remembers per
// process stays bounded, while each sample still names its stack.
TEST_F(StackSampleWriterTest, ManyProcessesOnOneStackKeepTheCacheBounded) {
  namer_.kernel[0xffff0000] = "__schedule";
  stacks_[1] = {0xffff0002};
  MakeRing(16 << 20);  // Holds every sample: none is overwritten.
  MakeWriter();
  const int32_t processes = static_cast<int32_t>(StackSampleWriter::kMaxRememberedStacks) + 5000;
  uint64_t ts = 1'000;
  std::vector<Words> records;
  for (int32_t tgid = 1000; tgid < 1000 + processes; tgid++) {
    Words r = Record(ts += 1000, tgid, 1, kNoStack, 500);
    Blocked(r).tgid = tgid;
    records.push_back(r);
    if (records.size() == 1000) {
      WriteBatch(records);
      records.clear();
      EXPECT_LE(writer_->stats().remembered_stacks, StackSampleWriter::kMaxRememberedStacks);
    }
  }
  WriteBatch(records);
  EXPECT_EQ(writer_->stats().samples, static_cast<uint64_t>(processes));
  EXPECT_EQ(writer_->stats().callstacks, 1u);
  EXPECT_GT(writer_->stats().remembered_stacks, 0u);
  EXPECT_LT(writer_->stats().remembered_stacks, StackSampleWriter::kMaxRememberedStacks);
  std::string bytes;
  const trace::Trace t = ReadFile(&bytes);
  int named = 0;
  for (const trace::TracePacket& p : t.packet()) named += p.stack_sample().callstack_iid() != 0;
  EXPECT_EQ(named, processes);
}

}  // namespace
}  // namespace ringside::agent
