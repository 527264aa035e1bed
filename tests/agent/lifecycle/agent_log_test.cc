#include "agent/lifecycle/agent_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/scoped_env.h"

namespace ringside::agent {
namespace {

using ::testing::ElementsAre;
using testing::ScopedEnv;
using testing::ScratchDir;

// 2024-01-02T03:04:05.678Z
const absl::Time kSomeTime = absl::FromUnixMillis(1704164645678);

class AgentLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fd_ = open(scratch_.Join("log").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override { close(fd_); }

  // A log into the file, with the time set by now_.
  AgentLog MakeLog(LogLevel min_level = LogLevel::kInfo) {
    return AgentLog(fd_, min_level, [this] { return now_; });
  }

  std::string Written() const {
    std::string out;
    char buf[4096];
    ssize_t n;
    off_t offset = 0;
    while ((n = pread(fd_, buf, sizeof(buf), offset)) > 0) {
      out.append(buf, static_cast<size_t>(n));
      offset += n;
    }
    return out;
  }

  std::vector<std::string> Lines() const {
    return absl::StrSplit(Written(), '\n', absl::SkipEmpty());
  }

  std::string DevIno() const {
    struct stat st;
    fstat(fd_, &st);
    return absl::StrCat(st.st_dev, ":", st.st_ino);
  }

  ScratchDir scratch_;
  ScopedEnv env_{{"JOURNAL_STREAM"}};
  int fd_ = -1;
  absl::Time now_ = kSomeTime;
};

TEST_F(AgentLogTest, OutsideJournalLinesAreTimestampedWithLevelWords) {
  AgentLog log = MakeLog(LogLevel::kDebug);
  EXPECT_FALSE(log.journald());
  log.Error("e");
  log.Warning("disk full");
  log.Notice("n");
  log.Info("i");
  log.Debug("d");
  EXPECT_EQ(Written(),
            "2024-01-02T03:04:05.678Z ringside agent: error: e\n"
            "2024-01-02T03:04:05.678Z ringside agent: warning: disk full\n"
            "2024-01-02T03:04:05.678Z ringside agent: notice: n\n"
            "2024-01-02T03:04:05.678Z ringside agent: info: i\n"
            "2024-01-02T03:04:05.678Z ringside agent: debug: d\n");
}

TEST_F(AgentLogTest, JournalStreamOfOurFdGetsPriorityPrefixes) {
  env_.Set("JOURNAL_STREAM", DevIno());
  AgentLog log = MakeLog(LogLevel::kDebug);
  EXPECT_TRUE(log.journald());
  log.Error("e");
  log.Warning("w");
  log.Notice("n");
  log.Info("i");
  log.Debug("d");
  EXPECT_EQ(Written(), "<3>e\n<4>w\n<5>n\n<6>i\n<7>d\n");
}

TEST_F(AgentLogTest, JournalStreamOfAnotherFileIsNotOurs) {
  const int other = open(scratch_.Join("other").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(other, 0);
  struct stat st;
  ASSERT_EQ(fstat(other, &st), 0);
  close(other);
  env_.Set("JOURNAL_STREAM", absl::StrCat(st.st_dev, ":", st.st_ino));
  AgentLog log = MakeLog();
  EXPECT_FALSE(log.journald());
  log.Warning("w");
  EXPECT_EQ(Written(), "2024-01-02T03:04:05.678Z ringside agent: warning: w\n");
}

TEST_F(AgentLogTest, MalformedJournalStreamIsNotOurs) {
  for (const char* value : {"", ":", "12", "a:b", "1:2:3", "-1:-1"}) {
    env_.Set("JOURNAL_STREAM", value);
    EXPECT_FALSE(MakeLog().journald()) << value;
  }
}

TEST_F(AgentLogTest, LinesBelowMinLevelAreDropped) {
  AgentLog log = MakeLog(LogLevel::kWarning);
  log.Debug("d");
  log.Info("i");
  log.Notice("n");
  log.Warning("w");
  log.Error("e");
  EXPECT_THAT(Lines(), ElementsAre("2024-01-02T03:04:05.678Z ringside agent: warning: w",
                                   "2024-01-02T03:04:05.678Z ringside agent: error: e"));
}

TEST_F(AgentLogTest, DefaultMinLevelIsInfo) {
  AgentLog log(fd_);
  log.Debug("d");
  log.Info("i");
  EXPECT_THAT(Lines(), ElementsAre(::testing::EndsWith("ringside agent: info: i")));
}

TEST_F(AgentLogTest, MultiLineMessageGetsThePrefixOnEachLine) {
  AgentLog log = MakeLog();
  log.Error("config rejected:\n  line 3: unknown field\n  line 9: bad size\n");
  EXPECT_EQ(Written(),
            "2024-01-02T03:04:05.678Z ringside agent: error: config rejected:\n"
            "2024-01-02T03:04:05.678Z ringside agent: error:   line 3: unknown field\n"
            "2024-01-02T03:04:05.678Z ringside agent: error:   line 9: bad size\n");
}

TEST_F(AgentLogTest, MultiLineMessageInJournalKeepsItsLevelOnEachLine) {
  env_.Set("JOURNAL_STREAM", DevIno());
  AgentLog log = MakeLog();
  log.Warning("a\nb");
  EXPECT_EQ(Written(), "<4>a\n<4>b\n");
}

TEST_F(AgentLogTest, EmptyMessageIsOneLine) {
  AgentLog log = MakeLog();
  log.Info("");
  EXPECT_EQ(Written(), "2024-01-02T03:04:05.678Z ringside agent: info: \n");
}

TEST_F(AgentLogTest, RateLimitHoldsBackLinesBeyondTheBurstAndCountsThem) {
  AgentLog log = MakeLog();
  for (int i = 0; i < 5; ++i) {
    log.LogLimited(LogLevel::kWarning, "peer", absl::StrCat("refused ", i), 2, absl::Minutes(1));
  }
  now_ += absl::Minutes(1);
  log.LogLimited(LogLevel::kWarning, "peer", "refused 5", 2, absl::Minutes(1));
  log.LogLimited(LogLevel::kWarning, "peer", "refused 6", 2, absl::Minutes(1));
  EXPECT_THAT(Lines(), ElementsAre("2024-01-02T03:04:05.678Z ringside agent: warning: refused 0",
                                   "2024-01-02T03:04:05.678Z ringside agent: warning: refused 1",
                                   "2024-01-02T03:05:05.678Z ringside agent: warning: refused 5 "
                                   "(3 similar messages suppressed)",
                                   "2024-01-02T03:05:05.678Z ringside agent: warning: refused 6"));
}

TEST_F(AgentLogTest, RateLimitWindowDoesNotReopenEarly) {
  AgentLog log = MakeLog();
  log.LogLimited(LogLevel::kWarning, "k", "first", 1, absl::Minutes(1));
  now_ += absl::Seconds(59);
  log.LogLimited(LogLevel::kWarning, "k", "held back", 1, absl::Minutes(1));
  EXPECT_EQ(Lines().size(), 1u);
}

TEST_F(AgentLogTest, RateLimitKeysAreIndependent) {
  AgentLog log = MakeLog();
  log.LogLimited(LogLevel::kWarning, "a", "a1", 1);
  log.LogLimited(LogLevel::kWarning, "a", "a2", 1);
  log.LogLimited(LogLevel::kWarning, "b", "b1", 1);
  EXPECT_THAT(Lines(),
              ElementsAre(::testing::EndsWith("warning: a1"), ::testing::EndsWith("warning: b1")));
}

TEST_F(AgentLogTest, FilteredLinesDoNotCountAgainstTheRateLimit) {
  AgentLog log = MakeLog(LogLevel::kInfo);
  for (int i = 0; i < 10; ++i) log.LogLimited(LogLevel::kDebug, "k", "debug", 1);
  log.LogLimited(LogLevel::kInfo, "k", "info", 1);
  EXPECT_THAT(Lines(), ElementsAre("2024-01-02T03:04:05.678Z ringside agent: info: info"));
}

TEST_F(AgentLogTest, RateLimitKeysAreBounded) {
  AgentLog log = MakeLog();
  for (int i = 0; i < 3000; ++i) {
    log.LogLimited(LogLevel::kInfo, absl::StrCat("peer ", i), "x", 1, absl::Seconds(1));
  }
  EXPECT_LE(log.rate_limit_keys_for_testing(), AgentLog::kMaxRateLimitKeys + 1);
  // Once their windows are over, old keys make room for new ones.
  now_ += absl::Seconds(1);
  log.LogLimited(LogLevel::kInfo, "new peer", "y", 1, absl::Seconds(1));
  EXPECT_THAT(Lines().back(), ::testing::EndsWith("info: y"));
  EXPECT_LT(log.rate_limit_keys_for_testing(), 10u);
}

// Messages far larger than a pipe's buffer, so that each write() blocks
// part way: only the log's own serialization keeps them whole.
TEST(AgentLogConcurrencyTest, ConcurrentMessagesNeverInterleave) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  std::string received;
  std::thread reader([&] {
    char buf[65536];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof(buf))) > 0) received.append(buf, static_cast<size_t>(n));
  });
  constexpr int kThreads = 4;
  constexpr int kMessages = 20;
  constexpr size_t kLineBytes = 40000;
  {
    AgentLog log(fds[1], LogLevel::kInfo);
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([&log, t] {
        const std::string filler(kLineBytes, static_cast<char>('a' + t));
        for (int i = 0; i < kMessages; ++i) {
          log.Info(absl::StrCat("t", t, " first ", filler, "\nt", t, " second ", filler));
        }
      });
    }
    for (std::thread& w : writers) w.join();
  }
  close(fds[1]);
  reader.join();
  close(fds[0]);

  std::vector<std::string> lines = absl::StrSplit(received, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kMessages * 2));
  for (size_t i = 0; i < lines.size(); i += 2) {
    // "<time> ringside agent: info: tN first aaaa..." then the same thread's second line.
    const size_t tag = lines[i].find(": info: t");
    ASSERT_NE(tag, std::string::npos) << "line " << i;
    const int t = lines[i][tag + 9] - '0';
    ASSERT_TRUE(t >= 0 && t < kThreads) << "line " << i;
    const std::string filler(kLineBytes, static_cast<char>('a' + t));
    // Compared as bools: a failure printing two 40 kB lines helps nobody.
    EXPECT_TRUE(lines[i].substr(tag) == absl::StrCat(": info: t", t, " first ", filler))
        << "line " << i << " is not whole";
    EXPECT_TRUE(lines[i + 1].substr(tag) == absl::StrCat(": info: t", t, " second ", filler))
        << "line " << i + 1 << " is not the whole second line of line " << i << "'s message";
  }
}

}  // namespace
}  // namespace ringside::agent
