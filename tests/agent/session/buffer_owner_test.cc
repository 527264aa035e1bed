#include "agent/session/buffer_owner.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/session/session_buffers.h"
#include "agent/session/session_stream.h"
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

}  // namespace
}  // namespace ringside::agent
