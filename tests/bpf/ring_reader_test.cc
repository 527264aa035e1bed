// RingReader over ring memory written by hand, laid out as the kernel lays
// out a BPF_MAP_TYPE_RINGBUF (kernel/bpf/ringbuf.c):
//
//   consumer page: u64 consumer_pos (ours to advance)
//   producer page: u64 producer_pos (the kernel's)
//   data:          ring_size bytes (the kernel can map them twice in a row;
//                  the reader maps them once, and so does FakeRing, with
//                  nothing readable after them)
//
//   record at data[pos & mask]:
//   +---------------------------------+-----------+---------------------+
//   | u32 len | BUSY(31) | DISCARD(30) | u32 pg_off | len bytes, padded   |
//   +---------------------------------+-----------+  to a multiple of 8 |
//
// Positions only grow; a reservation advances producer_pos by
// round_up(len + 8, 8) and writes the header with BUSY set; the commit
// clears BUSY (and sets DISCARD for a discard).

#include "bpf/ring_reader.h"

#include <linux/bpf.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside::bpf {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

size_t PageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

uint64_t RoundedRecordBytes(uint32_t size) {
  return (uint64_t{size} + BPF_RINGBUF_HDR_SZ + 7) & ~7ull;
}

// One ring's memory, mapped the way the reader maps a ring buffer map: one
// memfd holds the consumer page, the producer page and the data, mapped
// once, with an inaccessible ring's worth after it: a reader that read a
// record running over the end in place, past the data, would crash.
class FakeRing {
 public:
  explicit FakeRing(size_t ring_size) : ring_size_(ring_size) {
    const size_t page = PageSize();
    fd_ = static_cast<int>(syscall(SYS_memfd_create, "ring_reader_test", MFD_CLOEXEC));
    if (fd_ < 0 || ftruncate(fd_, static_cast<off_t>(2 * page + ring_size)) != 0) return;
    void* cons = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    // Reserve the whole span first, so nothing else lands in between.
    region_size_ = page + 2 * ring_size;
    void* region = mmap(nullptr, region_size_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (cons == MAP_FAILED || region == MAP_FAILED) return;
    auto* base = static_cast<uint8_t*>(region);
    const bool mapped = mmap(base, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_,
                             static_cast<off_t>(page)) != MAP_FAILED &&
                        mmap(base + page, ring_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                             fd_, static_cast<off_t>(2 * page)) != MAP_FAILED;
    consumer_ = static_cast<uint64_t*>(cons);
    region_ = base;
    if (!mapped) return;
    producer_ = reinterpret_cast<uint64_t*>(base);
    data_ = base + page;
  }
  ~FakeRing() {
    if (consumer_ != nullptr) munmap(consumer_, PageSize());
    if (region_ != nullptr) munmap(region_, region_size_);
    if (fd_ >= 0) close(fd_);
  }
  FakeRing(const FakeRing&) = delete;
  FakeRing& operator=(const FakeRing&) = delete;

  bool ok() const { return data_ != nullptr; }
  RingReader::RingMemoryForTesting memory() const { return {consumer_, producer_, data_}; }

  // Both positions at `pos`, as after the ring has carried pos bytes.
  void StartAt(uint64_t pos) { *consumer_ = *producer_ = pos; }
  uint64_t consumer_pos() const { return *consumer_; }
  uint64_t producer_pos() const { return *producer_; }
  const uint8_t* data() const { return data_; }
  size_t ring_size() const { return ring_size_; }

  // Reserves a record as bpf_ringbuf_reserve does: header BUSY, payload
  // written, producer advanced. Returns the record's position.
  uint64_t Reserve(const std::string& payload) {
    const uint64_t pos = *producer_;
    WriteHeader(pos, static_cast<uint32_t>(payload.size()) | BPF_RINGBUF_BUSY_BIT);
    // A payload that runs over the ring's end goes on at the ring's start,
    // as the kernel writes it (through its second mapping).
    const size_t start = (pos + BPF_RINGBUF_HDR_SZ) & (ring_size_ - 1);
    const size_t head = std::min(payload.size(), ring_size_ - start);
    std::memcpy(data_ + start, payload.data(), head);
    std::memcpy(data_, payload.data() + head, payload.size() - head);
    *producer_ = pos + RoundedRecordBytes(static_cast<uint32_t>(payload.size()));
    return pos;
  }
  void Commit(uint64_t pos) { WriteHeader(pos, Header(pos) & ~BPF_RINGBUF_BUSY_BIT); }
  void Discard(uint64_t pos) {
    WriteHeader(pos, (Header(pos) & ~BPF_RINGBUF_BUSY_BIT) | BPF_RINGBUF_DISCARD_BIT);
  }
  uint64_t Submit(const std::string& payload) {
    const uint64_t pos = Reserve(payload);
    Commit(pos);
    return pos;
  }
  uint32_t Header(uint64_t pos) const {
    uint32_t len;
    std::memcpy(&len, data_ + (pos & (ring_size_ - 1)), sizeof(len));
    return len;
  }
  void WriteHeader(uint64_t pos, uint32_t len) {
    const uint32_t pg_off = 0;
    std::memcpy(data_ + (pos & (ring_size_ - 1)), &len, sizeof(len));
    std::memcpy(data_ + (pos & (ring_size_ - 1)) + 4, &pg_off, sizeof(pg_off));
  }
  void SetProducerPos(uint64_t pos) { *producer_ = pos; }

 private:
  size_t ring_size_;
  int fd_ = -1;
  uint64_t* consumer_ = nullptr;
  uint64_t* producer_ = nullptr;
  uint8_t* region_ = nullptr;
  size_t region_size_ = 0;
  uint8_t* data_ = nullptr;
};

// What one Drain handed out: every batch's ring and record contents.
struct Seen {
  std::vector<std::pair<uint32_t, std::vector<std::string>>> batches;
  std::vector<std::string> records() const {
    std::vector<std::string> all;
    for (const auto& b : batches) all.insert(all.end(), b.second.begin(), b.second.end());
    return all;
  }
};

RingReader::BatchCallback Collect(Seen* seen) {
  return [seen](uint32_t ring, absl::Span<const RecordView> records) {
    std::vector<std::string> batch;
    for (const RecordView& r : records) {
      batch.emplace_back(static_cast<const char*>(r.data), r.size);
    }
    seen->batches.emplace_back(ring, std::move(batch));
  };
}

class RingReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ring_.ok()) << "cannot map a fake ring: " << std::strerror(errno);
    auto reader = RingReader::CreateForTesting({ring_.memory()}, ring_.ring_size());
    ASSERT_TRUE(reader.ok()) << reader.status();
    reader_ = std::move(*reader);
  }
  // Whatever a test did, the reader never consumes what was not produced.
  void TearDown() override { EXPECT_LE(ring_.consumer_pos(), ring_.producer_pos()); }

  uint64_t Drain(Seen* seen) { return reader_->Drain(Collect(seen)); }

  FakeRing ring_{4 * PageSize()};
  std::unique_ptr<RingReader> reader_;
};

TEST_F(RingReaderTest, RecordsComeOutInTheOrderTheyWereReserved) {
  ring_.Submit("first");
  ring_.Submit(std::string(100, 'x'));
  ring_.Submit("third record");
  Seen seen;
  EXPECT_EQ(Drain(&seen), 3u);
  ASSERT_EQ(seen.batches.size(), 1u);
  EXPECT_EQ(seen.batches[0].first, 0u);
  EXPECT_THAT(seen.batches[0].second, ElementsAre("first", std::string(100, 'x'), "third record"));
}

TEST_F(RingReaderTest, RecordSizeIsTheReservedSizeNotThePaddedOne) {
  ring_.Submit("a");
  ring_.Submit("1234567");
  ring_.Submit("12345678");
  ring_.Submit("123456789");
  std::vector<uint32_t> sizes;
  reader_->Drain([&sizes](uint32_t, absl::Span<const RecordView> records) {
    for (const RecordView& r : records) sizes.push_back(r.size);
  });
  EXPECT_THAT(sizes, ElementsAre(1u, 7u, 8u, 9u));
}

TEST_F(RingReaderTest, ConsumerPositionAdvancesExactlyPastThePaddedRecordsRead) {
  const uint64_t start = ring_.consumer_pos();
  ring_.Submit("a");          // 8 + 1 -> 16
  ring_.Submit("1234567");    // 8 + 7 -> 16
  ring_.Submit("12345678");   // 8 + 8 -> 16
  ring_.Submit("123456789");  // 8 + 9 -> 24
  Seen seen;
  Drain(&seen);
  EXPECT_EQ(ring_.consumer_pos(), start + 72);
  EXPECT_EQ(ring_.consumer_pos(), ring_.producer_pos());
}

TEST_F(RingReaderTest, EmptyRingCallsNothingAndLeavesTheConsumerWhereItWas) {
  ring_.StartAt(4096 + 64);
  Seen seen;
  EXPECT_EQ(Drain(&seen), 0u);
  EXPECT_TRUE(seen.batches.empty());
  EXPECT_EQ(ring_.consumer_pos(), 4096u + 64);
}

TEST_F(RingReaderTest, DiscardedRecordsAreSkippedAndTheirSpaceReleased) {
  ring_.Submit("kept 1");
  ring_.Discard(ring_.Reserve("thrown away"));
  ring_.Submit("kept 2");
  Seen seen;
  EXPECT_EQ(Drain(&seen), 2u);
  EXPECT_THAT(seen.records(), ElementsAre("kept 1", "kept 2"));
  EXPECT_EQ(ring_.consumer_pos(), ring_.producer_pos());
}

TEST_F(RingReaderTest, RingOfOnlyDiscardedRecordsIsReleasedWithoutACallback) {
  ring_.Discard(ring_.Reserve("gone"));
  ring_.Discard(ring_.Reserve("gone too"));
  Seen seen;
  EXPECT_EQ(Drain(&seen), 0u);
  EXPECT_TRUE(seen.batches.empty());
  EXPECT_EQ(ring_.consumer_pos(), ring_.producer_pos());
}

TEST_F(RingReaderTest, BusyRecordStopsTheBatchUntilItIsCommitted) {
  ring_.Submit("before");
  const uint64_t busy = ring_.Reserve("in flight");
  ring_.Submit("after");
  Seen seen;
  EXPECT_EQ(Drain(&seen), 1u);
  EXPECT_THAT(seen.records(), ElementsAre("before"));
  // Released up to the busy record, not past it: the kernel still writes it.
  EXPECT_EQ(ring_.consumer_pos(), busy);

  Seen again;
  EXPECT_EQ(Drain(&again), 0u) << "a busy record was handed out";
  ring_.Commit(busy);
  EXPECT_EQ(Drain(&again), 2u);
  EXPECT_THAT(again.records(), ElementsAre("in flight", "after"));
  EXPECT_EQ(ring_.consumer_pos(), ring_.producer_pos());
}

TEST_F(RingReaderTest, BusyRecordThenDiscardReleasesItWithoutHandingItOut) {
  const uint64_t busy = ring_.Reserve("will be discarded");
  ring_.Submit("after");
  Seen seen;
  EXPECT_EQ(Drain(&seen), 0u);
  EXPECT_EQ(ring_.consumer_pos(), busy);
  ring_.Discard(busy);
  EXPECT_EQ(Drain(&seen), 1u);
  EXPECT_THAT(seen.records(), ElementsAre("after"));
}

TEST_F(RingReaderTest, RecordRunningOverTheRingsEndIsReadWhole) {
  // Positions keep growing past the ring size; the third lap, 16 bytes
  // before the end: the header fits, the payload wraps to the start.
  const uint64_t start = 3 * ring_.ring_size() - 16;
  ring_.StartAt(start);
  std::string payload;
  for (int i = 0; i < 40; i++) payload.push_back(static_cast<char>('A' + i % 26));
  ring_.Submit(payload);
  ring_.Submit("next lap");
  Seen seen;
  EXPECT_EQ(Drain(&seen), 2u);
  EXPECT_THAT(seen.records(), ElementsAre(payload, "next lap"));
  EXPECT_EQ(ring_.consumer_pos(), start + 48 + 16);
  // The payload really was split: its tail sits at the start of the data.
  EXPECT_EQ(std::memcmp(ring_.data(), payload.data() + 8, 32), 0);
}

TEST_F(RingReaderTest, RecordsRunningOverTheEndLapAfterLapAreEachReadWhole) {
  // The reader copies a wrapped record into one buffer of its own: each
  // lap's must come out whole, whatever the lap before left there.
  const size_t ring = ring_.ring_size();
  for (uint64_t lap = 1; lap <= 3; lap++) {
    SCOPED_TRACE(::testing::Message() << "lap " << lap);
    const uint64_t start = lap * ring - 8 * lap;  // 8, 16, 24 bytes before the end.
    ring_.StartAt(start);
    const std::string payload(24 + 40 * lap, static_cast<char>('a' + lap));
    ring_.Submit(payload);
    Seen seen;
    EXPECT_EQ(Drain(&seen), 1u);
    EXPECT_THAT(seen.records(), ElementsAre(payload));
  }
}

TEST_F(RingReaderTest, HeaderInTheLastEightBytesOfTheRingIsRead) {
  const uint64_t start = ring_.ring_size() - 8;
  ring_.StartAt(start);
  ring_.Submit("payload entirely in the next lap");
  Seen seen;
  EXPECT_EQ(Drain(&seen), 1u);
  EXPECT_THAT(seen.records(), ElementsAre("payload entirely in the next lap"));
  EXPECT_EQ(ring_.consumer_pos(), ring_.producer_pos());
}

TEST_F(RingReaderTest, FullRingIsReadWhole) {
  // Just under ring_size bytes pending, as full as the kernel lets it get.
  ring_.StartAt(ring_.ring_size() / 2);
  const std::string payload(56, 'f');  // 64 bytes a record.
  std::vector<std::string> want;
  while (ring_.producer_pos() - ring_.consumer_pos() + 64 < ring_.ring_size()) {
    want.push_back(payload);
    ring_.Submit(payload);
  }
  Seen seen;
  EXPECT_EQ(Drain(&seen), want.size());
  EXPECT_EQ(seen.records(), want);
  EXPECT_EQ(ring_.consumer_pos(), ring_.producer_pos());
}

TEST_F(RingReaderTest, PendingBytesCountWhatIsProducedButNotConsumed) {
  EXPECT_EQ(reader_->pending_bytes(0), 0u);
  ring_.Submit("123456789");                 // 24 bytes.
  const uint64_t busy = ring_.Reserve("x");  // 16.
  EXPECT_EQ(reader_->pending_bytes(0), 40u);
  Seen seen;
  Drain(&seen);
  EXPECT_EQ(reader_->pending_bytes(0), 16u);  // The busy one stays.
  ring_.Commit(busy);
  Drain(&seen);
  EXPECT_EQ(reader_->pending_bytes(0), 0u);
}

TEST_F(RingReaderTest, LongBacklogComesInBatchesReleasedOneByOne) {
  constexpr size_t kRecords = RingReader::kMaxBatch + 10;
  FakeRing big(64 * PageSize());  // Room for kRecords 16-byte records.
  ASSERT_TRUE(big.ok());
  auto reader = RingReader::CreateForTesting({big.memory()}, big.ring_size());
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (size_t i = 0; i < kRecords; i++) big.Submit(std::to_string(i % 10));
  std::vector<size_t> batch_sizes;
  std::vector<uint64_t> consumer_at_call;
  const uint64_t n = (*reader)->Drain([&](uint32_t, absl::Span<const RecordView> records) {
    batch_sizes.push_back(records.size());
    consumer_at_call.push_back(big.consumer_pos());
  });
  EXPECT_EQ(n, kRecords);
  EXPECT_THAT(batch_sizes, ElementsAre(RingReader::kMaxBatch, 10u));
  // The first batch's space was given back before the second was handed out.
  ASSERT_EQ(consumer_at_call.size(), 2u);
  EXPECT_EQ(consumer_at_call[0], 0u);
  EXPECT_EQ(consumer_at_call[1], RingReader::kMaxBatch * 16);
  EXPECT_EQ(big.consumer_pos(), kRecords * 16);
}

// --- Corrupt ring memory -----------------------------------------------------
// The kernel never publishes a header whose record does not fit below
// producer_pos; one that does means the ring is corrupt, and must neither
// hand out a view past the ring nor leave the ring full for good.

// A committed header at the producer position claiming `len`, with only
// `bytes` published for it.
void PublishHeader(FakeRing* ring, uint32_t len, uint64_t bytes) {
  ring->WriteHeader(ring->producer_pos(), len);
  ring->SetProducerPos(ring->producer_pos() + bytes);
}

// Every view whole inside the ring's one mapping, or a copy outside it (a
// record that ran over the end); every byte readable.
RingReader::BatchCallback CheckInside(const FakeRing& ring, Seen* seen) {
  return [&ring, seen](uint32_t index, absl::Span<const RecordView> records) {
    const auto* begin = ring.data();
    const auto* end = ring.data() + ring.ring_size();
    std::vector<std::string> batch;
    for (const RecordView& r : records) {
      const auto* p = static_cast<const uint8_t*>(r.data);
      const bool inside = p >= begin && p < end;
      ASSERT_TRUE(!inside || r.size <= static_cast<size_t>(end - p))
          << "record of " << r.size << " bytes at ring offset " << (p - begin);
      ASSERT_LE(r.size, ring.ring_size());
      batch.emplace_back(static_cast<const char*>(r.data), r.size);
    }
    seen->batches.emplace_back(index, std::move(batch));
  };
}

TEST_F(RingReaderTest, HeaderLongerThanTheRingIsCountedAndItsRingReleased) {
  ring_.Submit("good");
  PublishHeader(&ring_, static_cast<uint32_t>(4 * ring_.ring_size()), 16);
  ring_.Submit("behind the corruption");
  Seen seen;
  EXPECT_EQ(reader_->Drain(CheckInside(ring_, &seen)), 1u);
  EXPECT_THAT(seen.records(), ElementsAre("good"));
  EXPECT_EQ(reader_->corruptions(), 1u);
  EXPECT_EQ(ring_.consumer_pos(), ring_.producer_pos());
}

TEST_F(RingReaderTest, HeaderRunningPastThePublishedDataIsCounted) {
  PublishHeader(&ring_, 100, 16);  // 112 bytes claimed, 16 published.
  Seen seen;
  EXPECT_EQ(reader_->Drain(CheckInside(ring_, &seen)), 0u);
  EXPECT_TRUE(seen.records().empty());
  EXPECT_EQ(reader_->corruptions(), 1u);
  EXPECT_EQ(ring_.consumer_pos(), ring_.producer_pos());
}

TEST_F(RingReaderTest, DiscardedHeaderWithACorruptLengthIsCounted) {
  PublishHeader(&ring_, BPF_RINGBUF_DISCARD_BIT | 0x3fffffff, 16);
  ring_.Submit("lost");
  Seen seen;
  EXPECT_EQ(reader_->Drain(CheckInside(ring_, &seen)), 0u);
  EXPECT_EQ(reader_->corruptions(), 1u);
  EXPECT_EQ(ring_.consumer_pos(), ring_.producer_pos());
}

TEST_F(RingReaderTest, ProducerMoreThanARingAheadIsCountedAndReleased) {
  ring_.Submit("a");
  ring_.SetProducerPos(ring_.consumer_pos() + 3 * ring_.ring_size());
  Seen seen;
  EXPECT_EQ(reader_->Drain(CheckInside(ring_, &seen)), 0u);
  EXPECT_EQ(reader_->corruptions(), 1u);
  EXPECT_EQ(ring_.consumer_pos(), ring_.producer_pos());
}

TEST_F(RingReaderTest, RecordsWrittenAfterACorruptionAreReadAgain) {
  PublishHeader(&ring_, static_cast<uint32_t>(2 * ring_.ring_size()), 8);
  Seen seen;
  reader_->Drain(CheckInside(ring_, &seen));
  ring_.Submit("recovered");
  EXPECT_EQ(reader_->Drain(CheckInside(ring_, &seen)), 1u);
  EXPECT_THAT(seen.records(), ElementsAre("recovered"));
  EXPECT_EQ(reader_->corruptions(), 1u);
}

TEST_F(RingReaderTest, RandomRingMemoryNeverYieldsARecordOutsideTheRing) {
  const size_t ring_size = ring_.ring_size();
  for (uint32_t seed = 1; seed <= 500; seed++) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    auto* data = const_cast<uint8_t*>(ring_.data());
    for (size_t i = 0; i < ring_size; i += 8) {
      // Headers of every kind: small lengths, lengths near and past the
      // ring, with and without BUSY/DISCARD, and plain noise.
      uint32_t len;
      switch (rng() % 4) {
        case 0:
          len = static_cast<uint32_t>(rng() % 64);
          break;
        case 1:
          len = static_cast<uint32_t>(ring_size - 64 + rng() % 128);
          break;
        case 2:
          len = static_cast<uint32_t>(rng() % 64) | BPF_RINGBUF_DISCARD_BIT;
          break;
        default:
          len = static_cast<uint32_t>(rng());
          break;
      }
      std::memcpy(data + i, &len, 4);
      const uint32_t noise = static_cast<uint32_t>(rng());
      std::memcpy(data + i + 4, &noise, 4);
    }
    const uint64_t cons = (rng() % (1ull << 40)) & ~7ull;
    ring_.StartAt(cons);
    ring_.SetProducerPos(cons + ((rng() % (ring_size + 1)) & ~7ull));
    Seen seen;
    const uint64_t n = reader_->Drain(CheckInside(ring_, &seen));
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(n, seen.records().size());
    ASSERT_LE(ring_.consumer_pos(), ring_.producer_pos());
    // Stopped only at the producer or at a busy record.
    if (ring_.consumer_pos() != ring_.producer_pos()) {
      ASSERT_NE(ring_.Header(ring_.consumer_pos()) & BPF_RINGBUF_BUSY_BIT, 0u);
    }
  }
}

TEST(RingReaderRingsTest, EachRingsRecordsComeWithItsIndex) {
  FakeRing ring0(PageSize()), ring1(PageSize()), ring2(PageSize());
  ASSERT_TRUE(ring0.ok() && ring1.ok() && ring2.ok());
  auto reader =
      RingReader::CreateForTesting({ring0.memory(), ring1.memory(), ring2.memory()}, PageSize());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->num_rings(), 3u);
  ring0.Submit("cpu0 a");
  ring2.Submit("cpu2 a");
  ring2.Submit("cpu2 b");
  Seen seen;
  EXPECT_EQ((*reader)->Drain(Collect(&seen)), 3u);
  ASSERT_EQ(seen.batches.size(), 2u);  // Ring 1 had nothing: no batch.
  EXPECT_EQ(seen.batches[0].first, 0u);
  EXPECT_THAT(seen.batches[0].second, ElementsAre("cpu0 a"));
  EXPECT_EQ(seen.batches[1].first, 2u);
  EXPECT_THAT(seen.batches[1].second, ElementsAre("cpu2 a", "cpu2 b"));
}

TEST(RingReaderRingsTest, BusyRecordInOneRingDoesNotHoldBackAnother) {
  FakeRing ring0(PageSize()), ring1(PageSize());
  ASSERT_TRUE(ring0.ok() && ring1.ok());
  auto reader = RingReader::CreateForTesting({ring0.memory(), ring1.memory()}, PageSize());
  ASSERT_TRUE(reader.ok()) << reader.status();
  ring0.Reserve("stuck");
  ring1.Submit("flows");
  Seen seen;
  EXPECT_EQ((*reader)->Drain(Collect(&seen)), 1u);
  ASSERT_EQ(seen.batches.size(), 1u);
  EXPECT_EQ(seen.batches[0].first, 1u);
  EXPECT_THAT(seen.batches[0].second, ElementsAre("flows"));
}

TEST_F(RingReaderTest, PollDrainsRingsThatWereNeverSignalled) {
  // The kernel signals only a ring whose consumer had caught up; a poll
  // that returns for any reason (here its timeout) must drain them all.
  ring_.Submit("unsignalled");
  Seen seen;
  absl::StatusOr<uint64_t> n = reader_->Poll(0, Collect(&seen));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1u);
  EXPECT_THAT(seen.records(), ElementsAre("unsignalled"));
}

TEST_F(RingReaderTest, WakeBeforePollMakesItReturnAtOnce) {
  reader_->Wake();
  const absl::Time start = absl::Now();
  absl::StatusOr<uint64_t> n = reader_->Poll(60'000, [](uint32_t, absl::Span<const RecordView>) {});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0u);
  // Bounded far above any scheduling delay, far below the 60 s wait.
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

TEST(RingReaderCreateTest, RingSizeThatIsNotAPowerOfTwoNumberOfPagesIsRefused) {
  for (size_t size : {size_t{0}, 3 * PageSize(), PageSize() / 2, PageSize() + 8}) {
    absl::StatusOr<std::unique_ptr<RingReader>> r = RingReader::Create({}, size);
    ASSERT_FALSE(r.ok()) << size;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(std::to_string(size))) << r.status();
  }
}

TEST(RingReaderCreateTest, FdThatIsNotARingBufferIsAnErrorNotACrash) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  absl::StatusOr<std::unique_ptr<RingReader>> r = RingReader::Create({fds[0]}, PageSize());
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("ring 0"));
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace ringside::bpf
