// agent/symbols/process_maps.h: /proc/<pid>/maps as the kernel writes it,
// odd names included, and garbage never crashes.
#include "agent/symbols/process_maps.h"

#include <unistd.h>

#include <random>
#include <string>

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

// Lines as show_map_vma() writes them on a 64-bit kernel: fields, then the
// name padded to column 73.
constexpr char kMaps[] =
    "55d0c4a00000-55d0c4a28000 r--p 00000000 08:01 1837                       /usr/bin/my app\n"
    "55d0c4a28000-55d0c4b00000 r-xp 00028000 08:01 1837                       /usr/bin/my app\n"
    "55d0c5000000-55d0c5021000 rw-p 00000000 00:00 0                          [heap]\n"
    "7f2c1a400000-7f2c1a428000 r-xp 00001000 fd:02 99                         "
    "/tmp/lib.so (deleted)\n"
    "7f2c1a500000-7f2c1a600000 rw-s 00000000 00:05 4242                       "
    "/memfd:pool (deleted)\n"
    "7f2c1a700000-7f2c1a710000 rw-p 00000000 00:00 0 \n"
    "7f2c1a710000-7f2c1a720000 ---p 00000000 00:00 0\n"
    "7ffd3c1f0000-7ffd3c211000 rw-p 00000000 00:00 0                          [stack]\n"
    "7ffd3c3fa000-7ffd3c3fc000 r-xp 00000000 00:00 0                          [vdso]\n"
    "7ffd3c400000-7ffd3c401000 r--p 00000000 00:0e 12                         "
    "anon_inode:[perf_event]\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";

TEST(ProcessMapsTest, ParsesEveryField) {
  const ProcessMaps maps = ProcessMaps::Parse(kMaps);
  EXPECT_EQ(maps.malformed_lines(), 0u);
  ASSERT_EQ(maps.entries().size(), 11u);
  const MapsEntry& text = maps.entries()[1];
  EXPECT_EQ(text.start, 0x55d0c4a28000u);
  EXPECT_EQ(text.end, 0x55d0c4b00000u);
  EXPECT_EQ(text.pgoff, 0x28000u);
  EXPECT_EQ(text.dev_major, 8u);
  EXPECT_EQ(text.dev_minor, 1u);
  EXPECT_EQ(text.inode, 1837u);
  EXPECT_TRUE(text.readable);
  EXPECT_FALSE(text.writable);
  EXPECT_TRUE(text.executable);
  EXPECT_FALSE(text.shared);
  EXPECT_EQ(text.kind, MapsEntry::Kind::kFile);
  EXPECT_EQ(text.path, "/usr/bin/my app");
  EXPECT_FALSE(text.deleted);
}

TEST(ProcessMapsTest, KeepsSpacesInPaths) {
  const ProcessMaps maps =
      ProcessMaps::Parse("1000-2000 r-xp 00000000 08:01 7    /opt/a b/  lead and trail  \n");
  ASSERT_EQ(maps.entries().size(), 1u);
  EXPECT_EQ(maps.entries()[0].path, "/opt/a b/  lead and trail  ");
}

TEST(ProcessMapsTest, TakesDeletedOffThePathAndMarksIt) {
  const ProcessMaps maps = ProcessMaps::Parse(kMaps);
  const MapsEntry* lib = maps.Find(0x7f2c1a400010);
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ(lib->path, "/tmp/lib.so");
  EXPECT_TRUE(lib->deleted);
  EXPECT_EQ(lib->dev_major, 0xfdu);
  const MapsEntry* memfd = maps.Find(0x7f2c1a500000);
  ASSERT_NE(memfd, nullptr);
  EXPECT_EQ(memfd->path, "/memfd:pool");
  EXPECT_TRUE(memfd->deleted);
  EXPECT_TRUE(memfd->shared);
}

TEST(ProcessMapsTest, TellsAnonymousAndSpecialMappingsFromFiles) {
  const ProcessMaps maps = ProcessMaps::Parse(kMaps);
  EXPECT_EQ(maps.Find(0x7f2c1a700000)->kind, MapsEntry::Kind::kAnonymous);
  EXPECT_EQ(maps.Find(0x7f2c1a700000)->path, "");
  EXPECT_EQ(maps.Find(0x7f2c1a710000)->kind, MapsEntry::Kind::kAnonymous);
  EXPECT_EQ(maps.Find(0x7ffd3c3fa000)->kind, MapsEntry::Kind::kSpecial);
  EXPECT_EQ(maps.Find(0x7ffd3c3fa000)->path, "[vdso]");
  EXPECT_EQ(maps.Find(0x55d0c5000000)->path, "[heap]");
  EXPECT_EQ(maps.Find(0x7ffd3c400000)->path, "anon_inode:[perf_event]");
  EXPECT_EQ(maps.Find(0xffffffffff600000)->path, "[vsyscall]");
}

TEST(ProcessMapsTest, FindsTheMappingOfAnAddressAndNothingInGaps) {
  const ProcessMaps maps = ProcessMaps::Parse(kMaps);
  EXPECT_EQ(maps.Find(0x55d0c4a28000)->pgoff, 0x28000u);
  EXPECT_EQ(maps.Find(0x55d0c4afffff)->pgoff, 0x28000u);
  EXPECT_EQ(maps.Find(0x55d0c4a27fff)->pgoff, 0u);
  EXPECT_EQ(maps.Find(0x55d0c4b00000), nullptr);  // end is exclusive
  EXPECT_EQ(maps.Find(0x1000), nullptr);
  EXPECT_EQ(maps.Find(0), nullptr);
  EXPECT_EQ(maps.Find(~uint64_t{0}), nullptr);
}

TEST(ProcessMapsTest, SortsLinesGivenOutOfOrder) {
  const ProcessMaps maps = ProcessMaps::Parse(
      "3000-4000 r-xp 00000000 08:01 7 /b\n"
      "1000-2000 r-xp 00000000 08:01 7 /a\n");
  EXPECT_EQ(maps.Find(0x1800)->path, "/a");
  EXPECT_EQ(maps.Find(0x3800)->path, "/b");
}

TEST(ProcessMapsTest, SkipsAndCountsMalformedLines) {
  const ProcessMaps maps = ProcessMaps::Parse(
      "garbage\n"
      "1000-2000\n"
      "2000-1000 r-xp 00000000 08:01 7 /end-before-start\n"
      "1000-1000 r-xp 00000000 08:01 7 /empty\n"
      "1000-2000 rwzp 00000000 08:01 7 /bad-perms\n"
      "1000-2000 r-xp 0000000g 08:01 7 /bad-offset\n"
      "1000-2000 r-xp 00000000 0801 7 /no-colon\n"
      "1000-2000 r-xp 00000000 08:01 x /bad-inode\n"
      "1000-2000 r-xp 00000000 08:01 7/no-space\n"
      "11111111111111111-2000 r-xp 00000000 08:01 7 /too-long\n"
      "1000-2000 r-xp 00000000 08:01 99999999999999999999999 /inode-overflow\n"
      "\n"
      "5000-6000 r-xp 00000000 08:01 7 /good\n");
  EXPECT_EQ(maps.malformed_lines(), 11u);
  ASSERT_EQ(maps.entries().size(), 1u);
  EXPECT_EQ(maps.entries()[0].path, "/good");
}

TEST(ProcessMapsTest, DropsAndCountsALineThatOverlapsTheOneBefore) {
  const ProcessMaps maps = ProcessMaps::Parse(
      "1000-5000 r-xp 00000000 08:01 7 /outer\n"
      "2000-3000 r-xp 00000000 08:01 7 /inner\n"
      "4000-6000 r-xp 00000000 08:01 7 /straddles\n"
      "6000-7000 r-xp 00000000 08:01 7 /next\n");
  EXPECT_EQ(maps.malformed_lines(), 2u);
  ASSERT_EQ(maps.entries().size(), 2u);
  EXPECT_EQ(maps.Find(0x3800)->path, "/outer");
  EXPECT_EQ(maps.Find(0x4800)->path, "/outer");
  EXPECT_EQ(maps.Find(0x6000)->path, "/next");
}

TEST(ProcessMapsTest, RandomBytesNeverCrash) {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    std::string text = kMaps;
    for (int i = 0; i < 40; ++i) {
      text[rng() % text.size()] = static_cast<char>(rng() % 256);
    }
    const ProcessMaps maps = ProcessMaps::Parse(text);
    EXPECT_EQ(maps.entries().size() + maps.malformed_lines() >= 1, true) << "seed " << seed;
    for (const MapsEntry& e : maps.entries()) {
      EXPECT_LT(e.start, e.end) << "seed " << seed;
      EXPECT_EQ(maps.Find(e.start) != nullptr, true) << "seed " << seed;
    }
  }
}

TEST(ProcessMapsTest, ReadsItsOwnMaps) {
  const auto maps = ProcessMaps::Read("/proc", getpid());
  ASSERT_TRUE(maps.ok()) << maps.status();
  EXPECT_EQ(maps->malformed_lines(), 0u);
  const MapsEntry* code = maps->Find(reinterpret_cast<uintptr_t>(&ProcessMaps::Parse));
  ASSERT_NE(code, nullptr);
  EXPECT_TRUE(code->executable);
  EXPECT_EQ(code->kind, MapsEntry::Kind::kFile);
  EXPECT_GT(maps->memory_bytes(), sizeof(MapsEntry));
}

TEST(ProcessMapsTest, AProcessThatIsGoneIsNotFound) {
  const auto maps = ProcessMaps::Read("/nonexistent-proc", 1);
  EXPECT_EQ(maps.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(maps.status().message().find("/nonexistent-proc/1/maps"), std::string::npos);
}

}  // namespace
}  // namespace ringside::agent
