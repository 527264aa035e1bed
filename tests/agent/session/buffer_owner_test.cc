#include "agent/session/buffer_owner.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/descriptors/descriptor_tracker.h"
#include "agent/session/session_buffers.h"
#include "agent/session/session_stream.h"
#include "agent/sources/data_source.h"
#include "agent/writer/producer_buffer.h"
#include "agent/writer/trace_writer.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"

namespace ringside::agent {
namespace {

// A sink the drain thread writes into while the test looks at it.
class LockedSink : public TraceSink {
 public:
  absl::Status Write(absl::string_view packets) override {
    absl::MutexLock lock(&mu_);
    data_.append(packets.data(), packets.size());
    return absl::OkStatus();
  }
  absl::Status Finish() override { return absl::OkStatus(); }
  const std::string& display_name() const override { return name_; }
  uint64_t bytes_written() const override {
    absl::MutexLock lock(&mu_);
    return data_.size();
  }
  std::string data() const {
    absl::MutexLock lock(&mu_);
    return data_;
  }

 private:
  const std::string name_ = "locked";
  mutable absl::Mutex mu_;
  std::string data_ ABSL_GUARDED_BY(mu_);
};

// One buffer fed by one producer, whose writer the test writes through,
// and an owner of them on the periods of `config_`.
class BufferOwnerTest : public testing::Test {
 protected:
  void SetUp() override {
    config_.add_buffers()->set_size_kb(256);
    config_.set_flush_period_ms(0);
    config_.mutable_builtin_data_sources()->set_disable_clock_snapshotting(true);
    auto buffers = SessionBuffers::Create(config_, 0);
    ASSERT_TRUE(buffers.ok()) << buffers.status();
    buffers_ = *std::move(buffers);
    sources_.slots.resize(1);
    sources_.slots[0].producer =
        std::make_unique<ProducerBuffer>(1, buffer::ClientIdentity{}, ProducerBuffer::Options{});
    writer_ = sources_.slots[0].producer->CreateTraceWriter(1);
  }

  std::unique_ptr<BufferOwner> Owner() {
    return std::make_unique<BufferOwner>(config_, buffers_.get(), &sources_, nullptr,
                                         [](std::string) {});
  }

  // `n` packets of about 100 bytes each; `flush`: the chunk is queued for
  // a commit, else it stays open in the writer.
  void Write(int n, bool flush) {
    for (int i = 0; i < n; i++) {
      auto packet = writer_->NewTracePacket();
      packet->AppendVarInt(trace::TracePacket::kTimestampFieldNumber, ++last_ts_);
      packet->AppendString(9999, std::string(100, 'x'));
    }
    if (flush) writer_->Flush();
  }

  int PacketsIn(const std::string& framed) {
    trace::Trace t;
    EXPECT_TRUE(t.ParseFromString(framed));
    return t.packet_size();
  }

  // Waits up to 10 s for `done`.
  template <typename F>
  static bool Eventually(F done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!done()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }

  config::TraceConfig config_;
  std::unique_ptr<SessionBuffers> buffers_;
  BuiltSources sources_;
  std::unique_ptr<TraceWriter> writer_;
  uint64_t last_ts_ = 0;
};

TEST_F(BufferOwnerTest, WhatProducersQueuedReachesTheBuffersWithoutAskingWhileItRuns) {
  auto owner = Owner();
  owner->Start(nullptr);
  Write(5, /*flush=*/true);
  EXPECT_TRUE(Eventually([&] { return buffers_->usage()[0].stats.chunks_written > 0; }));
  owner->Stop();
  std::string out;
  buffers_->ReadInto(&out);
  EXPECT_EQ(PacketsIn(out), 5);
}

// A flush never waits for a writer: what it holds in an open chunk is
// copied into the buffers.
TEST_F(BufferOwnerTest, AFlushTakesWhatWritersHoldInOpenChunks) {
  auto owner = Owner();
  Write(3, /*flush=*/false);
  owner->Flush();
  std::string out;
  buffers_->ReadInto(&out);
  EXPECT_EQ(PacketsIn(out), 3);
  owner->Stop();
}

TEST_F(BufferOwnerTest, TheDrainWritesTheBuffersIntoTheStreamEachPeriod) {
  config_.set_file_write_period_ms(20);
  LockedSink sink;
  SessionStream::Hooks hooks;
  hooks.preamble = [](std::string*) {};
  hooks.source_stats = [] { return std::vector<SourceStats>{}; };
  hooks.notice = [](std::string) {};
  SessionStream stream(buffers_.get(), &sink, nullptr, 0, 0, std::move(hooks));
  auto owner = Owner();
  owner->Start(&stream);
  Write(4, /*flush=*/true);
  EXPECT_TRUE(Eventually([&] { return sink.bytes_written() > 0; }));
  owner->Stop();
  stream.ClaimState();
  EXPECT_EQ(PacketsIn(sink.data()), 4);
}

// A source whose reader serves the owner's staging passes only when the
// test says: a reader paused by its CPU budget, or kept off the CPU.
class PassesOnCue : public DataSource {
 public:
  absl::Status Start() override { return absl::OkStatus(); }
  void Stop() override {}
  bool FlushStaging(absl::Duration) override { return false; }
  uint64_t events_read() const override { return 0; }
  uint64_t events_lost() const override { return 0; }
  std::vector<Loss> Losses() const override { return {}; }
  uint64_t RequestStagingPass() override { return ++requested_; }
  bool StagingPassDone(uint64_t n) override { return n <= served_; }
  void ServeAll() { served_ = requested_; }
  uint64_t requested() const { return requested_; }

 private:
  uint64_t requested_ = 0;
  uint64_t served_ = 0;
};

// A task's last events can wait in a staging ring (a BPF ring, an in-kernel
// batch, a paused reader) after its exit reached the durable store. Its
// name is kept until every source has read its rings since its end: a
// flush whose sources have not does not count towards the end's pin, so no
// ring's worth written after it drops the name early.
TEST_F(BufferOwnerTest, AnEndedTaskKeepsItsNameUntilEverySourceReadItsStagingRings) {
  config_.set_durable_buffer_size_kb(64);
  auto buffers = SessionBuffers::Create(config_, 0);
  ASSERT_TRUE(buffers.ok()) << buffers.status();
  buffers_ = *std::move(buffers);
  auto source = std::make_unique<PassesOnCue>();
  PassesOnCue* reader = source.get();
  sources_.slots[0].source = std::move(source);
  DescriptorTracker tracker;
  BufferOwner owner(config_, buffers_.get(), &sources_, &tracker, [](std::string) {});
  tracker.OnFork(1000, 1, 1, 4242, 4242, "victim");
  owner.MoveChunksIntoBuffers();
  tracker.OnExit(2000, 4242, 4242, /*group_dead=*/1, "victim");
  owner.MoveChunksIntoBuffers();
  // More than a ring's worth (256 KiB) written between flushes, each time.
  auto write_a_ring = [&] {
    for (int i = 0; i < 30; i++) {
      Write(100, /*flush=*/true);
      owner.MoveChunksIntoBuffers();
    }
    owner.Flush();
  };
  for (int i = 0; i < 5; i++) write_a_ring();
  ASSERT_GT(reader->requested(), 0u) << "the owner asked for no staging pass";
  ASSERT_GT(buffers_->usage()[0].stats.chunks_overwritten, 0u) << "the ring did not wrap";
  EXPECT_EQ(buffers_->durable_stats()->compacted, 0u)
      << "the ended task's name went while its last events could still be in a staging ring";
  // The reader catches up: two flushes later the end is pinned, and once a
  // ring's worth is written past it the name goes.
  for (int i = 0; i < 4; i++) {
    reader->ServeAll();
    write_a_ring();
  }
  EXPECT_GT(buffers_->durable_stats()->compacted, 0u);
  owner.Stop();
}

}  // namespace
}  // namespace ringside::agent
