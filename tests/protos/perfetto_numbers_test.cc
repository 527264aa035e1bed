// ringside's protos must read as Perfetto's: a field Perfetto has keeps
// Perfetto's number and type, and a field only ringside has takes a number
// >= 1000 that Perfetto leaves free in the same message. Otherwise Perfetto's
// tools decode our bytes as one of their own fields (bpf_config once sat on
// DataSourceConfig.legacy_config and showed up as garbage text).
//
// kPerfetto below is Perfetto's side of that contract, written down from
// google/perfetto's protos/perfetto/... files: for every message we define,
// the fields we mirror (name, number, type) and the numbers >= 1000 Perfetto
// uses or reserves there. The checks walk our descriptors, so a field or
// message added later is checked without touching this file, and a message
// that is in neither table fails until someone looks up Perfetto's numbers.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/control/control.pb.h"
#include "ringside/trace/trace.pb.h"
#include "tests/testing/paths.h"

namespace ringside {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

struct PerfettoField {
  std::string name;
  int number;
  // "uint64", "repeated string", "message:TraceStats.BufferStats",
  // "enum:BuiltinClock": names are relative to the package, which is the
  // only part that differs between perfetto.protos and ringside.*.
  std::string type;
};

struct PerfettoMessage {
  std::vector<PerfettoField> fields;
  // Numbers >= 1000 Perfetto uses, reserves or opens to extensions here.
  std::vector<std::pair<int, int>> taken_from_1000;
};

using PerfettoTable = std::map<std::string, PerfettoMessage>;

// clang-format off
const PerfettoTable& Perfetto() {
  static const PerfettoTable* table = new PerfettoTable{
      // protos/perfetto/config/trace_config.proto
      {"TraceConfig", {{
          {"buffers", 1, "repeated message:TraceConfig.BufferConfig"},
          {"data_sources", 2, "repeated message:TraceConfig.DataSource"},
          {"duration_ms", 3, "uint32"},
          {"write_into_file", 8, "bool"},
          {"file_write_period_ms", 9, "uint32"},
          {"max_file_size_bytes", 10, "uint64"},
          {"flush_period_ms", 13, "uint32"},
          {"trigger_config", 17, "message:TraceConfig.TriggerConfig"},
          {"compression_type", 24, "enum:TraceConfig.CompressionType"},
          {"output_path", 29, "string"},
          {"compression", 47, "message:TraceConfig.CompressionConfig"},
          {"builtin_data_sources", 20, "message:TraceConfig.BuiltinDataSource"},
      }, {}}},
      {"TraceConfig.BuiltinDataSource", {{
          {"disable_clock_snapshotting", 1, "bool"},
          {"snapshot_interval_ms", 6, "uint32"},
      }, {}}},
      {"TraceConfig.CompressionConfig", {{
          {"deflate", 1, "message:TraceConfig.CompressionConfig.Deflate"},
          {"zstd", 2, "message:TraceConfig.CompressionConfig.Zstd"},
      }, {}}},
      {"TraceConfig.CompressionConfig.Deflate", {{}, {}}},
      {"TraceConfig.CompressionConfig.Zstd", {{
          {"level", 1, "int32"},
      }, {}}},
      {"TraceConfig.TriggerConfig", {{
          {"trigger_mode", 1, "enum:TraceConfig.TriggerConfig.TriggerMode"},
          {"triggers", 2, "repeated message:TraceConfig.TriggerConfig.Trigger"},
          {"trigger_timeout_ms", 3, "uint32"},
      }, {}}},
      {"TraceConfig.TriggerConfig.Trigger", {{
          {"name", 1, "string"},
          {"stop_delay_ms", 3, "uint32"},
          {"max_per_24_h", 4, "uint32"},
          {"skip_probability", 5, "double"},
      }, {}}},
      {"TraceConfig.BufferConfig", {{
          {"size_kb", 1, "uint32"},
          {"fill_policy", 4, "enum:TraceConfig.BufferConfig.FillPolicy"},
      }, {}}},
      {"TraceConfig.DataSource", {{
          {"config", 1, "message:DataSourceConfig"},
      }, {}}},
      // protos/perfetto/config/data_source_config.proto
      {"DataSourceConfig", {{
          {"name", 1, "string"},
          {"target_buffer", 2, "uint32"},
          {"ftrace_config", 100, "message:FtraceConfig"},
          {"process_stats_config", 103, "message:ProcessStatsConfig"},
          {"sys_stats_config", 104, "message:SysStatsConfig"},
      }, {{1000, 1000} /* legacy_config */, {1001, 1001} /* for_testing */,
          {268435455, 268435455} /* reserved */}}},
      // protos/perfetto/config/ftrace/ftrace_config.proto
      {"FtraceConfig", {{
          {"ftrace_events", 1, "repeated string"},
          {"buffer_size_kb", 10, "uint32"},
          {"drain_period_ms", 11, "uint32"},
          {"compact_sched", 12, "message:FtraceConfig.CompactSchedConfig"},
          {"drain_buffer_percent", 29, "uint32"},
      }, {}}},
      {"FtraceConfig.CompactSchedConfig", {{
          {"enabled", 1, "bool"},
      }, {}}},
      // protos/perfetto/config/process_stats/process_stats_config.proto
      {"ProcessStatsConfig", {{
          {"proc_stats_poll_ms", 4, "uint32"},
      }, {}}},
      // protos/perfetto/trace/ps/process_stats.proto
      {"ProcessStats", {{
          {"processes", 1, "repeated message:ProcessStats.Process"},
          {"collection_end_timestamp", 2, "uint64"},
      }, {}}},
      {"ProcessStats.Process", {{
          {"pid", 1, "int32"}, {"vm_size_kb", 2, "uint64"}, {"vm_rss_kb", 3, "uint64"},
          {"rss_anon_kb", 4, "uint64"}, {"rss_file_kb", 5, "uint64"},
          {"rss_shmem_kb", 6, "uint64"}, {"vm_swap_kb", 7, "uint64"},
          {"vm_locked_kb", 8, "uint64"}, {"vm_hwm_kb", 9, "uint64"},
          {"oom_score_adj", 10, "int64"},
      }, {}}},
      // protos/perfetto/config/sys_stats/sys_stats_config.proto
      {"SysStatsConfig", {{
          {"meminfo_period_ms", 1, "uint32"},
          {"meminfo_counters", 2, "repeated enum:MeminfoCounters"},
          {"vmstat_period_ms", 3, "uint32"},
          {"vmstat_counters", 4, "repeated enum:VmstatCounters"},
          {"stat_period_ms", 5, "uint32"},
          {"stat_counters", 6, "repeated enum:SysStatsConfig.StatCounters"},
          {"psi_period_ms", 11, "uint32"},
      }, {}}},
      // protos/perfetto/trace/sys_stats/sys_stats.proto
      {"SysStats", {{
          {"meminfo", 1, "repeated message:SysStats.MeminfoValue"},
          {"vmstat", 2, "repeated message:SysStats.VmstatValue"},
          {"cpu_stat", 3, "repeated message:SysStats.CpuTimes"},
          {"num_forks", 4, "uint64"},
          {"collection_end_timestamp", 9, "uint64"},
          {"psi", 14, "repeated message:SysStats.PsiSample"},
      }, {}}},
      {"SysStats.MeminfoValue", {{
          {"key", 1, "enum:MeminfoCounters"}, {"value", 2, "uint64"},
      }, {}}},
      {"SysStats.VmstatValue", {{
          {"key", 1, "enum:VmstatCounters"}, {"value", 2, "uint64"},
      }, {}}},
      {"SysStats.CpuTimes", {{
          {"cpu_id", 1, "uint32"}, {"user_ns", 2, "uint64"}, {"user_nice_ns", 3, "uint64"},
          {"system_mode_ns", 4, "uint64"}, {"idle_ns", 5, "uint64"}, {"io_wait_ns", 6, "uint64"},
          {"irq_ns", 7, "uint64"}, {"softirq_ns", 8, "uint64"}, {"steal_ns", 9, "uint64"},
      }, {}}},
      {"SysStats.PsiSample", {{
          {"resource", 1, "enum:SysStats.PsiSample.PsiResource"}, {"total_ns", 2, "uint64"},
      }, {}}},

      // protos/perfetto/trace/trace.proto
      {"Trace", {{
          {"packet", 1, "repeated message:TracePacket"},
      }, {}}},
      // protos/perfetto/trace/trace_packet.proto
      {"TracePacket", {{
          {"timestamp", 8, "uint64"},
          {"timestamp_clock_id", 58, "uint32"},
          {"ftrace_events", 1, "message:FtraceEventBundle"},
          {"process_tree", 2, "message:ProcessTree"},
          {"sys_stats", 7, "message:SysStats"},
          {"process_stats", 9, "message:ProcessStats"},
          {"clock_snapshot", 6, "message:ClockSnapshot"},
          {"trace_config", 33, "message:TraceConfig"},
          {"ftrace_stats", 34, "message:FtraceStats"},
          {"trace_stats", 35, "message:TraceStats"},
          {"synchronization_marker", 36, "bytes"},
          {"compressed_packets", 50, "bytes"},
          {"zstd_compressed_packets", 133, "bytes"},
          {"system_info", 45, "message:SystemInfo"},
          {"trigger", 46, "message:Trigger"},
          {"service_event", 69, "message:TracingServiceEvent"},
          {"trace_uuid", 89, "message:TraceUuid"},
          {"clone_snapshot_trigger", 113, "message:Trigger"},
          {"stack_sample", 135, "message:StackSample"},
          {"track_descriptor", 60, "message:TrackDescriptor"},
          {"trace_packet_defaults", 59, "message:TracePacketDefaults"},
          {"trusted_uid", 3, "int32"},
          {"trusted_packet_sequence_id", 10, "uint32"},
          {"trusted_pid", 79, "int32"},
          {"interned_data", 12, "message:InternedData"},
          {"sequence_flags", 13, "uint32"},
          {"incremental_state_cleared", 41, "bool"},
          {"previous_packet_dropped", 42, "uint32"},
          {"first_packet_on_sequence", 87, "bool"},
          {"machine_id", 98, "uint32"},
      }, {{1000, 1999} /* extensions, allocated by Perfetto */}}},
      // protos/perfetto/trace/clock_snapshot.proto
      {"ClockSnapshot", {{
          {"clocks", 1, "repeated message:ClockSnapshot.Clock"},
          {"primary_trace_clock", 2, "enum:BuiltinClock"},
      }, {}}},
      {"ClockSnapshot.Clock", {{
          {"clock_id", 1, "uint32"},
          {"timestamp", 2, "uint64"},
          {"is_incremental", 3, "bool"},
          {"unit_multiplier_ns", 4, "uint64"},
      }, {}}},
      // protos/perfetto/trace/ftrace/ftrace_event_bundle.proto
      {"FtraceEventBundle", {{
          {"cpu", 1, "uint32"},
          {"event", 2, "repeated message:FtraceEvent"},
          {"lost_events", 3, "bool"},
          {"compact_sched", 4, "message:FtraceEventBundle.CompactSched"},
      }, {}}},
      {"FtraceEventBundle.CompactSched", {{
          {"switch_timestamp", 1, "repeated uint64"},
          {"switch_prev_state", 2, "repeated int64"},
          {"switch_next_pid", 3, "repeated int32"},
          {"switch_next_prio", 4, "repeated int32"},
          {"intern_table", 5, "repeated string"},
          {"switch_next_comm_index", 6, "repeated uint32"},
          {"waking_timestamp", 7, "repeated uint64"},
          {"waking_pid", 8, "repeated int32"},
          {"waking_target_cpu", 9, "repeated int32"},
          {"waking_prio", 10, "repeated int32"},
          {"waking_comm_index", 11, "repeated uint32"},
      }, {}}},
      // protos/perfetto/trace/ftrace/ftrace_event.proto
      {"FtraceEvent", {{
          {"timestamp", 1, "uint64"},
          {"pid", 2, "uint32"},
          {"common_flags", 5, "uint32"},
          {"print", 3, "message:PrintFtraceEvent"},
          {"sched_switch", 4, "message:SchedSwitchFtraceEvent"},
          {"cpu_frequency", 11, "message:CpuFrequencyFtraceEvent"},
          {"cpu_idle", 13, "message:CpuIdleFtraceEvent"},
          {"sched_wakeup", 17, "message:SchedWakeupFtraceEvent"},
          {"sched_waking", 20, "message:SchedWakingFtraceEvent"},
          {"sched_wakeup_new", 114, "message:SchedWakeupNewFtraceEvent"},
          {"task_newtask", 235, "message:TaskNewtaskFtraceEvent"},
          {"task_rename", 236, "message:TaskRenameFtraceEvent"},
          {"sched_process_exec", 237, "message:SchedProcessExecFtraceEvent"},
          {"sched_process_exit", 238, "message:SchedProcessExitFtraceEvent"},
          {"sched_process_fork", 239, "message:SchedProcessForkFtraceEvent"},
          {"sched_process_free", 240, "message:SchedProcessFreeFtraceEvent"},
          {"signal_generate", 325, "message:SignalGenerateFtraceEvent"},
          {"generic", 327, "message:GenericFtraceEvent"},
          {"mark_victim", 334, "message:MarkVictimFtraceEvent"},
          {"sched_migrate_task", 491, "message:SchedMigrateTaskFtraceEvent"},
      }, {}}},
      // protos/perfetto/trace/ftrace/ftrace.proto
      {"PrintFtraceEvent", {{
          {"ip", 1, "uint64"},
          {"buf", 2, "string"},
      }, {}}},
      // protos/perfetto/trace/ftrace/power.proto
      {"CpuFrequencyFtraceEvent", {{
          {"state", 1, "uint32"},
          {"cpu_id", 2, "uint32"},
      }, {}}},
      {"CpuIdleFtraceEvent", {{
          {"state", 1, "uint32"},
          {"cpu_id", 2, "uint32"},
      }, {}}},
      // protos/perfetto/trace/ftrace/sched.proto
      {"SchedSwitchFtraceEvent", {{
          {"prev_comm", 1, "string"},
          {"prev_pid", 2, "int32"},
          {"prev_prio", 3, "int32"},
          {"prev_state", 4, "int64"},
          {"next_comm", 5, "string"},
          {"next_pid", 6, "int32"},
          {"next_prio", 7, "int32"},
      }, {}}},
      {"SchedWakeupFtraceEvent", {{
          {"comm", 1, "string"},
          {"pid", 2, "int32"},
          {"prio", 3, "int32"},
          {"success", 4, "int32"},
          {"target_cpu", 5, "int32"},
      }, {}}},
      {"SchedWakingFtraceEvent", {{
          {"comm", 1, "string"},
          {"pid", 2, "int32"},
          {"prio", 3, "int32"},
          {"success", 4, "int32"},
          {"target_cpu", 5, "int32"},
      }, {}}},
      {"SchedWakeupNewFtraceEvent", {{
          {"comm", 1, "string"},
          {"pid", 2, "int32"},
          {"prio", 3, "int32"},
          {"success", 4, "int32"},
          {"target_cpu", 5, "int32"},
      }, {}}},
      {"SchedProcessExecFtraceEvent", {{
          {"filename", 1, "string"},
          {"pid", 2, "int32"},
          {"old_pid", 3, "int32"},
      }, {}}},
      {"SchedProcessExitFtraceEvent", {{
          {"comm", 1, "string"},
          {"pid", 2, "int32"},
          {"tgid", 3, "int32"},
          {"prio", 4, "int32"},
      }, {}}},
      {"SchedProcessForkFtraceEvent", {{
          {"parent_comm", 1, "string"},
          {"parent_pid", 2, "int32"},
          {"child_comm", 3, "string"},
          {"child_pid", 4, "int32"},
      }, {}}},
      {"SchedProcessFreeFtraceEvent", {{
          {"comm", 1, "string"},
          {"pid", 2, "int32"},
          {"prio", 3, "int32"},
      }, {}}},
      {"SchedMigrateTaskFtraceEvent", {{
          {"comm", 1, "string"},
          {"pid", 2, "int32"},
          {"prio", 3, "int32"},
          {"orig_cpu", 4, "int32"},
          {"dest_cpu", 5, "int32"},
      }, {}}},
      // protos/perfetto/trace/ftrace/task.proto
      {"TaskNewtaskFtraceEvent", {{
          {"pid", 1, "int32"},
          {"comm", 2, "string"},
          {"clone_flags", 3, "uint64"},
          {"oom_score_adj", 4, "int32"},
      }, {}}},
      {"TaskRenameFtraceEvent", {{
          {"pid", 1, "int32"},
          {"oldcomm", 2, "string"},
          {"newcomm", 3, "string"},
          {"oom_score_adj", 4, "int32"},
      }, {}}},
      // protos/perfetto/trace/ftrace/signal.proto
      {"SignalGenerateFtraceEvent", {{
          {"code", 1, "int32"},
          {"comm", 2, "string"},
          {"group", 3, "int32"},
          {"pid", 4, "int32"},
          {"result", 5, "int32"},
          {"sig", 6, "int32"},
      }, {}}},
      // protos/perfetto/trace/ftrace/oom.proto
      {"MarkVictimFtraceEvent", {{
          {"pid", 1, "int32"},
      }, {}}},
      // protos/perfetto/trace/ftrace/generic.proto
      {"GenericFtraceEvent", {{
          {"event_name", 1, "string"},
          {"field", 2, "repeated message:GenericFtraceEvent.Field"},
      }, {}}},
      {"GenericFtraceEvent.Field", {{
          {"name", 1, "string"},
          {"str_value", 3, "string"},
          {"int_value", 4, "int64"},
          {"uint_value", 5, "uint64"},
      }, {}}},
      // protos/perfetto/trace/ftrace/ftrace_stats.proto
      {"FtraceCpuStats", {{
          {"cpu", 1, "uint64"},
          {"entries", 2, "uint64"},
          {"overrun", 3, "uint64"},
          {"commit_overrun", 4, "uint64"},
          {"bytes_read", 5, "uint64"},
          {"oldest_event_ts", 6, "double"},
          {"now_ts", 7, "double"},
          {"dropped_events", 8, "uint64"},
          {"read_events", 9, "uint64"},
      }, {}}},
      {"FtraceStats", {{
          {"phase", 1, "enum:FtraceStats.Phase"},
          {"cpu_stats", 2, "repeated message:FtraceCpuStats"},
          {"kernel_symbols_parsed", 3, "uint32"},
          {"kernel_symbols_mem_kb", 4, "uint32"},
          {"atrace_errors", 5, "string"},
          {"unknown_ftrace_events", 6, "repeated string"},
          {"failed_ftrace_events", 7, "repeated string"},
          {"preserve_ftrace_buffer", 8, "bool"},
      }, {}}},
      // protos/perfetto/trace/interned_data/interned_data.proto and
      // track_event/{track_event,debug_annotation}.proto
      {"InternedData", {{
          {"event_categories", 1, "repeated message:EventCategory"},
          {"event_names", 2, "repeated message:EventName"},
          {"debug_annotation_names", 3, "repeated message:DebugAnnotationName"},
          {"function_names", 5, "repeated message:InternedString"},
          {"frames", 6, "repeated message:Frame"},
          {"callstacks", 7, "repeated message:Callstack"},
          {"build_ids", 16, "repeated message:InternedString"},
          {"mapping_paths", 17, "repeated message:InternedString"},
          {"mappings", 19, "repeated message:Mapping"},
          {"stack_sample_counter_descriptors", 50,
           "repeated message:StackSample.CounterDescriptor"},
      }, {}}},
      // protos/perfetto/trace/profiling/profile_common.proto
      {"InternedString", {{{"iid", 1, "uint64"}, {"str", 2, "bytes"}}, {}}},
      {"Mapping", {{
          {"iid", 1, "uint64"},
          {"build_id", 2, "uint64"},
          {"exact_offset", 8, "uint64"},
          {"start_offset", 3, "uint64"},
          {"start", 4, "uint64"},
          {"end", 5, "uint64"},
          {"load_bias", 6, "uint64"},
          {"path_string_ids", 7, "repeated uint64"},
      }, {}}},
      {"Frame", {{
          {"iid", 1, "uint64"},
          {"function_name_id", 2, "uint64"},
          {"mapping_id", 3, "uint64"},
          {"rel_pc", 4, "uint64"},
          {"kind", 7, "enum:Frame.Kind"},
      }, {}}},
      {"Callstack", {{{"iid", 1, "uint64"}, {"frame_ids", 2, "repeated uint64"}}, {}}},
      // protos/perfetto/trace/profiling/stack_sample.proto
      {"StackSample", {{
          {"task_context", 1, "message:StackSample.TaskContext"},
          {"execution_context", 3, "message:StackSample.ExecutionContext"},
          {"callstack_iid", 6, "uint64"},
          {"unwind_error", 7, "string"},
          {"primary_descriptor_iid", 10, "uint64"},
          {"primary_weight", 11, "uint64"},
      }, {}}},
      {"StackSample.TaskContext", {{
          {"iid", 1, "uint64"}, {"pid", 2, "uint32"}, {"tid", 3, "uint32"},
      }, {}}},
      {"StackSample.ExecutionContext", {{
          {"iid", 1, "uint64"}, {"cpu", 2, "uint32"}, {"mode", 3, "enum:StackSample.Mode"},
      }, {}}},
      {"StackSample.CounterDescriptor", {{
          {"iid", 1, "uint64"},
          {"name", 2, "string"},
          {"unit", 3, "enum:StackSample.Unit"},
          {"unit_multiplier", 5, "uint64"},
          {"description", 6, "string"},
      }, {}}},
      {"StackSampleDefaults", {{
          {"source", 1, "string"},
          {"primary_descriptor", 2, "message:StackSample.CounterDescriptor"},
      }, {}}},
      // protos/perfetto/trace/trace_packet_defaults.proto
      {"TracePacketDefaults", {{
          {"timestamp_clock_id", 58, "uint32"},
          {"stack_sample_defaults", 100, "message:StackSampleDefaults"},
      }, {}}},
      {"EventCategory", {{{"iid", 1, "uint64"}, {"name", 2, "string"}}, {}}},
      {"EventName", {{{"iid", 1, "uint64"}, {"name", 2, "string"}}, {}}},
      {"DebugAnnotationName", {{{"iid", 1, "uint64"}, {"name", 2, "string"}}, {}}},
      // protos/perfetto/trace/ps/process_tree.proto
      {"ProcessTree", {{
          {"processes", 1, "repeated message:ProcessTree.Process"},
          {"threads", 2, "repeated message:ProcessTree.Thread"},
          {"collection_end_timestamp", 3, "uint64"},
      }, {}}},
      {"ProcessTree.Thread", {{
          {"tid", 1, "int32"},
          {"name", 2, "string"},
          {"tgid", 3, "int32"},
      }, {}}},
      {"ProcessTree.Process", {{
          {"pid", 1, "int32"},
          {"ppid", 2, "int32"},
          {"cmdline", 3, "repeated string"},
          {"uid", 5, "int32"},
      }, {}}},
      // protos/perfetto/common/system_info.proto
      {"Utsname", {{
          {"sysname", 1, "string"},
          {"version", 2, "string"},
          {"release", 3, "string"},
          {"machine", 4, "string"},
      }, {}}},
      {"SystemInfo", {{
          {"utsname", 1, "message:Utsname"},
          {"tracing_service_version", 4, "string"},
          {"page_size", 6, "uint32"},
          {"timezone_off_mins", 7, "int32"},
          {"num_cpus", 8, "uint32"},
          {"machine_name", 17, "string"},
      }, {}}},
      // protos/perfetto/common/trace_stats.proto
      {"TraceStats", {{
          {"buffer_stats", 1, "repeated message:TraceStats.BufferStats"},
          {"producers_connected", 2, "uint32"},
          {"producers_seen", 3, "uint64"},
          {"data_sources_registered", 4, "uint32"},
          {"data_sources_seen", 5, "uint64"},
          {"tracing_sessions", 6, "uint32"},
          {"total_buffers", 7, "uint32"},
          {"chunks_discarded", 8, "uint64"},
          {"patches_discarded", 9, "uint64"},
          {"invalid_packets", 10, "uint64"},
          {"flushes_requested", 12, "uint64"},
          {"flushes_succeeded", 13, "uint64"},
          {"flushes_failed", 14, "uint64"},
          {"final_flush_outcome", 15, "enum:TraceStats.FinalFlushOutcome"},
      }, {}}},
      {"TraceStats.BufferStats", {{
          {"bytes_written", 1, "uint64"},
          {"chunks_written", 2, "uint64"},
          {"chunks_overwritten", 3, "uint64"},
          {"write_wrap_count", 4, "uint64"},
          {"patches_succeeded", 5, "uint64"},
          {"patches_failed", 6, "uint64"},
          {"readaheads_succeeded", 7, "uint64"},
          {"readaheads_failed", 8, "uint64"},
          {"abi_violations", 9, "uint64"},
          {"chunks_rewritten", 10, "uint64"},
          {"chunks_committed_out_of_order", 11, "uint64"},
          {"buffer_size", 12, "uint64"},
          {"bytes_overwritten", 13, "uint64"},
          {"bytes_read", 14, "uint64"},
          {"padding_bytes_written", 15, "uint64"},
          {"padding_bytes_cleared", 16, "uint64"},
          {"chunks_read", 17, "uint64"},
          {"chunks_discarded", 18, "uint64"},
          {"trace_writer_packet_loss", 19, "uint64"},
          // TraceBufferV2's loss breakdown, in Perfetto since it landed.
          {"data_loss_read_gap", 22, "uint64"},
          {"data_loss_chunk_corrupted", 23, "uint64"},
          {"data_loss_orphan_continuation", 24, "uint64"},
          {"data_loss_reassembly_gap", 25, "uint64"},
          {"data_loss_reassembly_broken_chain", 26, "uint64"},
          {"data_loss_overwrite", 27, "uint64"},
          {"data_loss_missing_chunks", 28, "uint64"},
      }, {}}},
      // protos/perfetto/trace/trace_uuid.proto
      {"TraceUuid", {{{"msb", 1, "int64"}, {"lsb", 2, "int64"}}, {}}},
      // protos/perfetto/trace/track_event/track_descriptor.proto
      {"TrackDescriptor", {{
          {"uuid", 1, "uint64"},
          {"process", 3, "message:ProcessDescriptor"},
      }, {}}},
      // protos/perfetto/trace/track_event/process_descriptor.proto
      {"ProcessDescriptor", {{
          {"pid", 1, "int32"},
          {"process_labels", 8, "repeated string"},
      }, {}}},
      // protos/perfetto/trace/perfetto/tracing_service_event.proto
      {"TracingServiceEvent", {{
          {"all_data_sources_started", 1, "bool"},
          {"tracing_started", 2, "bool"},
          {"all_data_sources_flushed", 3, "bool"},
          {"read_tracing_buffers_completed", 4, "bool"},
          {"tracing_disabled", 5, "bool"},
      }, {}}},
      // protos/perfetto/trace/trigger.proto
      {"Trigger", {{
          {"trigger_name", 1, "string"},
          {"producer_name", 2, "string"},
          {"trusted_producer_uid", 3, "int32"},
      }, {}}},
  };
  return *table;
}
// clang-format on

// Messages Perfetto does not have. Nothing of Perfetto's can decode them, as
// long as they are reached only through ringside-only fields, which the
// checks below hold to the >= 1000 rule.
const std::set<std::string>& RingsideOnlyMessages() {
  static const std::set<std::string>* names = new std::set<std::string>{
      "BpfConfig",
      "BpfConfig.Stacks",
      "TraceConfig.TriggerConfig.Trigger.Incident",
      "TraceConfig.TriggerConfig.Trigger.Pressure",
      "TraceConfig.TriggerConfig.Trigger.Event",
      "TraceConfig.TriggerConfig.Trigger.TaskStall",
      "FtraceConfig.EventFilter",
      "TraceStats.StagingLoss",
      "TraceStats.ProducerStats",
      "TraceStats.DurableBufferStats",
      "TraceStats.TriggerCount",
      "TraceStats.SnapshotTrigger",
      "TraceStats.EventLoss",
      "TraceStats.SnapshotWindow",
      "TraceStats.StackStats",
      "TraceStats.EventsSeen",
      // The control socket's protocol (ringside.control), never in a trace.
      "Request",
      "StatusRequest",
      "SnapshotRequest",
      "StopRequest",
      "TriggerRequest",
      "Reply",
      "StatusReply",
      "PressureStatus",
      "EventTriggerStatus",
      "SourceStatus",
      "SourceStatus.Loss",
      "StackStatus",
      "BufferStatus",
      "DurableStatus",
      "SnapshotStatus",
      "SnapshotStatus.Trigger",
      "StreamingStatus",
      "ReloadStatus",
      "MemoryStatus",
      "MetricsListenerStatus",
      "BootInstanceStatus",
      "PreviousBootSnapshot",
      "SnapshotReply",
      "StopReply",
      "TriggerReply",
  };
  return *names;
}

std::string Relative(const std::string& full_name, const FileDescriptor* file) {
  const std::string& package = file->package();
  if (package.empty()) return full_name;
  return full_name.substr(package.size() + 1);
}

std::string TypeOf(const FieldDescriptor* f) {
  const std::string repeated = f->is_repeated() ? "repeated " : "";
  if (f->type() == FieldDescriptor::TYPE_MESSAGE) {
    return repeated +
           "message:" + Relative(f->message_type()->full_name(), f->message_type()->file());
  }
  if (f->type() == FieldDescriptor::TYPE_ENUM) {
    return repeated + "enum:" + Relative(f->enum_type()->full_name(), f->enum_type()->file());
  }
  return repeated + f->type_name();
}

// Every problem found, one line each, naming the message and field.
std::vector<std::string> CheckAgainstPerfetto(const std::vector<const Descriptor*>& messages,
                                              const PerfettoTable& perfetto,
                                              const std::set<std::string>& ringside_only) {
  std::vector<std::string> problems;
  for (const Descriptor* m : messages) {
    const std::string name = Relative(m->full_name(), m->file());
    if (ringside_only.count(name) != 0) continue;
    const auto it = perfetto.find(name);
    if (it == perfetto.end()) {
      problems.push_back(name +
                         ": not in the table of Perfetto's messages; add Perfetto's numbers "
                         "for it, or list it as ringside-only");
      continue;
    }
    const PerfettoMessage& theirs = it->second;
    for (const PerfettoField& p : theirs.fields) {
      if (m->FindFieldByName(p.name) == nullptr) {
        problems.push_back(name + "." + p.name + ": in the table but not in our message");
      }
    }
    for (int i = 0; i < m->field_count(); i++) {
      const FieldDescriptor* f = m->field(i);
      const std::string where = name + "." + f->name() + " = " + std::to_string(f->number());
      const PerfettoField* same_name = nullptr;
      const PerfettoField* same_number = nullptr;
      for (const PerfettoField& p : theirs.fields) {
        if (p.name == f->name()) same_name = &p;
        if (p.number == f->number()) same_number = &p;
      }
      if (same_name != nullptr) {
        if (same_name->number != f->number()) {
          problems.push_back(where + ": Perfetto numbers it " + std::to_string(same_name->number));
        }
        if (same_name->type != TypeOf(f)) {
          problems.push_back(where + ": is " + TypeOf(f) + ", Perfetto's is " + same_name->type);
        }
        continue;
      }
      // A field only ringside has.
      if (same_number != nullptr) {
        problems.push_back(where + ": ringside-only field on Perfetto's " + same_number->name +
                           " (" + same_number->type + ")");
      } else if (f->number() < 1000) {
        problems.push_back(where + ": ringside-only field below 1000, where Perfetto adds fields");
      }
      for (const auto& [lo, hi] : theirs.taken_from_1000) {
        if (f->number() >= lo && f->number() <= hi) {
          problems.push_back(where + ": Perfetto uses or reserves " + std::to_string(lo) +
                             (lo == hi ? "" : "-" + std::to_string(hi)) + " in this message");
        }
      }
    }
  }
  return problems;
}

void CollectMessages(const Descriptor* d, std::vector<const Descriptor*>* out) {
  out->push_back(d);
  for (int i = 0; i < d->nested_type_count(); i++) CollectMessages(d->nested_type(i), out);
}

// Every message defined in our .proto files that `file` pulls in.
void CollectOurMessages(const FileDescriptor* file, std::set<const FileDescriptor*>* seen,
                        std::vector<const Descriptor*>* out) {
  if (!seen->insert(file).second) return;
  if (file->package().rfind("ringside.", 0) != 0) return;
  for (int i = 0; i < file->message_type_count(); i++) CollectMessages(file->message_type(i), out);
  for (int i = 0; i < file->dependency_count(); i++)
    CollectOurMessages(file->dependency(i), seen, out);
}

std::vector<const Descriptor*> OurMessages(std::set<std::string>* files = nullptr) {
  std::set<const FileDescriptor*> seen;
  std::vector<const Descriptor*> out;
  CollectOurMessages(trace::Trace::descriptor()->file(), &seen, &out);
  CollectOurMessages(config::TraceConfig::descriptor()->file(), &seen, &out);
  CollectOurMessages(control::Request::descriptor()->file(), &seen, &out);
  if (files != nullptr) {
    for (const FileDescriptor* f : seen) files->insert(f->name());
  }
  return out;
}

std::string Join(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

TEST(PerfettoNumbersTest, EveryFieldOfOurProtosIsPerfettosOrOnAFreeNumberFrom1000) {
  const std::vector<const Descriptor*> messages = OurMessages();
  // Trace, TracePacket, the config and everything they hold.
  ASSERT_GE(messages.size(), 50u);
  const std::vector<std::string> problems =
      CheckAgainstPerfetto(messages, Perfetto(), RingsideOnlyMessages());
  EXPECT_TRUE(problems.empty()) << Join(problems);
}

// docs/config.md lists every number ringside took from 1000 up, so that a
// reader of a trace with another tool knows what the unknown fields are.
TEST(PerfettoNumbersTest, EveryRingsideFieldOfTraceStatsIsInTheDocsNumberList) {
  std::ifstream in(ringside::testing::SourceDir() + "/docs/config.md");
  ASSERT_TRUE(in.good());
  std::string docs(std::istreambuf_iterator<char>(in), {});
  std::replace(docs.begin(), docs.end(), '\n', ' ');
  std::vector<const Descriptor*> messages = {trace::TraceStats::descriptor()};
  for (int i = 0; i < trace::TraceStats::descriptor()->nested_type_count(); i++) {
    messages.push_back(trace::TraceStats::descriptor()->nested_type(i));
  }
  for (const Descriptor* message : messages) {
    for (int i = 0; i < message->field_count(); i++) {
      const google::protobuf::FieldDescriptor* field = message->field(i);
      if (field->number() < 1000) continue;
      const std::string entry = field->name() + "` " + std::to_string(field->number());
      EXPECT_NE(docs.find(entry), std::string::npos)
          << message->full_name() << "." << field->name() << " " << field->number()
          << " is not in docs/config.md's field numbers";
    }
  }
}

TEST(PerfettoNumbersTest, EveryProtoFileOfOursIsReachedByTheCheck) {
  // A .proto that neither the trace nor the config imports would have its
  // messages skip the check above; it has to be pulled in there.
  std::set<std::string> reached;
  OurMessages(&reached);
  const std::filesystem::path root =
      std::filesystem::path(ringside::testing::SourceDir()) / "protos";
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root / "ringside")) {
    if (entry.path().extension() != ".proto") continue;
    files++;
    const std::string name = entry.path().lexically_relative(root).string();
    EXPECT_EQ(reached.count(name), 1u) << name << " is not imported by trace.proto, "
                                       << "trace_config.proto or control.proto, so its fields "
                                       << "go unchecked";
  }
  EXPECT_GE(files, 15);
}

// The field check above sees an enum's type, not its values. A config that
// says CLONE_SNAPSHOT must mean the same to Perfetto's tools that show it.
// protos/perfetto/config/trace_config.proto: 3 is reserved (an early
// CLONE_SNAPSHOT, retired).
TEST(PerfettoNumbersTest, TriggerModeValuesArePerfettos) {
  const google::protobuf::EnumDescriptor* mode =
      config::TraceConfig::TriggerConfig::TriggerMode_descriptor();
  const std::vector<std::pair<std::string, int>> perfetto = {
      {"UNSPECIFIED", 0}, {"START_TRACING", 1}, {"STOP_TRACING", 2}, {"CLONE_SNAPSHOT", 4}};
  EXPECT_EQ(mode->value_count(), static_cast<int>(perfetto.size()));
  for (const auto& [name, number] : perfetto) {
    const google::protobuf::EnumValueDescriptor* v = mode->FindValueByName(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->number(), number) << name;
  }
  EXPECT_EQ(mode->FindValueByNumber(3), nullptr);
}

TEST(PerfettoNumbersTest, RingsideOnlyMessagesAreOursAndNotPerfettos) {
  // A name in both lists would let a Perfetto message skip every check.
  std::set<std::string> ours;
  for (const Descriptor* d : OurMessages()) ours.insert(Relative(d->full_name(), d->file()));
  for (const std::string& name : RingsideOnlyMessages()) {
    EXPECT_EQ(Perfetto().count(name), 0u) << name;
    EXPECT_EQ(ours.count(name), 1u) << name << " is listed as ringside-only but not defined";
  }
}

// The checker itself, on small made-up protos, so that a broken check cannot
// pass the real protos by accident.
class CheckerTest : public ::testing::Test {
 protected:
  std::vector<std::string> Check(const std::string& file_text, const PerfettoTable& perfetto,
                                 const std::set<std::string>& ringside_only = {}) {
    google::protobuf::FileDescriptorProto proto;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
        "name: 'checker_test.proto' package: 'ringside.checkertest' syntax: 'proto2' " + file_text,
        &proto));
    const FileDescriptor* file = pool_.BuildFile(proto);
    EXPECT_NE(file, nullptr);
    if (file == nullptr) return {"file did not build"};
    std::vector<const Descriptor*> messages;
    for (int i = 0; i < file->message_type_count(); i++)
      CollectMessages(file->message_type(i), &messages);
    return CheckAgainstPerfetto(messages, perfetto, ringside_only);
  }

  const PerfettoTable kDataSourceConfig = {
      {"DataSourceConfig", {{{"name", 1, "string"}}, {{1000, 1000}, {1001, 1001}}}}};
  google::protobuf::DescriptorPool pool_;
};

TEST_F(CheckerTest, AcceptsPerfettosFieldsAndAFreeNumberFrom1000) {
  EXPECT_TRUE(Check(R"pb(message_type {
                           name: "DataSourceConfig"
                           field { name: "name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
                           field { name: "ours" number: 1100 label: LABEL_OPTIONAL type: TYPE_BOOL }
                         })pb",
                    kDataSourceConfig)
                  .empty());
}

TEST_F(CheckerTest, RejectsARingsideFieldOnANumberPerfettoUsesFrom1000) {
  const std::vector<std::string> problems =
      Check(R"pb(message_type {
                   name: "DataSourceConfig"
                   field { name: "name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
                   field { name: "bpf_config" number: 1000 label: LABEL_OPTIONAL type: TYPE_BYTES }
                 })pb",
            kDataSourceConfig);
  ASSERT_EQ(problems.size(), 1u) << Join(problems);
  EXPECT_NE(problems[0].find("DataSourceConfig.bpf_config = 1000"), std::string::npos)
      << problems[0];
}

TEST_F(CheckerTest, RejectsARingsideFieldBelow1000) {
  const std::vector<std::string> problems =
      Check(R"pb(message_type {
                   name: "DataSourceConfig"
                   field { name: "name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
                   field { name: "ours" number: 22 label: LABEL_OPTIONAL type: TYPE_UINT64 }
                 })pb",
            kDataSourceConfig);
  ASSERT_EQ(problems.size(), 1u) << Join(problems);
  EXPECT_NE(problems[0].find("DataSourceConfig.ours = 22: ringside-only field below 1000"),
            std::string::npos)
      << problems[0];
}

TEST_F(CheckerTest, RejectsARingsideFieldOnAPerfettoNumberWithAnotherName) {
  const std::vector<std::string> problems =
      Check(R"pb(message_type {
                   name: "DataSourceConfig"
                   field { name: "label" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
                 })pb",
            kDataSourceConfig);
  ASSERT_EQ(problems.size(), 2u) << Join(problems);
  EXPECT_NE(
      Join(problems).find("DataSourceConfig.label = 1: ringside-only field on Perfetto's name"),
      std::string::npos)
      << Join(problems);
}

TEST_F(CheckerTest, RejectsPerfettosFieldUnderAnotherNumber) {
  const std::vector<std::string> problems =
      Check(R"pb(message_type {
                   name: "DataSourceConfig"
                   field { name: "name" number: 3 label: LABEL_OPTIONAL type: TYPE_STRING }
                 })pb",
            kDataSourceConfig);
  ASSERT_EQ(problems.size(), 1u) << Join(problems);
  EXPECT_NE(problems[0].find("Perfetto numbers it 1"), std::string::npos) << problems[0];
}

TEST_F(CheckerTest, RejectsPerfettosFieldWithAnotherType) {
  const std::vector<std::string> problems =
      Check(R"pb(message_type {
                   name: "DataSourceConfig"
                   field { name: "name" number: 1 label: LABEL_OPTIONAL type: TYPE_BYTES }
                 })pb",
            kDataSourceConfig);
  ASSERT_EQ(problems.size(), 1u) << Join(problems);
  EXPECT_NE(problems[0].find("is bytes, Perfetto's is string"), std::string::npos) << problems[0];
}

TEST_F(CheckerTest, RejectsAMessageMissingFromTheTableNamingIt) {
  const std::vector<std::string> problems =
      Check(R"pb(message_type {
                   name: "DataSourceConfig"
                   field { name: "name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
                   nested_type {
                     name: "Extra"
                     field { name: "x" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 }
                   }
                 })pb",
            kDataSourceConfig);
  ASSERT_EQ(problems.size(), 1u) << Join(problems);
  EXPECT_EQ(problems[0].rfind("DataSourceConfig.Extra: not in the table", 0), 0u) << problems[0];
}

TEST_F(CheckerTest, LetsARingsideOnlyMessageNumberItsFieldsFreely) {
  EXPECT_TRUE(Check(R"pb(message_type {
                           name: "BpfConfig"
                           field { name: "sched" number: 1 label: LABEL_OPTIONAL type: TYPE_BOOL }
                         })pb",
                    kDataSourceConfig, {"BpfConfig"})
                  .empty());
}

TEST_F(CheckerTest, RejectsAPerfettoMessageTypeSwappedForAnother) {
  const PerfettoTable table = {
      {"Packet", {{{"trigger", 46, "message:Trigger"}}, {}}},
      {"Trigger", {{}, {}}},
      {"Other", {{}, {}}},
  };
  const std::vector<std::string> problems = Check(
      R"pb(message_type {
             name: "Packet"
             field {
               name: "trigger"
               number: 46
               label: LABEL_OPTIONAL
               type: TYPE_MESSAGE
               type_name: ".ringside.checkertest.Other"
             }
           }
           message_type { name: "Trigger" }
           message_type { name: "Other" })pb",
      table);
  ASSERT_EQ(problems.size(), 1u) << Join(problems);
  EXPECT_NE(problems[0].find("is message:Other, Perfetto's is message:Trigger"), std::string::npos)
      << problems[0];
}

}  // namespace
}  // namespace ringside
