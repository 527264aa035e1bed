// agent/symbols/internal/elf_cache.h: the least recently used table goes
// first, the budget holds, and a handle outlives nothing it points to.
#include "agent/symbols/internal/elf_cache.h"

#include <fcntl.h>

#include <string>

#include "base/scoped_fd.h"
#include "gtest/gtest.h"
#include "tests/agent/symbols/test_binaries.h"

namespace ringside::agent::internal {
namespace {

using agent::testing::ScratchDir;

class ElfCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"a", "b", "c"}) {
      const std::string path =
          agent::testing::BuildTinyBinary(dir_, name, std::string("function_of_") + name);
      if (path.empty()) GTEST_SKIP() << "no cc to build test binaries";
      paths_.push_back(path);
    }
  }

  ElfFile Read(int i) {
    base::ScopedFd fd(open(paths_[i].c_str(), O_RDONLY | O_CLOEXEC));
    absl::StatusOr<ElfFile> file = ElfFile::Read(fd.get(), paths_[i]);
    EXPECT_TRUE(file.ok()) << file.status();
    return *std::move(file);
  }
  static FileIdentity Id(int i) { return {1, static_cast<uint64_t>(100 + i), 0, 0}; }
  static std::string Key(int i) { return "key" + std::to_string(i); }

  ScratchDir dir_;
  std::vector<std::string> paths_;
};

TEST_F(ElfCacheTest, EvictsTheLeastRecentlyUsed) {
  // Room for two of the three tables (of about the same size).
  ElfCache probe(1 << 20);
  ElfCache::Handle h;
  ASSERT_TRUE(probe.Insert(Key(0), Id(0), Read(0), &h));
  ElfCache cache(probe.memory_bytes() * 5 / 2);

  ElfCache::Handle a, b, c;
  ASSERT_TRUE(cache.Insert(Key(0), Id(0), Read(0), &a));
  ASSERT_TRUE(cache.Insert(Key(1), Id(1), Read(1), &b));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_TRUE(cache.Valid(a));
  cache.Use(a);  // a is now more recent than b
  ASSERT_TRUE(cache.Insert(Key(2), Id(2), Read(2), &c));
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.Valid(a));  // an eviction invalidates every older handle
  ElfCache::Handle found;
  EXPECT_TRUE(cache.FindByKey(Key(0), &found));
  EXPECT_FALSE(cache.FindByKey(Key(1), &found));
  EXPECT_FALSE(cache.FindByIdentity(Id(1), &found));
  EXPECT_TRUE(cache.FindByIdentity(Id(2), &found));
  EXPECT_LE(cache.memory_bytes(), probe.memory_bytes() * 5 / 2);
}

TEST_F(ElfCacheTest, AnotherFileWithTheSameKeyIsFoundByItsIdentity) {
  ElfCache cache(1 << 20);
  ElfCache::Handle h;
  ASSERT_TRUE(cache.Insert(Key(0), Id(0), Read(0), &h));
  ElfCache::Handle found;
  EXPECT_FALSE(cache.FindByIdentity(Id(9), &found));
  ASSERT_TRUE(cache.FindByKey(Key(0), &found));
  cache.AddIdentity(found, Id(9));
  ASSERT_TRUE(cache.FindByIdentity(Id(9), &found));
  EXPECT_EQ(cache.KeyOf(found), Key(0));
  EXPECT_EQ(cache.size(), 1u);
}

// A library every new container maps from an overlay of its own (another
// dev each time): its entry remembers the newest files only, and its bytes
// stop growing.
TEST_F(ElfCacheTest, AnEntryRemembersABoundedNumberOfFiles) {
  ElfCache cache(1 << 20);
  ElfCache::Handle h;
  ASSERT_TRUE(cache.Insert(Key(0), Id(0), Read(0), &h));
  const size_t alone = cache.memory_bytes();
  auto container = [](uint64_t n) { return FileIdentity{1000 + n, 100, 0, 0}; };
  for (uint64_t n = 1; n < ElfCache::kMaxIdentities; n++) cache.AddIdentity(h, container(n));
  EXPECT_EQ(cache.IdentitiesOf(h), ElfCache::kMaxIdentities);
  const size_t full = cache.memory_bytes();
  EXPECT_GT(full, alone) << "the files it is known by count";
  for (uint64_t n = ElfCache::kMaxIdentities; n < 10 * ElfCache::kMaxIdentities; n++) {
    cache.AddIdentity(h, container(n));
  }
  EXPECT_EQ(cache.IdentitiesOf(h), ElfCache::kMaxIdentities);
  EXPECT_EQ(cache.memory_bytes(), full);
  ElfCache::Handle found;
  EXPECT_FALSE(cache.FindByIdentity(Id(0), &found)) << "the oldest went first";
  EXPECT_FALSE(cache.FindByIdentity(container(1), &found));
  EXPECT_TRUE(cache.FindByIdentity(container(10 * ElfCache::kMaxIdentities - 1), &found));
  EXPECT_TRUE(cache.FindByKey(Key(0), &found)) << "still found by its build id";
}

TEST_F(ElfCacheTest, RefusesATableOverTheWholeBudget) {
  ElfCache cache(100);
  ElfCache::Handle h;
  EXPECT_FALSE(cache.Insert(Key(0), Id(0), Read(0), &h));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.memory_bytes(), 0u);
  EXPECT_EQ(cache.evictions(), 0u);
}

}  // namespace
}  // namespace ringside::agent::internal
