#ifndef RINGSIDE_AGENT_CONFIG_INTERNAL_CONFIG_VALIDATOR_H_
#define RINGSIDE_AGENT_CONFIG_INTERNAL_CONFIG_VALIDATOR_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/config/config_limits.h"
#include "google/protobuf/text_format.h"
#include "ringside/config/trace_config.pb.h"

// What the checks of config_validation.cc and its data sources'
// (config_validation_sources.cc) share: the validator that makes the first
// problem an error naming the file, the line and the field, and the checks
// of values both use.
namespace ringside::agent::internal {

// A field of the config by its path from the root, e.g.
// {{"data_sources", 0}, {"config", -1}, {"bpf_config", -1}, {"ring_size_kb", -1}}
// (index -1: not repeated).
using FieldPath = std::vector<std::pair<std::string, int>>;

inline std::string PathText(const FieldPath& path) {
  std::string text;
  for (const auto& [name, index] : path) {
    absl::StrAppend(&text, text.empty() ? "" : ".", name);
    if (index >= 0) absl::StrAppend(&text, "[", index, "]");
  }
  return text;
}

// `at` and one field below it.
inline FieldPath Child(FieldPath at, const std::string& name, int index = -1) {
  at.push_back({name, index});
  return at;
}

// Checks values against what ringside and the kernel can do; the first
// problem becomes an error naming the file, the line and the field.
class Validator {
 public:
  Validator(const std::string& file_name, const google::protobuf::TextFormat::ParseInfoTree* tree)
      : file_name_(file_name), tree_(tree) {}

  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }

  // Records "file: line L, column C: <field> <problem>" unless an error is
  // already recorded.
  void Fail(const FieldPath& path, const std::string& problem) {
    if (!status_.ok()) return;
    status_ = absl::InvalidArgumentError(
        absl::StrCat(file_name_, ": ", Where(path), PathText(path), " ", problem));
  }

 private:
  // Where the field was written; for a field left out (an empty name, no
  // kinds), where the innermost section holding it was.
  std::string Where(const FieldPath& path) const {
    const google::protobuf::Descriptor* d = config::TraceConfig::descriptor();
    const google::protobuf::TextFormat::ParseInfoTree* tree = tree_;
    google::protobuf::TextFormat::ParseLocation found;
    for (size_t i = 0; tree != nullptr && d != nullptr && i < path.size(); i++) {
      const google::protobuf::FieldDescriptor* f = d->FindFieldByName(path[i].first);
      if (f == nullptr) break;
      const int index = f->is_repeated() ? std::max(path[i].second, 0) : -1;
      const auto loc = tree->GetLocation(f, index);
      if (loc.line >= 0) found = loc;
      if (i + 1 == path.size()) break;
      tree = tree->GetTreeForNested(f, index);
      d = f->message_type();
    }
    if (found.line < 0) return "";
    return absl::StrCat("line ", found.line + 1, ", column ", found.column + 1, ": ");
  }

  std::string file_name_;
  const google::protobuf::TextFormat::ParseInfoTree* tree_;
  absl::Status status_;
};

// "4 MiB", "1 GiB", "12 KiB": `kb` in the largest unit that divides it.
inline std::string Kb(uint64_t kb) {
  if (kb >= (1 << 20) && kb % (1 << 20) == 0) return absl::StrCat(kb >> 20, " GiB");
  if (kb >= (1 << 10) && kb % (1 << 10) == 0) return absl::StrCat(kb >> 10, " MiB");
  return absl::StrCat(kb, " KiB");
}

// A cgroup's path below the cgroup2 mount (filters of incidents and of
// linux.bpf).
void CheckCgroupPath(const std::string& path, const FieldPath& at, Validator* v);

// config_validation_sources.cc: data_sources[i] (a known name, a buffer
// that exists, no twin before it writing into the same buffer, and its own
// settings), and the buffers no source writes into.
void CheckDataSource(const config::TraceConfig& cfg, int i, const MachineLimits& machine,
                     Validator* v);
void CheckEveryBufferIsWritten(const config::TraceConfig& cfg, Validator* v);

// config_validation_triggers.cc: what fires triggers[i] by itself (its
// incident filter or its pressure threshold, at most one).
void CheckTriggerKind(const config::TraceConfig::TriggerConfig::Trigger& t, const FieldPath& at,
                      Validator* v);

}  // namespace ringside::agent::internal

#endif  // RINGSIDE_AGENT_CONFIG_INTERNAL_CONFIG_VALIDATOR_H_
