// The trace format must stay wire-compatible with Perfetto's: these tests pin
// the field numbers we took from Perfetto's protos and check that every
// message survives a round trip through libprotobuf.

#include <cstdint>
#include <string>

#include <memory>
#include <set>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "ringside/config/trace_config.pb.h"
#include "ringside/trace/trace.pb.h"

namespace ringside::trace {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// Sets every field of `message` (recursing into sub-messages down to `depth`)
// to a non-default value derived from `seed`, so a round trip that drops or
// mangles any field shows up as a difference.
void FillAllFields(Message* message, uint64_t seed, int depth) {
  const Descriptor* descriptor = message->GetDescriptor();
  const google::protobuf::Reflection* r = message->GetReflection();
  for (int i = 0; i < descriptor->field_count(); i++) {
    const FieldDescriptor* f = descriptor->field(i);
    // Only one member of a oneof can be set; fill them one per round instead.
    if (f->real_containing_oneof() != nullptr &&
        f->index_in_oneof() != static_cast<int>(seed % f->real_containing_oneof()->field_count())) {
      continue;
    }
    const uint64_t v = seed * 131 + static_cast<uint64_t>(f->number());
    const int copies = f->is_repeated() ? 2 : 1;
    for (int c = 0; c < copies; c++) {
      const bool rep = f->is_repeated();
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          rep ? r->AddInt32(message, f, -static_cast<int32_t>(v + c))
              : r->SetInt32(message, f, -static_cast<int32_t>(v));
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          rep ? r->AddInt64(message, f, -static_cast<int64_t>(v << 33) - c)
              : r->SetInt64(message, f, -static_cast<int64_t>(v << 33));
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          rep ? r->AddUInt32(message, f, static_cast<uint32_t>(v + c))
              : r->SetUInt32(message, f, static_cast<uint32_t>(v));
          break;
        case FieldDescriptor::CPPTYPE_UINT64:
          rep ? r->AddUInt64(message, f, (v << 35) + c) : r->SetUInt64(message, f, v << 35);
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          rep ? r->AddDouble(message, f, v + 0.25 + c) : r->SetDouble(message, f, v + 0.25);
          break;
        case FieldDescriptor::CPPTYPE_FLOAT:
          rep ? r->AddFloat(message, f, v + 0.5f + c) : r->SetFloat(message, f, v + 0.5f);
          break;
        case FieldDescriptor::CPPTYPE_BOOL:
          rep ? r->AddBool(message, f, true) : r->SetBool(message, f, true);
          break;
        case FieldDescriptor::CPPTYPE_ENUM: {
          const auto* e = f->enum_type();
          const auto* value = e->value(static_cast<int>(v % e->value_count()));
          rep ? r->AddEnum(message, f, value) : r->SetEnum(message, f, value);
          break;
        }
        case FieldDescriptor::CPPTYPE_STRING: {
          std::string s = "s" + std::to_string(v + c) + std::string("\0\xc3\xa9", 3);
          rep ? r->AddString(message, f, s) : r->SetString(message, f, s);
          break;
        }
        case FieldDescriptor::CPPTYPE_MESSAGE:
          if (depth > 0) {
            Message* sub = rep ? r->AddMessage(message, f) : r->MutableMessage(message, f);
            FillAllFields(sub, v + c, depth - 1);
          }
          break;
      }
    }
  }
}

// Every message type reachable from Trace, including nested types.
void CollectMessages(const Descriptor* d, std::set<const Descriptor*>* out) {
  if (!out->insert(d).second) return;
  for (int i = 0; i < d->nested_type_count(); i++) CollectMessages(d->nested_type(i), out);
  for (int i = 0; i < d->field_count(); i++) {
    if (d->field(i)->message_type()) CollectMessages(d->field(i)->message_type(), out);
  }
}

TEST(TraceProtoTest, EveryMessageRoundTripsThroughLibprotobuf) {
  std::set<const Descriptor*> messages;
  CollectMessages(Trace::descriptor(), &messages);
  ASSERT_GE(messages.size(), 25u);
  google::protobuf::DynamicMessageFactory factory;
  for (const Descriptor* d : messages) {
    // Several seeds, so every member of every oneof gets its turn.
    for (uint64_t seed = 0; seed < 16; seed++) {
      SCOPED_TRACE(d->full_name() + " seed " + std::to_string(seed));
      std::unique_ptr<Message> original(factory.GetPrototype(d)->New());
      FillAllFields(original.get(), seed, 3);
      std::string bytes;
      ASSERT_TRUE(original->SerializeToString(&bytes));
      std::unique_ptr<Message> parsed(factory.GetPrototype(d)->New());
      ASSERT_TRUE(parsed->ParseFromString(bytes));
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*original, *parsed))
          << original->DebugString() << "\nvs\n"
          << parsed->DebugString();
      EXPECT_TRUE(parsed->GetReflection()->GetUnknownFields(*parsed).empty());
    }
  }
}

TEST(TraceProtoTest, FieldsPerfettoDoesNotModelSurviveAsUnknownFields) {
  // Field 11 is Perfetto's TracePacket.track_event; ringside does not model it
  // but must not lose it when it re-serializes a packet.
  const std::string bytes = std::string("\x50\x07\x5a\x02\x08\x01", 6);
  TracePacket packet;
  ASSERT_TRUE(packet.ParseFromString(bytes));
  EXPECT_EQ(packet.trusted_packet_sequence_id(), 7u);
  EXPECT_EQ(packet.SerializeAsString(), bytes);
}

// The numbers below are Perfetto's (protos/perfetto/trace/trace_packet.proto
// and the files it imports). A mismatch would make our files unreadable to
// ui.perfetto.dev and trace_processor.
struct ExpectedField {
  const Descriptor* message;
  const char* name;
  int number;
  FieldDescriptor::Type type;
};

TEST(TraceProtoTest, FieldNumbersAndTypesMatchPerfetto) {
  using T = FieldDescriptor;
  const ExpectedField expected[] = {
      {Trace::descriptor(), "packet", 1, T::TYPE_MESSAGE},
      {TracePacket::descriptor(), "timestamp", 8, T::TYPE_UINT64},
      {TracePacket::descriptor(), "timestamp_clock_id", 58, T::TYPE_UINT32},
      {TracePacket::descriptor(), "trusted_uid", 3, T::TYPE_INT32},
      {TracePacket::descriptor(), "trusted_packet_sequence_id", 10, T::TYPE_UINT32},
      {TracePacket::descriptor(), "trusted_pid", 79, T::TYPE_INT32},
      {TracePacket::descriptor(), "previous_packet_dropped", 42, T::TYPE_UINT32},
      {TracePacket::descriptor(), "sequence_flags", 13, T::TYPE_UINT32},
      {TracePacket::descriptor(), "incremental_state_cleared", 41, T::TYPE_BOOL},
      {TracePacket::descriptor(), "first_packet_on_sequence", 87, T::TYPE_BOOL},
      {TracePacket::descriptor(), "interned_data", 12, T::TYPE_MESSAGE},
      {TracePacket::descriptor(), "ftrace_events", 1, T::TYPE_MESSAGE},
      {TracePacket::descriptor(), "process_tree", 2, T::TYPE_MESSAGE},
      {TracePacket::descriptor(), "clock_snapshot", 6, T::TYPE_MESSAGE},
      {TracePacket::descriptor(), "trace_config", 33, T::TYPE_MESSAGE},
      {TracePacket::descriptor(), "ftrace_stats", 34, T::TYPE_MESSAGE},
      {TracePacket::descriptor(), "trace_stats", 35, T::TYPE_MESSAGE},
      {TracePacket::descriptor(), "synchronization_marker", 36, T::TYPE_BYTES},
      {TracePacket::descriptor(), "system_info", 45, T::TYPE_MESSAGE},
      {TracePacket::descriptor(), "trigger", 46, T::TYPE_MESSAGE},
      {TracePacket::descriptor(), "service_event", 69, T::TYPE_MESSAGE},
      {TracePacket::descriptor(), "trace_uuid", 89, T::TYPE_MESSAGE},
      {TracePacket::descriptor(), "clone_snapshot_trigger", 113, T::TYPE_MESSAGE},
      {FtraceEventBundle::descriptor(), "cpu", 1, T::TYPE_UINT32},
      {FtraceEventBundle::descriptor(), "event", 2, T::TYPE_MESSAGE},
      {FtraceEventBundle::descriptor(), "lost_events", 3, T::TYPE_BOOL},
      {FtraceEventBundle::descriptor(), "compact_sched", 4, T::TYPE_MESSAGE},
      {FtraceEventBundle::CompactSched::descriptor(), "intern_table", 5, T::TYPE_STRING},
      {FtraceEventBundle::CompactSched::descriptor(), "switch_timestamp", 1, T::TYPE_UINT64},
      {FtraceEventBundle::CompactSched::descriptor(), "switch_next_comm_index", 6, T::TYPE_UINT32},
      {FtraceEventBundle::CompactSched::descriptor(), "waking_comm_index", 11, T::TYPE_UINT32},
      {FtraceEvent::descriptor(), "timestamp", 1, T::TYPE_UINT64},
      {FtraceEvent::descriptor(), "pid", 2, T::TYPE_UINT32},
      {FtraceEvent::descriptor(), "print", 3, T::TYPE_MESSAGE},
      {FtraceEvent::descriptor(), "sched_switch", 4, T::TYPE_MESSAGE},
      {FtraceEvent::descriptor(), "sched_waking", 20, T::TYPE_MESSAGE},
      {FtraceEvent::descriptor(), "sched_wakeup_new", 114, T::TYPE_MESSAGE},
      {FtraceEvent::descriptor(), "task_newtask", 235, T::TYPE_MESSAGE},
      {FtraceEvent::descriptor(), "task_rename", 236, T::TYPE_MESSAGE},
      {FtraceEvent::descriptor(), "sched_process_exec", 237, T::TYPE_MESSAGE},
      {FtraceEvent::descriptor(), "sched_process_exit", 238, T::TYPE_MESSAGE},
      {FtraceEvent::descriptor(), "sched_process_fork", 239, T::TYPE_MESSAGE},
      {FtraceEvent::descriptor(), "sched_process_free", 240, T::TYPE_MESSAGE},
      {FtraceEvent::descriptor(), "generic", 327, T::TYPE_MESSAGE},
      {FtraceEvent::descriptor(), "signal_generate", 325, T::TYPE_MESSAGE},
      {FtraceEvent::descriptor(), "mark_victim", 334, T::TYPE_MESSAGE},
      {FtraceEvent::descriptor(), "sched_migrate_task", 491, T::TYPE_MESSAGE},
      {SignalGenerateFtraceEvent::descriptor(), "sig", 6, T::TYPE_INT32},
      {SignalGenerateFtraceEvent::descriptor(), "pid", 4, T::TYPE_INT32},
      {MarkVictimFtraceEvent::descriptor(), "pid", 1, T::TYPE_INT32},
      {SchedSwitchFtraceEvent::descriptor(), "prev_state", 4, T::TYPE_INT64},
      {SchedSwitchFtraceEvent::descriptor(), "next_pid", 6, T::TYPE_INT32},
      {GenericFtraceEvent::Field::descriptor(), "uint_value", 5, T::TYPE_UINT64},
      {ProcessTree::descriptor(), "processes", 1, T::TYPE_MESSAGE},
      {ProcessTree::descriptor(), "threads", 2, T::TYPE_MESSAGE},
      {ProcessTree::Process::descriptor(), "cmdline", 3, T::TYPE_STRING},
      {ProcessTree::Process::descriptor(), "uid", 5, T::TYPE_INT32},
      {ProcessTree::Thread::descriptor(), "tgid", 3, T::TYPE_INT32},
      {ClockSnapshot::Clock::descriptor(), "timestamp", 2, T::TYPE_UINT64},
      {SystemInfo::descriptor(), "page_size", 6, T::TYPE_UINT32},
      {SystemInfo::descriptor(), "num_cpus", 8, T::TYPE_UINT32},
      {TraceStats::descriptor(), "buffer_stats", 1, T::TYPE_MESSAGE},
      {TraceStats::BufferStats::descriptor(), "chunks_overwritten", 3, T::TYPE_UINT64},
      {TraceStats::BufferStats::descriptor(), "abi_violations", 9, T::TYPE_UINT64},
      {TraceStats::BufferStats::descriptor(), "chunks_discarded", 18, T::TYPE_UINT64},
      {TraceStats::BufferStats::descriptor(), "data_loss_overwrite", 27, T::TYPE_UINT64},
      {FtraceStats::descriptor(), "cpu_stats", 2, T::TYPE_MESSAGE},
      {FtraceCpuStats::descriptor(), "overrun", 3, T::TYPE_UINT64},
      {FtraceCpuStats::descriptor(), "oldest_event_ts", 6, T::TYPE_DOUBLE},
      {TraceUuid::descriptor(), "lsb", 2, T::TYPE_INT64},
      {Trigger::descriptor(), "trusted_producer_uid", 3, T::TYPE_INT32},
      {TracingServiceEvent::descriptor(), "tracing_started", 2, T::TYPE_BOOL},
      {TracingServiceEvent::descriptor(), "tracing_disabled", 5, T::TYPE_BOOL},
      {InternedData::descriptor(), "event_names", 2, T::TYPE_MESSAGE},
      {config::TraceConfig::descriptor(), "buffers", 1, T::TYPE_MESSAGE},
      {config::TraceConfig::descriptor(), "data_sources", 2, T::TYPE_MESSAGE},
      {config::TraceConfig::descriptor(), "duration_ms", 3, T::TYPE_UINT32},
      {config::TraceConfig::descriptor(), "write_into_file", 8, T::TYPE_BOOL},
      {config::TraceConfig::descriptor(), "file_write_period_ms", 9, T::TYPE_UINT32},
      {config::TraceConfig::descriptor(), "max_file_size_bytes", 10, T::TYPE_UINT64},
      {config::TraceConfig::descriptor(), "flush_period_ms", 13, T::TYPE_UINT32},
      {config::TraceConfig::descriptor(), "output_path", 29, T::TYPE_STRING},
      {config::TraceConfig::BufferConfig::descriptor(), "fill_policy", 4, T::TYPE_ENUM},
      {config::DataSourceConfig::descriptor(), "target_buffer", 2, T::TYPE_UINT32},
  };
  for (const ExpectedField& e : expected) {
    const FieldDescriptor* field = e.message->FindFieldByName(e.name);
    ASSERT_NE(field, nullptr) << e.message->full_name() << "." << e.name;
    EXPECT_EQ(field->number(), e.number) << e.message->full_name() << "." << e.name;
    EXPECT_EQ(field->type(), e.type) << e.message->full_name() << "." << e.name;
  }
}

TEST(TraceProtoTest, PacketBytesMatchPerfettoEncoding) {
  // Hand-encoded from Perfetto's numbers: ftrace_events { cpu: 3 }, timestamp 5,
  // trusted_packet_sequence_id 2, previous_packet_dropped 1.
  const std::string perfetto_bytes =
      std::string("\x0a\x02\x08\x03\x40\x05\x50\x02\xd0\x02\x01", 11);
  TracePacket packet;
  ASSERT_TRUE(packet.ParseFromString(perfetto_bytes));
  EXPECT_EQ(packet.ftrace_events().cpu(), 3u);
  EXPECT_EQ(packet.timestamp(), 5u);
  EXPECT_EQ(packet.trusted_packet_sequence_id(), 2u);
  EXPECT_EQ(packet.previous_packet_dropped(), 1u);
  EXPECT_EQ(packet.SerializeAsString(), perfetto_bytes);
}

TEST(TraceProtoTest, ConfigParsesAsPerfettoStyleTextFormat) {
  config::TraceConfig cfg;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        buffers { size_kb: 65536 fill_policy: RING_BUFFER }
        data_sources { config { name: "linux.ftrace" target_buffer: 0 } }
        duration_ms: 10000
        write_into_file: true
        file_write_period_ms: 2500
        flush_period_ms: 1000
        max_file_size_bytes: 1000000
        output_path: "/tmp/x.pftrace"
      )pb",
      &cfg));
  EXPECT_EQ(cfg.buffers(0).size_kb(), 65536u);
  EXPECT_EQ(cfg.buffers(0).fill_policy(), config::TraceConfig::BufferConfig::RING_BUFFER);
  EXPECT_EQ(cfg.data_sources(0).config().name(), "linux.ftrace");
  EXPECT_EQ(cfg.file_write_period_ms(), 2500u);
}

}  // namespace
}  // namespace ringside::trace
