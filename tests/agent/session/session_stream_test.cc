#include "agent/session/session_stream.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/session/session_buffers.h"
#include "agent/sources/source_factory.h"
#include "agent/writer/producer_buffer.h"
#include "agent/writer/trace_writer.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"

namespace ringside::agent {
namespace {

// Files in memory, one after another; the test says when one is due, and
// when writing or opening the next fails.
class FakeFiles : public RotatingSink {
 public:
  absl::Status Write(absl::string_view packets) override {
    if (fail_writes || files.empty()) return absl::ResourceExhaustedError("disk full");
    files.back().append(packets.data(), packets.size());
    return absl::OkStatus();
  }
  absl::Status Finish() override { return absl::OkStatus(); }
  const std::string& display_name() const override { return name_; }
  uint64_t bytes_written() const override { return files.empty() ? 0 : files.back().size(); }
  bool FileDue() const override { return due; }
  absl::Status NextFile() override {
    if (fail_next_file) return absl::UnavailableError("cannot open the next file");
    files.emplace_back();
    due = false;
    return absl::OkStatus();
  }

  std::vector<std::string> files{1};
  bool due = false;
  bool fail_writes = false;
  bool fail_next_file = false;

 private:
  std::string name_ = "fake files";
};

// A session's buffers, one producer writing into them, and a stream of
// them into `sink` with hooks that say what they were asked.
class SessionStreamTest : public testing::Test {
 protected:
  void SetUp() override {
    config::TraceConfig config;
    config.add_buffers()->set_size_kb(256);
    auto buffers = SessionBuffers::Create(config, 0);
    ASSERT_TRUE(buffers.ok()) << buffers.status();
    buffers_ = *std::move(buffers);
    slots_.resize(1);
    slots_[0].producer =
        std::make_unique<ProducerBuffer>(1, buffer::ClientIdentity{}, ProducerBuffer::Options{});
    writer_ = slots_[0].producer->CreateTraceWriter(1);
  }

  std::unique_ptr<SessionStream> Stream(TraceSink* sink, RotatingSink* rotating,
                                        uint64_t max_bytes = 0) {
    SessionStream::Hooks hooks;
    // A preamble of one packet: tracing_started at the file's number.
    hooks.preamble = [this](std::string* out) {
      AppendServicePacket(TracingStartedPacket(++preambles_), 0, out);
    };
    hooks.source_stats = [] { return std::vector<SourceStats>{}; };
    hooks.notice = [this](std::string message) { notices_.push_back(std::move(message)); };
    hooks.limit_reached = [this] { limits_reached_++; };
    return std::make_unique<SessionStream>(buffers_.get(), sink, rotating, max_bytes, 0,
                                           std::move(hooks));
  }

  // Packets with the next `n` timestamps, committed into the buffers.
  void Record(int n) {
    for (int i = 0; i < n; i++) {
      auto packet = writer_->NewTracePacket();
      packet->AppendVarInt(trace::TracePacket::kTimestampFieldNumber, ++last_ts_);
      packet->AppendString(9999, std::string(100, 'x'));
    }
    writer_->Flush();
    buffers_->CommitQueued(slots_, nullptr, nullptr);
  }

  std::unique_ptr<SessionBuffers> buffers_;
  std::vector<SourceSlot> slots_;
  std::unique_ptr<TraceWriter> writer_;
  uint64_t last_ts_ = 0;
  int64_t preambles_ = 0;
  std::vector<std::string> notices_;
  int limits_reached_ = 0;
};

// The data packets' timestamps and the kinds of the stream's own packets
// ("started <n>", "clocks", "stats"), in file order.
std::vector<std::string> Contents(const std::string& file) {
  trace::Trace t;
  EXPECT_TRUE(t.ParseFromString(file));
  std::vector<std::string> out;
  for (const trace::TracePacket& p : t.packet()) {
    if (p.has_service_event()) {
      out.push_back(absl::StrCat("started ", p.timestamp()));
    } else if (p.has_clock_snapshot()) {
      out.push_back("clocks");
    } else if (p.has_trace_stats()) {
      out.push_back("stats");
    } else {
      out.push_back(absl::StrCat(p.timestamp()));
    }
  }
  return out;
}

using Lines = std::vector<std::string>;

TEST_F(SessionStreamTest, EachWriteAppendsWhatTheBuffersGotSinceTheLast) {
  StringSink sink;
  auto stream = Stream(&sink, nullptr);
  Record(2);
  stream->WriteIntoFile();
  Record(1);
  stream->WriteIntoFile();
  EXPECT_EQ(Contents(sink.data()), (Lines{"1", "2", "3"}));
  EXPECT_FALSE(stream->file_limit_reached());
  EXPECT_TRUE(notices_.empty());
}

// ...and tells its session once, so that `ringside record` (asleep until
// something is due) stops at once.
TEST_F(SessionStreamTest, AFileNotCutIntoPiecesSaysWhenItReachedItsLimit) {
  StringSink sink;
  auto stream = Stream(&sink, nullptr, /*max_bytes=*/1000);
  Record(5);
  stream->WriteIntoFile();
  EXPECT_FALSE(stream->file_limit_reached());
  EXPECT_EQ(limits_reached_, 0);
  Record(5);
  stream->WriteIntoFile();
  EXPECT_TRUE(stream->file_limit_reached());
  EXPECT_EQ(limits_reached_, 1);
  Record(5);
  stream->WriteIntoFile();
  EXPECT_EQ(limits_reached_, 1);
}

// A full disk loses nothing read from the buffers: what could not be
// written goes out first once writing works again; each is told once.
TEST_F(SessionStreamTest, AFailedWriteIsRetriedFirstAndToldOnce) {
  FakeFiles files;
  auto stream = Stream(&files, nullptr);
  Record(2);
  files.fail_writes = true;
  stream->WriteIntoFile();
  Record(1);
  stream->WriteIntoFile();
  ASSERT_EQ(notices_.size(), 1u);
  EXPECT_NE(notices_[0].find("disk full"), std::string::npos) << notices_[0];

  files.fail_writes = false;
  Record(1);
  stream->WriteIntoFile();
  EXPECT_EQ(Contents(files.files[0]), (Lines{"1", "2", "3", "4"}));
  ASSERT_EQ(notices_.size(), 2u);
  EXPECT_EQ(notices_[1], "writing fake files again; nothing read from the buffers was lost");
}

// A file that is due ends with a clock snapshot and trace_stats; the next
// begins with the preamble, so each opens alone.
TEST_F(SessionStreamTest, ADueFileEndsWithItsStatsAndTheNextBeginsWithThePreamble) {
  FakeFiles files;
  auto stream = Stream(&files, &files);
  Record(2);
  files.due = true;
  stream->WriteIntoFile();
  Record(1);
  stream->WriteIntoFile();
  ASSERT_EQ(files.files.size(), 2u);
  EXPECT_EQ(Contents(files.files[0]), (Lines{"1", "2", "clocks", "stats"}));
  EXPECT_EQ(Contents(files.files[1]), (Lines{"started 1", "3"}));
  EXPECT_EQ(stream->service_packets(), 2u);
}

// At the end of a recording the trailer has to go into the current file: a
// file begun for it alone would hold no event.
TEST_F(SessionStreamTest, NoNewFileForTheEndOfTheRecording) {
  FakeFiles files;
  auto stream = Stream(&files, &files);
  Record(2);
  files.due = true;
  ASSERT_TRUE(stream->DrainForTrailer().ok());
  EXPECT_EQ(files.files.size(), 1u);
  EXPECT_EQ(Contents(files.files[0]), (Lines{"1", "2"}));
}

// Files cut by size end between two packets, the rest going into the next:
// every packet once, in order, each file but the last ended with its stats
// and each but the first begun with the preamble.
TEST_F(SessionStreamTest, FilesCutBySizeEndBetweenTwoPackets) {
  FakeFiles files;
  auto stream = Stream(&files, &files, /*max_bytes=*/500);
  Record(12);
  stream->WriteIntoFile();
  ASSERT_GE(files.files.size(), 2u);
  Lines data;
  for (size_t i = 0; i < files.files.size(); i++) {
    Lines lines = Contents(files.files[i]);
    ASSERT_GE(lines.size(), 2u) << i;
    if (i > 0) {
      EXPECT_EQ(lines.front().rfind("started ", 0), 0u) << i;
    }
    if (i + 1 < files.files.size()) {
      EXPECT_EQ(Lines(lines.end() - 2, lines.end()), (Lines{"clocks", "stats"})) << i;
    }
    for (const std::string& l : lines) {
      if (l != "clocks" && l != "stats" && l.rfind("started ", 0) != 0) data.push_back(l);
    }
  }
  EXPECT_EQ(data, (Lines{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"}));
}

// A next file that cannot be opened keeps the data for it, and is tried
// again at each write; the failure and the recovery are told once each.
TEST_F(SessionStreamTest, ANextFileThatCannotBeOpenedIsTriedAgainAtEachWrite) {
  FakeFiles files;
  auto stream = Stream(&files, &files);
  Record(1);
  files.due = true;
  files.fail_next_file = true;
  stream->WriteIntoFile();
  Record(1);
  stream->WriteIntoFile();
  EXPECT_EQ(files.files.size(), 1u);
  ASSERT_EQ(notices_.size(), 1u);
  EXPECT_NE(notices_[0].find("cannot open the next file"), std::string::npos) << notices_[0];

  files.fail_next_file = false;
  Record(1);
  stream->WriteIntoFile();
  ASSERT_EQ(files.files.size(), 2u);
  EXPECT_EQ(Contents(files.files[1]), (Lines{"started 1", "2", "3"}));
  ASSERT_EQ(notices_.size(), 2u);
  EXPECT_EQ(notices_[1], "streaming again, into fake files");
  EXPECT_TRUE(stream->DrainForTrailer().ok());
}

}  // namespace
}  // namespace ringside::agent
