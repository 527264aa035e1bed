#include "agent/sources/source_factory.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/config/defaults.h"
#include "agent/sources/bpf_data_source.h"
#include "agent/sources/ftrace_data_source.h"
#include "agent/sources/process_stats_data_source.h"
#include "agent/sources/sys_stats_data_source.h"
#include "bpf/stack_events.h"

namespace ringside::agent {
namespace {

// What the builders share while the sources of one config are built.
struct BuildContext {
  const config::TraceConfig* config = nullptr;
  DescriptorTracker* tracker = nullptr;
  IncidentListener* incidents = nullptr;
  BuiltSources* out = nullptr;
  buffer::ProducerID next_producer = 1;
  // The BPF program groups running in some linux.bpf source: the ftrace
  // sources' bpf_fallback_events stand in for those that are not.
  bool bpf_sched = false;
  bool bpf_process = false;
  // Some linux.bpf source made its rings (loaded at least one group).
  bool bpf_rings = false;
  // Some linux.bpf source measures the stall triggers' stalls: only one
  // does, so that each stall is told once.
  bool stalls_measured = false;
  // The tracepoints a running linux.bpf source records every hit of, by
  // the buffer it writes into: an ftrace source writing into the same
  // buffer leaves them out rather than record each one twice. (Into another
  // buffer, they are kept apart on purpose: to compare the two, or to keep
  // one for longer.)
  absl::flat_hash_map<uint32_t, absl::flat_hash_set<std::string>> bpf_tracepoints;
  std::optional<absl::Status> tracefs_error;

  // A reader whose chunk pool is empty waits for the buffer-owner thread to
  // commit (asked to when half the pool waits for it) rather than drop what
  // it took out of the staging ring: the ring holds the events meanwhile,
  // and counts what it must refuse. It drops only when the owner falls
  // 100 ms behind. The pool is the source's share of staging_budget_kb, at
  // least 4 chunks per CPU: each CPU's writer keeps one open.
  std::unique_ptr<ProducerBuffer> NewProducer() {
    ProducerBuffer::Options options;
    options.num_chunks =
        StagingSharesFor(budget_kb(), PossibleCpus(), FtraceShareOf(*config), options.chunk_size)
            .chunk_pool_chunks;
    options.policy = PoolExhaustedPolicy::kStall;
    return std::make_unique<ProducerBuffer>(next_producer++,
                                            buffer::ClientIdentity{getuid(), getpid()}, options);
  }
  // A polled source's pool (linux.sys_stats, linux.process_stats): one
  // writer, a packet a period.
  std::unique_ptr<ProducerBuffer> NewPolledProducer() {
    ProducerBuffer::Options options;
    options.num_chunks = 8;
    options.policy = PoolExhaustedPolicy::kStall;
    return std::make_unique<ProducerBuffer>(next_producer++,
                                            buffer::ClientIdentity{getuid(), getpid()}, options);
  }
  uint64_t budget_kb() const {
    return config->has_staging_budget_kb() ? config->staging_budget_kb() : kDefaultStagingBudgetKb;
  }
  void Warn(std::string message) { out->warnings.push_back(std::move(message)); }
  void Disable(const config::DataSourceConfig& c, absl::string_view why) {
    Warn(absl::StrCat(c.name(), " disabled: ", why));
    out->failed.push_back({c.name(), std::string(why)});
  }
  void Add(const config::DataSourceConfig& c, std::unique_ptr<ProducerBuffer> producer,
           std::unique_ptr<DataSource> source) {
    out->slots.push_back(
        SourceSlot{c.name(), c.target_buffer(), std::move(producer), std::move(source)});
  }
};

// bpf_config.stacks: what the programs record, and the durable store's
// share for what the samples refer to.
void ConfigureStacks(const config::BpfConfig& bc, const config::TraceConfig& config,
                     BpfDataSource::Config* cfg) {
  if (!bc.has_stacks()) return;
  const config::BpfConfig::Stacks& st = bc.stacks();
  const uint32_t cpu_hz = CpuSampleHz(st);
  const uint32_t which = (st.kernel() ? RS_STACKS_KERNEL : 0u) | (st.user() ? RS_STACKS_USER : 0u);
  // Nothing to record with no kind of stack, or no moment to take one.
  if (which != 0 && (st.blocked() || cpu_hz > 0)) {
    cfg->source.stacks.flags = which | (st.blocked() ? RS_STACKS_BLOCKED : 0u);
    cfg->source.stacks.cpu_hz = cpu_hz;
  }
  // On a kernel without kprobes, blocked stacks only when asked for in
  // so many words: there the switch takes them at every block.
  cfg->source.stacks.at_switch_allowed = st.has_blocked() && st.blocked();
  cfg->source.stacks.max_depth = st.has_max_depth() ? st.max_depth() : kDefaultStackDepth;
  cfg->source.stacks.blocked_period_ns =
      uint64_t{st.has_blocked_period_us() ? st.blocked_period_us() : kDefaultBlockedPeriodUs} *
      1000;
  cfg->source.stacks.max_blocked_tasks =
      st.has_max_blocked_threads() ? st.max_blocked_threads() : kDefaultMaxBlockedThreads;
  // A quarter of the durable store: with the generation before it, still
  // kept while the ring refers to it, half; the other half names tasks.
  const uint64_t durable_kb = config.has_durable_buffer_size_kb() ? config.durable_buffer_size_kb()
                                                                  : kDefaultDurableBufferSizeKb;
  cfg->stacks_interned_budget_bytes = static_cast<size_t>(durable_kb * 1024 / 4);
}

// What bpf_config.stacks asked for that this kernel does not do, or does
// otherwise.
void WarnAboutStacks(const config::DataSourceConfig& c, const BpfDataSource& b, BuildContext* ctx) {
  if (!b.stacks_refused().empty()) {
    ctx->Warn(absl::StrCat(c.name(), ": no stacks: ", b.stacks_refused()));
  }
  if (b.blocked_stacks_at_switch()) {
    ctx->Warn(absl::StrCat(c.name(),
                           ": this kernel has no kprobes: blocked threads' stacks are taken as "
                           "they leave the CPU, every block (dearer; "
                           "bpf_config.stacks.blocked_period_us does not apply)"));
  }
  if (const std::string why = b.user_frames_unnamed_reason(); !why.empty()) {
    ctx->Warn(absl::StrCat(c.name(), ": ", why));
  }
  if (!b.blocked_refused().empty()) {
    ctx->Warn(absl::StrCat(c.name(), ": no blocked threads' stacks (bpf_config.stacks.blocked): ",
                           b.blocked_refused()));
  }
  if (!b.cpu_sampling_refused().empty()) {
    ctx->Warn(absl::StrCat(
        c.name(), ": no CPU samples (bpf_config.stacks.cpu_hz): ", b.cpu_sampling_refused()));
  }
}

void BuildBpf(const config::DataSourceConfig& c, BuildContext* ctx) {
  const config::BpfConfig& bc = c.bpf_config();
  BpfDataSource::Config cfg;
  cfg.source.sched = bc.sched();
  cfg.source.process = bc.process();
  cfg.source.incidents = bc.incidents();
  cfg.source.ring_size_per_cpu = size_t{bc.ring_size_kb()} * 1024;
  cfg.source.btf_path = bc.btf_path();
  cfg.source.filters.tgids.assign(bc.filter_tgid().begin(), bc.filter_tgid().end());
  cfg.source.filters.cgroup_id = bc.filter_cgroup_id();
  cfg.source.filters.max_prio = bc.has_filter_max_prio() ? bc.filter_max_prio() : -1;
  ConfigureStacks(bc, *ctx->config, &cfg);
  if (ctx->incidents != nullptr && bc.sched() && !ctx->stalls_measured) {
    cfg.source.stalls = StallsOf(*ctx->config);
    cfg.blocked_thresholds_ns = BlockedThresholdsOf(*ctx->config);
  }
  cfg.filter_container_ids.assign(bc.filter_container_id().begin(), bc.filter_container_id().end());
  cfg.filter_cgroup_paths.assign(bc.filter_cgroup_path().begin(), bc.filter_cgroup_path().end());
  cfg.drain_period_ms = bc.drain_period_ms();
  cfg.tracker = ctx->tracker;
  cfg.incidents = ctx->incidents;
  cfg.cpu_budget = ctx->out->cpu_budget.get();
  std::unique_ptr<ProducerBuffer> producer = ctx->NewProducer();
  absl::StatusOr<std::unique_ptr<BpfDataSource>> b = BpfDataSource::Create(cfg, producer.get());
  if (!b.ok()) {
    ctx->Disable(c, b.status().message());
    return;
  }
  if ((*b)->raw_tracepoints()) {
    ctx->Warn(absl::StrCat(c.name(),
                           ": this kernel does not expose its BTF; the programs run as "
                           "raw tracepoints, relocated against bpf_config.btf_path ",
                           bc.btf_path()));
  }
  for (const std::string& p : (*b)->skipped_programs()) {
    ctx->Warn(absl::StrCat(c.name(), ": this kernel cannot attach ", p));
  }
  WarnAboutStacks(c, **b, ctx);
  if (!(*b)->runqueue_refused().empty()) {
    ctx->Warn(absl::StrCat(c.name(), ": waits for a CPU are not measured (runqueue_delay triggers ",
                           "answer requests by name only): ", (*b)->runqueue_refused()));
  }
  for (const std::string& w : (*b)->cgroup_filter_warnings()) {
    ctx->Warn(absl::StrCat(c.name(), ": bpf_config.", w));
  }
  for (const bpf::EventSource::RefusedGroup& g : (*b)->refused_groups()) {
    ctx->Warn(
        absl::StrCat(c.name(), ": bpf/", g.group, " cannot run on this kernel (", g.why.message(),
                     "); the other groups run",
                     g.group == "incidents" ? "" : ", and ftrace's bpf_fallback_events stand in"));
  }
  // Every group loaded, but not as one object: each read the kernel's
  // BTF (start-up takes longer). Not the user's to fix: ours, so said.
  if ((*b)->refused_groups().empty() && !(*b)->one_object_refused().empty()) {
    ctx->Warn(absl::StrCat(c.name(),
                           ": its programs loaded one group at a time, not as one object (",
                           (*b)->one_object_refused(), "): a ringside bug worth reporting"));
  }
  const bpf::EventSource::Options loaded = (*b)->loaded_groups();
  ctx->stalls_measured |=
      loaded.sched && (cfg.source.stalls.blocked_ns != 0 || cfg.source.stalls.runqueue_ns != 0);
  ctx->bpf_sched |= loaded.sched;
  ctx->bpf_process |= loaded.process;
  ctx->bpf_rings |= loaded.sched || loaded.process || loaded.incidents;
  ctx->out->incidents_reported |= loaded.incidents;
  const bpf::EventSource::Filters& fl = cfg.source.filters;
  const bool every_hit = fl.tgids.empty() && fl.cgroup_id == 0 && !fl.cgroup_set &&
                         fl.max_prio < 0 && cfg.filter_container_ids.empty() &&
                         cfg.filter_cgroup_paths.empty();
  if (every_hit) {
    for (std::string& t : bpf::EventSource::RecordedTracepoints(loaded)) {
      ctx->bpf_tracepoints[c.target_buffer()].insert(std::move(t));
    }
  }
  ctx->Add(c, std::move(producer), std::move(*b));
}

// Whether the config has a trigger that fires on incidents.
bool WantsIncidents(const config::TraceConfig& config) {
  for (const auto& t : config.trigger_config().triggers()) {
    if (t.has_incident()) return true;
  }
  return false;
}

// The ftrace events that report incidents when BPF's incident programs
// cannot: an OOM kill's victim, and each signal with the action its task
// takes (SIG_DFL of a fatal one is a crash).
constexpr const char* kIncidentEvents[] = {"oom/mark_victim", "signal/signal_deliver"};

// Whether a bpf_fallback_events event stands in for bpf/process (process
// lifecycle) rather than bpf/sched (switches, wakeups).
bool IsProcessEvent(absl::string_view event) {
  return absl::StartsWith(event, "sched/sched_process_") || absl::StartsWith(event, "task/");
}

// The fallback events of the BPF groups that are not running, less those
// ftrace_events lists anyway.
std::vector<std::string> FallbackEvents(const config::FtraceConfig& f, const BuildContext& ctx) {
  std::vector<std::string> fallback;
  for (const std::string& e : f.bpf_fallback_events()) {
    const bool listed =
        std::find(f.ftrace_events().begin(), f.ftrace_events().end(), e) != f.ftrace_events().end();
    if (!listed && !(IsProcessEvent(e) ? ctx.bpf_process : ctx.bpf_sched)) fallback.push_back(e);
  }
  return fallback;
}

// Opens tracefs for the ftrace sources, once. False, with `c` disabled,
// when it cannot be.
bool OpenTracefs(const config::DataSourceConfig& c, BuildContext* ctx) {
  if (!ctx->out->tracefs.has_value() && !ctx->tracefs_error.has_value()) {
    absl::StatusOr<ftrace::Tracefs> tracefs = ftrace::Tracefs::Open();
    if (tracefs.ok()) {
      ctx->out->tracefs = *tracefs;
    } else {
      ctx->tracefs_error = tracefs.status();
    }
  }
  if (ctx->tracefs_error.has_value()) {
    ctx->Disable(c, ctx->tracefs_error->message());
    return false;
  }
  return true;
}

// Adds ftrace_events, with their filters, to `events`, less what a
// linux.bpf source writing into the same buffer records every hit of
// (`bpf_records`). Returns those left out, for the warning.
std::vector<std::string> AddListedEvents(const config::FtraceConfig& f,
                                         const absl::flat_hash_set<std::string>& bpf_records,
                                         const ftrace::Tracefs& tracefs,
                                         std::vector<ftrace::Instance::EventSpec>* events) {
  std::vector<std::string> left_out;
  for (const std::string& e : f.ftrace_events()) {
    std::string filter;
    for (const auto& ef : f.event_filters()) {
      if (ef.event() == e) filter = ef.filter();
    }
    if (bpf_records.contains(e)) {
      left_out.push_back(filter.empty() ? e : absl::StrCat(e, " (and its filter)"));
      continue;
    }
    // A group glob enables every event of the group; one that BPF records
    // is left out of it by naming the others one by one.
    const size_t slash = e.find('/');
    const std::string group = e.substr(0, slash);
    const bool glob = slash != std::string::npos && e.substr(slash + 1) == "*";
    if (glob && std::any_of(bpf_records.begin(), bpf_records.end(),
                            [&](const std::string& t) { return t.starts_with(group + "/"); })) {
      for (const std::string& name : tracefs.GroupEvents(group)) {
        const std::string one = absl::StrCat(group, "/", name);
        if (!bpf_records.contains(one)) events->push_back({one, ""});
      }
      continue;
    }
    events->push_back({e, filter});
  }
  return left_out;
}

// The agent's incident triggers would wait for incidents nobody reports:
// the first ftrace source reports them in BPF's place, with the incident
// events this kernel has.
void AddIncidentEvents(const config::DataSourceConfig& c, BuildContext* ctx,
                       FtraceDataSource::Config* fc) {
  std::vector<std::string> added;
  for (const char* e : kIncidentEvents) {
    if (!ctx->out->tracefs->Exists(absl::StrCat("events/", e))) continue;
    if (std::none_of(fc->events.begin(), fc->events.end(),
                     [&](const auto& spec) { return spec.event == e; })) {
      fc->events.push_back({e, ""});
    }
    added.push_back(e);
  }
  if (!added.empty()) {
    fc->incidents = ctx->incidents;
    ctx->Warn(absl::StrCat(c.name(), ": reporting OOM kills and fatal signals with ",
                           absl::StrJoin(added, " and "),
                           " in place of BPF's incident programs (their cgroup is not known: "
                           "an incident filter on cgroups does not match them)"));
  }
}

// No BPF rings were made, so their half of staging_budget_kb is free: a
// buffer size the budget gave beside BPF becomes the one it gives ftrace
// alone, which now records scheduling and processes in BPF's place. (A
// size set by hand that happens to equal that share is raised too.)
void TakeTheBpfRingsShare(const config::DataSourceConfig& c, BuildContext* ctx,
                          FtraceDataSource::Config* fc) {
  const int cpus = PossibleCpus();
  const FtraceShare planned = FtraceShareOf(*ctx->config);
  if (!ctx->bpf_rings && planned != FtraceShare::kAlone &&
      fc->buffer_size_kb == StagingSharesFor(ctx->budget_kb(), cpus, planned).ftrace_buffer_kb) {
    fc->buffer_size_kb =
        StagingSharesFor(ctx->budget_kb(), cpus, FtraceShare::kAlone).ftrace_buffer_kb;
    ctx->Warn(absl::StrCat(c.name(),
                           ": its per-CPU buffers take the BPF rings' share of "
                           "staging_budget_kb as well: ",
                           fc->buffer_size_kb, " KiB each"));
  }
}

// Creates the source from `fc` and adds it, with a warning for each event
// it could not enable; disables `c` when it cannot be created.
void CreateFtraceSource(const config::DataSourceConfig& c, const FtraceDataSource::Config& fc,
                        std::unique_ptr<ProducerBuffer> producer, BuildContext* ctx) {
  absl::StatusOr<std::unique_ptr<FtraceDataSource>> ds =
      FtraceDataSource::Create(*ctx->out->tracefs, fc, producer.get());
  if (!ds.ok()) {
    ctx->Disable(c, ds.status().message());
    return;
  }
  for (const std::string& e : (*ds)->enable_result().unknown) {
    ctx->Warn(absl::StrCat(c.name(), ": this kernel has no event ", e));
  }
  for (const auto& [e, s] : (*ds)->enable_result().failed) {
    ctx->Warn(absl::StrCat(c.name(), ": ", s.message()));
  }
  if (fc.incidents != nullptr) ctx->out->incidents_reported = true;
  ctx->Add(c, std::move(producer), std::move(*ds));
}

void BuildFtrace(const config::DataSourceConfig& c, BuildContext* ctx) {
  const config::FtraceConfig& f = c.ftrace_config();
  const std::vector<std::string> fallback = FallbackEvents(f, *ctx);
  const bool incidents =
      ctx->incidents != nullptr && !ctx->out->incidents_reported && WantsIncidents(*ctx->config);
  // Only fallback events, and BPF records them: nothing for ftrace to do.
  if (f.ftrace_events_size() == 0 && fallback.empty() && !incidents) return;
  if (!OpenTracefs(c, ctx)) return;
  std::unique_ptr<ProducerBuffer> producer = ctx->NewProducer();
  FtraceDataSource::Config fc;
  fc.tracker = ctx->tracker;
  fc.cpu_budget = ctx->out->cpu_budget.get();
  // Named after the program, as `ls instances/` shows it to whoever wonders
  // whose it is: only the agent listens for incidents. (Instance::Create
  // adds an id of its own, so two ftrace sources never share a name.)
  fc.instance_name = ctx->incidents != nullptr ? "agent" : "record";
  std::vector<std::string> left_out =
      AddListedEvents(f, ctx->bpf_tracepoints[c.target_buffer()], *ctx->out->tracefs, &fc.events);
  if (!left_out.empty()) {
    std::sort(left_out.begin(), left_out.end());
    ctx->Warn(absl::StrCat(c.name(), ": leaves out ", absl::StrJoin(left_out, ", "),
                           ": linux.bpf records every one of them (ftrace takes them only when "
                           "BPF is not running)"));
  }
  if (!fallback.empty()) {
    for (const std::string& e : fallback) fc.events.push_back({e, ""});
    ctx->Warn(absl::StrCat(c.name(), ": recording ", absl::StrJoin(fallback, ", "),
                           " with ftrace in place of BPF"));
  }
  if (incidents) AddIncidentEvents(c, ctx, &fc);
  // Every event it lists is BPF's: no tracefs instance for nothing.
  if (fc.events.empty()) return;
  fc.buffer_size_kb = f.buffer_size_kb();
  if (!fallback.empty()) TakeTheBpfRingsShare(c, ctx, &fc);
  fc.drain_period_ms = f.drain_period_ms();
  fc.buffer_percent = f.drain_buffer_percent();
  fc.compact_sched = f.compact_sched().enabled();
  CreateFtraceSource(c, fc, std::move(producer), ctx);
}

void BuildSysStats(const config::DataSourceConfig& c, BuildContext* ctx) {
  const config::SysStatsConfig& st = c.sys_stats_config();
  SysStatsDataSource::Config cfg;
  cfg.meminfo_period_ms = st.meminfo_period_ms();
  cfg.meminfo_counters.assign(st.meminfo_counters().begin(), st.meminfo_counters().end());
  cfg.vmstat_period_ms = st.vmstat_period_ms();
  cfg.vmstat_counters.assign(st.vmstat_counters().begin(), st.vmstat_counters().end());
  cfg.stat_period_ms = st.stat_period_ms();
  if (st.stat_counters_size() > 0) {
    auto listed = [&](config::SysStatsConfig::StatCounters which) {
      return std::find(st.stat_counters().begin(), st.stat_counters().end(), which) !=
             st.stat_counters().end();
    };
    cfg.cpu_times = listed(config::SysStatsConfig::STAT_CPU_TIMES);
    cfg.forks = listed(config::SysStatsConfig::STAT_FORK_COUNT);
  }
  cfg.psi_period_ms = st.psi_period_ms();
  std::unique_ptr<ProducerBuffer> producer = ctx->NewPolledProducer();
  absl::StatusOr<std::unique_ptr<SysStatsDataSource>> ds =
      SysStatsDataSource::Create(std::move(cfg), producer.get());
  if (!ds.ok()) {
    ctx->Disable(c, ds.status().message());
    return;
  }
  for (const std::string& w : (*ds)->warnings()) {
    ctx->Warn(absl::StrCat(c.name(), ": sys_stats_config.", w, "; the other counters record"));
  }
  ctx->Add(c, std::move(producer), std::move(*ds));
}

void BuildProcessStats(const config::DataSourceConfig& c, BuildContext* ctx) {
  const config::ProcessStatsConfig& ps = c.process_stats_config();
  ProcessStatsDataSource::Config cfg;
  cfg.poll_ms = ps.proc_stats_poll_ms();
  cfg.min_rss_kb = ps.min_rss_kb();
  std::unique_ptr<ProducerBuffer> producer = ctx->NewPolledProducer();
  absl::StatusOr<std::unique_ptr<ProcessStatsDataSource>> ds =
      ProcessStatsDataSource::Create(std::move(cfg), producer.get());
  if (!ds.ok()) {
    ctx->Disable(c, ds.status().message());
    return;
  }
  for (const std::string& w : (*ds)->warnings()) ctx->Warn(absl::StrCat(c.name(), ": ", w));
  ctx->Add(c, std::move(producer), std::move(*ds));
}

// The kinds of data source, in the order they are built.
struct SourceKind {
  const char* name;
  void (*build)(const config::DataSourceConfig&, BuildContext*);
};
constexpr SourceKind kSourceKinds[] = {
    {"linux.bpf", BuildBpf},
    {"linux.ftrace", BuildFtrace},
    {"linux.sys_stats", BuildSysStats},
    {"linux.process_stats", BuildProcessStats},
};

}  // namespace

void BuiltSources::UnmountTracefs() {
  if (tracefs.has_value()) (void)tracefs->Unmount();
}

BuiltSources BuildDataSources(const config::TraceConfig& config, DescriptorTracker* tracker,
                              IncidentListener* incidents) {
  BuiltSources out;
  BuildContext ctx;
  ctx.config = &config;
  ctx.tracker = tracker;
  ctx.incidents = incidents;
  ctx.out = &out;
  if (config.max_consumer_cpu_percent() > 0) {
    out.cpu_budget = std::make_unique<CpuBudget>(config.max_consumer_cpu_percent());
  }
  for (const SourceKind& kind : kSourceKinds) {
    for (const auto& ds : config.data_sources()) {
      if (ds.config().name() == kind.name) kind.build(ds.config(), &ctx);
    }
  }
  if (incidents != nullptr && !ctx.stalls_measured) {
    for (const auto& t : config.trigger_config().triggers()) {
      if (!t.has_blocked() && !t.has_runqueue_delay()) continue;
      ctx.Warn(absl::StrCat("trigger ", t.name(), ": no stall reaches it: linux.bpf's scheduling ",
                            "programs measure them, and ",
                            ctx.bpf_sched ? "they could not" : "none is running",
                            " (a linux.bpf source with bpf_config.sched); it answers requests by "
                            "name only"));
    }
  }
  return out;
}

}  // namespace ringside::agent
