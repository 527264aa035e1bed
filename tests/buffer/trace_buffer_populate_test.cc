// TraceBuffer::Populate(): the memory of a fresh buffer is mapped before the
// writers need it, and populating beside writes loses none of their bytes.

#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "buffer/chunk_abi.h"
#include "buffer/trace_buffer.h"
#include "gtest/gtest.h"
#include "tests/testing/chunk_builder.h"

namespace ringside::buffer {
namespace {

// This process's resident pages (/proc/self/statm's second field).
long ResidentPages() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident;
}

TEST(TraceBufferPopulateTest, MapsTheWholeBufferBeforeAnyWrite) {
  constexpr size_t kSize = 32 << 20;
  const long page = sysconf(_SC_PAGESIZE);
  const long before = ResidentPages();
  auto buffer = TraceBuffer::Create(kSize);
  ASSERT_NE(buffer, nullptr);
  // Created, it holds no page yet: a buffer costs memory as it fills.
  const long created = ResidentPages();
  EXPECT_LT((created - before) * page, long{kSize / 8});
  ASSERT_TRUE(buffer->Populate());
  // Other threads of this process may fault a few pages meanwhile; the
  // buffer's own are nearly all of the growth, and all of them are there.
  EXPECT_GE((ResidentPages() - created) * page, long{kSize});
  // Populating is not writing: the buffer still reads as empty.
  buffer->BeginRead();
  TracePacket packet;
  PacketSequenceProperties props;
  uint32_t loss = 0;
  EXPECT_FALSE(buffer->ReadNextTracePacket(&packet, &props, &loss));
  EXPECT_EQ(buffer->stats().bytes_written, 0u);
}

TEST(TraceBufferPopulateTest, PopulatingBesideWritesKeepsEveryByteWritten) {
  // A session populates its buffers on a thread of their own while the
  // sources start and write: the writes must all read back intact.
  constexpr size_t kSize = 16 << 20;
  auto buffer = TraceBuffer::Create(kSize);
  ASSERT_NE(buffer, nullptr);
  std::thread populator([&buffer] { EXPECT_TRUE(buffer->Populate()); });
  constexpr int kChunks = 3000;  // About 12 MiB: within the buffer, nothing overwritten.
  for (int i = 0; i < kChunks; i++) {
    ChunkBuilder b(static_cast<ChunkID>(i), 1);
    b.AddFragment(std::string(4000, static_cast<char>('a' + i % 26)));
    buffer->CopyChunkUntrusted(1, ClientIdentity{0, 0}, b.writer_id(), b.chunk_id(),
                               b.num_fragments(), b.flags(), true, b.payload_data(),
                               b.payload().size());
  }
  populator.join();
  buffer->BeginRead();
  TracePacket packet;
  PacketSequenceProperties props;
  uint32_t loss = 0;
  int read = 0;
  while (buffer->ReadNextTracePacket(&packet, &props, &loss)) {
    ASSERT_EQ(packet.ToString(), std::string(4000, static_cast<char>('a' + read % 26)))
        << "packet " << read;
    read++;
  }
  EXPECT_EQ(read, kChunks);
  EXPECT_EQ(loss, 0u);
}

}  // namespace
}  // namespace ringside::buffer
