#ifndef RINGSIDE_TESTS_FTRACE_TESTING_FAKE_PAGE_H_
#define RINGSIDE_TESTS_FTRACE_TESTING_FAKE_PAGE_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ftrace/cpu_reader.h"
#include "ftrace/event_format.h"
#include "ftrace/event_table.h"
#include "tests/ftrace/testing/kernel_formats.h"

namespace ringside::ftrace::testing {

// Builds a ring-buffer page in this kernel's (the default) layout.
class FakePage {
 public:
  FakePage(uint64_t timestamp = 1000) : bytes_(4096, 0) {
    std::memcpy(bytes_.data(), &timestamp, 8);
  }
  FakePage& Data(uint32_t delta, const std::string& payload) {
    if (payload.size() <= 28 * 4 && payload.size() % 4 == 0 && !payload.empty()) {
      Header(static_cast<uint32_t>(payload.size() / 4), delta);
    } else {
      Header(0, delta);
      Word(static_cast<uint32_t>(payload.size() + 4));
    }
    Append(payload);
    return *this;
  }
  FakePage& TimeExtend(uint64_t delta) {
    Header(30, static_cast<uint32_t>(delta & ((1u << 27) - 1)));
    Word(static_cast<uint32_t>(delta >> 27));
    return *this;
  }
  FakePage& Absolute(uint64_t ts) {
    Header(31, static_cast<uint32_t>(ts & ((1u << 27) - 1)));
    Word(static_cast<uint32_t>(ts >> 27));
    return *this;
  }
  FakePage& Padding(uint32_t delta, uint32_t length) {
    Header(29, delta);
    Word(length);
    Append(std::string(length - 4, '\0'));
    return *this;
  }
  FakePage& Raw(const std::string& bytes) {
    Append(bytes);
    return *this;
  }
  // Sets commit to the bytes written, with the missed-events flags.
  std::vector<uint8_t> Finish(bool missed = false, uint64_t stored_count = 0) {
    uint64_t commit = used_;
    if (stored_count != 0) {
      std::memcpy(bytes_.data() + 16 + used_, &stored_count, 8);
      commit |= 1u << 30;
    }
    if (missed) commit |= 1u << 31;
    std::memcpy(bytes_.data() + 8, &commit, 8);
    return bytes_;
  }
  FakePage& SetCommit(uint64_t commit) {
    commit_override_ = commit;
    return *this;
  }
  std::vector<uint8_t> FinishWithCommit() {
    std::memcpy(bytes_.data() + 8, &commit_override_, 8);
    return bytes_;
  }

 private:
  void Header(uint32_t type_len, uint32_t delta) { Word(type_len | delta << 5); }
  void Word(uint32_t w) {
    std::memcpy(bytes_.data() + 16 + used_, &w, 4);
    used_ += 4;
  }
  void Append(const std::string& s) {
    std::memcpy(bytes_.data() + 16 + used_, s.data(), s.size());
    used_ += static_cast<uint32_t>(s.size());
  }
  std::vector<uint8_t> bytes_;
  uint32_t used_ = 0;
  uint64_t commit_override_ = 0;
};

// A sched_switch record (kSchedSwitchFormat's layout and id) from `prev`
// to `next`, the previous task left sleeping.
inline std::string SchedSwitchRecord(int32_t prev, const char* prev_comm, int32_t next,
                                     const char* next_comm) {
  std::string r(64, '\0');
  const uint16_t id = 372;
  std::memcpy(r.data(), &id, 2);
  std::memcpy(r.data() + 4, &prev, 4);
  std::strncpy(r.data() + 8, prev_comm, 15);
  std::memcpy(r.data() + 24, &prev, 4);
  const int64_t state = 1;  // S
  std::memcpy(r.data() + 32, &state, 8);
  std::strncpy(r.data() + 40, next_comm, 15);
  std::memcpy(r.data() + 56, &next, 4);
  return r;
}

// A trace_marker write of `text` (kPrintFormat's layout and id).
inline std::string PrintRecord(const std::string& text) {
  std::string r(16, '\0');
  const uint16_t id = 5;
  std::memcpy(r.data(), &id, 2);
  r += text;
  r.push_back('\0');
  r.resize((r.size() + 3) / 4 * 4, '\0');
  return r;
}

// The formats of kSchedSwitchFormat and kPrintFormat: what the records
// above are.
inline EventTable SchedSwitchAndPrintTable() {
  EventTable table;
  for (auto [group, text] :
       {std::pair{"sched", kSchedSwitchFormat}, std::pair{"ftrace", kPrintFormat}}) {
    absl::StatusOr<EventFormat> format = ParseEventFormat(group, text);
    if (format.ok()) table.Add(*std::move(format));
  }
  return table;
}

// A reader of `pages`, then `trailing_bytes` more, as CPU `cpu`'s
// trace_pipe_raw gives them.
inline std::unique_ptr<CpuReader> CpuReaderOfPages(int cpu,
                                                   const std::vector<std::vector<uint8_t>>& pages,
                                                   size_t trailing_bytes = 0) {
  const int fd = memfd_create("pages", MFD_CLOEXEC);
  std::string bytes;
  for (const std::vector<uint8_t>& p : pages) bytes.append(p.begin(), p.end());
  bytes.append(trailing_bytes, 'x');
  if (fd < 0 || write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()) ||
      lseek(fd, 0, SEEK_SET) != 0) {
    return nullptr;
  }
  return CpuReader::FromFdForTesting(cpu, fd, 4096);
}

}  // namespace ringside::ftrace::testing

#endif  // RINGSIDE_TESTS_FTRACE_TESTING_FAKE_PAGE_H_
