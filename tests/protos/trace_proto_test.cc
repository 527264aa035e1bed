// The trace format must stay wire-compatible with Perfetto's: these tests check
// that every message survives a round trip through libprotobuf and that bytes
// encoded with Perfetto's numbers read back as ours. Perfetto's numbers
// themselves are checked field by field in perfetto_numbers_test.cc.

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
