#ifndef RINGSIDE_AGENT_DAEMON_CONFIG_RELOADER_H_
#define RINGSIDE_AGENT_DAEMON_CONFIG_RELOADER_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/lifecycle/agent_log.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// The agent's running config and its reload (SIGHUP, `systemctl reload`):
// the config file loaded again with the command line's settings and the
// agent's defaults, checked as the start checked it; what can change live
// handed to the parts of the agent that hold it (Target), what needs a
// restart named and kept at its running value; and what `status` says of
// the reloads. A config that does not load or check is refused whole: the
// running one stays, and the reason goes into the log and the status.
//
//   Reload() ──► load + check ──► refused: status().last_error
//                     │
//                     ▼
//               PlanReload(running, loaded) ──► Target (live fields)
//                                          └──► waiting_for_restart (the rest)
//
// Thread-safe: Reload() runs on one thread at a time (the agent's main
// thread); the accessors may be called from any thread. mu_ is a leaf: no
// other lock is taken while it is held (the target is called without it).
class ConfigReloader {
 public:
  // What a reload changes live, in the parts of the agent that hold it.
  // Reload() calls these on its thread, holding no lock of its own.
  class Target {
   public:
    virtual ~Target() = default;
    // output_dir, made ready already: where the next snapshots go.
    virtual void SetSnapshotDir(const std::string& dir) = 0;
    // trigger_config: the triggers as `config` has them.
    virtual void ReplaceTriggers(const config::TraceConfig& config) = 0;
    // snapshot_request_cooldown_ms, max_snapshot_requests_per_hour.
    virtual void ReplaceRequestLimits(const config::TraceConfig& config) = 0;
    // max_snapshot_files, max_snapshot_bytes.
    virtual void SetRetention(uint32_t max_files, uint64_t max_bytes) = 0;
  };

  struct Options {
    // The config file; empty when running on the embedded default (a
    // reload then has nothing to load).
    std::string config_path;
    // The command line's settings, merged over every config loaded.
    config::TraceConfig overrides;
    // output_group, resolved at start: a new output_dir is made ready with it.
    std::optional<gid_t> output_group;
    AgentLog* log = nullptr;   // Required; outlives the reloader.
    Target* target = nullptr;  // Required; outlives the reloader.
  };

  // `running`: the effective config the agent started with.
  ConfigReloader(Options options, config::TraceConfig running);

  // Loads the config file again and applies what it changes live (logged;
  // status() says how it went). A config that does not load or check, and
  // a new output_dir that cannot be made ready, leave the running value.
  void Reload();

  // The running config's output_dir (a reload may have changed it).
  std::string output_dir() const;
  // The running config's trigger names, each with what fires it besides a
  // request by name: "incident", "pressure", or "".
  std::map<std::string, std::string> trigger_names() const;
  // What `status` says of the reloads: how many, refused, the last error,
  // the fields waiting for a restart.
  control::ReloadStatus status() const;

 private:
  // The config file with the command line's settings and the agent's
  // defaults, checked as the start checked it.
  absl::StatusOr<config::TraceConfig> Load() const;
  // Hands what `loaded` changes live to the target (`dir_ready`: the new
  // output_dir, made ready or not), names what needs a restart, and keeps
  // the result as the running config.
  void Apply(const config::TraceConfig& loaded, const absl::Status& dir_ready);

  const Options options_;
  AgentLog& log_;
  Target& target_;

  mutable absl::Mutex mu_;
  // The running config: written by Reload() only, read by the accessors.
  config::TraceConfig running_ ABSL_GUARDED_BY(mu_);
  control::ReloadStatus status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_DAEMON_CONFIG_RELOADER_H_
