#ifndef RINGSIDE_FTRACE_EVENT_FORMAT_H_
#define RINGSIDE_FTRACE_EVENT_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace ringside::ftrace {

// One field of an event record, from its format file:
//   field:char prev_comm[16];	offset:8;	size:16;	signed:0;
struct FieldFormat {
  enum class Kind {
    kInteger,         // 1, 2, 4 or 8 bytes.
    kFixedCharArray,  // char x[N]: a NUL-padded string.
    kCharTail,        // char x[] of size 0: a string to the end of the record.
    kDataLocString,   // __data_loc char[] x: u32 (length << 16 | offset) to a string.
    kDataLocArray,    // __data_loc <type>[] x: the same, to an array.
    kPointer,         // Any pointer: an address.
    kOther,           // Arrays of non-char and anything else: raw bytes.
  };
  std::string name;
  std::string declaration;  // "char prev_comm[16]".
  uint32_t offset = 0;
  uint32_t size = 0;
  bool is_signed = false;
  Kind kind = Kind::kInteger;
};

// The record layout of one event: events/<group>/<name>/format.
struct EventFormat {
  std::string group;
  std::string name;
  uint32_t id = 0;
  std::vector<FieldFormat> common_fields;  // common_type, common_pid, ...
  std::vector<FieldFormat> fields;         // The event's own.

  const FieldFormat* FindField(absl::string_view field_name) const;
};

// Parses a format file. Errors name the line that is wrong.
absl::StatusOr<EventFormat> ParseEventFormat(absl::string_view group, absl::string_view text);

// The ring-buffer page header, from events/header_page:
//   field: u64 timestamp;	offset:0;	size:8;	signed:0;
//   field: local_t commit;	offset:8;	size:8;	signed:1;
//   field: char data;	offset:16;	size:4080;	signed:0;
struct PageHeaderFormat {
  uint32_t timestamp_offset = 0;
  uint32_t timestamp_size = 8;
  uint32_t commit_offset = 8;
  uint32_t commit_size = 8;
  uint32_t data_offset = 16;
  uint32_t data_size = 4080;  // Bytes of event data a page holds.
  uint32_t page_size() const { return data_offset + data_size; }
};
absl::StatusOr<PageHeaderFormat> ParseHeaderPage(absl::string_view text);

// The compressed event header, from events/header_event.
struct EventHeaderFormat {
  uint32_t type_len_bits = 5;
  uint32_t time_delta_bits = 27;
  uint32_t padding_type = 29;
  uint32_t time_extend_type = 30;
  uint32_t time_stamp_type = 31;
  uint32_t max_data_type_len = 28;
};
absl::StatusOr<EventHeaderFormat> ParseHeaderEvent(absl::string_view text);

}  // namespace ringside::ftrace

#endif  // RINGSIDE_FTRACE_EVENT_FORMAT_H_
