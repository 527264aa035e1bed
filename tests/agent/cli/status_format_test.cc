#include "agent/cli/status_format.h"

#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "tests/testing/paths.h"

namespace ringside::agent {
namespace {

using control::SourceStatus;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// A busy agent: two sources (one failed), two buffers, snapshots taken,
// streaming into a file.
control::StatusReply FilledReply() {
  control::StatusReply s;
  s.set_uptime_ms(((2 * 60 + 3) * 60 + 15) * 1000 + 250);
  s.set_config_path("/etc/ringside/agent.pbtxt");
  s.set_cpu_seconds(12.34);
  s.set_rss_bytes(48 << 20);
  control::MemoryStatus* m = s.mutable_memory();
  m->set_cgroup("/system.slice/ringside.service");
  m->set_cgroup_bytes(uint64_t{100} << 20);
  m->set_cgroup_limit_bytes(uint64_t{512} << 20);
  m->set_proportional_bytes(uint64_t{90} << 20);
  m->set_bpf_ring_bytes(uint64_t{8} << 20);
  m->set_chunk_pool_bytes(uint64_t{2} << 20);
  m->set_ftrace_buffer_bytes(uint64_t{4} << 20);
  m->set_buffer_bytes(uint64_t{68} << 20);
  m->set_symbol_bytes(uint64_t{12} << 20);
  m->set_stack_interning_bytes(uint64_t{3} << 19);
  s.set_pid(4321);
  s.set_version("0.1.0-dev");
  SourceStatus* bpf = s.add_sources();
  bpf->set_name("linux.bpf");
  bpf->set_state(SourceStatus::RUNNING);
  bpf->set_events(1234567);
  bpf->set_events_per_s(5012.25);
  SourceStatus::Loss* loss = bpf->add_losses();
  loss->set_cpu(3);
  loss->set_kind("ringbuf_reserve_failed");
  loss->set_events(12);
  loss = bpf->add_losses();
  loss->set_cpu(-1);
  loss->set_kind("chunks_discarded");
  loss->set_events(30);
  control::StackStatus* stacks = bpf->mutable_stacks();
  stacks->set_blocked_samples(5000);
  stacks->set_cpu_samples(700);
  stacks->set_frames_named(900);
  stacks->set_frames_unnamed(40);
  stacks->set_callstacks(310);
  stacks->set_interned_bytes(300 << 10);
  stacks->set_generations(2);
  stacks->set_remembered_stacks(350);
  stacks->set_symbol_bytes(uint64_t{12} << 20);
  stacks->set_interning_bytes(uint64_t{3} << 19);
  stacks->set_user_frames_unmapped(224);
  stacks->set_maps_reads(18);
  stacks->set_maps_unreadable(14);
  stacks->set_binaries_unreadable(1);
  SourceStatus* ftrace = s.add_sources();
  ftrace->set_name("linux.ftrace");
  ftrace->set_state(SourceStatus::FAILED);
  ftrace->set_error("tracefs is not mounted");
  control::BufferStatus* b = s.add_buffers();
  b->set_size_bytes(64 << 20);
  b->set_bytes_written(uint64_t{3} << 29);  // 1.5 GiB
  b->set_bytes_overwritten(1536);
  b->set_write_wraps(18);
  b->set_fill_percent(87.5);
  s.add_buffers()->set_size_bytes(512);
  control::DurableStatus* d = s.mutable_durable();
  d->set_entries(1234);
  d->set_bytes(2 << 20);
  d->set_capacity(4 << 20);
  d->set_evicted_live(1);
  d->set_evicted_ended(12);
  control::SnapshotStatus* snap = s.mutable_snapshots();
  snap->set_count(3);
  snap->set_last_path("/var/lib/ringside/snapshots/oom-1.pftrace");
  snap->set_last_reason("oom");
  snap->set_suppressed(2);
  control::SnapshotStatus::Trigger* oom = snap->add_triggers();
  oom->set_name("oom_kill");
  oom->set_kind("config");
  oom->set_fired(1);
  oom->set_suppressed(2);
  snap->set_failed(1);
  snap->set_last_error("cannot write /snaps/x.pftrace: No space left on device");
  s.mutable_streaming()->set_path("/var/lib/ringside/trace.pftrace");
  s.mutable_streaming()->set_bytes(5 << 20);
  control::MetricsListenerStatus* l = s.mutable_metrics_listener();
  l->set_listen(":9464");
  l->set_listening("[::]:9464");
  l->set_requests(120);
  l->set_ended_at_deadline(2);
  l->set_displaced(5);
  l->set_refused(1);
  control::BootInstanceStatus* ring = s.mutable_boot_instance();
  ring->set_instance("/sys/kernel/tracing/instances/boot_mapped");
  ring->set_state("recording");
  ring->add_events("sched/sched_switch");
  ring->add_events("printk/console");
  ring->set_buffer_kb(12216);
  ring->set_previous_boot_id("84c2a617-d156-4dd4-aec1-ae9d277a9548");
  control::PreviousBootSnapshot* prev = ring->mutable_previous_boot_snapshot();
  prev->set_path("/var/lib/ringside/n7-20261203T170353Z-previous-boot.pftrace");
  prev->set_events(1582);
  prev->set_pages(24);
  prev->set_first_realtime_ns(1796317428186967000);  // 2026-12-03 17:03:48 UTC
  prev->set_last_realtime_ns(1796317433727181300);
  prev->set_pages_malformed(1);
  prev->set_first_malformed("cpu 1, page 3: bad commit");
  return s;
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

std::string LineWith(const std::string& text, const std::string& needle) {
  for (const std::string& line : Lines(text)) {
    if (line.find(needle) != std::string::npos) return line;
  }
  return "";
}

TEST(StatusTextTest, HeadNamesVersionPidUptimeConfigAndCost) {
  const std::string text = StatusText(FilledReply());
  EXPECT_THAT(LineWith(text, "agent"), HasSubstr("ringside 0.1.0-dev, pid 4321, up 2h 03m 15s"));
  EXPECT_THAT(LineWith(text, "config"), HasSubstr("/etc/ringside/agent.pbtxt"));
  EXPECT_THAT(LineWith(text, "cost"), HasSubstr("12.34 s CPU"));
}

TEST(StatusTextTest, MemoryIsTheCgroupsWithTheStagingNamedNotResident) {
  const std::string text = StatusText(FilledReply());
  EXPECT_THAT(text, Not(HasSubstr("resident")));
  EXPECT_THAT(LineWith(text, "memory"),
              HasSubstr("100.0 MiB in its cgroup (limit 512.0 MiB); 90.0 MiB its own pages"));
  EXPECT_THAT(text, HasSubstr("cgroup /system.slice/ringside.service\n"));
  EXPECT_THAT(LineWith(text, "BPF rings"),
              HasSubstr("BPF rings 8.0 MiB, chunk pools 2.0 MiB, ring and store 68.0 MiB"));
  EXPECT_THAT(LineWith(text, "ftrace rings"),
              HasSubstr("ftrace rings 4.0 MiB: kernel memory outside the cgroup"));
  control::StatusReply shared = FilledReply();
  shared.mutable_memory()->set_cgroup_other_processes(3);
  shared.mutable_memory()->set_cgroup_limit_bytes(0);
  EXPECT_THAT(LineWith(StatusText(shared), "memory"), HasSubstr("(no limit; 3 other processes)"));
  control::StatusReply none = FilledReply();
  none.mutable_memory()->clear_cgroup();
  EXPECT_THAT(LineWith(StatusText(none), "memory"),
              HasSubstr("90.0 MiB its own pages (its memory cgroup cannot be read here)"));
  EXPECT_THAT(StatusText(none), Not(HasSubstr("cgroup /")));
  // An agent from before `memory` still shows what it reported.
  control::StatusReply old = FilledReply();
  old.clear_memory();
  EXPECT_THAT(LineWith(StatusText(old), "cost"), HasSubstr("12.34 s CPU, 48.0 MiB resident"));
}

TEST(StatusTextTest, CompressedSnapshotsSayTheCodecRatioAndCpu) {
  control::StatusReply s = FilledReply();
  EXPECT_THAT(StatusText(s), Not(HasSubstr("compressed (")));
  s.mutable_snapshots()->set_codec("zstd");
  s.mutable_snapshots()->set_compressed_in_bytes(30 << 20);
  s.mutable_snapshots()->set_compressed_out_bytes(9 << 20);
  s.mutable_snapshots()->set_compression_cpu_ns(94'000'000);
  EXPECT_THAT(LineWith(StatusText(s), "compressed ("),
              HasSubstr("compressed (zstd): 30.0 MiB into 9.0 MiB (0.30x), 94 ms of CPU"));
}

TEST(StatusTextTest, CompressedStreamingFilesSayTheCodecRatioAndCpuUnderStreaming) {
  control::StatusReply s = FilledReply();
  s.mutable_streaming()->set_codec("deflate");
  s.mutable_streaming()->set_compressed_in_bytes(8 << 20);
  s.mutable_streaming()->set_compressed_out_bytes(2 << 20);
  s.mutable_streaming()->set_compression_cpu_ns(61'000'000);
  const std::string text = StatusText(s);
  const size_t streaming = text.find("streaming");
  const size_t compressed = text.find("compressed (deflate): 8.0 MiB into 2.0 MiB (0.25x), 61 ms");
  ASSERT_NE(compressed, std::string::npos) << text;
  EXPECT_GT(compressed, streaming) << text;
}

TEST(StatusTextTest, SourceLineHasStateEventsRateAndTotalLosses) {
  const std::string line = LineWith(StatusText(FilledReply()), "linux.bpf");
  EXPECT_THAT(line, HasSubstr("RUNNING"));
  EXPECT_THAT(line, HasSubstr(" 1234567 "));
  EXPECT_THAT(line, HasSubstr(" 5012.2 "));
  EXPECT_THAT(line, ::testing::EndsWith(" 42"));
}

TEST(StatusTextTest, LossesAreListedByKindAndCpuUnderTheirSource) {
  const std::vector<std::string> lines = Lines(StatusText(FilledReply()));
  auto bpf = std::find_if(lines.begin(), lines.end(),
                          [](const std::string& l) { return l.starts_with("linux.bpf"); });
  ASSERT_NE(bpf, lines.end());
  ASSERT_GE(lines.end() - bpf, 3);
  EXPECT_EQ(bpf[1], "  lost 12: ringbuf_reserve_failed, cpu 3");
  EXPECT_EQ(bpf[2], "  lost 30: chunks_discarded");
}

TEST(StatusTextTest, StackSamplesAndWhatTheyInternedAreUnderTheirSource) {
  const std::vector<std::string> lines = Lines(StatusText(FilledReply()));
  auto bpf = std::find_if(lines.begin(), lines.end(),
                          [](const std::string& l) { return l.starts_with("linux.bpf"); });
  ASSERT_GE(lines.end() - bpf, 6);
  EXPECT_EQ(bpf[3], "  stack samples: 5000 blocked, 700 CPU; 310 callstacks");
  EXPECT_EQ(bpf[4], "  frames: 940 (40 unnamed); interned 300.0 KiB, generation 2");
  // Why user frames are unnamed, as the trace's stats and inspect say.
  ASSERT_GE(lines.end() - bpf, 7);
  EXPECT_EQ(bpf[5], "  user frames in no mapping: 224; binaries unreadable: 1");
  EXPECT_EQ(bpf[6], "  maps read: 18, 14 unreadable (the process gone)");
  // No maps read (no user frame met yet): no such line.
  control::StatusReply unread = FilledReply();
  unread.mutable_sources(0)->mutable_stacks()->set_maps_reads(0);
  EXPECT_THAT(StatusText(unread), Not(HasSubstr("maps read")));
  // A source without stacks has no such lines.
  control::StatusReply none = FilledReply();
  none.mutable_sources(0)->clear_stacks();
  EXPECT_THAT(StatusText(none), Not(HasSubstr("stack samples")));
}

TEST(StatusTextTest, TheSymbolCachesHaveAMemoryLineOfTheirOwn) {
  EXPECT_THAT(StatusText(FilledReply()),
              HasSubstr("symbol caches 12.0 MiB, stack interning 1.5 MiB\n"));
  control::StatusReply none = FilledReply();
  none.mutable_memory()->clear_symbol_bytes();
  none.mutable_memory()->clear_stack_interning_bytes();
  EXPECT_THAT(StatusText(none), Not(HasSubstr("symbol caches")));
}

TEST(StatusTextTest, ZeroLossesAreNotListed) {
  control::StatusReply s;
  SourceStatus* source = s.add_sources();
  source->set_name("linux.bpf");
  source->add_losses()->set_kind("ftrace_overrun");
  EXPECT_THAT(StatusText(s), Not(HasSubstr("ftrace_overrun")));
}

TEST(StatusTextTest, FailedSourceShowsItsError) {
  const std::vector<std::string> lines = Lines(StatusText(FilledReply()));
  auto ftrace = std::find_if(lines.begin(), lines.end(),
                             [](const std::string& l) { return l.starts_with("linux.ftrace"); });
  ASSERT_NE(ftrace, lines.end());
  EXPECT_THAT(*ftrace, HasSubstr("FAILED"));
  ASSERT_NE(ftrace + 1, lines.end());
  EXPECT_EQ(ftrace[1], "  error: tracefs is not mounted");
}

TEST(StatusTextTest, BufferLineHasHumanSizesFillAndWraps) {
  const std::string text = StatusText(FilledReply());
  const std::string first = LineWith(text, "#0");
  EXPECT_THAT(first, HasSubstr("64.0 MiB"));
  EXPECT_THAT(first, HasSubstr("87.5%"));
  EXPECT_THAT(first, HasSubstr("1.5 GiB"));
  EXPECT_THAT(first, HasSubstr("1.5 KiB"));
  EXPECT_THAT(first, ::testing::EndsWith(" 18"));
  EXPECT_THAT(LineWith(text, "#1"), HasSubstr(" 512 B "));
}

TEST(StatusTextTest, DurableSnapshotsAndStreamingHaveTheirLines) {
  const std::string text = StatusText(FilledReply());
  EXPECT_THAT(LineWith(text, "durable"),
              HasSubstr("1234 entries, 2.0 MiB of 4.0 MiB; evicted 1 live, 12 ended"));
  EXPECT_THAT(LineWith(text, "snapshots"), HasSubstr("3 taken, 1 failed, 2 suppressed"));
  EXPECT_THAT(text, HasSubstr("last: /var/lib/ringside/snapshots/oom-1.pftrace\n"));
  EXPECT_THAT(text, HasSubstr("reason: oom\n"));
  EXPECT_THAT(text, HasSubstr("last failure: cannot write /snaps/x.pftrace: "
                              "No space left on device\n"));
  EXPECT_THAT(LineWith(text, "streaming"),
              HasSubstr("/var/lib/ringside/trace.pftrace, 5.0 MiB written"));
}

// Where the listener listens, the port bound included, or why it does not.
TEST(StatusTextTest, TheMetricsListenerSaysWhereItListensOrWhyNot) {
  control::StatusReply s = FilledReply();
  EXPECT_THAT(LineWith(StatusText(s), "metrics"),
              HasSubstr("listening on [::]:9464 (metrics_listen :9464), 120 requests"));
  EXPECT_THAT(StatusText(s), HasSubstr("ended 2 at the deadline, 5 displaced, 1 refused"));
  control::MetricsListenerStatus* l = s.mutable_metrics_listener();
  l->set_listen("127.0.0.1:9464");
  l->clear_listening();
  l->set_error("metrics_listen 127.0.0.1:9464: Address already in use");
  EXPECT_THAT(LineWith(StatusText(s), "metrics"),
              HasSubstr("failed: metrics_listen 127.0.0.1:9464: Address already in use"));
  s.clear_metrics_listener();
  EXPECT_EQ(LineWith(StatusText(s), "metrics"), "") << "no metrics_listen, no line";
}

TEST(StatusTextTest, TheBootRingSaysWhatItRecordsAndWhereThePreviousBootWent) {
  control::StatusReply s = FilledReply();
  const std::string text = StatusText(s);
  EXPECT_THAT(LineWith(text, "boot ring"),
              HasSubstr("recording, 11.9 MiB kept across a warm reboot, 2 events"));
  EXPECT_THAT(text, HasSubstr("into /sys/kernel/tracing/instances/boot_mapped\n"));
  EXPECT_THAT(text, HasSubstr("previous boot 84c2a617-d156-4dd4-aec1-ae9d277a9548:\n"));
  EXPECT_THAT(text, HasSubstr("1582 events, 2026-12-03 17:03:48 to 17:03:53 UTC\n"));
  EXPECT_THAT(text, HasSubstr("in /var/lib/ringside/n7-20261203T170353Z-previous-boot.pftrace\n"));
  EXPECT_THAT(text, HasSubstr("1 malformed pages skipped, the first cpu 1, page 3: bad commit"));
  s.mutable_boot_instance()->mutable_previous_boot_snapshot()->set_error("disk full");
  EXPECT_THAT(StatusText(s), HasSubstr("not written: disk full"));
  s.mutable_boot_instance()->clear_previous_boot_snapshot();
  s.mutable_boot_instance()->set_previous_boot_lost("0e2063f1-5bf3-43d9-bb91-746564e8d05e");
  EXPECT_THAT(StatusText(s),
              HasSubstr("previous boot 0e2063f1-5bf3-43d9-bb91-746564e8d05e: events gone"));
}

TEST(StatusTextTest, EveryLineFitsEightyColumns) {
  for (const std::string& line : Lines(StatusText(FilledReply()))) {
    EXPECT_LE(line.size(), 80u) << line;
  }
}

TEST(StatusTextTest, EmptyReplySaysEmbeddedDefaultAndNone) {
  const std::string text = StatusText(control::StatusReply());
  EXPECT_THAT(LineWith(text, "config"), HasSubstr("embedded default"));
  EXPECT_THAT(LineWith(text, "sources"), HasSubstr("none"));
  EXPECT_THAT(LineWith(text, "buffers"), HasSubstr("none"));
  EXPECT_THAT(LineWith(text, "snapshots"), HasSubstr("0 taken, 0 failed, 0 suppressed"));
  EXPECT_THAT(text, Not(HasSubstr("last:")));
  EXPECT_THAT(text, Not(HasSubstr("last failure:")));
  EXPECT_THAT(text, Not(HasSubstr("streaming")));
}

TEST(StatusTextTest, LongUptimeIsInDays) {
  control::StatusReply s;
  s.set_uptime_ms(uint64_t{((3 * 24 + 4) * 60 + 5) * 60} * 1000);
  EXPECT_THAT(LineWith(StatusText(s), "agent"), HasSubstr("up 3d 04h 05m"));
}

// --- JSON ---------------------------------------------------------------------

// Every field of `descriptor` is a key of `object`, of the JSON type its
// proto type maps to; messages are checked the same way, recursively (a
// repeated one through its first element, when there is one).
void ExpectEveryField(const Descriptor* descriptor, const json& object, const std::string& where) {
  ASSERT_TRUE(object.is_object()) << where;
  for (int i = 0; i < descriptor->field_count(); i++) {
    const FieldDescriptor* field = descriptor->field(i);
    const std::string path = where + "." + field->name();
    ASSERT_TRUE(object.contains(field->name())) << path;
    const json& value = object.at(field->name());
    if (field->is_repeated()) {
      ASSERT_TRUE(value.is_array()) << path;
      if (!value.empty() && field->type() == FieldDescriptor::TYPE_MESSAGE) {
        ExpectEveryField(field->message_type(), value[0], path + "[0]");
      }
      continue;
    }
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE:
        if (!value.is_null()) ExpectEveryField(field->message_type(), value, path);
        break;
      case FieldDescriptor::CPPTYPE_STRING:
      case FieldDescriptor::CPPTYPE_ENUM:
        EXPECT_TRUE(value.is_string()) << path;
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        EXPECT_TRUE(value.is_boolean()) << path;
        break;
      default:
        EXPECT_TRUE(value.is_number()) << path << " is " << value.dump();
    }
  }
}

json Parsed(const control::StatusReply& s) {
  const json j = json::parse(StatusJson(s), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded());
  return j;
}

TEST(StatusJsonTest, HasEveryFieldOfTheReplyUnderItsProtoName) {
  const json j = Parsed(FilledReply());
  ExpectEveryField(control::StatusReply::descriptor(), j, "status");
  EXPECT_EQ(j["schema_version"], 1);
}

TEST(StatusJsonTest, EmptyReplyStillHasEveryFieldWithZeroValues) {
  const json j = Parsed(control::StatusReply());
  ExpectEveryField(control::StatusReply::descriptor(), j, "status");
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["uptime_ms"], 0);
  EXPECT_EQ(j["config_path"], "");
  EXPECT_EQ(j["sources"], json::array());
  EXPECT_EQ(j["memory"]["symbol_bytes"], 0);
  EXPECT_EQ(j["buffers"], json::array());
  EXPECT_EQ(j["durable"]["capacity"], 0);
  EXPECT_EQ(j["snapshots"]["last_path"], "");
  EXPECT_EQ(j["snapshots"]["failed"], 0);
  EXPECT_EQ(j["snapshots"]["last_error"], "");
  EXPECT_TRUE(j["streaming"].is_null());
  EXPECT_TRUE(j["metrics_listener"].is_null());
}

TEST(StatusJsonTest, NumbersAreNumbersAndEnumsAreNames) {
  control::StatusReply s = FilledReply();
  s.mutable_sources(0)->set_events(std::numeric_limits<uint64_t>::max());
  const json j = Parsed(s);
  EXPECT_EQ(j["sources"][0]["state"], "RUNNING");
  EXPECT_EQ(j["sources"][1]["state"], "FAILED");
  EXPECT_EQ(j["sources"][0]["events"].get<uint64_t>(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(j["sources"][0]["losses"][1]["cpu"], -1);
  EXPECT_DOUBLE_EQ(j["buffers"][0]["fill_percent"].get<double>(), 87.5);
  EXPECT_DOUBLE_EQ(j["cpu_seconds"].get<double>(), 12.34);
  EXPECT_EQ(j["streaming"]["bytes"], 5 << 20);
  EXPECT_EQ(j["sources"][0]["stacks"]["cpu_samples"], 700);
  // A source without stacks has the object too, all 0.
  EXPECT_EQ(j["sources"][1]["stacks"]["blocked_samples"], 0);
  EXPECT_EQ(j["sources"][1]["stacks"]["symbol_bytes"], 0);
}

TEST(StatusJsonTest, TextThatIsNotUtf8BecomesReplacementCharacters) {
  control::StatusReply s = FilledReply();
  s.mutable_sources(1)->set_error("bad \xff\xfe byte");
  s.mutable_snapshots()->set_last_path("/snap/\xc3(.pftrace");
  std::string text;
  ASSERT_NO_THROW(text = StatusJson(s));
  const json j = Parsed(s);
  EXPECT_EQ(j["sources"][1]["error"], "bad \xef\xbf\xbd\xef\xbf\xbd byte");
  EXPECT_EQ(j["snapshots"]["last_path"], "/snap/\xef\xbf\xbd(.pftrace");
}

// Every key the JSON can hold, as "a.b" paths (array elements as "a[].b").
void CollectKeys(const json& value, const std::string& prefix, std::set<std::string>* out) {
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      out->insert(path);
      CollectKeys(child, path, out);
    }
  } else if (value.is_array() && !value.empty()) {
    CollectKeys(value[0], prefix + "[]", out);
  }
}

TEST(StatusJsonTest, DocsDescribeEveryKey) {
  std::ifstream in(ringside::testing::SourceDir() + "/docs/status.md");
  ASSERT_TRUE(in) << "docs/status.md";
  const std::string doc((std::istreambuf_iterator<char>(in)), {});
  std::set<std::string> keys;
  CollectKeys(StatusJsonValue(FilledReply()), "", &keys);
  for (const std::string& key : keys) {
    EXPECT_THAT(doc, HasSubstr("`" + key + "`")) << "docs/status.md does not describe " << key;
  }
}

}  // namespace
}  // namespace ringside::agent
