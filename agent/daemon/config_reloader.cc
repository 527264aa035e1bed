#include "agent/daemon/config_reloader.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/config/config_loader.h"
#include "agent/config/config_reload.h"
#include "agent/config/config_validation.h"
#include "agent/config/defaults.h"
#include "agent/output/output_dir.h"

namespace ringside::agent {

ConfigReloader::ConfigReloader(Options options, config::TraceConfig running)
    : options_(std::move(options)),
      log_(*options_.log),
      target_(*options_.target),
      running_(std::move(running)) {}

void ConfigReloader::Reload() {
  {
    absl::MutexLock lock(&mu_);
    status_.set_count(status_.count() + 1);
  }
  if (options_.config_path.empty()) {
    log_.Notice("SIGHUP: running on the embedded default config; nothing to reload");
    return;
  }
  absl::StatusOr<config::TraceConfig> loaded = Load();
  if (!loaded.ok()) {
    log_.Error(absl::StrCat("reload: ", loaded.status().message(), "; keeping the running config"));
    absl::MutexLock lock(&mu_);
    status_.set_refused(status_.refused() + 1);
    status_.set_last_error(std::string(loaded.status().message()));
    return;
  }
  // A new output_dir is made ready before the target is told: the file
  // system may be slow, and nothing waits for it meanwhile.
  const std::string running_dir = output_dir();
  const absl::Status dir_ready =
      loaded->output_dir() == running_dir
          ? absl::OkStatus()
          : OutputDir::Open(loaded->output_dir(), options_.output_group).status();
  Apply(*loaded, dir_ready);
}

absl::StatusOr<config::TraceConfig> ConfigReloader::Load() const {
  absl::StatusOr<config::TraceConfig> loaded = LoadConfigFile(options_.config_path);
  if (!loaded.ok()) return loaded;
  // The file with the command line's settings, as the start checked it.
  loaded->MergeFrom(options_.overrides);
  ApplyAgentDefaults(&*loaded);
  if (absl::Status st = CheckEffectiveConfig(*loaded, options_.config_path); !st.ok()) return st;
  return loaded;
}

void ConfigReloader::Apply(const config::TraceConfig& loaded, const absl::Status& dir_ready) {
  config::TraceConfig running;
  {
    absl::MutexLock lock(&mu_);
    running = running_;
  }
  ReloadPlan plan = PlanReload(running, loaded);
  std::vector<std::string> applied;
  for (const std::string& field : plan.applied) {
    if (field == "output_dir") {
      if (!dir_ready.ok()) {
        log_.Error(absl::StrCat("reload: ", dir_ready.message(), "; snapshots still go into ",
                                running.output_dir()));
        plan.next.set_output_dir(running.output_dir());
        continue;
      }
      target_.SetSnapshotDir(plan.next.output_dir());
    } else if (field == "trigger_config") {
      target_.ReplaceTriggers(plan.next);
    } else if (field == "snapshot_request_cooldown_ms" ||
               field == "max_snapshot_requests_per_hour") {
      target_.ReplaceRequestLimits(plan.next);
    } else if (field == "max_snapshot_files" || field == "max_snapshot_bytes") {
      target_.SetRetention(plan.next.max_snapshot_files(), plan.next.max_snapshot_bytes());
    }
    applied.push_back(field);
  }
  for (const std::string& field : plan.kept) {
    log_.Warning(absl::StrCat("reload: ", field,
                              " changed, which needs a restart of the agent; it keeps its "
                              "running value until then"));
  }
  {
    absl::MutexLock lock(&mu_);
    running_ = std::move(plan.next);
    status_.clear_last_error();
    status_.clear_waiting_for_restart();
    for (const std::string& field : plan.kept) status_.add_waiting_for_restart(field);
  }
  log_.Notice(absl::StrCat("reloaded ", options_.config_path,
                           applied.empty()
                               ? "; nothing to apply live"
                               : absl::StrCat("; applied: ", absl::StrJoin(applied, ", "))));
}

std::string ConfigReloader::output_dir() const {
  absl::MutexLock lock(&mu_);
  return running_.output_dir();
}

std::map<std::string, std::string> ConfigReloader::trigger_names() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, std::string> names;
  for (const auto& t : running_.trigger_config().triggers()) {
    names[t.name()] = t.has_incident()         ? "incident"
                      : t.has_pressure()       ? "pressure"
                      : t.has_event()          ? "event"
                      : t.has_blocked()        ? "blocked"
                      : t.has_runqueue_delay() ? "runqueue_delay"
                                               : "";
  }
  return names;
}

control::ReloadStatus ConfigReloader::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

}  // namespace ringside::agent
