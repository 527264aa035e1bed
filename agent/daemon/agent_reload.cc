// AgentService's config reload (SIGHUP, `systemctl reload`): the new file
// loaded and checked, what can change live applied, what needs a restart
// named, and what `status` says of it.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/config/config_loader.h"
#include "agent/config/config_reload.h"
#include "agent/config/config_validation.h"
#include "agent/config/defaults.h"
#include "agent/daemon/agent_service.h"
#include "agent/output/output_dir.h"
#include "agent/snapshots/snapshot_retention.h"

namespace ringside::agent {

void AgentService::Reload() {
  notifier_.Reloading();
  {
    absl::MutexLock lock(&mu_);
    reload_.set_count(reload_.count() + 1);
  }
  if (options_.config_path.empty()) {
    log_.Notice("SIGHUP: running on the embedded default config; nothing to reload");
    notifier_.Ready(HealthLine());
    return;
  }
  absl::StatusOr<config::TraceConfig> loaded = LoadReloadedConfig();
  if (!loaded.ok()) {
    log_.Error(absl::StrCat("reload: ", loaded.status().message(), "; keeping the running config"));
    {
      absl::MutexLock lock(&mu_);
      reload_.set_refused(reload_.refused() + 1);
      reload_.set_last_error(std::string(loaded.status().message()));
    }
    notifier_.Ready(HealthLine());
    return;
  }
  // A new output_dir is made ready before mu_ is taken: the file system may
  // be slow, and incidents take mu_ on a source's reader thread.
  std::string running_dir;
  {
    absl::MutexLock lock(&mu_);
    running_dir = config_.output_dir();
  }
  const absl::Status dir_ready =
      loaded->output_dir() == running_dir
          ? absl::OkStatus()
          : OutputDir::Open(loaded->output_dir(), output_group_).status();
  {
    absl::MutexLock lock(&mu_);
    ApplyReloadLocked(*loaded, dir_ready);
  }
  notifier_.Ready(HealthLine());
}

absl::StatusOr<config::TraceConfig> AgentService::LoadReloadedConfig() const {
  absl::StatusOr<config::TraceConfig> loaded = LoadConfigFile(options_.config_path);
  if (!loaded.ok()) return loaded;
  // The file with the command line's settings, as the start checked it.
  loaded->MergeFrom(options_.overrides);
  ApplyAgentDefaults(&*loaded);
  if (absl::Status st = CheckEffectiveConfig(*loaded, options_.config_path); !st.ok()) return st;
  return loaded;
}

void AgentService::ApplyReloadLocked(const config::TraceConfig& loaded,
                                     const absl::Status& dir_ready) {
  ReloadPlan plan = PlanReload(config_, loaded);
  std::vector<std::string> applied;
  for (const std::string& field : plan.applied) {
    if (field == "output_dir") {
      if (!dir_ready.ok()) {
        log_.Error(absl::StrCat("reload: ", dir_ready.message(), "; snapshots still go into ",
                                config_.output_dir()));
        plan.next.set_output_dir(config_.output_dir());
        continue;
      }
      snapshots_->set_output_dir(plan.next.output_dir());
    } else if (field == "trigger_config") {
      triggers_.ReplaceTriggers(plan.next);
      tally_.Reserve(ReservedTallyNames(plan.next));
    } else if (field == "snapshot_request_cooldown_ms" ||
               field == "max_snapshot_requests_per_hour") {
      requests_->ReplaceLimits(plan.next);
    } else if (field == "max_snapshot_files" || field == "max_snapshot_bytes") {
      snapshots_->set_retention(plan.next.max_snapshot_files(), plan.next.max_snapshot_bytes());
    }
    applied.push_back(field);
  }
  for (const std::string& field : plan.kept) {
    log_.Warning(absl::StrCat("reload: ", field,
                              " changed, which needs a restart of the agent; it keeps its "
                              "running value until then"));
  }
  config_ = plan.next;
  reload_.clear_last_error();
  reload_.clear_waiting_for_restart();
  for (const std::string& field : plan.kept) reload_.add_waiting_for_restart(field);
  log_.Notice(absl::StrCat("reloaded ", options_.config_path,
                           applied.empty()
                               ? "; nothing to apply live"
                               : absl::StrCat("; applied: ", absl::StrJoin(applied, ", "))));
}

}  // namespace ringside::agent
