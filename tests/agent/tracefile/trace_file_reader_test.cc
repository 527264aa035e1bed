#include "agent/tracefile/trace_file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "buffer/trace_packet.h"
#include "buffer/wire_format.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "zlib.h"

namespace ringside::agent {
namespace {

using Result = TraceFileReader::Result;

// Each test reads a file of its own, removed afterwards.
class TraceFileReaderTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }

  std::string Path(const std::string& name) {
    const std::string path =
        ::testing::TempDir() + "ringside_reader_" + std::to_string(getpid()) + "_" + name;
    paths_.push_back(path);
    return path;
  }

  std::string WriteFile(const std::string& name, const std::string& bytes) {
    const std::string path = Path(name);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    return path;
  }

  std::unique_ptr<TraceFileReader> OpenBytes(const std::string& bytes) {
    absl::StatusOr<std::unique_ptr<TraceFileReader>> r =
        TraceFileReader::Open(WriteFile(std::to_string(paths_.size()), bytes));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::move(*r) : nullptr;
  }

 private:
  std::vector<std::string> paths_;
};

// What a trace file holds for `packet`: a Trace.packet field.
std::string Framed(const std::string& packet) {
  std::string out;
  buffer::AppendLengthDelimitedField(buffer::kTracePacketFieldNumber, packet, &out);
  return out;
}

// `bytes` as gzip writes them (`gzip -c`).
std::string Gzipped(const std::string& bytes) {
  z_stream z{};
  // 15 + 16: a gzip header and trailer around the deflate stream.
  EXPECT_EQ(deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, bytes.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

trace::Trace ThreePackets() {
  trace::Trace t;
  t.add_packet()->set_timestamp(1);
  t.add_packet()->mutable_ftrace_events()->add_event()->mutable_print()->set_buf(
      std::string(300, 'x'));  // A length that takes two varint bytes.
  t.add_packet()->set_timestamp(3);
  return t;
}

TEST_F(TraceFileReaderTest, ReadsEveryPacketOfAWellFormedFileWithItsOffset) {
  const trace::Trace t = ThreePackets();
  const std::string bytes = t.SerializeAsString();
  auto reader = OpenBytes(bytes);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->file_size(), bytes.size());

  uint64_t expected_offset = 0;
  for (int i = 0; i < t.packet_size(); i++) {
    std::string packet;
    uint64_t offset = ~0ull;
    ASSERT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kPacket) << reader->error();
    EXPECT_EQ(packet, t.packet(i).SerializeAsString());
    EXPECT_EQ(offset, expected_offset);
    expected_offset += Framed(packet).size();
    EXPECT_EQ(reader->position(), expected_offset);
  }
  std::string packet;
  uint64_t offset = 0;
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kEnd);
  EXPECT_EQ(reader->position(), bytes.size());
}

TEST_F(TraceFileReaderTest, EmptyFileEndsAtOnce) {
  auto reader = OpenBytes("");
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kEnd);
  EXPECT_EQ(reader->file_size(), 0u);
  EXPECT_TRUE(reader->error().empty());
}

TEST_F(TraceFileReaderTest, EmptyPacketIsAPacket) {
  auto reader = OpenBytes(std::string("\x0a\x00", 2));
  ASSERT_NE(reader, nullptr);
  std::string packet = "stale";
  uint64_t offset = 1;
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kPacket);
  EXPECT_EQ(packet, "");
  EXPECT_EQ(offset, 0u);
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kEnd);
}

TEST_F(TraceFileReaderTest, PacketLargerThanStdioBuffersReadsWhole) {
  trace::Trace t;
  t.add_packet()->set_synchronization_marker(std::string(3 << 20, 'm'));
  auto reader = OpenBytes(t.SerializeAsString());
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  ASSERT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kPacket) << reader->error();
  EXPECT_EQ(packet, t.packet(0).SerializeAsString());
}

TEST_F(TraceFileReaderTest, TruncatedLastPacketIsAnErrorAtItsStartAfterTheGoodOnes) {
  const std::string bytes = ThreePackets().SerializeAsString();
  const size_t last_offset =
      bytes.size() - Framed(ThreePackets().packet(2).SerializeAsString()).size();
  auto reader = OpenBytes(bytes.substr(0, bytes.size() - 1));
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  ASSERT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kPacket);
  ASSERT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kPacket);
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kError);
  EXPECT_EQ(reader->error_offset(), last_offset);
  EXPECT_NE(reader->error().find("truncated packet"), std::string::npos) << reader->error();
}

TEST_F(TraceFileReaderTest, FileEndingInsideTheTagIsTruncated) {
  // 0x8a 0x00 would be a (non-minimal) tag 0x0a; the file ends after 0x8a.
  auto reader = OpenBytes("\x8a");
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kError);
  EXPECT_EQ(reader->error_offset(), 0u);
  EXPECT_NE(reader->error().find("ends inside the packet tag"), std::string::npos)
      << reader->error();
}

TEST_F(TraceFileReaderTest, FileEndingInsideTheLengthIsTruncatedAtTheLength) {
  auto reader = OpenBytes(std::string("\x0a\x00\x0a\x80", 4));
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  ASSERT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kPacket);
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kError);
  EXPECT_EQ(reader->error_offset(), 3u);
  EXPECT_NE(reader->error().find("ends inside the packet length"), std::string::npos)
      << reader->error();
}

TEST_F(TraceFileReaderTest, GarbageIsNotATracePacketAtOffsetZero) {
  auto reader = OpenBytes("hello, I am text\n");
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kError);
  EXPECT_EQ(reader->error_offset(), 0u);
  EXPECT_TRUE(reader->not_a_trace());
  EXPECT_EQ(reader->error(), "not a Perfetto trace: it is text") << reader->error();
}

TEST_F(TraceFileReaderTest, OtherFieldOfTraceIsNotATracePacketAndIsNamed) {
  // Field 2, length-delimited: well-formed protobuf, but not Trace.packet.
  auto reader = OpenBytes(std::string("\x12\x01\x00", 3));
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kError);
  EXPECT_NE(reader->error().find("not a Perfetto trace: it is data of an unknown kind (it begins "
                                 "with bytes 12 01 00)"),
            std::string::npos)
      << reader->error();
}

TEST_F(TraceFileReaderTest, PacketFieldWithAnotherWireTypeIsNotATracePacket) {
  // Field 1 as a varint.
  auto reader = OpenBytes(std::string("\x08\x01", 2));
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kError);
  EXPECT_NE(reader->error().find("(it begins with bytes 08 01)"), std::string::npos)
      << reader->error();
  // After a first packet, the tag is named: the file is a trace broken there.
  reader = OpenBytes(Framed("") + std::string("\x08\x01", 2));
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kPacket);
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kError);
  EXPECT_FALSE(reader->not_a_trace());
  EXPECT_NE(reader->error().find("found field 1 wire type 0"), std::string::npos)
      << reader->error();
}

TEST_F(TraceFileReaderTest, LengthAboveTheLimitIsCorruptAndNotAllocated) {
  std::string bytes("\x0a", 1);
  buffer::AppendVarInt(TraceFileReader::kMaxPacketBytes + 1, &bytes);
  auto reader = OpenBytes(bytes + "tail");
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kError);
  EXPECT_EQ(reader->error_offset(), 0u);
  EXPECT_NE(reader->error().find("corrupt packet length"), std::string::npos) << reader->error();
  EXPECT_EQ(packet.capacity(), std::string().capacity());
}

TEST_F(TraceFileReaderTest, LengthBeyondTheFileIsTruncatedAndNotAllocated) {
  // Declares 200 MiB (under the limit) in a 7-byte file.
  auto reader = OpenBytes(std::string("\x0a\x80\x80\x80\x64\x00\x00", 7));
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kError);
  EXPECT_NE(reader->error().find("declares 209715200 bytes but the file ends after 2"),
            std::string::npos)
      << reader->error();
  EXPECT_EQ(packet.capacity(), std::string().capacity());
}

TEST_F(TraceFileReaderTest, LengthVarIntLongerThanTenBytesIsCorrupt) {
  auto reader = OpenBytes("\x0a" + std::string(10, '\x80') + std::string(1, '\x00'));
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kError);
  EXPECT_EQ(reader->error_offset(), 1u);
  EXPECT_NE(reader->error().find("corrupt packet length: varint longer than 10 bytes"),
            std::string::npos)
      << reader->error();
}

TEST_F(TraceFileReaderTest, ResultAfterTheEndOrAnErrorStaysTheSame) {
  auto ended = OpenBytes(std::string("\x0a\x00", 2));
  auto failed = OpenBytes("garbage");
  ASSERT_NE(ended, nullptr);
  ASSERT_NE(failed, nullptr);
  std::string packet;
  uint64_t offset = 0;
  ASSERT_EQ(ended->ReadNextPacket(&packet, &offset), Result::kPacket);
  for (int i = 0; i < 3; i++) {
    EXPECT_EQ(ended->ReadNextPacket(&packet, &offset), Result::kEnd);
    EXPECT_EQ(failed->ReadNextPacket(&packet, &offset), Result::kError);
    EXPECT_EQ(failed->error_offset(), 0u);
  }
}

TEST_F(TraceFileReaderTest, PacketAppendedAfterOpenIsRead) {
  // A trace being streamed grows while it is read.
  const std::string path = WriteFile("growing", Framed("\x08\x01"));
  absl::StatusOr<std::unique_ptr<TraceFileReader>> reader = TraceFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::string packet;
  uint64_t offset = 0;
  ASSERT_EQ((*reader)->ReadNextPacket(&packet, &offset), Result::kPacket);
  // The reader does not parse packets: any 100 bytes do.
  const std::string second(100, '\x00');
  std::ofstream(path, std::ios::binary | std::ios::app) << Framed(second);
  ASSERT_EQ((*reader)->ReadNextPacket(&packet, &offset), Result::kPacket) << (*reader)->error();
  EXPECT_EQ(packet, second);
  EXPECT_EQ(offset, 4u);
}

// Traces are often kept gzip'd; the reader knows one by its magic bytes,
// whatever its name, and reads it as trace_processor does.
TEST_F(TraceFileReaderTest, GzippedFileReadsLikeThePlainOne) {
  const trace::Trace trace = ThreePackets();
  const std::string plain = trace.SerializeAsString();
  auto reader = OpenBytes(Gzipped(plain));
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  for (const auto& expected : trace.packet()) {
    ASSERT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kPacket) << reader->error();
    EXPECT_EQ(packet, expected.SerializeAsString());
  }
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kEnd) << reader->error();
  EXPECT_EQ(reader->position(), plain.size());
}

TEST_F(TraceFileReaderTest, TruncatedGzipIsAnErrorNamingWhereItEnds) {
  trace::Trace big;
  for (int i = 0; i < 2000; i++) big.add_packet()->set_timestamp(i * 7919u);
  std::string gz = Gzipped(big.SerializeAsString());
  gz.resize(gz.size() / 2);
  auto reader = OpenBytes(gz);
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  Result result;
  int packets = 0;
  while ((result = reader->ReadNextPacket(&packet, &offset)) == Result::kPacket) packets++;
  EXPECT_EQ(result, Result::kError);
  EXPECT_GT(packets, 0);
  EXPECT_LT(packets, 2000);
  EXPECT_NE(reader->error().find("truncated gzip"), std::string::npos) << reader->error();
  EXPECT_NE(reader->error().find("compressed byte"), std::string::npos) << reader->error();
}

TEST_F(TraceFileReaderTest, GzipWithABadChecksumIsCorrupt) {
  std::string gz = Gzipped(ThreePackets().SerializeAsString());
  gz[gz.size() - 8] ^= 0x01;  // The trailer's CRC-32.
  auto reader = OpenBytes(gz);
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  Result result;
  while ((result = reader->ReadNextPacket(&packet, &offset)) == Result::kPacket) {
  }
  EXPECT_EQ(result, Result::kError);
  EXPECT_NE(reader->error().find("corrupt gzip"), std::string::npos) << reader->error();
}

TEST_F(TraceFileReaderTest, GzipDeclaringAHugePacketIsTruncatedAndNotAllocatedWhole) {
  // Declares 200 MiB (under the limit) and holds 2 bytes of it: nothing says
  // how much a compressed stream holds, so the packet grows as data comes.
  auto reader = OpenBytes(Gzipped(std::string("\x0a\x80\x80\x80\x64\x00\x00", 7)));
  ASSERT_NE(reader, nullptr);
  std::string packet;
  uint64_t offset = 0;
  EXPECT_EQ(reader->ReadNextPacket(&packet, &offset), Result::kError);
  EXPECT_NE(reader->error().find("declares 209715200 bytes but the file ends after 2"),
            std::string::npos)
      << reader->error();
  EXPECT_LT(packet.capacity(), 1u << 20);
}

// `ringside inspect -` reads a trace piped in, which is no regular file.
TEST_F(TraceFileReaderTest, DashReadsStandardInputEvenAPipe) {
  const std::string bytes = ThreePackets().SerializeAsString();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(write(fds[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fds[1]);
  const int saved_stdin = dup(STDIN_FILENO);
  ASSERT_GE(saved_stdin, 0);
  dup2(fds[0], STDIN_FILENO);
  close(fds[0]);
  absl::StatusOr<std::unique_ptr<TraceFileReader>> reader = TraceFileReader::Open("-");
  dup2(saved_stdin, STDIN_FILENO);
  close(saved_stdin);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::string packet;
  uint64_t offset = 0;
  int packets = 0;
  Result result;
  while ((result = (*reader)->ReadNextPacket(&packet, &offset)) == Result::kPacket) packets++;
  EXPECT_EQ(result, Result::kEnd) << (*reader)->error();
  EXPECT_EQ(packets, 3);
}

// `ringside inspect -` typed at a terminal would wait for a trace nobody
// types; it says how to give one instead.
TEST_F(TraceFileReaderTest, DashRefusesATerminal) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const int terminal = open(ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(terminal, 0);
  // An end of file (^D) already typed, so that a reader that does wait on
  // the terminal fails this test instead of hanging it.
  ASSERT_EQ(write(master, "\x04", 1), 1);
  const int saved_stdin = dup(STDIN_FILENO);
  ASSERT_GE(saved_stdin, 0);
  dup2(terminal, STDIN_FILENO);
  close(terminal);
  absl::StatusOr<std::unique_ptr<TraceFileReader>> reader = TraceFileReader::Open("-");
  dup2(saved_stdin, STDIN_FILENO);
  close(saved_stdin);
  close(master);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(reader.status().message().find("standard input is a terminal"), std::string::npos)
      << reader.status();
}

TEST_F(TraceFileReaderTest, MissingFileIsNotFoundAndNamed) {
  absl::StatusOr<std::unique_ptr<TraceFileReader>> r =
      TraceFileReader::Open(Path("does-not-exist"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("does-not-exist"), std::string::npos) << r.status();
}

TEST_F(TraceFileReaderTest, FifoIsRefusedWithoutWaitingForAWriter) {
  const std::string fifo = Path("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::promise<absl::StatusCode> opened;
  std::future<absl::StatusCode> code = opened.get_future();
  std::thread opener([&] { opened.set_value(TraceFileReader::Open(fifo).status().code()); });
  if (code.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    // Open() waits for a writer: become one so that the thread can end.
    const int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    opener.join();
    if (fd >= 0) close(fd);
    FAIL() << "Open() blocked on a FIFO with no writer";
  }
  opener.join();
  EXPECT_EQ(code.get(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(TraceFileReaderTest, DirectoryIsNotARegularFile) {
  const std::string dir = Path("dir");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  absl::StatusOr<std::unique_ptr<TraceFileReader>> r = TraceFileReader::Open(dir);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find(dir), std::string::npos) << r.status();
}

}  // namespace
}  // namespace ringside::agent
