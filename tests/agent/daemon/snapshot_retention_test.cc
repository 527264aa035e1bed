#include "agent/daemon/snapshot_retention.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
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
  const PruneResult r =
      PruneSnapshots(dir.path(), "h", 2, 0, dir.Join("h-20261123T090503Z-r.pftrace"));
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
  const PruneResult r =
      PruneSnapshots(dir.path(), "h", 0, 150, dir.Join("h-20261123T090503Z-c.pftrace"));
  EXPECT_EQ(r.files_deleted, 2u);
  EXPECT_EQ(r.bytes_deleted, 200u);
  EXPECT_TRUE(Exists(dir.Join("h-20261123T090503Z-c.pftrace")));
}

TEST(SnapshotRetentionTest, NoLimitsDeletesNothing) {
  ScratchDir dir;
  Write(dir.Join("h-20261123T090501Z-a.pftrace"), 100);
  EXPECT_EQ(PruneSnapshots(dir.path(), "h", 0, 0, "").files_deleted, 0u);
  EXPECT_TRUE(Exists(dir.Join("h-20261123T090501Z-a.pftrace")));
}

}  // namespace
}  // namespace ringside::agent
