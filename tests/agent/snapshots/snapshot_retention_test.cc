#include "agent/snapshots/snapshot_retention.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"

namespace ringside::agent {
namespace {

using testing::ScratchDir;

void Write(const std::string& path, size_t bytes) {
  std::ofstream(path) << std::string(bytes, 'x');
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

std::unique_ptr<OutputDir> Open(const ScratchDir& dir) {
  absl::StatusOr<std::unique_ptr<OutputDir>> d = OutputDir::Open(dir.path(), std::nullopt);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? std::move(*d) : nullptr;
}

TEST(SnapshotRetentionTest, KnowsItsOwnFileNamesOnly) {
  EXPECT_TRUE(IsSnapshotFileName("h-20261123T090507Z-oom.pftrace", "h"));
  EXPECT_TRUE(IsSnapshotFileName("h-20261123T090507Z-oom-2.pftrace", "h"));
  EXPECT_FALSE(IsSnapshotFileName("other-20261123T090507Z-oom.pftrace", "h"));
  EXPECT_FALSE(IsSnapshotFileName("h-20261123T090507Z-oom.pftrace.gz", "h"));
  EXPECT_FALSE(IsSnapshotFileName("h-2026112XT090507Z-oom.pftrace", "h"));
  EXPECT_FALSE(IsSnapshotFileName("h-notes.pftrace", "h"));
  EXPECT_FALSE(IsSnapshotFileName(".ringside-AbC123", "h"));
}

TEST(SnapshotRetentionTest, DeletesTheOldestBeyondTheFileCountAndNothingElse) {
  ScratchDir dir;
  for (const char* t : {"20261123T090501Z", "20261123T090502Z", "20261123T090503Z"}) {
    Write(dir.Join(std::string("h-") + t + "-r.pftrace"), 10);
  }
  Write(dir.Join("h-notes.txt"), 10);                                          // Not a snapshot.
  Write(dir.Join("other-20261123T090500Z-r.pftrace"), 10);                     // Another host's.
  symlink("/etc/hostname", dir.Join("h-20261123T090400Z-l.pftrace").c_str());  // Not a file.
  const PruneResult r = PruneSnapshots(*Open(dir), "h", 2, 0, "h-20261123T090503Z-r.pftrace");
  EXPECT_EQ(r.files_deleted, 1u);
  EXPECT_EQ(r.bytes_deleted, 10u);
  EXPECT_FALSE(Exists(dir.Join("h-20261123T090501Z-r.pftrace")));
  EXPECT_TRUE(Exists(dir.Join("h-20261123T090502Z-r.pftrace")));
  EXPECT_TRUE(Exists(dir.Join("h-20261123T090503Z-r.pftrace")));
  EXPECT_TRUE(Exists(dir.Join("h-notes.txt")));
  EXPECT_TRUE(Exists(dir.Join("other-20261123T090500Z-r.pftrace")));
  EXPECT_TRUE(Exists(dir.Join("h-20261123T090400Z-l.pftrace")));
  EXPECT_TRUE(Exists("/etc/hostname"));
}

TEST(SnapshotRetentionTest, DeletesTheOldestBeyondTheBytesButNeverTheNewOne) {
  ScratchDir dir;
  Write(dir.Join("h-20261123T090501Z-a.pftrace"), 100);
  Write(dir.Join("h-20261123T090502Z-b.pftrace"), 100);
  Write(dir.Join("h-20261123T090503Z-c.pftrace"), 500);
  const PruneResult r = PruneSnapshots(*Open(dir), "h", 0, 150, "h-20261123T090503Z-c.pftrace");
  EXPECT_EQ(r.files_deleted, 2u);
  EXPECT_EQ(r.bytes_deleted, 200u);
  EXPECT_TRUE(Exists(dir.Join("h-20261123T090503Z-c.pftrace")));
}

TEST(SnapshotRetentionTest, TellsRequestedSnapshotsFromTriggeredOnes) {
  EXPECT_EQ(RequestedSnapshotFileReason("request"), "request");
  EXPECT_EQ(RequestedSnapshotFileReason("deploy"), "request-deploy");
  EXPECT_TRUE(IsRequestedSnapshotName("h-20261123T090507Z-request.pftrace", "h"));
  EXPECT_TRUE(IsRequestedSnapshotName("h-20261123T090507Z-request-deploy.pftrace", "h"));
  EXPECT_TRUE(IsRequestedSnapshotName("h-20261123T090507Z-request-2.pftrace", "h"));
  EXPECT_FALSE(IsRequestedSnapshotName("h-20261123T090507Z-oom_kill.pftrace", "h"));
  EXPECT_FALSE(IsRequestedSnapshotName("h-20261123T090507Z-requested.pftrace", "h"));
  EXPECT_FALSE(IsRequestedSnapshotName("other-20261123T090507Z-request.pftrace", "h"));
}

// A flood of requests by hand must not push out what the triggers caught:
// the requested snapshots go first, however new they are.
TEST(SnapshotRetentionTest, RequestedSnapshotsGoBeforeTriggeredOnes) {
  ScratchDir dir;
  Write(dir.Join("h-20261123T090500Z-oom_kill.pftrace"), 10);
  Write(dir.Join("h-20261123T090501Z-crash.pftrace"), 10);
  for (const char* t : {"20261123T090502Z", "20261123T090503Z", "20261123T090504Z"}) {
    Write(dir.Join(std::string("h-") + t + "-request.pftrace"), 10);
  }
  const PruneResult r = PruneSnapshots(*Open(dir), "h", 3, 0, "h-20261123T090504Z-request.pftrace");
  EXPECT_EQ(r.files_deleted, 2u);
  EXPECT_TRUE(Exists(dir.Join("h-20261123T090500Z-oom_kill.pftrace")));
  EXPECT_TRUE(Exists(dir.Join("h-20261123T090501Z-crash.pftrace")));
  EXPECT_FALSE(Exists(dir.Join("h-20261123T090502Z-request.pftrace")));
  EXPECT_FALSE(Exists(dir.Join("h-20261123T090503Z-request.pftrace")));
  EXPECT_TRUE(Exists(dir.Join("h-20261123T090504Z-request.pftrace")));
  // Only triggered ones left beyond the limit: the oldest of them goes.
  Write(dir.Join("h-20261123T090505Z-crash.pftrace"), 10);
  Write(dir.Join("h-20261123T090506Z-crash.pftrace"), 10);
  EXPECT_EQ(PruneSnapshots(*Open(dir), "h", 3, 0, "h-20261123T090506Z-crash.pftrace").files_deleted,
            2u);
  EXPECT_FALSE(Exists(dir.Join("h-20261123T090504Z-request.pftrace")));
  EXPECT_FALSE(Exists(dir.Join("h-20261123T090500Z-oom_kill.pftrace")));
  EXPECT_TRUE(Exists(dir.Join("h-20261123T090501Z-crash.pftrace")));
}

TEST(SnapshotRetentionTest, NoLimitsDeletesNothing) {
  ScratchDir dir;
  Write(dir.Join("h-20261123T090501Z-a.pftrace"), 100);
  EXPECT_EQ(PruneSnapshots(*Open(dir), "h", 0, 0, "").files_deleted, 0u);
  EXPECT_TRUE(Exists(dir.Join("h-20261123T090501Z-a.pftrace")));
}

}  // namespace
}  // namespace ringside::agent
