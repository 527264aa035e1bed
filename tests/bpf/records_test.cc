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
  Record r;
  ASSERT_TRUE(DecodeRecord(RecordView{b.data(), static_cast<uint32_t>(b.size())}, &r));
  EXPECT_EQ(r.type, uint32_t{RS_EV_SCHED_SWITCH});
  EXPECT_EQ(r.sched_switch.h.ts_ns, 1234u);
  EXPECT_EQ(r.sched_switch.prev_pid, 7);
  EXPECT_EQ(r.sched_switch.next_pid, 8);
  EXPECT_EQ(CommOf(r.sched_switch.next_comm), "next");
}

TEST(RecordsTest, RefusesARecordWhoseHeaderSizeIsNotItsSize) {
  rs_sched_switch e = Switch();
  e.h.size = sizeof(e) - 8;
  const std::vector<uint8_t> b = Bytes(e);
  Record r;
  EXPECT_FALSE(DecodeRecord(RecordView{b.data(), static_cast<uint32_t>(b.size())}, &r));
}

TEST(RecordsTest, RefusesARecordShorterThanItsType) {
  rs_sched_switch e = Switch();
  e.h.size = sizeof(rs_event_header) + 4;
  const std::vector<uint8_t> b = Bytes(e, e.h.size);
  Record r;
  EXPECT_FALSE(DecodeRecord(RecordView{b.data(), static_cast<uint32_t>(b.size())}, &r));
  // Shorter than even a header.
  EXPECT_FALSE(DecodeRecord(RecordView{b.data(), 3}, &r));
}

TEST(RecordsTest, RefusesUnknownTypes) {
  for (uint16_t type : {uint16_t{0}, uint16_t{RS_EV_MAX}, uint16_t{12}, uint16_t{0xffff}}) {
    rs_sched_switch e = Switch();
    e.h.type = type;
    const std::vector<uint8_t> b = Bytes(e);
    Record r;
    EXPECT_FALSE(DecodeRecord(RecordView{b.data(), static_cast<uint32_t>(b.size())}, &r)) << type;
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
  Record r;
  ASSERT_TRUE(DecodeRecord(RecordView{b.data(), static_cast<uint32_t>(b.size())}, &r));
  EXPECT_EQ(ExecFilename(r.exec).size(), size_t{RS_FILENAME_LEN} - 1);
  EXPECT_EQ(ExecArgv(r.exec).size(), size_t{RS_ARGV_LEN});
  // An unterminated comm stops at the array's end.
  std::memset(r.exec.comm, 'c', sizeof(r.exec.comm));
  EXPECT_EQ(CommOf(r.exec.comm).size(), size_t{RS_TASK_COMM_LEN});
}

}  // namespace
}  // namespace ringside::bpf
