#include "ftrace/event_table.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ftrace/testing/kernel_formats.h"
#include "tests/testing/kernel_tracefs.h"

namespace ringside::ftrace {
namespace {

using ::testing::HasSubstr;
using testing::KernelTracefs;

// Format files as a 6.18 kernel writes them.
using testing::kPrintFormat;
using testing::kSchedSwitchFormat;

constexpr char kSchedWakeup[] = R"(name: sched_wakeup
ID: 374
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:char comm[16];	offset:8;	size:16;	signed:0;
	field:pid_t pid;	offset:24;	size:4;	signed:1;
	field:int prio;	offset:28;	size:4;	signed:1;
	field:int target_cpu;	offset:32;	size:4;	signed:1;

print fmt: "comm=%s pid=%d prio=%d target_cpu=%03d", REC->comm, REC->pid, REC->prio, REC->target_cpu
)";

constexpr char kSchedProcessExec[] = R"(name: sched_process_exec
ID: 365
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:__data_loc char[] filename;	offset:8;	size:4;	signed:0;
	field:pid_t pid;	offset:12;	size:4;	signed:1;
	field:pid_t old_pid;	offset:16;	size:4;	signed:1;

print fmt: "filename=%s pid=%d old_pid=%d", __get_str(filename), REC->pid, REC->old_pid
)";

constexpr char kTaskRename[] = R"(name: task_rename
ID: 204
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:pid_t pid;	offset:8;	size:4;	signed:1;
	field:char oldcomm[16];	offset:12;	size:16;	signed:0;
	field:char newcomm[16];	offset:28;	size:16;	signed:0;
	field:short oom_score_adj;	offset:44;	size:2;	signed:1;

print fmt: "pid=%d oldcomm=%s newcomm=%s oom_score_adj=%hd", REC->pid, REC->oldcomm, REC->newcomm, REC->oom_score_adj
)";

// An event of a module's own, with two __data_loc strings and a signed
// 8-byte and 1-byte field.
constexpr char kCustom[] = R"(name: request_done
ID: 1500
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:__data_loc char[] host;	offset:8;	size:4;	signed:0;
	field:__data_loc char[] path;	offset:12;	size:4;	signed:0;
	field:s64 latency_delta;	offset:16;	size:8;	signed:1;
	field:s8 status;	offset:24;	size:1;	signed:1;

print fmt: "host=%s path=%s", __get_str(host), __get_str(path)
)";

EventFormat Parse(const char* group, const char* text) {
  absl::StatusOr<EventFormat> f = ParseEventFormat(group, text);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *f : EventFormat{};
}

EventTable Table() {
  EventTable table;
  table.Add(Parse("sched", kSchedSwitchFormat));
  table.Add(Parse("sched", kSchedWakeup));
  table.Add(Parse("sched", kSchedProcessExec));
  table.Add(Parse("ftrace", kPrintFormat));
  table.Add(Parse("task", kTaskRename));
  table.Add(Parse("mymodule", kCustom));
  return table;
}

// Builds the bytes of one record, as a page holds it after the event header.
class Record {
 public:
  Record(uint16_t id, size_t size) : bytes_(size, 0) { Put<uint16_t>(0, id); }
  template <typename T>
  Record& Put(size_t offset, T value) {
    std::memcpy(bytes_.data() + offset, &value, sizeof(value));
    return *this;
  }
  Record& PutBytes(size_t offset, const std::string& s) {
    std::memcpy(bytes_.data() + offset, s.data(), s.size());
    return *this;
  }
  // A __data_loc field at `field_offset` naming `s` (NUL included, as the
  // kernel stores it) written at `at`.
  Record& PutDataLoc(size_t field_offset, size_t at, const std::string& s) {
    PutBytes(at, s);
    bytes_[at + s.size()] = 0;
    return Put<uint32_t>(field_offset, static_cast<uint32_t>((s.size() + 1) << 16 | at));
  }
  RawEvent View(size_t size) const {
    return RawEvent{0, bytes_.data(), static_cast<uint32_t>(size)};
  }
  RawEvent View() const { return View(bytes_.size()); }

 private:
  std::vector<uint8_t> bytes_;
};

const FieldFormat* Field(const EventTable& table, uint32_t id, const char* name) {
  const EventTable::Entry* entry = table.Find(id);
  return entry == nullptr ? nullptr : entry->format.FindField(name);
}

TEST(EventTableTest, FindsEachEventByTheIdOfItsFormat) {
  const EventTable table = Table();
  EXPECT_EQ(table.size(), 6u);
  const EventTable::Entry* wakeup = table.Find(374);
  ASSERT_NE(wakeup, nullptr);
  EXPECT_EQ(wakeup->format.group, "sched");
  EXPECT_EQ(wakeup->format.name, "sched_wakeup");
  const EventTable::Entry* custom = table.Find(1500);
  ASSERT_NE(custom, nullptr);
  EXPECT_EQ(custom->format.name, "request_done");
}

TEST(EventTableTest, UnknownIdFindsNothing) {
  const EventTable table = Table();
  EXPECT_EQ(table.Find(373), nullptr);
  EXPECT_EQ(table.Find(0), nullptr);
  EXPECT_EQ(table.Find(65535), nullptr);
  EXPECT_EQ(EventTable().Find(372), nullptr);
}

TEST(EventTableTest, EventsRingsideDecodesAreClassifiedByGroupAndName) {
  const EventTable table = Table();
  EXPECT_EQ(table.Find(372)->known, KnownEvent::kSchedSwitch);
  EXPECT_EQ(table.Find(374)->known, KnownEvent::kSchedWakeup);
  EXPECT_EQ(table.Find(365)->known, KnownEvent::kSchedProcessExec);
  EXPECT_EQ(table.Find(5)->known, KnownEvent::kPrint);
  EXPECT_EQ(table.Find(204)->known, KnownEvent::kTaskRename);
  EXPECT_EQ(table.Find(1500)->known, KnownEvent::kOther);
}

TEST(EventTableTest, KnownNameInAnotherGroupIsNotTakenForIt) {
  EXPECT_EQ(ClassifyEvent("mymodule", "sched_switch"), KnownEvent::kOther);
  EXPECT_EQ(ClassifyEvent("sched", "print"), KnownEvent::kOther);
  EXPECT_EQ(ClassifyEvent("ftrace", "task_rename"), KnownEvent::kOther);
  EXPECT_EQ(ClassifyEvent("sched", "sched_switch"), KnownEvent::kSchedSwitch);
}

TEST(EventTableTest, EventIdIsTheRecordsCommonType) {
  const EventTable table = Table();
  const Record wakeup(374, 36);
  EXPECT_EQ(EventTable::EventId(wakeup.View()), 374u);
  const EventTable::Entry* entry = table.Find(EventTable::EventId(wakeup.View()));
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->format.name, "sched_wakeup");
}

TEST(EventTableTest, RecordTooShortForCommonTypeHasIdZero) {
  const Record r(374, 36);
  EXPECT_EQ(EventTable::EventId(r.View(1)), 0u);
  EXPECT_EQ(EventTable::EventId(r.View(0)), 0u);
}

TEST(EventTableTest, ReadsIntegerFieldsAtTheirFormatsOffsets) {
  const EventTable table = Table();
  Record r(374, 36);
  r.Put<int32_t>(4, 4242).Put<int32_t>(24, 777).Put<int32_t>(28, 120).Put<int32_t>(32, 3);
  const RawEvent e = r.View();
  EXPECT_EQ(EventTable::ReadInt(e, Field(table, 374, "common_pid")), 4242);
  EXPECT_EQ(EventTable::ReadInt(e, Field(table, 374, "pid")), 777);
  EXPECT_EQ(EventTable::ReadInt(e, Field(table, 374, "prio")), 120);
  EXPECT_EQ(EventTable::ReadInt(e, Field(table, 374, "target_cpu")), 3);
  EXPECT_EQ(EventTable::ReadUint(e, Field(table, 374, "common_type")), 374u);
}

TEST(EventTableTest, SignedFieldsAreSignExtendedUnsignedOnesAreNot) {
  const EventTable table = Table();
  Record r(204, 48);
  r.Put<int32_t>(8, -1).Put<int16_t>(44, -1000);
  Record custom(1500, 32);
  custom.Put<int64_t>(16, -5'000'000'000).Put<int8_t>(24, -2);
  Record flags(374, 36);
  flags.Put<uint8_t>(2, 0xff);
  EXPECT_EQ(EventTable::ReadInt(r.View(), Field(table, 204, "pid")), -1);
  EXPECT_EQ(EventTable::ReadInt(r.View(), Field(table, 204, "oom_score_adj")), -1000);
  EXPECT_EQ(EventTable::ReadInt(custom.View(), Field(table, 1500, "latency_delta")),
            -5'000'000'000);
  EXPECT_EQ(EventTable::ReadInt(custom.View(), Field(table, 1500, "status")), -2);
  // The raw bits, for a caller that wants them.
  EXPECT_EQ(EventTable::ReadUint(r.View(), Field(table, 204, "pid")), 0xffffffffu);
  EXPECT_EQ(EventTable::ReadInt(flags.View(), Field(table, 374, "common_flags")), 255);
}

TEST(EventTableTest, FixedCharArrayReadsUpToItsNul) {
  const EventTable table = Table();
  Record r(372, 64);
  r.PutBytes(8, "kworker/0:1").PutBytes(40, "swapper/0");
  EXPECT_EQ(EventTable::ReadString(r.View(), Field(table, 372, "prev_comm")), "kworker/0:1");
  EXPECT_EQ(EventTable::ReadString(r.View(), Field(table, 372, "next_comm")), "swapper/0");
}

TEST(EventTableTest, FixedCharArrayWithoutNulStopsAtItsSize) {
  const EventTable table = Table();
  Record r(372, 64);
  r.PutBytes(8, "0123456789abcdef");  // All 16 bytes, no NUL...
  r.Put<int32_t>(24, 0x41414141);     // ...and the next field is not text.
  EXPECT_EQ(EventTable::ReadString(r.View(), Field(table, 372, "prev_comm")), "0123456789abcdef");
}

TEST(EventTableTest, DataLocStringReadsWhereItsLocationPoints) {
  const EventTable table = Table();
  Record r(365, 40);
  r.PutDataLoc(8, 20, "/usr/bin/true").Put<int32_t>(12, 99).Put<int32_t>(16, 99);
  EXPECT_EQ(EventTable::ReadString(r.View(), Field(table, 365, "filename")), "/usr/bin/true");
  EXPECT_EQ(EventTable::ReadInt(r.View(), Field(table, 365, "pid")), 99);
}

TEST(EventTableTest, TwoDataLocStringsOfOneRecordReadIndependently) {
  const EventTable table = Table();
  Record r(1500, 64);
  r.PutDataLoc(8, 28, "example.org").PutDataLoc(12, 40, "/index.html");
  EXPECT_EQ(EventTable::ReadString(r.View(), Field(table, 1500, "host")), "example.org");
  EXPECT_EQ(EventTable::ReadString(r.View(), Field(table, 1500, "path")), "/index.html");
}

TEST(EventTableTest, DataLocPointingOutsideTheRecordReadsEmpty) {
  const EventTable table = Table();
  const FieldFormat* host = Field(table, 1500, "host");
  Record past_end(1500, 64);
  past_end.Put<uint32_t>(8, 4u << 16 | 200);  // Offset beyond the record.
  EXPECT_EQ(EventTable::ReadString(past_end.View(), host), "");
  Record too_long(1500, 64);
  too_long.Put<uint32_t>(8, 60u << 16 | 28);  // Starts inside, runs past the end.
  EXPECT_EQ(EventTable::ReadString(too_long.View(), host), "");
  Record max(1500, 64);
  max.Put<uint32_t>(8, 0xffffffffu);
  EXPECT_EQ(EventTable::ReadString(max.View(), host), "");
}

TEST(EventTableTest, CharTailReadsToTheEndOfTheRecordOrItsNul) {
  const EventTable table = Table();
  const FieldFormat* buf = Field(table, 5, "buf");
  Record r(5, 28);
  r.PutBytes(16, "hello\n");  // NUL-padded to the record's end.
  EXPECT_EQ(EventTable::ReadString(r.View(), buf), "hello\n");
  Record unterminated(5, 20);
  unterminated.PutBytes(16, "abcd");
  EXPECT_EQ(EventTable::ReadString(unterminated.View(), buf), "abcd");
}

TEST(EventTableTest, FieldBeyondATruncatedRecordReadsZeroAndEmpty) {
  const EventTable table = Table();
  Record r(372, 64);
  r.PutBytes(8, "bash").Put<int32_t>(56, 1234).PutBytes(40, "cat");
  const RawEvent cut = r.View(50);  // Ends inside next_comm.
  EXPECT_EQ(EventTable::ReadInt(cut, Field(table, 372, "next_pid")), 0);
  EXPECT_EQ(EventTable::ReadString(cut, Field(table, 372, "next_comm")), "");
  EXPECT_EQ(EventTable::ReadString(cut, Field(table, 372, "prev_comm")), "bash");
  Record exec(365, 40);
  exec.PutDataLoc(8, 20, "/bin/sh");  // Bytes 20..27: cut at 24.
  EXPECT_EQ(EventTable::ReadString(exec.View(24), Field(table, 365, "filename")), "");
}

TEST(EventTableTest, MissingFieldReadsZeroAndEmpty) {
  const EventTable table = Table();
  const Record r(374, 36);
  const FieldFormat* none = Field(table, 374, "no_such_field");
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(EventTable::ReadInt(r.View(), none), 0);
  EXPECT_EQ(EventTable::ReadUint(r.View(), none), 0u);
  EXPECT_EQ(EventTable::ReadString(r.View(), none), "");
}

// --- Load, from a directory laid out as tracefs' events/ --------------------

class FakeEventsDir {
 public:
  FakeEventsDir() {
    char tmpl[] = "/tmp/event_table_test.XXXXXX";
    if (mkdtemp(tmpl) != nullptr) root_ = tmpl;
  }
  ~FakeEventsDir() {
    // Only what Add created, deepest first.
    for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
      if (unlink(it->c_str()) != 0) rmdir(it->c_str());
    }
    if (!root_.empty()) rmdir(root_.c_str());
  }
  void Add(const std::string& relative_path, const std::string& contents) {
    std::string path = root_;
    size_t start = 0;
    for (size_t slash; (slash = relative_path.find('/', start)) != std::string::npos;
         start = slash + 1) {
      path = absl::StrCat(root_, "/", relative_path.substr(0, slash));
      if (mkdir(path.c_str(), 0755) == 0) created_.push_back(path);
    }
    const std::string file = absl::StrCat(root_, "/", relative_path);
    std::ofstream(file) << contents;
    created_.push_back(file);
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
  std::vector<std::string> created_;
};

TEST(EventTableLoadTest, LoadsEachNamedEventsFormat) {
  FakeEventsDir dir;
  dir.Add("events/sched/sched_switch/format", kSchedSwitchFormat);
  dir.Add("events/sched/sched_wakeup/format", kSchedWakeup);
  dir.Add("events/task/task_rename/format", kTaskRename);
  absl::StatusOr<EventTable> table = EventTable::Load(Tracefs::AtRootForTesting(dir.root()),
                                                      {"sched/sched_switch", "task/task_rename"});
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 2u);
  ASSERT_NE(table->Find(372), nullptr);
  EXPECT_EQ(table->Find(372)->known, KnownEvent::kSchedSwitch);
  ASSERT_NE(table->Find(204), nullptr);
  EXPECT_EQ(table->Find(374), nullptr);  // Not asked for.
}

TEST(EventTableLoadTest, GroupWildcardLoadsEveryEventDirectoryOfTheGroup) {
  FakeEventsDir dir;
  dir.Add("events/sched/sched_switch/format", kSchedSwitchFormat);
  dir.Add("events/sched/sched_wakeup/format", kSchedWakeup);
  dir.Add("events/sched/enable", "0\n");  // Files beside the events are not events.
  dir.Add("events/sched/filter", "none\n");
  dir.Add("events/task/task_rename/format", kTaskRename);
  absl::StatusOr<EventTable> table =
      EventTable::Load(Tracefs::AtRootForTesting(dir.root()), {"sched/*"});
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 2u);
  EXPECT_NE(table->Find(372), nullptr);
  EXPECT_NE(table->Find(374), nullptr);
}

TEST(EventTableLoadTest, EventNotWrittenGroupSlashNameIsRefused) {
  FakeEventsDir dir;
  absl::StatusOr<EventTable> table =
      EventTable::Load(Tracefs::AtRootForTesting(dir.root()), {"sched_switch"});
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(table.status().message(), HasSubstr("'sched_switch' is not group/name"));
}

TEST(EventTableLoadTest, MissingEventIsAnErrorNamingItsFormatFile) {
  FakeEventsDir dir;
  dir.Add("events/sched/sched_switch/format", kSchedSwitchFormat);
  absl::StatusOr<EventTable> table =
      EventTable::Load(Tracefs::AtRootForTesting(dir.root()), {"sched/sched_switch", "sched/nope"});
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.status().message(), HasSubstr("events/sched/nope/format"));
}

TEST(EventTableLoadTest, MalformedFormatIsAnErrorNamingTheEventAndLine) {
  FakeEventsDir dir;
  dir.Add("events/g/broken/format",
          "name: broken\nID: 3\nformat:\n\tfield:int a;\toffset:zz;\tsize:4;\tsigned:1;\n");
  absl::StatusOr<EventTable> table =
      EventTable::Load(Tracefs::AtRootForTesting(dir.root()), {"g/broken"});
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.status().message(), HasSubstr("g/broken: "));
  EXPECT_THAT(table.status().message(), HasSubstr("line 4"));
}

// --- Against this kernel's tracefs (formats only: read, never written) ------

TEST(EventTableKernelTest, LoadedIdsAreTheKernelsOwn) {
  RINGSIDE_REQUIRE_TRACEFS();
  const Tracefs& tracefs = *KernelTracefs();
  absl::StatusOr<EventTable> table =
      EventTable::Load(tracefs, {"sched/sched_switch", "ftrace/print"});
  ASSERT_TRUE(table.ok()) << table.status();
  for (const char* event : {"sched/sched_switch", "ftrace/print"}) {
    absl::StatusOr<std::string> text = tracefs.Read(absl::StrCat("events/", event, "/format"));
    ASSERT_TRUE(text.ok()) << text.status();
    const size_t at = text->find("\nID: ");
    ASSERT_NE(at, std::string::npos);
    const uint32_t id = static_cast<uint32_t>(std::stoul(text->substr(at + 5)));
    const EventTable::Entry* entry = table->Find(id);
    ASSERT_NE(entry, nullptr) << event;
    EXPECT_EQ(absl::StrCat(entry->format.group, "/", entry->format.name), event);
  }
  EXPECT_EQ(table->size(), 2u);
}

TEST(EventTableKernelTest, GroupWildcardLoadsEveryEventTheKernelHasInIt) {
  RINGSIDE_REQUIRE_TRACEFS();
  const Tracefs& tracefs = *KernelTracefs();
  size_t dirs = 0;
  DIR* d = opendir((tracefs.root() + "/events/sched").c_str());
  ASSERT_NE(d, nullptr);
  while (dirent* entry = readdir(d)) {
    dirs += entry->d_type == DT_DIR && entry->d_name[0] != '.';
  }
  closedir(d);
  absl::StatusOr<EventTable> table = EventTable::Load(tracefs, {"sched/*"});
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_GT(dirs, 5u);
  EXPECT_EQ(table->size(), dirs);
}

}  // namespace
}  // namespace ringside::ftrace
