// libFuzzer target: the bytes of a config file (-c FILE, or a SIGHUP
// reload), through what `ringside record` and `ringside agent` do with
// them before anything starts: ParseConfig (text format, then every
// check), the agent's defaults and ValidateConfig, and the reload plan
// against the agent's running default.
//
// Checked beyond "no crash, no UB, no leak": an error is InvalidArgument
// and names the file; an accepted config passes ValidateConfig again once
// the agent's defaults are in, and survives a round trip through text
// format unchanged (ApplyDefaults is idempotent, so the effective config
// written into a trace reads back as itself). The seeds (tests/fuzz/
// corpus/config_text) are the deploy/configs examples and a few configs
// of every section.

#include <cstdlib>
#include <string>

#include "agent/config/config_loader.h"
#include "agent/config/config_reload.h"
#include "agent/config/defaults.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"

namespace {

constexpr char kFileName[] = "fuzz.pbtxt";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ringside::agent::ParseConfig;
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ringside::config::TraceConfig> cfg = ParseConfig(text, kFileName);
  if (!cfg.ok()) {
    if (cfg.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    if (cfg.status().message().rfind(std::string(kFileName) + ": ", 0) != 0) std::abort();
    return 0;
  }

  std::string printed;
  if (!google::protobuf::TextFormat::PrintToString(*cfg, &printed)) std::abort();
  absl::StatusOr<ringside::config::TraceConfig> again = ParseConfig(printed, kFileName);
  if (!again.ok() || !google::protobuf::util::MessageDifferencer::Equals(*cfg, *again)) {
    std::abort();
  }

  ringside::config::TraceConfig agent = *cfg;
  ringside::agent::ApplyAgentDefaults(&agent);
  if (!ringside::agent::ValidateConfig(agent, kFileName).ok()) std::abort();
  static const auto* running =
      new ringside::config::TraceConfig(ringside::agent::DefaultAgentConfig());
  const ringside::agent::ReloadPlan plan = ringside::agent::PlanReload(*running, agent);
  if (!ringside::agent::ValidateConfig(plan.next, kFileName).ok()) std::abort();
  return 0;
}
