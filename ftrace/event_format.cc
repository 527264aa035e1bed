#include "ftrace/event_format.h"

#include <cctype>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringside::ftrace {
namespace {

// The value of "key:value;" in a format line, or empty.
absl::string_view Attribute(absl::string_view line, absl::string_view key) {
  const size_t at = line.find(key);
  if (at == absl::string_view::npos) return {};
  const size_t begin = at + key.size();
  const size_t end = line.find(';', begin);
  if (end == absl::string_view::npos) return {};
  return absl::StripAsciiWhitespace(line.substr(begin, end - begin));
}

// "char prev_comm[16]" -> "prev_comm"; "unsigned long ip" -> "ip".
std::string FieldName(absl::string_view declaration) {
  absl::string_view d = declaration;
  const size_t bracket = d.rfind('[');
  // "__data_loc char[] name": the brackets belong to the type.
  if (bracket != absl::string_view::npos && d.find(']', bracket) == d.size() - 1) {
    d = d.substr(0, bracket);
  }
  d = absl::StripTrailingAsciiWhitespace(d);
  size_t begin = d.size();
  while (begin > 0 &&
         (std::isalnum(static_cast<unsigned char>(d[begin - 1])) || d[begin - 1] == '_')) {
    begin--;
  }
  return std::string(d.substr(begin));
}

FieldFormat::Kind Classify(absl::string_view declaration, uint32_t size) {
  using Kind = FieldFormat::Kind;
  if (absl::StartsWith(declaration, "__data_loc")) {
    return absl::StrContains(declaration, "char[]") ? Kind::kDataLocString : Kind::kDataLocArray;
  }
  if (absl::StrContains(declaration, "*")) return Kind::kPointer;
  const bool is_array = absl::EndsWith(declaration, "]");
  const bool is_char =
      absl::StartsWith(declaration, "char ") || absl::StartsWith(declaration, "const char ") ||
      absl::StartsWith(declaration, "unsigned char ") || absl::StartsWith(declaration, "u8 ");
  if (is_array) {
    if (!is_char) return Kind::kOther;
    return size == 0 ? Kind::kCharTail : Kind::kFixedCharArray;
  }
  if (size == 1 || size == 2 || size == 4 || size == 8) return Kind::kInteger;
  return Kind::kOther;
}

absl::StatusOr<FieldFormat> ParseFieldLine(absl::string_view line, size_t line_number) {
  FieldFormat f;
  const absl::string_view declaration = Attribute(line, "field:");
  const absl::string_view offset = Attribute(line, "offset:");
  const absl::string_view size = Attribute(line, "size:");
  const absl::string_view is_signed = Attribute(line, "signed:");
  if (declaration.empty() || !absl::SimpleAtoi(offset, &f.offset) ||
      !absl::SimpleAtoi(size, &f.size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("format line ", line_number, ": cannot parse field '", line, "'"));
  }
  f.declaration = std::string(declaration);
  f.name = FieldName(declaration);
  f.is_signed = is_signed == "1";
  f.kind = Classify(declaration, f.size);
  if (f.name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("format line ", line_number, ": no field name in '", declaration, "'"));
  }
  return f;
}

// Field lines of a header_page file, by name.
absl::StatusOr<FieldFormat> HeaderField(absl::string_view text, absl::string_view name) {
  size_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line_number++;
    if (!absl::StrContains(line, "field:")) continue;
    absl::StatusOr<FieldFormat> f = ParseFieldLine(line, line_number);
    if (!f.ok()) return f.status();
    if (f->name == name) return f;
  }
  return absl::InvalidArgumentError(absl::StrCat("header_page has no '", name, "' field"));
}

}  // namespace

const FieldFormat* EventFormat::FindField(absl::string_view field_name) const {
  for (const FieldFormat& f : fields) {
    if (f.name == field_name) return &f;
  }
  for (const FieldFormat& f : common_fields) {
    if (f.name == field_name) return &f;
  }
  return nullptr;
}

absl::StatusOr<EventFormat> ParseEventFormat(absl::string_view group, absl::string_view text) {
  EventFormat format;
  format.group = std::string(group);
  bool has_id = false;
  size_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line_number++;
    const absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (absl::StartsWith(trimmed, "name:")) {
      format.name = std::string(absl::StripAsciiWhitespace(trimmed.substr(5)));
    } else if (absl::StartsWith(trimmed, "ID:")) {
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(trimmed.substr(3)), &format.id)) {
        return absl::InvalidArgumentError(
            absl::StrCat("format line ", line_number, ": bad ID '", trimmed, "'"));
      }
      has_id = true;
    } else if (absl::StartsWith(trimmed, "field:")) {
      absl::StatusOr<FieldFormat> f = ParseFieldLine(trimmed, line_number);
      if (!f.ok()) return f.status();
      if (absl::StartsWith(f->name, "common_")) {
        format.common_fields.push_back(std::move(*f));
      } else {
        format.fields.push_back(std::move(*f));
      }
    } else if (absl::StartsWith(trimmed, "print fmt:")) {
      break;
    }
  }
  if (format.name.empty() || !has_id) {
    return absl::InvalidArgumentError("format has no name or ID line");
  }
  return format;
}

absl::StatusOr<PageHeaderFormat> ParseHeaderPage(absl::string_view text) {
  absl::StatusOr<FieldFormat> timestamp = HeaderField(text, "timestamp");
  absl::StatusOr<FieldFormat> commit = HeaderField(text, "commit");
  absl::StatusOr<FieldFormat> data = HeaderField(text, "data");
  if (!timestamp.ok()) return timestamp.status();
  if (!commit.ok()) return commit.status();
  if (!data.ok()) return data.status();
  PageHeaderFormat f;
  f.timestamp_offset = timestamp->offset;
  f.timestamp_size = timestamp->size;
  f.commit_offset = commit->offset;
  f.commit_size = commit->size;
  f.data_offset = data->offset;
  f.data_size = data->size;
  if (f.timestamp_size != 8 || (f.commit_size != 4 && f.commit_size != 8) || f.data_size == 0 ||
      f.data_offset < f.commit_offset + f.commit_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "header_page layout not understood: timestamp size ", f.timestamp_size, ", commit size ",
        f.commit_size, ", data at ", f.data_offset, " size ", f.data_size));
  }
  return f;
}

absl::StatusOr<EventHeaderFormat> ParseHeaderEvent(absl::string_view text) {
  EventHeaderFormat f;
  bool has_type_len = false, has_time_delta = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const absl::string_view t = absl::StripAsciiWhitespace(line);
    uint32_t value = 0;
    auto number_after = [&](absl::string_view sep) {
      const size_t at = t.find(sep);
      if (at == absl::string_view::npos) return false;
      absl::string_view rest = absl::StripAsciiWhitespace(t.substr(at + sep.size()));
      rest = rest.substr(0, rest.find(' '));
      return absl::SimpleAtoi(rest, &value);
    };
    if (absl::StartsWith(t, "type_len") && number_after(":")) {
      f.type_len_bits = value;
      has_type_len = true;
    } else if (absl::StartsWith(t, "time_delta") && number_after(":")) {
      f.time_delta_bits = value;
      has_time_delta = true;
    } else if (absl::StartsWith(t, "padding") && number_after("==")) {
      f.padding_type = value;
    } else if (absl::StartsWith(t, "time_extend") && number_after("==")) {
      f.time_extend_type = value;
    } else if (absl::StartsWith(t, "time_stamp") && number_after("==")) {
      f.time_stamp_type = value;
    } else if (absl::StartsWith(t, "data max type_len") && number_after("==")) {
      f.max_data_type_len = value;
    }
  }
  if (!has_type_len || !has_time_delta || f.type_len_bits + f.time_delta_bits != 32) {
    return absl::InvalidArgumentError("header_event layout not understood");
  }
  return f;
}

}  // namespace ringside::ftrace
