// Configs an operator can get wrong, each with the exact error ringside
// gives: the file, the line and column, the field, and what is allowed.
// The last tests run the CLI on some of them and check that nothing
// started: no output, no socket, no tracefs instance.

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/config/config_loader.h"
#include "agent/config/defaults.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/testing/kernel_tracefs.h"
#include "tests/testing/paths.h"

namespace ringside::agent {
namespace {

// A machine of fixed size, so that the per-CPU checks do not depend on the
// one the test runs on.
constexpr MachineLimits kMachine = {8, uint64_t{16} << 20};

struct BadConfig {
  const char* what;   // The mistake, for failure messages.
  std::string text;   // The config as written.
  std::string error;  // The whole error message for "bad.pbtxt".
};

constexpr char kBuffer[] = "buffers { size_kb: 1024 }\n";

std::string Bpf(const std::string& bpf_config) {
  return absl::StrCat(kBuffer, "data_sources { config { name: \"linux.bpf\"\n  bpf_config { ",
                      bpf_config, " } } }\n");
}

std::string Trigger(const std::string& fields) {
  return absl::StrCat(kBuffer, "trigger_config { trigger_mode: CLONE_SNAPSHOT\n  triggers { ",
                      fields, " } }\n");
}

std::string FilterTgids(int n) {
  std::string t;
  for (int i = 1; i <= n; i++) absl::StrAppend(&t, "filter_tgid: ", i, " ");
  return t;
}

const std::vector<BadConfig>& BadConfigs() {
  static const auto* cases = new std::vector<BadConfig>{
      // Syntax.
      {"a section never closed", "buffers { size_kb: 1024\n",
       "bad.pbtxt: line 2, column 1: Expected identifier, got: the end of the file (is a '}' "
       "missing?)"},
      {"a field without its value", "buffers { size_kb: }\n",
       "bad.pbtxt: line 1, column 20: Expected integer, got: }"},
      {"a string never closed",
       absl::StrCat(kBuffer, "data_sources { config { name: \"linux.bpf } }\n"),
       "bad.pbtxt: line 2, column 45: String literals cannot cross line boundaries."},
      {"a brace too many", absl::StrCat(kBuffer, "}\n"),
       "bad.pbtxt: line 2, column 1: Expected identifier, got: }"},
      {"JSON instead of text format", "{\"buffers\": [{\"size_kb\": 1024}]}\n",
       "bad.pbtxt: line 1, column 1: Expected identifier, got: {"},
      // Unknown fields.
      {"a misspelt field", "bufers { size_kb: 1024 }\n",
       "bad.pbtxt: line 1, column 8: Message type \"ringside.config.TraceConfig\" has no field "
       "named \"bufers\"."},
      {"a misspelt nested field", Bpf("ring_size: 4096"),
       "bad.pbtxt: line 3, column 25: Message type \"ringside.config.BpfConfig\" has no field "
       "named \"ring_size\"."},
      {"a Perfetto field ringside does not have",
       absl::StrCat(kBuffer, "unique_session_name: \"x\"\n"),
       "bad.pbtxt: line 2, column 20: Message type \"ringside.config.TraceConfig\" has no field "
       "named \"unique_session_name\"."},
      // Wrong types.
      {"a size as a string", "buffers { size_kb: \"1024\" }\n",
       "bad.pbtxt: line 1, column 20: Expected integer, got: \"1024\""},
      {"a negative size", "buffers { size_kb: -1 }\n",
       "bad.pbtxt: line 1, column 20: Expected integer, got: -"},
      {"a fractional size", "buffers { size_kb: 1.5 }\n",
       "bad.pbtxt: line 1, column 20: Expected integer, got: 1.5"},
      {"a duration beyond uint32", absl::StrCat(kBuffer, "duration_ms: 5000000000\n"),
       "bad.pbtxt: line 2, column 14: Integer out of range (5000000000)"},
      {"yes for a bool", absl::StrCat(kBuffer, "write_into_file: yes\n"),
       "bad.pbtxt: line 3, column 1: Invalid value for boolean field \"write_into_file\". "
       "Value: \"yes\"."},
      {"an unknown fill policy", "buffers { size_kb: 1024 fill_policy: OVERWRITE }\n",
       "bad.pbtxt: line 1, column 48: Unknown enumeration value of \"OVERWRITE\" for field "
       "\"fill_policy\"."},
      {"a number where a section goes", "buffers: 1024\n",
       "bad.pbtxt: line 1, column 10: Expected \"{\", found \"1024\"."},
      {"a string without quotes", absl::StrCat(kBuffer, "output_path: /tmp/t.pftrace\n"),
       "bad.pbtxt: line 2, column 14: Expected string, got: /"},
      // Sizes: 0, below a page, beyond 4 GiB, beyond what the kernel makes,
      // beyond the machine.
      {"a buffer of 0", "buffers {\n  size_kb: 0 }\n",
       "bad.pbtxt: line 2, column 3: buffers[0].size_kb is 0: it must be at least 4 and at most "
       "4194300 (4 GiB less a page)"},
      {"a buffer below a page", "buffers { size_kb: 2 }\n",
       "bad.pbtxt: line 1, column 11: buffers[0].size_kb is 2: it must be at least 4 and at most "
       "4194300 (4 GiB less a page)"},
      {"a buffer of 4 GiB", absl::StrCat(kBuffer, "buffers { size_kb: 4194304 }\n"),
       "bad.pbtxt: line 2, column 11: buffers[1].size_kb is 4194304: it must be at least 4 and "
       "at most 4194300 (4 GiB less a page)"},
      {"no buffer at all", "duration_ms: 1000\n",
       "bad.pbtxt: no buffers { size_kb: ... } section: at least one is needed"},
      {"a BPF ring of 4 GiB", Bpf("ring_size_kb: 4194304"),
       "bad.pbtxt: line 3, column 16: data_sources[0].config.bpf_config.ring_size_kb is 4194304: "
       "a BPF ring buffer holds at most 2097152 (2 GiB) per CPU"},
      {"an ftrace buffer beyond 2 GiB",
       absl::StrCat(kBuffer,
                    "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                    "  ftrace_events: \"sched/sched_switch\" buffer_size_kb: 3000000 } } }\n"),
       "bad.pbtxt: line 3, column 39: data_sources[0].config.ftrace_config.buffer_size_kb is "
       "3000000: at most 2097152 (2 GiB) per CPU"},
      {"BPF rings beyond half the machine", Bpf("ring_size_kb: 2097152"),
       "bad.pbtxt: line 3, column 16: data_sources[0].config.bpf_config.ring_size_kb is 2097152: "
       "8 CPUs of 2 GiB exceed half of this machine's 16 GiB of memory, which the kernel would "
       "refuse or the machine miss"},
      // Data sources and buffers.
      {"an unknown data source",
       absl::StrCat(kBuffer, "data_sources { config { name: \"linux.perf\" } }\n"),
       "bad.pbtxt: line 2, column 25: data_sources[0].config.name 'linux.perf' is not a data "
       "source; known: linux.bpf, linux.ftrace, linux.sys_stats, linux.process_stats"},
      {"a data source without a name",
       absl::StrCat(kBuffer, "data_sources { config { target_buffer: 0 } }\n"),
       "bad.pbtxt: line 2, column 16: data_sources[0].config.name '' is not a data source; known: "
       "linux.bpf, "
       "linux.ftrace, linux.sys_stats, linux.process_stats"},
      {"linux.ftrace without events",
       absl::StrCat(kBuffer, "data_sources { config { name: \"linux.ftrace\" } }\n"),
       "bad.pbtxt: line 2, column 25: data_sources[0].config.name is linux.ftrace, which needs "
       "ftrace_config { ftrace_events: \"group/name\" ... } (or bpf_fallback_events)"},
      {"a target_buffer that does not exist",
       absl::StrCat(kBuffer, "data_sources { config { name: \"linux.bpf\" target_buffer: 1 } }\n"),
       "bad.pbtxt: line 2, column 43: data_sources[0].config.target_buffer is 1 but there are "
       "only 1 buffers: an index from 0 to 0"},
      {"the same source twice into one buffer",
       absl::StrCat(
           kBuffer,
           "data_sources { config { name: \"linux.bpf\" } }\n"
           "data_sources { config { name: \"linux.bpf\" bpf_config { sched: false } } }\n"),
       "bad.pbtxt: line 3, column 25: data_sources[1].config.name 'linux.bpf' also writes into "
       "buffers[0], as data_sources[0] does: one data source of a name per buffer; merge the two"},
      {"a buffer no source writes into",
       absl::StrCat(kBuffer, kBuffer, "data_sources { config { name: \"linux.bpf\" } }\n"),
       "bad.pbtxt: line 2, column 1: buffers[1] is the target_buffer of no data source, so it "
       "would stay empty: point a data source at it (target_buffer: 1) or remove it"},
      // Paths the agent cannot use.
      {"a relative output_dir", absl::StrCat(kBuffer, "output_dir: \"snapshots\"\n"),
       "bad.pbtxt: line 2, column 1: output_dir is 'snapshots': an absolute path"},
      {"an output_dir below a file", absl::StrCat(kBuffer, "output_dir: \"/proc/version/s\"\n"),
       "bad.pbtxt: line 2, column 1: output_dir is '/proc/version/s', but /proc/version is not a "
       "directory: a directory, or a path the agent can create one at"},
      {"an output_dir that is a file", absl::StrCat(kBuffer, "output_dir: \"/proc/version\"\n"),
       "bad.pbtxt: line 2, column 1: output_dir is '/proc/version', but /proc/version is not a "
       "directory: a directory, or a path the agent can create one at"},
      {"a control_socket too long for sun_path",
       absl::StrCat(kBuffer, "control_socket: \"/run/", std::string(103, 's'), "\"\n"),
       "bad.pbtxt: line 2, column 1: control_socket is 108 bytes long: a unix socket path is at "
       "most 107"},
      {"a relative control_socket", absl::StrCat(kBuffer, "control_socket: \"control.sock\"\n"),
       "bad.pbtxt: line 2, column 1: control_socket is 'control.sock': an absolute path"},
      {"a control_socket below a file",
       absl::StrCat(kBuffer, "control_socket: \"/proc/version/control.sock\"\n"),
       "bad.pbtxt: line 2, column 1: control_socket is '/proc/version/control.sock', but "
       "/proc/version is not a directory: a path in a directory the agent can write"},
      {"a path with a NUL byte", absl::StrCat(kBuffer, "output_dir: \"/tmp\\000/x\"\n"),
       "bad.pbtxt: line 2, column 1: output_dir is '/tmp\\x00/x', which holds a NUL byte: a path "
       "cannot"},
      {"an output_group that does not exist",
       absl::StrCat(kBuffer, "output_group: \"rs-no-such-group\"\n"),
       "bad.pbtxt: line 2, column 1: output_group is 'rs-no-such-group': no such group on this "
       "machine (see `getent group`); a group name or number"},
      // Triggers.
      {"a cooldown beyond a day", Trigger("name: \"a\" cooldown_ms: 100000000"),
       "bad.pbtxt: line 3, column 24: trigger_config.triggers[0].cooldown_ms is 100000000: at "
       "most 86400000 (24 hours; 0: none); for fewer fires, set max_per_24_h"},
      {"a stop delay beyond 10 minutes", Trigger("name: \"a\" stop_delay_ms: 600001"),
       "bad.pbtxt: line 3, column 24: trigger_config.triggers[0].stop_delay_ms is 600001: at "
       "most 600000 (10 minutes); later, the buffers no longer hold the trigger's moment"},
      {"an unknown incident kind", Trigger("name: \"a\" incident { kinds: PANIC }"),
       "bad.pbtxt: line 3, column 48: Unknown enumeration value of \"PANIC\" for field "
       "\"kinds\"."},
      {"an incident without a kind", Trigger("name: \"a\" incident { comms: \"java\" }"),
       "bad.pbtxt: line 3, column 24: trigger_config.triggers[0].incident.kinds is empty: "
       "OOM_KILL, FATAL_SIGNAL or "
       "CORE_DUMP, at least one"},
      {"SIGTERM as a fatal signal",
       Trigger("name: \"a\" incident { kinds: FATAL_SIGNAL signals: 15 }"),
       "bad.pbtxt: line 3, column 55: trigger_config.triggers[0].incident.signals[0] is 15: "
       "linux.bpf reports the fatal signals 4, 6, 7, 8, 9, 11 (SIGILL, SIGABRT, SIGBUS, SIGFPE, "
       "SIGKILL, SIGSEGV); for others that dump core, use the kind CORE_DUMP"},
      {"a negative signal", Trigger("name: \"a\" incident { kinds: FATAL_SIGNAL signals: -11 }"),
       "bad.pbtxt: line 3, column 55: trigger_config.triggers[0].incident.signals[0] is -11: "
       "linux.bpf reports the fatal signals 4, 6, 7, 8, 9, 11 (SIGILL, SIGABRT, SIGBUS, SIGFPE, "
       "SIGKILL, SIGSEGV); for others that dump core, use the kind CORE_DUMP"},
      {"a pressure trigger without a resource", Trigger("name: \"a\" pressure { stall_ms: 100 }"),
       "bad.pbtxt: line 3, column 24: trigger_config.triggers[0].pressure.resource is unset: "
       "CPU, MEMORY or IO"},
      {"a stall longer than its window",
       Trigger("name: \"a\" pressure { resource: MEMORY stall_ms: 2000 window_ms: 1000 }"),
       "bad.pbtxt: line 3, column 52: trigger_config.triggers[0].pressure.stall_ms is 2000: the "
       "stall time in a window that fires it, 1 to window_ms (1000)"},
      {"a pressure window past the kernel's",
       Trigger("name: \"a\" pressure { resource: IO stall_ms: 100 window_ms: 20000 }"),
       "bad.pbtxt: line 3, column 62: trigger_config.triggers[0].pressure.window_ms is 20000: "
       "the kernel's windows are 500 to 10000 ms"},
      {"a pressure cgroup that is not a path",
       Trigger("name: \"a\" pressure { resource: CPU stall_ms: 100 cgroups: \"x\" }"),
       "bad.pbtxt: line 3, column 63: trigger_config.triggers[0].pressure.cgroups[0] is 'x': a "
       "cgroup's path below the cgroup2 mount, starting with '/' "
       "(\"/system.slice/nginx.service\"), "
       "without '..', at most 4095 bytes"},
      {"a trigger of two kinds",
       Trigger("name: \"a\" incident { kinds: OOM_KILL } pressure { resource: CPU stall_ms: 1 }"),
       "bad.pbtxt: line 3, column 53: trigger_config.triggers[0].pressure is set beside incident: "
       "a trigger fires on one kind of thing; make it a trigger of its own"},
      {"an event trigger on a glob", Trigger("name: \"a\" event { event: \"sched/*\" }"),
       "bad.pbtxt: line 3, column 32: trigger_config.triggers[0].event.event is 'sched/*': one "
       "tracepoint, \"group/name\" as tracefs's events/ names it (\"block/block_rq_complete\"; "
       "no glob)"},
      {"an event filter of two lines",
       Trigger("name: \"a\" event { event: \"sched/sched_switch\" filter: \"a\\nb\" }"),
       "bad.pbtxt: line 3, column 60: trigger_config.triggers[0].event.filter is 3 bytes with a "
       "newline or NUL: an ftrace filter of one line, at most 4096 bytes (\"nr_sector > 1024\")"},
      {"an event trigger beside a pressure threshold",
       Trigger("name: \"a\" pressure { resource: IO stall_ms: 1 } event { event: \"a/b\" }"),
       "bad.pbtxt: line 3, column 62: trigger_config.triggers[0].event is set beside pressure: a "
       "trigger fires on one kind of thing; make it a trigger of its own"},
      {"a blocked trigger without a threshold", Trigger("name: \"a\" blocked { comms: \"x\" }"),
       "bad.pbtxt: line 3, column 24: trigger_config.triggers[0].blocked.threshold_ms is 0: the "
       "stall that fires it, 1 to 3600000 ms"},
      {"a run-queue delay past an hour",
       Trigger("name: \"a\" runqueue_delay { threshold_ms: 3600001 }"),
       "bad.pbtxt: line 3, column 41: trigger_config.triggers[0].runqueue_delay.threshold_ms is "
       "3600001: the stall that fires it, 1 to 3600000 ms"},
      {"a blocked trigger on a name longer than a comm",
       Trigger("name: \"a\" blocked { threshold_ms: 10 comms: \"a-name-of-16-byt\" }"),
       "bad.pbtxt: line 3, column 51: trigger_config.triggers[0].blocked.comms[0] is "
       "'a-name-of-16-byt': a task name is 1 to 15 bytes (the kernel's comm), so it would never "
       "match"},
      {"a pod pattern that no Kubernetes name matches",
       Trigger("name: \"a\" incident { kinds: OOM_KILL pod_namespaces: \"Payments\" }"),
       "bad.pbtxt: line 3, column 51: trigger_config.triggers[0].incident.pod_namespaces[0] is "
       "'Payments': a pattern of Kubernetes names is 1 to 253 bytes of lowercase letters, digits, "
       "'-' and '.', with the wildcards * ? [...] (\"web-*\"), so it would never match"},
      {"a run-queue delay beside a blocked threshold",
       Trigger("name: \"a\" blocked { threshold_ms: 1 } runqueue_delay { threshold_ms: 1 }"),
       "bad.pbtxt: line 3, column 52: trigger_config.triggers[0].runqueue_delay is set beside "
       "blocked: a trigger fires on one kind of thing; make it a trigger of its own"},
      {"two triggers of one name",
       absl::StrCat(kBuffer,
                    "trigger_config {\n  triggers { name: \"oom\" }\n"
                    "  triggers { name: \"oom\" } }\n"),
       "bad.pbtxt: line 4, column 14: trigger_config.triggers[1].name 'oom' is also the name of "
       "triggers[0]: names must be unique"},
      {"a skip probability above 1", Trigger("name: \"a\" skip_probability: 2"),
       "bad.pbtxt: line 3, column 24: trigger_config.triggers[0].skip_probability is 2: a "
       "probability, from 0 to 1"},
      // BPF filters.
      {"17 tgids", Bpf(FilterTgids(17)),
       "bad.pbtxt: line 3, column 263: data_sources[0].config.bpf_config.filter_tgid[16] is one "
       "of 17 filter_tgid values: at most 16 can be given"},
      {"stacks deeper than the kernel walks", Bpf("stacks { max_depth: 128 }"),
       "bad.pbtxt: line 3, column 25: data_sources[0].config.bpf_config.stacks.max_depth is "
       "128: frames per stack, 1 to 127 (the kernel's perf_event_max_stack)"},
      {"a blocked sampling period over a second", Bpf("stacks { blocked_period_us: 1000001 }"),
       "bad.pbtxt: line 3, column 25: data_sources[0].config.bpf_config.stacks.blocked_period_us "
       "is 1000001: at most 1000000 (1 s); 0 takes every block"},
      {"stacks without the switches that take them", Bpf("sched: false stacks { }"),
       "bad.pbtxt: line 3, column 29: data_sources[0].config.bpf_config.stacks.blocked needs the "
       "sched group (bpf_config.sched), whose switch records the stacks"},
      {"CPU samples without the group that takes them",
       Bpf("sched: false stacks { blocked: false cpu_hz: 99 }"),
       "bad.pbtxt: line 3, column 53: data_sources[0].config.bpf_config.stacks.cpu_hz needs the "
       "sched group (bpf_config.sched), which holds the sampling program; cpu_hz: 0 turns "
       "sampling off"},
      {"a negative prio", Bpf("filter_max_prio: -1"),
       "bad.pbtxt: line 3, column 16: data_sources[0].config.bpf_config.filter_max_prio is -1: "
       "kernel priorities are 0 to 139"},
      {"a container name for an id", Bpf("filter_container_id: \"nginx\""),
       "bad.pbtxt: line 3, column 16: data_sources[0].config.bpf_config.filter_container_id[0] "
       "is 'nginx': a container id is 12 to 64 lowercase hex digits (the full id, or a prefix of "
       "it such as `docker ps` shows)"},
      {"a cgroup path leaving the mount", Bpf("filter_cgroup_path: \"/a/../..\""),
       "bad.pbtxt: line 3, column 16: data_sources[0].config.bpf_config.filter_cgroup_path[0] is "
       "'/a/../..': a cgroup's path below the cgroup2 mount, starting with '/' "
       "(\"/system.slice/nginx.service\"), without '..', at most 4095 bytes"},
      {"a drain fill above 100%",
       absl::StrCat(kBuffer,
                    "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                    "  ftrace_events: \"sched/sched_switch\" drain_buffer_percent: 101 } } }\n"),
       "bad.pbtxt: line 3, column 39: data_sources[0].config.ftrace_config.drain_buffer_percent "
       "is 101: a percentage, at most 100"},
      {"a counter period below 10 ms",
       absl::StrCat(kBuffer,
                    "data_sources { config { name: \"linux.sys_stats\" sys_stats_config {\n"
                    "  meminfo_period_ms: 5 } } }\n"),
       "bad.pbtxt: line 3, column 3: data_sources[0].config.sys_stats_config.meminfo_period_ms "
       "is 5: 0 (not read) or 10 to 3600000 ms"},
      {"a counter source that reads nothing",
       absl::StrCat(kBuffer,
                    "data_sources { config { name: \"linux.sys_stats\" sys_stats_config {\n"
                    "  psi_period_ms: 0 } } }\n"),
       "bad.pbtxt: line 2, column 49: data_sources[0].config.sys_stats_config reads nothing: every "
       "*_period_ms is 0 (leave them all unset for each kind once a second)"},
      {"IRQ counts asked of linux.sys_stats",
       absl::StrCat(kBuffer,
                    "data_sources { config { name: \"linux.sys_stats\" sys_stats_config {\n"
                    "  stat_period_ms: 1000 stat_counters: STAT_IRQ_COUNTS } } }\n"),
       "bad.pbtxt: line 3, column 24: data_sources[0].config.sys_stats_config.stat_counters[0] is "
       "STAT_IRQ_COUNTS: ringside writes STAT_CPU_TIMES and STAT_FORK_COUNT only"},
      {"a zstd level past 19", absl::StrCat(kBuffer, "compression { zstd { level: 20 } }\n"),
       "bad.pbtxt: line 2, column 22: compression.zstd.level is 20: zstd levels go from 1 to 19 "
       "(0 or unset: 3)"},
      {"compression naming no codec", absl::StrCat(kBuffer, "compression {}\n"),
       "bad.pbtxt: line 2, column 1: compression names no codec: write compression { zstd {} } "
       "or compression { deflate {} }"},
      {"a machine name with a newline", absl::StrCat(kBuffer, "machine_name: \"db-1\\n\"\n"),
       "bad.pbtxt: line 2, column 1: machine_name is 'db-1\\n': a name of 1 to 253 printable "
       "ASCII characters"},
      {"an empty machine name", absl::StrCat(kBuffer, "machine_name: \"\"\n"),
       "bad.pbtxt: line 2, column 1: machine_name is '': a name of 1 to 253 printable ASCII "
       "characters"},
      // The metrics' textfile: node_exporter's directory, which must be there.
      {"a relative metrics_textfile", absl::StrCat(kBuffer, "metrics_textfile: \"prom\"\n"),
       "bad.pbtxt: line 2, column 1: metrics_textfile is 'prom': the absolute path of "
       "node_exporter's textfile directory"},
      {"a metrics_textfile that is not a directory",
       absl::StrCat(kBuffer, "metrics_textfile: \"/nonexistent/textfile\"\n"),
       "bad.pbtxt: line 2, column 1: metrics_textfile is '/nonexistent/textfile', which is not a "
       "directory: the directory node_exporter's --collector.textfile.directory names"},
      {"metrics_period_ms too short",
       absl::StrCat(kBuffer, "metrics_textfile: \"/tmp\"\nmetrics_period_ms: 10\n"),
       "bad.pbtxt: line 3, column 1: metrics_period_ms is 10: from 100 to 3600000 (an hour); "
       "unset: 15000"},
      {"metrics_listen with a name", absl::StrCat(kBuffer, "metrics_listen: \"localhost:9464\"\n"),
       "bad.pbtxt: line 2, column 1: metrics_listen is 'localhost:9464': not a numeric IPv4 "
       "address (names are not looked up) (HOST:PORT with a numeric IPv4 HOST, [IPv6]:PORT, or "
       ":PORT for every address)"},
      // Settings of the stream without the stream.
      {"max_file_size_bytes without write_into_file",
       absl::StrCat(kBuffer, "max_file_size_bytes: 1048576\n"),
       "bad.pbtxt: line 2, column 1: max_file_size_bytes is 1048576 without write_into_file: "
       "true: it applies only to streaming; set write_into_file or remove it"},
      {"file_write_period_ms without write_into_file",
       absl::StrCat(kBuffer, "write_into_file: false\nfile_write_period_ms: 1000\n"),
       "bad.pbtxt: line 3, column 1: file_write_period_ms is 1000 without write_into_file: "
       "true: it applies only to streaming; set write_into_file or remove it"},
      {"max_files without write_into_file", absl::StrCat(kBuffer, "max_files: 10\n"),
       "bad.pbtxt: line 2, column 1: max_files is 10 without write_into_file: true: it applies "
       "only to streaming; set write_into_file or remove it"},
  };
  return *cases;
}

TEST(BadConfigsTest, EachNamesFileLineFieldAndWhatIsAllowed) {
  ASSERT_GE(BadConfigs().size(), 30u);
  for (const BadConfig& c : BadConfigs()) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<config::TraceConfig> cfg = ParseConfig(c.text, "bad.pbtxt", kMachine);
    ASSERT_FALSE(cfg.ok()) << c.text;
    EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(cfg.status().message()), c.error) << c.text;
  }
}

// A size between two pages is no error: it is rounded up, as Perfetto
// does, and the effective config says so. 0 for a data source's size is
// its default, as in Perfetto.
// metrics_per_cpu in a file whose listener comes from --metrics-listen (as
// the DaemonSet starts the agent): the file alone is fine, the config as it
// runs needs the listener or the textfile. (Before, the file alone was
// refused, and with it the agent the flag completed.)
TEST(BadConfigsTest, MetricsPerCpuIsCheckedOnceTheFlagsAreMerged) {
  absl::StatusOr<config::TraceConfig> cfg =
      ParseConfig(absl::StrCat(kBuffer, "metrics_per_cpu: true\n"), "agent.pbtxt", kMachine);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const absl::Status alone = ValidateConfig(*cfg, "agent.pbtxt");
  EXPECT_EQ(alone.message(),
            "agent.pbtxt: metrics_per_cpu is set without metrics_textfile or metrics_listen (nor "
            "--metrics-listen): it applies only to the metrics they give; set one or remove it");
  config::TraceConfig flags;
  flags.set_metrics_listen(":9464");
  cfg->MergeFrom(flags);
  EXPECT_TRUE(ValidateConfig(*cfg, "agent.pbtxt").ok());
}

TEST(BadConfigsTest, SizesBetweenPagesAreRoundedUpInTheEffectiveConfig) {
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(
      "buffers { size_kb: 1001 }\nbuffers { size_kb: 4 }\n"
      "data_sources { config { name: \"linux.bpf\" bpf_config { ring_size_kb: 5 } } }\n"
      "data_sources { config { name: \"linux.bpf\" target_buffer: 1 bpf_config { "
      "ring_size_kb: 0 } } }\n",
      "ok.pbtxt", kMachine);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->buffers(0).size_kb(), 1004u);
  EXPECT_EQ(cfg->buffers(1).size_kb(), 4u);
  const uint32_t page_kb = static_cast<uint32_t>(sysconf(_SC_PAGESIZE) / 1024);
  EXPECT_EQ(cfg->data_sources(0).config().bpf_config().ring_size_kb(), std::max(8u, page_kb));
  // 0: unset, the budget's share for this machine's CPUs.
  EXPECT_EQ(
      cfg->data_sources(1).config().bpf_config().ring_size_kb(),
      StagingSharesFor(kDefaultStagingBudgetKb, PossibleCpus(), FtraceShare::kAlone).bpf_ring_kb);
  // The largest sizes stay what they are.
  cfg = ParseConfig(
      "buffers { size_kb: 4194300 }\n"
      "data_sources { config { name: \"linux.bpf\" bpf_config { ring_size_kb: 2097152 } } }\n",
      "ok.pbtxt", {1, 0});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->buffers(0).size_kb(), 4194300u);
  EXPECT_EQ(cfg->data_sources(0).config().bpf_config().ring_size_kb(), 2097152u);
}

// What the duplicate rules leave allowed: one source of a name per buffer,
// two of a name into two buffers, and a config of triggers only.
TEST(BadConfigsTest, OneSourceOfANamePerBufferIsFine) {
  EXPECT_TRUE(ParseConfig(absl::StrCat(kBuffer, kBuffer,
                                       "data_sources { config { name: \"linux.bpf\" } }\n"
                                       "data_sources { config { name: \"linux.bpf\" "
                                       "target_buffer: 1 bpf_config { filter_tgid: 1 } } }\n"),
                          "ok.pbtxt", kMachine)
                  .ok());
  EXPECT_TRUE(ParseConfig(absl::StrCat(kBuffer, kBuffer), "ok.pbtxt", kMachine).ok());
  EXPECT_TRUE(
      ParseConfig(absl::StrCat(kBuffer, "write_into_file: true\nmax_file_size_bytes: 1048576\n"),
                  "ok.pbtxt", kMachine)
          .ok());
}

// --- End to end: the CLI refuses them and starts nothing. ------------------

// ringside-* instances in tracefs that no live process holds: what a
// process that died or forgot would leave.
std::set<std::string> UnheldInstances() {
  std::set<std::string> names;
  const absl::StatusOr<ftrace::Tracefs>& tracefs = ftrace::testing::KernelTracefs();
  if (!tracefs.ok()) return names;
  const std::string dir = tracefs->root() + "/instances";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("ringside-", 0) != 0) continue;
    const int fd = open((dir + "/" + name).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) names.insert(name);
    close(fd);
  }
  closedir(d);
  return names;
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

class BadConfigCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempPath("bad_cli");
    ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0);
    unheld_before_ = UnheldInstances();
  }
  void TearDown() override {
    for (const char* name : {"bad.pbtxt", "trace.pftrace"}) unlink((dir_ + "/" + name).c_str());
    rmdir(dir_.c_str());
  }

  // Writes `text` as the config, with the agent's paths pointing into the
  // test's directory unless the text sets them.
  std::string WriteConfig(const std::string& text) {
    const std::string path = dir_ + "/bad.pbtxt";
    std::ofstream(path) << text;
    return path;
  }

  // Runs `ringside <args>` and checks the exit status 2, the error on
  // stderr, and that nothing was created. An agent that took the config
  // would run until stopped: it is killed after 30 s (status 137).
  void ExpectRefused(const std::vector<std::string>& args, const std::string& error,
                     bool test_made_output_file = false) {
    std::vector<std::string> command = {"-c", "exec timeout -s KILL 30 \"$@\" 2>&1", "sh",
                                        ringside::testing::RingsideBinary()};
    command.insert(command.end(), args.begin(), args.end());
    int code = -1;
    const std::string err = testing::RunProgramCapture("/bin/sh", command, &code);
    EXPECT_EQ(code, 2) << err;
    EXPECT_NE(err.find(error), std::string::npos) << err;
    for (const char* made : {"trace.pftrace", "snapshots", "run", "control.sock"}) {
      if (test_made_output_file && std::string(made) == "trace.pftrace") continue;
      EXPECT_FALSE(Exists(dir_ + "/" + made)) << made << " was created";
    }
    std::set<std::string> left = UnheldInstances();
    for (const std::string& before : unheld_before_) left.erase(before);
    EXPECT_TRUE(left.empty()) << "a tracefs instance was left: " << *left.begin();
  }

  void ExpectRecordAndAgentRefuse(const std::string& text, const std::string& error) {
    const std::string config = WriteConfig(text);
    SCOPED_TRACE(text);
    ExpectRefused({"record", "-c", config, "-o", dir_ + "/trace.pftrace", "--duration", "1s"},
                  absl::StrCat("ringside record: ", config, ": ", error));
    ExpectRefused({"agent", "-c", config, "--run-dir", dir_ + "/run", "--output-dir",
                   dir_ + "/snapshots", "--socket", dir_ + "/control.sock"},
                  absl::StrCat("ringside agent: ", config, ": ", error));
  }

  std::string dir_;
  std::set<std::string> unheld_before_;
};

TEST_F(BadConfigCliTest, ASyntaxErrorExitsTwoAndStartsNothing) {
  ExpectRecordAndAgentRefuse(
      "buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.bpf\" }\n",
      "line 3, column 1: Expected identifier, got: the end of the file (is a '}' missing?)");
}

TEST_F(BadConfigCliTest, AnUnknownDataSourceExitsTwoAndStartsNothing) {
  ExpectRecordAndAgentRefuse(
      "buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.bpf\" } }\n"
      "data_sources { config { name: \"linux.ebpf\" } }\n",
      "line 3, column 25: data_sources[1].config.name 'linux.ebpf' is not a data source; known: "
      "linux.bpf, linux.ftrace, linux.sys_stats, linux.process_stats");
}

TEST_F(BadConfigCliTest, TheSameSourceTwiceIntoOneBufferExitsTwoAndStartsNothing) {
  ExpectRecordAndAgentRefuse(
      "buffers { size_kb: 1024 }\n"
      "data_sources { config { name: \"linux.ftrace\" ftrace_config { ftrace_events: "
      "\"sched/sched_switch\" } } }\n"
      "data_sources { config { name: \"linux.ftrace\" ftrace_config { ftrace_events: "
      "\"sched/sched_waking\" } } }\n",
      "line 3, column 25: data_sources[1].config.name 'linux.ftrace' also writes into buffers[0], "
      "as data_sources[0] does: one data source of a name per buffer; merge the two");
}

TEST_F(BadConfigCliTest, ABadIncidentSignalExitsTwoAndStartsNothing) {
  ExpectRecordAndAgentRefuse(
      "buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.bpf\" } }\n"
      "trigger_config { trigger_mode: CLONE_SNAPSHOT\n"
      "  triggers { name: \"crash\" incident { kinds: FATAL_SIGNAL signals: 99 } } }\n",
      "line 4, column 59: trigger_config.triggers[0].incident.signals[0] is 99: linux.bpf reports "
      "the fatal signals 4, 6, 7, 8, 9, 11");
}

// A mode the loader reads (Perfetto's configs load) but the agent does not
// act on: refused before the agent takes its lock.
TEST_F(BadConfigCliTest, ATriggerModeTheAgentDoesNotActOnExitsTwoAndStartsNothing) {
  const std::string config = WriteConfig(
      "buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.bpf\" } }\n"
      "trigger_config { trigger_mode: STOP_TRACING triggers { name: \"a\" } }\n");
  ExpectRefused({"agent", "-c", config, "--run-dir", dir_ + "/run", "--output-dir",
                 dir_ + "/snapshots", "--socket", dir_ + "/control.sock"},
                absl::StrCat("ringside agent: ", config,
                             ": trigger_config.trigger_mode STOP_TRACING: the agent records until "
                             "stopped and takes CLONE_SNAPSHOTs; use CLONE_SNAPSHOT"));
}

// The agent's own paths: a file where its output directory should go, and
// a socket path that does not fit a unix address.
TEST_F(BadConfigCliTest, AgentPathsThatCannotWorkExitTwoAndStartNothing) {
  ASSERT_TRUE(std::ofstream(dir_ + "/trace.pftrace") << "not a directory");
  std::string config = WriteConfig(absl::StrCat(
      "buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.bpf\" } }\noutput_dir: \"",
      dir_, "/trace.pftrace/snapshots\"\n"));
  ExpectRefused(
      {"agent", "-c", config, "--run-dir", dir_ + "/run", "--socket", dir_ + "/control.sock"},
      absl::StrCat("ringside agent: ", config, ": line 3, column 1: output_dir is '", dir_,
                   "/trace.pftrace/snapshots', but ", dir_,
                   "/trace.pftrace is not a directory: a directory, or a path the agent can "
                   "create one at"),
      /*test_made_output_file=*/true);
  unlink((dir_ + "/trace.pftrace").c_str());

  config = WriteConfig(
      absl::StrCat("buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.bpf\" } }\n"
                   "control_socket: \"/",
                   std::string(110, 'c'), "\"\n"));
  ExpectRefused(
      {"agent", "-c", config, "--run-dir", dir_ + "/run", "--output-dir", dir_ + "/snapshots"},
      absl::StrCat("ringside agent: ", config,
                   ": line 3, column 1: control_socket is 111 bytes long: a unix socket "
                   "path is at most 107"));
}

}  // namespace
}  // namespace ringside::agent
