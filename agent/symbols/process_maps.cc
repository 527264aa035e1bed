#include "agent/symbols/process_maps.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/small_file.h"

namespace ringside::agent {
namespace {

constexpr absl::string_view kDeleted = " (deleted)";

// Parses 1 to `max_digits` digits of `base` (16 or 10) from the front of
// `s`, advancing it; false on none, too many, or overflow.
bool ConsumeNumber(absl::string_view* s, int base, size_t max_digits, uint64_t* value) {
  uint64_t v = 0;
  size_t i = 0;
  for (; i < s->size(); ++i) {
    const char c = (*s)[i];
    uint64_t digit;
    if (c >= '0' && c <= '9') {
      digit = static_cast<uint64_t>(c - '0');
    } else if (base == 16 && c >= 'a' && c <= 'f') {
      digit = static_cast<uint64_t>(c - 'a' + 10);
    } else {
      break;
    }
    if (i == max_digits || v > (~uint64_t{0} - digit) / static_cast<uint64_t>(base)) return false;
    v = v * static_cast<uint64_t>(base) + digit;
  }
  if (i == 0) return false;
  s->remove_prefix(i);
  *value = v;
  return true;
}

bool ConsumeChar(absl::string_view* s, char c) {
  if (s->empty() || (*s)[0] != c) return false;
  s->remove_prefix(1);
  return true;
}

bool ParsePerms(absl::string_view* s, MapsEntry* e) {
  if (s->size() < 4) return false;
  const absl::string_view p = s->substr(0, 4);
  if ((p[0] != 'r' && p[0] != '-') || (p[1] != 'w' && p[1] != '-') ||
      (p[2] != 'x' && p[2] != '-') || (p[3] != 'p' && p[3] != 's')) {
    return false;
  }
  e->readable = p[0] == 'r';
  e->writable = p[1] == 'w';
  e->executable = p[2] == 'x';
  e->shared = p[3] == 's';
  s->remove_prefix(4);
  return true;
}

bool ParseLine(absl::string_view line, MapsEntry* e) {
  uint64_t major, minor;
  if (!ConsumeNumber(&line, 16, 16, &e->start) || !ConsumeChar(&line, '-') ||
      !ConsumeNumber(&line, 16, 16, &e->end) || e->end <= e->start || !ConsumeChar(&line, ' ') ||
      !ParsePerms(&line, e) || !ConsumeChar(&line, ' ') ||
      !ConsumeNumber(&line, 16, 16, &e->pgoff) || !ConsumeChar(&line, ' ') ||
      !ConsumeNumber(&line, 16, 8, &major) || !ConsumeChar(&line, ':') ||
      !ConsumeNumber(&line, 16, 8, &minor) || !ConsumeChar(&line, ' ') ||
      !ConsumeNumber(&line, 10, 20, &e->inode)) {
    return false;
  }
  e->dev_major = static_cast<uint32_t>(major);
  e->dev_minor = static_cast<uint32_t>(minor);
  if (!line.empty() && line[0] != ' ') return false;
  while (!line.empty() && line[0] == ' ') line.remove_prefix(1);
  if (line.empty()) {
    e->kind = MapsEntry::Kind::kAnonymous;
    return true;
  }
  if (line[0] == '/') {
    e->kind = MapsEntry::Kind::kFile;
    e->deleted = absl::EndsWith(line, kDeleted);
    if (e->deleted) line.remove_suffix(kDeleted.size());
  } else {
    e->kind = MapsEntry::Kind::kSpecial;
  }
  e->path.assign(line.data(), line.size());
  return true;
}

}  // namespace

ProcessMaps ProcessMaps::Parse(absl::string_view text) {
  ProcessMaps maps;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const absl::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == absl::string_view::npos ? text.size() : eol + 1);
    if (line.empty()) continue;
    MapsEntry e;
    if (ParseLine(line, &e)) {
      maps.entries_.push_back(std::move(e));
    } else {
      ++maps.malformed_lines_;
    }
  }
  std::stable_sort(maps.entries_.begin(), maps.entries_.end(),
                   [](const MapsEntry& a, const MapsEntry& b) { return a.start < b.start; });
  // The kernel's mappings never overlap; a line that overlaps the one
  // before it is not the kernel's, and would hide that one from Find.
  size_t kept = 0;
  for (size_t i = 0; i < maps.entries_.size(); ++i) {
    if (kept > 0 && maps.entries_[i].start < maps.entries_[kept - 1].end) {
      ++maps.malformed_lines_;
      continue;
    }
    if (kept != i) maps.entries_[kept] = std::move(maps.entries_[i]);
    ++kept;
  }
  maps.entries_.resize(kept);
  maps.entries_.shrink_to_fit();
  return maps;
}

absl::StatusOr<ProcessMaps> ProcessMaps::Read(const std::string& proc_root, pid_t pid) {
  absl::StatusOr<std::string> text =
      base::ReadFileUpTo(absl::StrCat(proc_root, "/", pid, "/maps"), kMaxFileBytes);
  if (!text.ok()) return text.status();
  return Parse(*text);
}

const MapsEntry* ProcessMaps::Find(uint64_t addr) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), addr,
                             [](uint64_t a, const MapsEntry& e) { return a < e.start; });
  if (it == entries_.begin()) return nullptr;
  const MapsEntry& e = *(it - 1);
  return addr < e.end ? &e : nullptr;
}

size_t ProcessMaps::memory_bytes() const {
  size_t bytes = sizeof(*this) + entries_.capacity() * sizeof(MapsEntry);
  for (const MapsEntry& e : entries_) {
    if (e.path.capacity() > 15) bytes += e.path.capacity() + 1;  // past the inline buffer
  }
  return bytes;
}

}  // namespace ringside::agent
