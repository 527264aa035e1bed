#include "agent/metrics/metrics_textfile.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"

namespace ringside::agent {
namespace {

using testing::ListDir;
using testing::ScratchDir;

class MetricsTextfileTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0); }

  // A writer into the scratch directory whose thread waits an hour: the
  // test's own WriteOnce() calls are the only writes after the first.
  absl::StatusOr<std::unique_ptr<MetricsTextfile>> Start() {
    MetricsTextfile::Options o;
    o.dir = dir_.path();
    o.period = absl::Hours(1);
    o.status = [] {
      control::StatusReply s;
      s.set_version("0.1.0-test");
      return s;
    };
    o.warn = [this](const std::string& line) {
      absl::MutexLock lock(&mu_);
      warnings_.push_back(line);
    };
    return MetricsTextfile::Start(std::move(o));
  }
  std::string Warnings() {
    absl::MutexLock lock(&mu_);
    return absl::StrJoin(warnings_, "\n");
  }
  std::string Prom() const {
    std::ifstream in(dir_.Join(MetricsTextfile::kFileName));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  ScratchDir dir_;
  absl::Mutex mu_;
  std::vector<std::string> warnings_ ABSL_GUARDED_BY(mu_);
};

// Something planted at the name the temporary file had (one name for every
// agent, before) stops no write: the temporary name is a new random one
// each time, and what was planted is left alone.
TEST_F(MetricsTextfileTest, APlantedNameStopsNoWrite) {
  ASSERT_EQ(mkdir(dir_.Join(".ringside.prom.tmp").c_str(), 0755), 0);
  ASSERT_EQ(symlink("/etc/passwd", dir_.Join(".ringside-AAAAAA").c_str()), 0);
  absl::StatusOr<std::unique_ptr<MetricsTextfile>> m = Start();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Warnings(), "") << "the first write failed";
  EXPECT_TRUE(absl::StrContains(Prom(), "ringside_build_info")) << Prom();
  for (int i = 0; i < 20; i++) {
    const absl::Status st = (*m)->WriteOnce();
    EXPECT_TRUE(st.ok()) << st;
  }
  EXPECT_EQ((*m)->stats().failed, 0u) << (*m)->stats().last_error;
  EXPECT_EQ(ListDir(dir_.path()),
            (std::set<std::string>{".ringside.prom.tmp", ".ringside-AAAAAA", "ringside.prom"}))
      << "a temporary file left behind, or what was planted removed";
  struct stat st;
  ASSERT_EQ(stat(dir_.Join(MetricsTextfile::kFileName).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u) << "node_exporter reads it as its own user";
  m->reset();
  EXPECT_EQ(ListDir(dir_.path()),
            (std::set<std::string>{".ringside.prom.tmp", ".ringside-AAAAAA"}));
}

// A directory others can write: anyone there could put series of their own
// beside ringside's, or swap names under it; said at the start, once.
TEST_F(MetricsTextfileTest, WarnsOfADirectoryOthersCanWrite) {
  {
    absl::StatusOr<std::unique_ptr<MetricsTextfile>> m = Start();
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(Warnings(), "") << "0755, owned by the agent's user";
  }
  for (const mode_t mode : {01777, 0775}) {
    ASSERT_EQ(chmod(dir_.path().c_str(), mode), 0);
    ASSERT_EQ(chown(dir_.path().c_str(), static_cast<uid_t>(-1), 100), 0);
    absl::StatusOr<std::unique_ptr<MetricsTextfile>> m = Start();
    ASSERT_TRUE(m.ok()) << m.status();
    const std::string said = Warnings();
    EXPECT_TRUE(absl::StrContains(said, dir_.path())) << said;
    EXPECT_TRUE(absl::StrContains(said, "writable by")) << said;
    EXPECT_TRUE(absl::StrContains(Prom(), "ringside_build_info")) << "written all the same";
    absl::MutexLock lock(&mu_);
    warnings_.clear();
  }
}

}  // namespace
}  // namespace ringside::agent
