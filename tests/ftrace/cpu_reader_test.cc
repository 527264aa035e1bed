#include "ftrace/cpu_reader.h"

#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ftrace/event_format.h"
#include "ftrace/event_table.h"
#include "ftrace/page_parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/kernel_tracefs.h"

namespace ringside::ftrace {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::KernelTracefs;

constexpr size_t kPage = 4096;

// `n` pages of `size` bytes, page i filled with byte 'a' + i.
std::vector<uint8_t> Pages(size_t n, size_t size = kPage) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < n; i++) bytes.insert(bytes.end(), size, static_cast<uint8_t>('a' + i));
  return bytes;
}

// The first byte of each page in `pages`: which crafted page it is.
std::vector<char> PageMarks(const std::vector<uint8_t>& pages, size_t size = kPage) {
  std::vector<char> marks;
  for (size_t at = 0; at < pages.size(); at += size) marks.push_back(static_cast<char>(pages[at]));
  return marks;
}

// A regular file (unlinked at once) holding `bytes`, open for reading.
int FileWith(const std::vector<uint8_t>& bytes) {
  char path[] = "/tmp/cpu_reader_test.XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return -1;
  unlink(path);
  if (write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()) ||
      lseek(fd, 0, SEEK_SET) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A non-blocking pipe, as trace_pipe_raw is opened: read end, write end.
struct Pipe {
  Pipe() {
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) fds[0] = fds[1] = -1;
  }
  ~Pipe() {
    if (fds[1] >= 0) close(fds[1]);
  }
  // The read end, for the reader to own.
  int TakeReadEnd() { return std::exchange(fds[0], -1); }
  bool Write(const std::vector<uint8_t>& bytes) {
    return write(fds[1], bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  }
  int fds[2];
};

TEST(CpuReaderTest, ReadsEveryWholePageInOrder) {
  const int fd = FileWith(Pages(3));
  ASSERT_GE(fd, 0);
  auto reader = CpuReader::FromFdForTesting(0, fd, kPage);
  std::vector<uint8_t> pages;
  absl::StatusOr<size_t> n = reader->ReadPages(10, &pages);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 3u);
  EXPECT_EQ(pages, Pages(3));
}

TEST(CpuReaderTest, ReadsAtMostMaxPagesAndTheRestNextTime) {
  const int fd = FileWith(Pages(5));
  ASSERT_GE(fd, 0);
  auto reader = CpuReader::FromFdForTesting(0, fd, kPage);
  std::vector<uint8_t> first, second;
  EXPECT_EQ(*reader->ReadPages(2, &first), 2u);
  EXPECT_THAT(PageMarks(first), ElementsAre('a', 'b'));
  EXPECT_EQ(*reader->ReadPages(10, &second), 3u);
  EXPECT_THAT(PageMarks(second), ElementsAre('c', 'd', 'e'));
}

TEST(CpuReaderTest, AppendsAfterWhatThePagesVectorHolds) {
  const int fd = FileWith(Pages(2));
  ASSERT_GE(fd, 0);
  auto reader = CpuReader::FromFdForTesting(0, fd, kPage);
  std::vector<uint8_t> pages(kPage, 'z');
  EXPECT_EQ(*reader->ReadPages(10, &pages), 2u);
  EXPECT_THAT(PageMarks(pages), ElementsAre('z', 'a', 'b'));
}

TEST(CpuReaderTest, EmptyPipeReadsZeroPagesWithoutBlocking) {
  Pipe p;
  ASSERT_GE(p.fds[0], 0);
  auto reader = CpuReader::FromFdForTesting(0, p.TakeReadEnd(), kPage);
  std::vector<uint8_t> pages;
  absl::StatusOr<size_t> n = reader->ReadPages(10, &pages);  // EAGAIN.
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0u);
  EXPECT_TRUE(pages.empty());
}

TEST(CpuReaderTest, PagesThatArriveLaterAreReadByTheNextCall) {
  Pipe p;
  ASSERT_GE(p.fds[0], 0);
  auto reader = CpuReader::FromFdForTesting(0, p.TakeReadEnd(), kPage);
  std::vector<uint8_t> pages;
  EXPECT_EQ(*reader->ReadPages(10, &pages), 0u);
  ASSERT_TRUE(p.Write(Pages(2)));
  EXPECT_EQ(*reader->ReadPages(10, &pages), 2u);
  EXPECT_EQ(pages, Pages(2));
  EXPECT_EQ(*reader->ReadPages(10, &pages), 0u);
  EXPECT_EQ(pages.size(), 2 * kPage);
}

TEST(CpuReaderTest, EndOfFileReadsZeroPages) {
  const int fd = FileWith({});
  ASSERT_GE(fd, 0);
  auto reader = CpuReader::FromFdForTesting(0, fd, kPage);
  std::vector<uint8_t> pages;
  absl::StatusOr<size_t> n = reader->ReadPages(10, &pages);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0u);
}

TEST(CpuReaderTest, ReadShorterThanAPageIsDataLossNamingTheSizes) {
  std::vector<uint8_t> bytes = Pages(1);
  bytes.resize(kPage + 1000, 'x');
  const int fd = FileWith(bytes);
  ASSERT_GE(fd, 0);
  auto reader = CpuReader::FromFdForTesting(7, fd, kPage);
  std::vector<uint8_t> pages;
  absl::StatusOr<size_t> n = reader->ReadPages(10, &pages);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(n.status().message(), HasSubstr("cpu 7"));
  EXPECT_THAT(n.status().message(), HasSubstr("returned 1000 bytes, not a 4096-byte page"));
  // No partial page is left for a parser to read as a whole one.
  EXPECT_EQ(pages.size() % kPage, 0u);
}

TEST(CpuReaderTest, PagesAreOfTheReadersPageSize) {
  // The kernel's sub-buffers can be larger than a memory page.
  constexpr size_t kBig = 16384;
  const int fd = FileWith(Pages(2, kBig));
  ASSERT_GE(fd, 0);
  auto reader = CpuReader::FromFdForTesting(0, fd, kBig);
  EXPECT_EQ(reader->page_size(), kBig);
  std::vector<uint8_t> pages;
  EXPECT_EQ(*reader->ReadPages(10, &pages), 2u);
  EXPECT_EQ(pages.size(), 2 * kBig);
  EXPECT_THAT(PageMarks(pages, kBig), ElementsAre('a', 'b'));
}

TEST(CpuReaderTest, ReadErrorIsUnavailableNamingTheCpuAndCause) {
  const int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // read(): EISDIR.
  ASSERT_GE(fd, 0);
  auto reader = CpuReader::FromFdForTesting(3, fd, kPage);
  std::vector<uint8_t> pages;
  absl::StatusOr<size_t> n = reader->ReadPages(10, &pages);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(n.status().message(), HasSubstr("cpu 3"));
  EXPECT_THAT(n.status().message(), HasSubstr(std::strerror(EISDIR)));
  EXPECT_TRUE(pages.empty());
}

// --- Against the kernel, in an instance of the test's own -------------------

// Pins this thread to one CPU for the life of the object, so that what the
// test writes lands in that CPU's buffer.
class PinnedToCpu {
 public:
  explicit PinnedToCpu(int cpu) {
    ok_ = sched_getaffinity(0, sizeof(old_), &old_) == 0;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ok_ = ok_ && sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~PinnedToCpu() { sched_setaffinity(0, sizeof(old_), &old_); }
  bool ok() const { return ok_; }

 private:
  cpu_set_t old_;
  bool ok_ = false;
};

class CpuReaderKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RINGSIDE_REQUIRE_TRACEFS();
    const Tracefs& tracefs = *KernelTracefs();
    auto instance = Instance::Create(tracefs, "t-cpu-reader");
    ASSERT_TRUE(instance.ok()) << instance.status();
    instance_ = std::move(*instance);
    absl::StatusOr<PageHeaderFormat> page = ParseHeaderPage(*tracefs.Read("events/header_page"));
    absl::StatusOr<EventHeaderFormat> event =
        ParseHeaderEvent(*tracefs.Read("events/header_event"));
    absl::StatusOr<EventFormat> print =
        ParseEventFormat("ftrace", *tracefs.Read("events/ftrace/print/format"));
    ASSERT_TRUE(page.ok() && event.ok() && print.ok());
    page_ = *page;
    event_ = *event;
    table_.Add(*print);
    print_id_ = print->id;
  }
  void TearDown() override {
    // The instance can only go once no trace_pipe_raw of it is open.
    if (instance_ != nullptr) {
      EXPECT_TRUE(instance_->Remove().ok());
    }
  }

  // Writes `texts` into the instance's trace_marker from CPU 0.
  void WriteMarkers(const std::vector<std::string>& texts) {
    PinnedToCpu pin(0);
    ASSERT_TRUE(pin.ok());
    const int fd = open((instance_->path() + "/trace_marker").c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(instance_->SetTracingOn(true).ok());
    for (const std::string& text : texts) {
      EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    }
    ASSERT_TRUE(instance_->SetTracingOn(false).ok());
    close(fd);
  }

  // The ftrace/print texts on `pages`, in order.
  std::vector<std::string> Markers(const std::vector<uint8_t>& pages) {
    PageParser parser(page_, event_);
    std::vector<RawEvent> events;
    for (size_t at = 0; at < pages.size(); at += page_.page_size()) {
      PageParser::PageResult r = parser.Parse(pages.data() + at, page_.page_size(), &events);
      EXPECT_EQ(r.error, PageParser::Error::kNone) << PageErrorName(r.error);
    }
    const FieldFormat* buf = table_.Find(print_id_)->format.FindField("buf");
    std::vector<std::string> texts;
    for (const RawEvent& e : events) {
      if (EventTable::EventId(e) != print_id_) continue;
      std::string text(EventTable::ReadString(e, buf));
      if (!text.empty() && text.back() == '\n') text.pop_back();
      texts.push_back(text);
    }
    return texts;
  }

  std::unique_ptr<Instance> instance_;
  PageHeaderFormat page_;
  EventHeaderFormat event_;
  EventTable table_;
  uint32_t print_id_ = 0;
};

TEST_F(CpuReaderKernelTest, ReadsWhatWasWrittenIntoItsInstanceOnItsCpu) {
  WriteMarkers({"cpu reader one", "cpu reader two", "cpu reader three"});
  auto reader = CpuReader::Open(*instance_, 0, page_.page_size());
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<uint8_t> pages;
  absl::StatusOr<size_t> n = (*reader)->ReadPages(100, &pages);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_GE(*n, 1u);
  EXPECT_EQ(pages.size(), *n * page_.page_size());
  EXPECT_THAT(Markers(pages), ElementsAre("cpu reader one", "cpu reader two", "cpu reader three"));
}

TEST_F(CpuReaderKernelTest, ReadingConsumesThePagesFromTheKernelBuffer) {
  WriteMarkers({"read once"});
  {
    auto reader = CpuReader::Open(*instance_, 0, page_.page_size());
    ASSERT_TRUE(reader.ok()) << reader.status();
    std::vector<uint8_t> pages;
    ASSERT_TRUE((*reader)->ReadPages(100, &pages).ok());
    EXPECT_THAT(Markers(pages), ElementsAre("read once"));
  }
  // A new reader (a new fd) finds nothing: the kernel gave the pages away.
  auto reader = CpuReader::Open(*instance_, 0, page_.page_size());
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<uint8_t> pages;
  absl::StatusOr<size_t> again = (*reader)->ReadPages(100, &pages);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, 0u);
}

TEST_F(CpuReaderKernelTest, EmptyBufferReadsZeroPagesWithoutBlocking) {
  auto reader = CpuReader::Open(*instance_, 0, page_.page_size());
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<uint8_t> pages;
  absl::StatusOr<size_t> n = (*reader)->ReadPages(100, &pages);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0u);
  EXPECT_TRUE(pages.empty());
}

TEST_F(CpuReaderKernelTest, PageSizeLargerThanTheKernelsIsDataLossNotGarbage) {
  WriteMarkers({"some data"});
  auto reader = CpuReader::Open(*instance_, 0, 2 * page_.page_size());
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<uint8_t> pages;
  absl::StatusOr<size_t> n = (*reader)->ReadPages(100, &pages);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(n.status().message(),
              HasSubstr(absl::StrCat("returned ", page_.page_size(), " bytes")));
  EXPECT_TRUE(pages.empty());
}

TEST_F(CpuReaderKernelTest, CpuThatDoesNotExistIsNotFound) {
  auto reader = CpuReader::Open(*instance_, 100000, page_.page_size());
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(reader.status().message(), HasSubstr("per_cpu/cpu100000/trace_pipe_raw"));
  EXPECT_THAT(reader.status().message(), HasSubstr(instance_->relative_path()));
}

}  // namespace
}  // namespace ringside::ftrace
