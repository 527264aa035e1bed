#ifndef RINGSIDE_FTRACE_PAGE_PARSER_H_
#define RINGSIDE_FTRACE_PAGE_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ftrace/event_format.h"

namespace ringside::ftrace {

// One event record found on a page. `data` points into the page: the record
// as its format file describes it, starting with common_type.
struct RawEvent {
  uint64_t timestamp = 0;  // In the instance's trace_clock, ns.
  const uint8_t* data = nullptr;
  uint32_t size = 0;
};

// Parses the pages of a per-CPU kernel ring buffer (trace_pipe_raw), with the
// layout this kernel declares in header_page and header_event:
//
//   +-----------+--------------------+------------------------------------+
//   | timestamp | commit (+ flags)   | events ...               | missed? |
//   +-----------+--------------------+------------------------------------+
//   event: u32 header = type_len (low bits) | time_delta (high bits), then
//     type_len 1..28  data of type_len * 4 bytes
//     type_len 0      u32 length (incl. itself), then data
//     29 padding      (time_delta 0: the rest of the page; else u32 length)
//     30 time extend  u32: delta += value << time_delta_bits
//     31 timestamp    u32: absolute time = value << time_delta_bits | delta
//
// Untrusted input: a malformed page (lengths past the commit, a bad header)
// stops parsing that page with an error; nothing outside the page is read.
class PageParser {
 public:
  enum class Error {
    kNone,
    kShortPage,         // Smaller than the page header.
    kBadCommit,         // Commit size beyond the page.
    kShortEventHeader,  // An event header cut by the commit end.
    kShortTimeExtend,   // A time extend / timestamp cut by the commit end.
    kBadPadding,        // A padding length past the end.
    kZeroDataLength,    // A type_len 0 event with length < 4.
    kDataPastEnd,       // Event data past the commit end.
  };

  struct PageResult {
    uint64_t page_timestamp = 0;
    uint32_t data_bytes = 0;   // Committed bytes of events.
    bool lost_events = false;  // The kernel lost events before this page.
    uint64_t lost_count = 0;   // How many, when the kernel stored it (else 0).
    uint32_t events = 0;
    Error error = Error::kNone;
  };

  PageParser(PageHeaderFormat page, EventHeaderFormat event) : page_(page), event_(event) {}

  // Appends the page's data events to *events (its capacity is reused).
  PageResult Parse(const uint8_t* page, size_t size, std::vector<RawEvent>* events) const;

  const PageHeaderFormat& page_format() const { return page_; }

 private:
  PageHeaderFormat page_;
  EventHeaderFormat event_;
};

const char* PageErrorName(PageParser::Error error);

}  // namespace ringside::ftrace

#endif  // RINGSIDE_FTRACE_PAGE_PARSER_H_
