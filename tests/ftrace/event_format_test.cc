#include "ftrace/event_format.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/ftrace/testing/kernel_formats.h"
#include "tests/testing/kernel_tracefs.h"

namespace ringside::ftrace {
namespace {

using testing::kSchedSwitchFormat;

TEST(EventFormatTest, ParsesFieldsOffsetsSizesAndSignedness) {
  absl::StatusOr<EventFormat> f = ParseEventFormat("sched", kSchedSwitchFormat);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->group, "sched");
  EXPECT_EQ(f->name, "sched_switch");
  EXPECT_EQ(f->id, 372u);
  ASSERT_EQ(f->common_fields.size(), 4u);
  ASSERT_EQ(f->fields.size(), 7u);
  const FieldFormat* comm = f->FindField("prev_comm");
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->offset, 8u);
  EXPECT_EQ(comm->size, 16u);
  EXPECT_EQ(comm->kind, FieldFormat::Kind::kFixedCharArray);
  const FieldFormat* state = f->FindField("prev_state");
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->size, 8u);
  EXPECT_TRUE(state->is_signed);
  EXPECT_EQ(state->kind, FieldFormat::Kind::kInteger);
  EXPECT_EQ(f->FindField("common_pid")->offset, 4u);
  EXPECT_EQ(f->FindField("nope"), nullptr);
}

TEST(EventFormatTest, ClassifiesDataLocPointerAndTailFields) {
  constexpr char kFormat[] = R"(name: mixed
ID: 9
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:__data_loc char[] filename;	offset:8;	size:4;	signed:0;
	field:__data_loc u32[] cpus;	offset:12;	size:4;	signed:0;
	field:void * addr;	offset:16;	size:8;	signed:0;
	field:u64 vals[4];	offset:24;	size:32;	signed:0;
	field:char buf[];	offset:56;	size:0;	signed:0;
)";
  absl::StatusOr<EventFormat> f = ParseEventFormat("g", kFormat);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->FindField("filename")->kind, FieldFormat::Kind::kDataLocString);
  EXPECT_EQ(f->FindField("cpus")->kind, FieldFormat::Kind::kDataLocArray);
  EXPECT_EQ(f->FindField("addr")->kind, FieldFormat::Kind::kPointer);
  EXPECT_EQ(f->FindField("vals")->kind, FieldFormat::Kind::kOther);
  EXPECT_EQ(f->FindField("buf")->kind, FieldFormat::Kind::kCharTail);
}

TEST(EventFormatTest, MalformedFormatsNameTheLine) {
  absl::StatusOr<EventFormat> f =
      ParseEventFormat("g", "name: x\nID: 3\nformat:\n\tfield:int a;\toffset:zz;\tsize:4;\n");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("format line 4"), std::string::npos) << f.status();
  EXPECT_FALSE(ParseEventFormat("g", "ID: 3\n").ok());
  EXPECT_FALSE(ParseEventFormat("g", "").ok());
}

TEST(EventFormatTest, HeaderPageAndHeaderEventGiveThePageLayout) {
  absl::StatusOr<PageHeaderFormat> page = ParseHeaderPage(testing::kHeaderPage);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->commit_size, 8u);
  EXPECT_EQ(page->data_offset, 16u);
  EXPECT_EQ(page->page_size(), 4096u);

  absl::StatusOr<EventHeaderFormat> event = ParseHeaderEvent(testing::kHeaderEvent);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->type_len_bits, 5u);
  EXPECT_EQ(event->time_delta_bits, 27u);
  EXPECT_EQ(event->padding_type, 29u);
  EXPECT_EQ(event->time_stamp_type, 31u);
  EXPECT_EQ(event->max_data_type_len, 28u);
  EXPECT_FALSE(ParseHeaderEvent("nothing here").ok());
  EXPECT_FALSE(ParseHeaderPage("\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n").ok());
}

TEST(EventFormatTest, ParsesThisKernelsFormats) {
  RINGSIDE_REQUIRE_TRACEFS();
  const Tracefs& tracefs = *testing::KernelTracefs();
  for (const char* event : {"sched/sched_switch", "sched/sched_waking", "sched/sched_process_exec",
                            "task/task_rename", "ftrace/print"}) {
    SCOPED_TRACE(event);
    const std::string e = event;
    const std::string group = e.substr(0, e.find('/'));
    absl::StatusOr<std::string> text = tracefs.Read("events/" + e + "/format");
    ASSERT_TRUE(text.ok()) << text.status();
    absl::StatusOr<EventFormat> f = ParseEventFormat(group, *text);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_GT(f->id, 0u);
    ASSERT_NE(f->FindField("common_type"), nullptr);
    EXPECT_EQ(f->FindField("common_type")->offset, 0u);
    EXPECT_FALSE(f->fields.empty());
  }
  absl::StatusOr<std::string> page = tracefs.Read("events/header_page");
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(ParseHeaderPage(*page).ok());
  absl::StatusOr<std::string> event = tracefs.Read("events/header_event");
  ASSERT_TRUE(event.ok());
  EXPECT_TRUE(ParseHeaderEvent(*event).ok());
}

}  // namespace
}  // namespace ringside::ftrace
