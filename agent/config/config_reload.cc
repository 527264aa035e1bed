#include "agent/config/config_reload.h"

#include <algorithm>
#include <iterator>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/message_differencer.h"

namespace ringside::agent {
namespace {

using google::protobuf::FieldDescriptor;

// TraceConfig fields the agent reads each time it uses them.
constexpr const char* kLiveFields[] = {"output_dir",
                                       "trigger_config",
                                       "max_snapshot_files",
                                       "max_snapshot_bytes",
                                       "snapshot_request_cooldown_ms",
                                       "max_snapshot_requests_per_hour"};

bool IsLive(const FieldDescriptor* f) {
  return std::find(std::begin(kLiveFields), std::end(kLiveFields), f->name()) !=
         std::end(kLiveFields);
}

bool Differs(const config::TraceConfig& a, const config::TraceConfig& b,
             const FieldDescriptor* field) {
  google::protobuf::util::MessageDifferencer d;
  const google::protobuf::Descriptor* desc = config::TraceConfig::descriptor();
  for (int i = 0; i < desc->field_count(); i++) {
    if (desc->field(i) != field) d.IgnoreField(desc->field(i));
  }
  return !d.Compare(a, b);
}

}  // namespace

ReloadPlan PlanReload(const config::TraceConfig& running, const config::TraceConfig& loaded) {
  ReloadPlan plan;
  plan.next = running;
  const google::protobuf::Descriptor* desc = config::TraceConfig::descriptor();
  const google::protobuf::Reflection* r = config::TraceConfig::GetReflection();
  for (int i = 0; i < desc->field_count(); i++) {
    const FieldDescriptor* f = desc->field(i);
    if (!Differs(running, loaded, f)) continue;
    if (!IsLive(f)) {
      plan.kept.push_back(f->name());
      continue;
    }
    // The field alone, from the loaded config, over the running one's.
    config::TraceConfig only = loaded;
    for (int j = 0; j < desc->field_count(); j++) {
      if (j != i) r->ClearField(&only, desc->field(j));
    }
    r->ClearField(&plan.next, f);
    plan.next.MergeFrom(only);
    plan.applied.push_back(f->name());
  }
  return plan;
}

}  // namespace ringside::agent
