#include "ftrace/page_parser.h"

#include <cstring>

namespace ringside::ftrace {
namespace {

constexpr uint64_t kMissedEvents = 1u << 31;
constexpr uint64_t kMissedStored = 1u << 30;
constexpr uint64_t kCommitSizeMask = (1u << 30) - 1;

inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline uint64_t LoadN(const uint8_t* p, uint32_t size) {
  if (size == 4) return Load32(p);
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Walks the records of a page's data, [p, end), from its timestamp:
// appends the data records to `events` with their times and counts them
// in `r`; a malformed record stops the walk with r.error set. Inline: one
// call a page, part of Parse() in the compiled code.
inline void ParseRecords(const EventHeaderFormat& format, const uint8_t* p, const uint8_t* end,
                         std::vector<RawEvent>* events, PageParser::PageResult& r) {
  const uint32_t type_mask = (1u << format.type_len_bits) - 1;
  uint64_t ts = r.page_timestamp;
  while (p < end) {
    if (end - p < 4) {
      r.error = PageParser::Error::kShortEventHeader;
      return;
    }
    const uint32_t header = Load32(p);
    const uint32_t type_len = header & type_mask;
    const uint32_t delta = header >> format.type_len_bits;
    if (type_len == format.padding_type) {
      if (delta == 0) return;  // The rest of the page is padding.
      if (end - p < 8) {
        r.error = PageParser::Error::kBadPadding;
        return;
      }
      const uint32_t length = Load32(p + 4);
      if (length < 4 || length > static_cast<uint64_t>(end - p) - 4) {
        r.error = PageParser::Error::kBadPadding;
        return;
      }
      ts += delta;
      p += 4 + length;
    } else if (type_len == format.time_extend_type || type_len == format.time_stamp_type) {
      if (end - p < 8) {
        r.error = PageParser::Error::kShortTimeExtend;
        return;
      }
      const uint64_t high = uint64_t{Load32(p + 4)} << format.time_delta_bits;
      if (type_len == format.time_extend_type) {
        ts += high | delta;
      } else {
        ts = high | delta;
      }
      p += 8;
    } else if (type_len == 0) {
      if (end - p < 8) {
        r.error = PageParser::Error::kShortEventHeader;
        return;
      }
      const uint32_t length = Load32(p + 4);  // Counts itself.
      if (length < 4) {
        r.error = PageParser::Error::kZeroDataLength;
        return;
      }
      if (length > static_cast<uint64_t>(end - p) - 4) {
        r.error = PageParser::Error::kDataPastEnd;
        return;
      }
      ts += delta;
      events->push_back(RawEvent{ts, p + 8, length - 4});
      r.events++;
      p += 4 + length;
    } else if (type_len <= format.max_data_type_len) {
      const uint32_t length = type_len * 4;
      if (length > static_cast<uint64_t>(end - p) - 4) {
        r.error = PageParser::Error::kDataPastEnd;
        return;
      }
      ts += delta;
      events->push_back(RawEvent{ts, p + 4, length});
      r.events++;
      p += 4 + length;
    } else {
      // Only reachable with a header_event this parser does not know.
      r.error = PageParser::Error::kShortEventHeader;
      return;
    }
  }
}

}  // namespace

PageParser::PageResult PageParser::Parse(const uint8_t* page, size_t size,
                                         std::vector<RawEvent>* events) const {
  PageResult r;
  if (size < page_.data_offset) {
    r.error = Error::kShortPage;
    return r;
  }
  r.page_timestamp = LoadN(page + page_.timestamp_offset, page_.timestamp_size);
  const uint64_t commit = LoadN(page + page_.commit_offset, page_.commit_size);
  const uint64_t data_bytes = commit & kCommitSizeMask;
  const size_t capacity = size - page_.data_offset;
  if (data_bytes > capacity) {
    r.error = Error::kBadCommit;
    return r;
  }
  r.data_bytes = static_cast<uint32_t>(data_bytes);
  r.lost_events = (commit & kMissedEvents) != 0;
  const uint8_t* begin = page + page_.data_offset;
  const uint8_t* end = begin + data_bytes;
  if ((commit & kMissedStored) != 0 && capacity - data_bytes >= sizeof(uint64_t)) {
    std::memcpy(&r.lost_count, end, sizeof(uint64_t));
  }
  ParseRecords(event_, begin, end, events, r);
  return r;
}

const char* PageErrorName(PageParser::Error error) {
  switch (error) {
    case PageParser::Error::kNone:
      return "none";
    case PageParser::Error::kShortPage:
      return "short page";
    case PageParser::Error::kBadCommit:
      return "commit size beyond the page";
    case PageParser::Error::kShortEventHeader:
      return "event header cut short";
    case PageParser::Error::kShortTimeExtend:
      return "time extend cut short";
    case PageParser::Error::kBadPadding:
      return "bad padding length";
    case PageParser::Error::kZeroDataLength:
      return "zero data length";
    case PageParser::Error::kDataPastEnd:
      return "event data past the end";
  }
  return "unknown";
}

}  // namespace ringside::ftrace
