#include "bpf/records.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace ringside::bpf {
namespace {

template <typename T>
std::vector<uint8_t> Bytes(const T& record, size_t size = sizeof(T)) {
  std::vector<uint8_t> out(size, 0);
  std::memcpy(out.data(), &record, std::min(size, sizeof(T)));
  return out;
}

// A view of `bytes`, as the ring reader hands a record over.
RecordView ViewOf(const std::vector<uint8_t>& bytes) {
  return RecordView{bytes.data(), static_cast<uint32_t>(bytes.size())};
}

rs_sched_switch Switch() {
  rs_sched_switch e{};
  e.h.type = RS_EV_SCHED_SWITCH;
  e.h.size = sizeof(e);
  e.h.ts_ns = 1234;
  e.prev_pid = 7;
  e.next_pid = 8;
  std::memcpy(e.next_comm, "next", 5);
  return e;
}

TEST(RecordsTest, DecodesAWellFormedRecordIntoItsTypedView) {
  const std::vector<uint8_t> b = Bytes(Switch());
  RecordBatch r;
  ASSERT_TRUE(DecodeRecord(ViewOf(b), &r));
  ASSERT_EQ(r.records().size(), 1u);
  const Record& rec = r.records()[0];
  EXPECT_EQ(rec.type, uint32_t{RS_EV_SCHED_SWITCH});
  EXPECT_EQ(rec.sched_switch().h.ts_ns, 1234u);
  EXPECT_EQ(rec.sched_switch().prev_pid, 7);
  EXPECT_EQ(rec.sched_switch().next_pid, 8);
  EXPECT_EQ(CommOf(rec.sched_switch().next_comm), "next");
}

TEST(RecordsTest, RefusesARecordWhoseHeaderSizeIsNotItsSize) {
  rs_sched_switch e = Switch();
  e.h.size = sizeof(e) - 8;
  const std::vector<uint8_t> b = Bytes(e);
  RecordBatch r;
  EXPECT_FALSE(DecodeRecord(ViewOf(b), &r));
}

TEST(RecordsTest, RefusesARecordShorterThanItsType) {
  rs_sched_switch e = Switch();
  e.h.size = sizeof(rs_event_header) + 4;
  const std::vector<uint8_t> b = Bytes(e, e.h.size);
  RecordBatch r;
  EXPECT_FALSE(DecodeRecord(ViewOf(b), &r));
  // Shorter than even a header.
  EXPECT_FALSE(DecodeRecord(RecordView{b.data(), 3}, &r));
}

TEST(RecordsTest, ABatchKeepsTheWellFormedRecordsInOrderAndCountsTheRest) {
  rs_sched_switch a = Switch(), bad = Switch(), c = Switch();
  c.h.ts_ns = 99;
  bad.h.size = 3;
  const std::vector<uint8_t> ba = Bytes(a), bb = Bytes(bad), bc = Bytes(c);
  const RecordView views[] = {ViewOf(ba), ViewOf(bb), ViewOf(bc)};
  RecordBatch batch;
  EXPECT_EQ(batch.Decode(views), 1u);
  ASSERT_EQ(batch.records().size(), 2u);
  EXPECT_EQ(batch.records()[0].sched_switch().h.ts_ns, 1234u);
  EXPECT_EQ(batch.records()[1].sched_switch().h.ts_ns, 99u);
  // Aligned as a ring holds them: read where they lie.
  EXPECT_EQ(batch.records()[0].data, static_cast<const void*>(ba.data()));
}

TEST(RecordsTest, ABatchOfAlignedAndUnalignedRecordsReadsEachWhereItCan) {
  rs_sched_switch first = Switch(), second = Switch();
  second.h.ts_ns = 77;
  std::vector<uint64_t> words(2 * sizeof(rs_sched_switch) / 8 + 2);
  uint8_t* aligned = reinterpret_cast<uint8_t*>(words.data());
  uint8_t* unaligned = aligned + sizeof(rs_sched_switch) + 4;
  std::memcpy(aligned, &first, sizeof(first));
  std::memcpy(unaligned, &second, sizeof(second));
  const RecordView views[] = {{aligned, sizeof(first)}, {unaligned, sizeof(second)}};
  RecordBatch batch;
  ASSERT_EQ(batch.Decode(views), 0u);
  ASSERT_EQ(batch.records().size(), 2u);
  EXPECT_EQ(batch.records()[0].data, static_cast<const void*>(aligned));
  EXPECT_NE(batch.records()[1].data, static_cast<const void*>(unaligned));
  EXPECT_EQ(batch.records()[0].sched_switch().h.ts_ns, 1234u);
  EXPECT_EQ(batch.records()[1].sched_switch().h.ts_ns, 77u);
}

TEST(RecordsTest, AnUnalignedRecordIsReadFromAnAlignedCopy) {
  const std::vector<uint8_t> b = Bytes(Switch());
  std::vector<uint64_t> words(b.size() / 8 + 2);
  uint8_t* at = reinterpret_cast<uint8_t*>(words.data()) + 4;
  std::memcpy(at, b.data(), b.size());
  RecordBatch batch;
  const RecordView view{at, static_cast<uint32_t>(b.size())};
  ASSERT_EQ(batch.Decode(absl::Span<const RecordView>(&view, 1)), 0u);
  ASSERT_EQ(batch.records().size(), 1u);
  const Record& rec = batch.records()[0];
  EXPECT_NE(rec.data, static_cast<const void*>(at));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(rec.data) % alignof(uint64_t), 0u);
  EXPECT_EQ(rec.sched_switch().h.ts_ns, 1234u);
  EXPECT_EQ(CommOf(rec.sched_switch().next_comm), "next");
}

TEST(RecordsTest, ABatchCountsItsIncidentsAndTheNextDecodeStartsAfresh) {
  rs_fatal_signal crash{};
  crash.h.type = RS_EV_FATAL_SIGNAL;
  crash.h.size = sizeof(crash);
  crash.sig = 11;
  rs_oom_kill oom{};
  oom.h.type = RS_EV_OOM_KILL;
  oom.h.size = sizeof(oom);
  const std::vector<uint8_t> bs = Bytes(Switch()), bc = Bytes(crash), bo = Bytes(oom);
  const RecordView views[] = {ViewOf(bs), ViewOf(bc), ViewOf(bo)};
  RecordBatch batch;
  EXPECT_EQ(batch.Decode(views), 0u);
  EXPECT_EQ(batch.incidents(), 2u);
  EXPECT_EQ(batch.Decode(absl::Span<const RecordView>(views, 1)), 0u);
  EXPECT_EQ(batch.incidents(), 0u);
  ASSERT_EQ(batch.records().size(), 1u);  // None of the larger batch's records stays.
  EXPECT_EQ(batch.records()[0].type, static_cast<uint32_t>(RS_EV_SCHED_SWITCH));
}

// A view that is not aligned (never one from a ring) sends the whole batch
// down the copying path, whatever came before it in the batch: the records
// before it that were already taken are taken once, in order, and the
// malformed ones still refused.
TEST(RecordsTest, AnUnalignedViewAfterOthersDecodesTheBatchAsAWhole) {
  rs_fatal_signal crash{};
  crash.h.type = RS_EV_FATAL_SIGNAL;
  crash.h.size = sizeof(crash);
  rs_sched_switch bad = Switch();
  bad.h.size = 3;
  rs_sched_switch last = Switch();
  last.h.ts_ns = 55;
  const std::vector<uint8_t> bc = Bytes(crash), bb = Bytes(bad), bs = Bytes(Switch());
  std::vector<uint64_t> words(sizeof(last) / 8 + 2);
  uint8_t* unaligned = reinterpret_cast<uint8_t*>(words.data()) + 4;
  std::memcpy(unaligned, &last, sizeof(last));
  alignas(8) const uint8_t eight_bytes[8] = {};
  const RecordView views[] = {ViewOf(bc),
                              ViewOf(bb),
                              {eight_bytes, sizeof(eight_bytes)},
                              ViewOf(bs),
                              {unaligned, sizeof(last)}};
  RecordBatch batch;
  EXPECT_EQ(batch.Decode(views), 2u);
  ASSERT_EQ(batch.records().size(), 3u);
  EXPECT_EQ(batch.records()[0].type, static_cast<uint32_t>(RS_EV_FATAL_SIGNAL));
  EXPECT_EQ(batch.records()[0].data, static_cast<const void*>(bc.data()));
  EXPECT_EQ(batch.records()[1].data, static_cast<const void*>(bs.data()));
  EXPECT_EQ(batch.records()[2].sched_switch().h.ts_ns, 55u);
  EXPECT_EQ(batch.incidents(), 1u);
  EXPECT_TRUE(batch.HasAnyOf({RS_EV_FATAL_SIGNAL}));
  EXPECT_TRUE(batch.HasAnyOf({RS_EV_SCHED_SWITCH}));
  EXPECT_FALSE(batch.HasAnyOf({RS_EV_OOM_KILL}));
}

// The kinds a batch holds, for readers that skip the batches without theirs.
TEST(RecordsTest, ABatchSaysWhichKindsOfRecordItHolds) {
  rs_fatal_signal crash{};
  crash.h.type = RS_EV_FATAL_SIGNAL;
  crash.h.size = sizeof(crash);
  rs_sched_switch wrong = Switch();
  wrong.h.type = RS_EV_PROCESS_EXEC;  // Too short for one: refused.
  const std::vector<uint8_t> bs = Bytes(Switch()), bc = Bytes(crash), bw = Bytes(wrong);
  const RecordView views[] = {ViewOf(bs), ViewOf(bw), ViewOf(bc)};
  RecordBatch batch;
  EXPECT_EQ(batch.Decode(views), 1u);
  EXPECT_TRUE(batch.HasAnyOf({RS_EV_SCHED_SWITCH}));
  EXPECT_TRUE(batch.HasAnyOf({RS_EV_PROCESS_FORK, RS_EV_FATAL_SIGNAL}));
  EXPECT_FALSE(batch.HasAnyOf({RS_EV_PROCESS_EXEC}));
  EXPECT_FALSE(batch.HasAnyOf({RS_EV_STACK_BLOCKED, RS_EV_PROCESS_EXIT, RS_EV_MAX + 40}));
  EXPECT_EQ(batch.Decode(absl::Span<const RecordView>(views, 1)), 0u);
  EXPECT_FALSE(batch.HasAnyOf({RS_EV_FATAL_SIGNAL}));
}

TEST(RecordsTest, RefusesUnknownTypes) {
  for (uint16_t type : {uint16_t{0}, uint16_t{RS_EV_MAX}, uint16_t{12}, uint16_t{0xffff}}) {
    rs_sched_switch e = Switch();
    e.h.type = type;
    const std::vector<uint8_t> b = Bytes(e);
    RecordBatch r;
    EXPECT_FALSE(DecodeRecord(ViewOf(b), &r)) << type;
  }
}

TEST(RecordsTest, ExecStringsAreBoundedByTheirLengthsAndArrays) {
  rs_process_exec e{};
  e.h.type = RS_EV_PROCESS_EXEC;
  e.h.size = sizeof(e);
  std::memset(e.filename, 'f', sizeof(e.filename));
  std::memset(e.argv, 'a', sizeof(e.argv));
  e.filename_len = 0xffff;  // Hostile: beyond the arrays.
  e.argv_len = 0xffff;
  const std::vector<uint8_t> b = Bytes(e);
  RecordBatch r;
  ASSERT_TRUE(DecodeRecord(ViewOf(b), &r));
  const rs_process_exec& exec = r.records()[0].exec();
  EXPECT_EQ(ExecFilename(exec).size(), size_t{RS_FILENAME_LEN} - 1);
  EXPECT_EQ(ExecArgv(exec).size(), size_t{RS_ARGV_LEN});
  // An unterminated comm stops at the array's end.
  rs_process_exec copy = exec;
  std::memset(copy.comm, 'c', sizeof(copy.comm));
  EXPECT_EQ(CommOf(copy.comm).size(), size_t{RS_TASK_COMM_LEN});
}

}  // namespace
}  // namespace ringside::bpf
