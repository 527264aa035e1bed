// agent/symbols/user_symbolizer.h: a process's address names its function,
// with the mapping, build id and Perfetto rel_pc that let a frame it cannot
// name be named offline; everything it could not do is counted.
#include "agent/symbols/user_symbolizer.h"

#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/agent/symbols/test_binaries.h"

extern "C" __attribute__((noinline, used)) int ringside_user_symbolizer_test_target(int x) {
  asm volatile("" ::: "memory");
  return x * 5 + 2;
}

namespace ringside::agent {
namespace {

using testing::ScratchDir;

uint64_t FramesCounted(const UserSymbolizer& s) {
  const UserSymbolizerStats& st = s.stats();
  return st.frames_named + st.frames_unnamed + st.frames_unmapped;
}

class UserSymbolizerTest : public ::testing::Test {
 protected:
  // Symbolize(), checking that it counted the frame in exactly one of
  // frames_named, frames_unnamed and frames_unmapped.
  static UserFrame Symbolize(
      UserSymbolizer* s, pid_t pid, uint64_t pc,
      UserSymbolizer::Position position = UserSymbolizer::Position::kInnermost) {
    const uint64_t before = FramesCounted(*s);
    UserFrame frame = s->Symbolize(pid, pc, position);
    EXPECT_EQ(FramesCounted(*s), before + 1) << "pc 0x" << std::hex << pc;
    return frame;
  }
};

uintptr_t MainProgramLoadAddress() {
  uintptr_t base = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        *static_cast<uintptr_t*>(out) = info->dlpi_addr;
        return 1;
      },
      &base);
  return base;
}

TEST_F(UserSymbolizerTest, NamesItsOwnFunctionWithBuildIdAndRelPc) {
  UserSymbolizer symbolizer;
  const uint64_t pc = reinterpret_cast<uintptr_t>(&ringside_user_symbolizer_test_target);
  const UserFrame frame = Symbolize(&symbolizer, getpid(), pc + 1);
  ASSERT_TRUE(frame.has_mapping);
  EXPECT_EQ(frame.function_name, "ringside_user_symbolizer_test_target");
  EXPECT_EQ(frame.function_offset, 1u);
  EXPECT_EQ(frame.mapping.path, std::filesystem::read_symlink("/proc/self/exe").string());
  EXPECT_LE(frame.mapping.start, pc);
  EXPECT_LT(pc, frame.mapping.end);
  // rel_pc as the header defines it, and, the pc being in the executable
  // segment, the function's ELF virtual address (st_value) plus 1.
  EXPECT_EQ(frame.rel_pc,
            pc + 1 - frame.mapping.start + frame.mapping.pgoff + frame.mapping.load_bias);
  EXPECT_EQ(frame.rel_pc, pc + 1 - MainProgramLoadAddress());
  const std::string build_id = testing::ReadelfBuildId(std::string(frame.mapping.path));
  if (!build_id.empty()) {
    EXPECT_EQ(frame.mapping.build_id_hex, build_id);
  }
  EXPECT_EQ(frame.mapping.build_id.size() * 2, frame.mapping.build_id_hex.size());
  EXPECT_EQ(symbolizer.stats().frames_named, 1u);
  EXPECT_EQ(symbolizer.stats().maps_reads, 1u);
  EXPECT_GT(symbolizer.memory_bytes(), 0u);
}

// A /proc tree of the test's own for process 4242: maps written by the test,
// and a root that is the real "/" (as a process outside any container
// sees it), so that files are found by their real paths; no map_files, so
// they are opened the way a symbolizer without CAP_SYS_ADMIN opens them.
class UserSymbolizerFakeProcTest : public UserSymbolizerTest {
 protected:
  static constexpr pid_t kPid = 4242;
  static constexpr uint64_t kBase = 0x7f0000000000;

  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    std::filesystem::create_directories(dir_.Path("proc/4242"));
    std::filesystem::create_directory_symlink("/", dir_.Path("proc/4242/root"));
    options_.proc_root = dir_.Path("proc");
    options_.min_maps_refresh = std::chrono::milliseconds(0);
  }

  // A maps line mapping all of `path` executable at `start`, with its inode.
  std::string MapsLine(uint64_t start, const std::string& path, uint64_t inode = 0) {
    struct stat st = {};
    stat(path.c_str(), &st);
    const uint64_t size = (static_cast<uint64_t>(st.st_size) + 0xfff) & ~uint64_t{0xfff};
    return absl::StrCat(absl::Hex(start), "-", absl::Hex(start + std::max<uint64_t>(size, 0x1000)),
                        " r-xp 00000000 08:01 ", inode != 0 ? inode : st.st_ino, "   ", path, "\n");
  }
  void WriteMaps(const std::string& text) { dir_.Write("proc/4242/maps", text); }
  // Another process of the fake /proc, with `maps` and the same root.
  void AddProcess(pid_t pid, const std::string& maps) {
    std::filesystem::create_directories(dir_.Path(absl::StrCat("proc/", pid)));
    std::filesystem::create_directory_symlink("/", dir_.Path(absl::StrCat("proc/", pid, "/root")));
    dir_.Write(absl::StrCat("proc/", pid, "/maps"), maps);
  }

  // tiny_target in a binary built for the test; skips when none can be.
  bool BuildTiny(const std::string& name, const std::string& function, testing::NmSymbol* symbol) {
    const std::string path = testing::BuildTinyBinary(dir_, name, function);
    if (path.empty()) return false;
    const std::optional<testing::NmSymbol> s = testing::NmLookup(path, function);
    if (!s) return false;
    *symbol = *s;
    return true;
  }

  ScratchDir dir_;
  UserSymbolizer::Options options_;
};

TEST_F(UserSymbolizerFakeProcTest, NamesAFunctionOfAMappedFileByItsRelPc) {
  testing::NmSymbol target;
  if (!BuildTiny("tiny", "tiny_target", &target)) GTEST_SKIP() << "no cc to build a test binary";
  WriteMaps(MapsLine(kBase, dir_.Path("tiny")));
  UserSymbolizer symbolizer(options_);
  // The whole file is mapped from offset 0 at kBase: pc is kBase + the
  // function's file offset, which is its st_value less the load bias.
  const auto bias_probe = Symbolize(&symbolizer, kPid, kBase);
  const uint64_t pc = kBase + target.value - bias_probe.mapping.load_bias;
  const UserFrame frame = Symbolize(&symbolizer, kPid, pc);
  ASSERT_TRUE(frame.has_mapping);
  EXPECT_EQ(frame.function_name, "tiny_target");
  EXPECT_EQ(frame.function_offset, 0u);
  EXPECT_EQ(frame.rel_pc, target.value);
  EXPECT_EQ(frame.mapping.build_id_hex, testing::ReadelfBuildId(dir_.Path("tiny")));
  EXPECT_EQ(frame.mapping.path, dir_.Path("tiny"));
  if (testing::HaveTool("ld.lld")) {
    EXPECT_EQ(frame.mapping.load_bias, 0x1000u);
  }
  EXPECT_EQ(symbolizer.stats().mappings_unreadable, 0u);
}

// What a preload reads serves the frames that come later, even once the
// file is gone; it counts its reads, but no frame.
TEST_F(UserSymbolizerFakeProcTest, APreloadReadsTheTableAndCountsNoFrame) {
  testing::NmSymbol target;
  if (!BuildTiny("tiny", "tiny_target", &target)) GTEST_SKIP() << "no cc to build a test binary";
  WriteMaps(MapsLine(kBase, dir_.Path("tiny")));
  UserSymbolizer symbolizer(options_);
  symbolizer.Preload(kPid, kBase);
  EXPECT_EQ(symbolizer.stats().maps_reads, 1u);
  EXPECT_EQ(symbolizer.stats().frames_named + symbolizer.stats().frames_unnamed +
                symbolizer.stats().frames_unmapped,
            0u);
  EXPECT_GT(symbolizer.cache_memory_bytes(), 0u);
  std::filesystem::remove(dir_.Path("tiny"));
  const uint64_t bias = Symbolize(&symbolizer, kPid, kBase).mapping.load_bias;
  const UserFrame frame = Symbolize(&symbolizer, kPid, kBase + target.value - bias);
  EXPECT_EQ(frame.function_name, "tiny_target");
  EXPECT_EQ(symbolizer.stats().maps_reads, 1u);
  EXPECT_EQ(symbolizer.stats().mappings_unreadable, 0u);
}

TEST_F(UserSymbolizerFakeProcTest, AStrippedFileGivesBuildIdAndRelPcButNoName) {
  testing::NmSymbol target;
  if (!BuildTiny("tiny", "tiny_target", &target)) GTEST_SKIP() << "no cc to build a test binary";
  if (!testing::HaveTool("objcopy")) GTEST_SKIP() << "no objcopy";
  ASSERT_TRUE(testing::RunCommand("objcopy --strip-all '" + dir_.Path("tiny") + "' '" +
                                  dir_.Path("stripped") + "'"));
  WriteMaps(MapsLine(kBase, dir_.Path("stripped")));
  UserSymbolizer symbolizer(options_);
  const UserFrame probe = Symbolize(&symbolizer, kPid, kBase);
  const UserFrame frame =
      Symbolize(&symbolizer, kPid, kBase + target.value - probe.mapping.load_bias);
  ASSERT_TRUE(frame.has_mapping);
  EXPECT_EQ(frame.function_name, "");
  // The file was read: reading it again would name its frames no better.
  EXPECT_TRUE(frame.file_read);
  EXPECT_EQ(frame.rel_pc, target.value);
  EXPECT_EQ(frame.mapping.build_id_hex, testing::ReadelfBuildId(dir_.Path("tiny")));
  EXPECT_FALSE(frame.mapping.build_id_hex.empty());
  EXPECT_EQ(symbolizer.stats().frames_unnamed, 2u);
  EXPECT_EQ(symbolizer.stats().frames_named, 0u);
  EXPECT_EQ(symbolizer.stats().mappings_unreadable, 0u);
  // What Perfetto's offline symbolizer does with the frame: the unstripped
  // file, found by build id, and rel_pc handed to llvm-symbolizer as is
  // (its load bias equals the mapping's, so it corrects nothing).
  if (testing::HaveTool("llvm-symbolizer")) {
    const std::optional<std::string> named = testing::RunCommand(absl::StrCat(
        "llvm-symbolizer --obj='", dir_.Path("tiny"), "' 0x", absl::Hex(frame.rel_pc)));
    ASSERT_TRUE(named);
    EXPECT_EQ(named->substr(0, named->find('\n')), "tiny_target");
  }
}

TEST_F(UserSymbolizerFakeProcTest, UnreadableFilesAreCountedAndLeftUnnamed) {
  testing::NmSymbol target;
  if (!BuildTiny("tiny", "tiny_target", &target)) GTEST_SKIP() << "no cc to build a test binary";
  const std::string garbage = dir_.Write("garbage", std::string(8192, 'x'));
  const std::string truncated = dir_.Write("truncated",
                                           "\x7f"
                                           "ELF\x02\x01\x01");
  ASSERT_EQ(mkfifo(dir_.Path("fifo").c_str(), 0600), 0);
  std::filesystem::create_directory(dir_.Path("directory"));
  WriteMaps(MapsLine(0x10000, garbage) + MapsLine(0x20000, truncated) +
            MapsLine(0x30000, dir_.Path("fifo")) + MapsLine(0x40000, dir_.Path("directory")) +
            MapsLine(0x50000, dir_.Path("missing")) +
            // tiny, but the maps line's inode is not the file's: replaced.
            MapsLine(0x60000, dir_.Path("tiny"), /*inode=*/1));
  UserSymbolizer symbolizer(options_);
  for (uint64_t pc : {0x10010, 0x20010, 0x30010, 0x40010, 0x50010, 0x60010}) {
    const UserFrame frame = Symbolize(&symbolizer, kPid, pc);
    EXPECT_TRUE(frame.has_mapping) << std::hex << pc;
    EXPECT_EQ(frame.function_name, "") << std::hex << pc;
    EXPECT_EQ(frame.mapping.build_id, "") << std::hex << pc;
    EXPECT_EQ(frame.rel_pc, 0x10u) << std::hex << pc;
    EXPECT_FALSE(frame.file_read) << std::hex << pc;  // Another process may read it.
  }
  // A second frame in a mapping found unreadable does not try again.
  Symbolize(&symbolizer, kPid, 0x10020);
  EXPECT_EQ(symbolizer.stats().mappings_unreadable, 6u);
  EXPECT_EQ(symbolizer.stats().frames_unnamed, 7u);
}

TEST_F(UserSymbolizerFakeProcTest, SpecialAndAnonymousMappingsAreUnnamed) {
  WriteMaps(
      "10000-11000 r-xp 00000000 00:00 0                          [vdso]\n"
      "20000-21000 rwxp 00000000 00:00 0 \n");
  UserSymbolizer symbolizer(options_);
  const UserFrame vdso = Symbolize(&symbolizer, kPid, 0x10010);
  EXPECT_TRUE(vdso.has_mapping);
  EXPECT_EQ(vdso.mapping.path, "[vdso]");
  EXPECT_EQ(vdso.rel_pc, 0x10u);
  const UserFrame jit = Symbolize(&symbolizer, kPid, 0x20010);
  EXPECT_TRUE(jit.has_mapping);
  EXPECT_EQ(jit.mapping.path, "");
  EXPECT_FALSE(vdso.file_read);
  EXPECT_FALSE(jit.file_read);  // JIT code may be another function later.
  EXPECT_EQ(symbolizer.stats().frames_unnamed, 2u);
  EXPECT_EQ(symbolizer.stats().mappings_unreadable, 0u);
}

TEST_F(UserSymbolizerFakeProcTest, AnAddressInNoMappingRereadsTheMapsOnce) {
  testing::NmSymbol target;
  if (!BuildTiny("tiny", "tiny_target", &target)) GTEST_SKIP() << "no cc to build a test binary";
  WriteMaps("10000-11000 r-xp 00000000 00:00 0 \n");
  UserSymbolizer symbolizer(options_);
  EXPECT_FALSE(Symbolize(&symbolizer, kPid, kBase).has_mapping);
  EXPECT_EQ(symbolizer.stats().maps_reads, 2u);  // the first read, and one more on the miss
  EXPECT_EQ(symbolizer.stats().frames_unmapped, 1u);
  // The library is loaded (dlopen): the next miss finds it.
  WriteMaps("10000-11000 r-xp 00000000 00:00 0 \n" + MapsLine(kBase, dir_.Path("tiny")));
  const UserFrame frame = Symbolize(&symbolizer, kPid, kBase + 0x10);
  EXPECT_TRUE(frame.has_mapping);
  EXPECT_EQ(symbolizer.stats().maps_reads, 3u);
  // An address in a mapping already known reads nothing.
  Symbolize(&symbolizer, kPid, kBase + 0x20);
  EXPECT_EQ(symbolizer.stats().maps_reads, 3u);
}

TEST_F(UserSymbolizerFakeProcTest, RereadsTheMapsAtMostOncePerRefreshInterval) {
  WriteMaps("10000-11000 r-xp 00000000 00:00 0 \n");
  options_.min_maps_refresh = std::chrono::hours(1);
  UserSymbolizer symbolizer(options_);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(Symbolize(&symbolizer, kPid, 0x99000).has_mapping);
  EXPECT_EQ(symbolizer.stats().maps_reads, 1u);
  EXPECT_EQ(symbolizer.stats().frames_unmapped, 5u);
}

TEST_F(UserSymbolizerFakeProcTest, AProcessThatIsGoneIsCountedAndForgotten) {
  UserSymbolizer symbolizer(options_);
  const UserFrame frame = Symbolize(&symbolizer, 999999, 0x1000);
  EXPECT_FALSE(frame.has_mapping);
  EXPECT_EQ(symbolizer.stats().maps_unreadable, 2u);  // the first read, and the retry on the miss
  EXPECT_EQ(symbolizer.process_count(), 1u);
  symbolizer.ForgetProcess(999999);
  EXPECT_EQ(symbolizer.process_count(), 0u);
}

// A process's stack read after its exit: /proc has no maps of it, or those
// of a new process that took its id. They are not read, and count as
// unreadable, until the process is forgotten.
TEST_F(UserSymbolizerFakeProcTest, TheMapsOfAnExitedProcessAreNotRead) {
  WriteMaps("10000-11000 r-xp 00000000 00:00 0 \n");  // another process's, under its id
  UserSymbolizer symbolizer(options_);
  symbolizer.ProcessExited(kPid);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(Symbolize(&symbolizer, kPid, 0x10010).has_mapping);
  EXPECT_EQ(symbolizer.stats().maps_reads, 1u);
  EXPECT_EQ(symbolizer.stats().maps_unreadable, 1u);
  EXPECT_EQ(symbolizer.stats().frames_unmapped, 3u);
  // Forgotten, the id is read as any new process's.
  symbolizer.ForgetProcess(kPid);
  EXPECT_TRUE(Symbolize(&symbolizer, kPid, 0x10010).has_mapping);
  EXPECT_EQ(symbolizer.stats().maps_reads, 2u);
  EXPECT_EQ(symbolizer.stats().maps_unreadable, 1u);
}

// What was read of a process before its exit names its frames after it,
// and an address in none of its mappings no longer reads them again.
TEST_F(UserSymbolizerFakeProcTest, WhatWasReadBeforeAnExitStillNamesItsFrames) {
  WriteMaps("10000-11000 r-xp 00000000 00:00 0 \n");
  UserSymbolizer symbolizer(options_);
  EXPECT_TRUE(Symbolize(&symbolizer, kPid, 0x10010).has_mapping);
  symbolizer.ProcessExited(kPid);
  WriteMaps("20000-21000 r-xp 00000000 00:00 0 \n");  // a new process's
  EXPECT_EQ(Symbolize(&symbolizer, kPid, 0x10020).rel_pc, 0x20u);
  EXPECT_FALSE(Symbolize(&symbolizer, kPid, 0x20010).has_mapping);
  EXPECT_EQ(symbolizer.stats().maps_reads, 1u);
  EXPECT_EQ(symbolizer.stats().maps_unreadable, 0u);
}

// Records are read CPU by CPU: a child's exit may be read before its
// fork. The fork still gives it its parent's maps, which name its frames.
TEST_F(UserSymbolizerFakeProcTest, AnExitReadBeforeItsForkLeavesTheChildItsParentsMaps) {
  WriteMaps("10000-11000 r-xp 00000000 00:00 0 \n");
  UserSymbolizer symbolizer(options_);
  EXPECT_TRUE(Symbolize(&symbolizer, kPid, 0x10010).has_mapping);
  symbolizer.ProcessExited(5001);
  symbolizer.ProcessForked(kPid, 5001);
  EXPECT_EQ(Symbolize(&symbolizer, 5001, 0x10020).rel_pc, 0x20u);
  EXPECT_EQ(symbolizer.stats().maps_reads, 1u);
  symbolizer.ForgetProcess(5001);
  EXPECT_EQ(symbolizer.process_count(), 1u);
  // Maps its family shares, unread when the child exited: not read from
  // it, but from one of the family still there, for every one of them.
  UserSymbolizer family(options_);
  family.ProcessForked(kPid, 5002);
  family.ProcessExited(5002);
  EXPECT_FALSE(Symbolize(&family, 5002, 0x10020).has_mapping);
  EXPECT_EQ(family.stats().maps_unreadable, 1u);
  EXPECT_TRUE(Symbolize(&family, kPid, 0x10020).has_mapping);
  EXPECT_TRUE(Symbolize(&family, 5002, 0x10030).has_mapping);
  EXPECT_EQ(family.stats().maps_reads, 2u);
}

TEST_F(UserSymbolizerFakeProcTest, ForgetProcessDropsItsMaps) {
  WriteMaps("10000-11000 r-xp 00000000 00:00 0 \n");
  UserSymbolizer symbolizer(options_);
  Symbolize(&symbolizer, kPid, 0x10000);
  const size_t with_process = symbolizer.memory_bytes();
  EXPECT_EQ(symbolizer.process_count(), 1u);
  symbolizer.ForgetProcess(kPid);
  EXPECT_EQ(symbolizer.process_count(), 0u);
  EXPECT_LT(symbolizer.memory_bytes(), with_process);
}

// Without frame pointers the callers past the first frames are garbage,
// most of it in no mapping: reading the maps again for each would cost a
// read per stack and find nothing.
TEST_F(UserSymbolizerFakeProcTest, ACallerInNoMappingDoesNotRereadTheMaps) {
  WriteMaps("10000-11000 r-xp 00000000 00:00 0 \n");
  UserSymbolizer symbolizer(options_);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(
        Symbolize(&symbolizer, kPid, 0x99000 + i, UserSymbolizer::Position::kCaller).has_mapping);
  }
  EXPECT_EQ(symbolizer.stats().maps_reads, 1u);
  EXPECT_EQ(symbolizer.stats().frames_unmapped, 3u);
}

// A server's forked workers map what it mapped: one read of the maps, one
// open of each file, for all of them.
TEST_F(UserSymbolizerFakeProcTest, ForkedChildrenShareTheirParentsMapsUntilTheyExec) {
  testing::NmSymbol target;
  if (!BuildTiny("tiny", "tiny_target", &target)) GTEST_SKIP() << "no cc to build a test binary";
  WriteMaps(MapsLine(kBase, dir_.Path("tiny")));
  UserSymbolizer symbolizer(options_);
  constexpr pid_t kChildren[] = {5001, 5002, 5003};
  for (pid_t child : kChildren) symbolizer.ProcessForked(kPid, child);
  EXPECT_EQ(symbolizer.space_count(), 1u);
  // A child's frame reads the maps (its own: the parent has none of its
  // own yet), and every other process of the family uses them.
  AddProcess(5002, MapsLine(kBase, dir_.Path("tiny")));
  const uint64_t pc = kBase + target.value - Symbolize(&symbolizer, 5002, kBase).mapping.load_bias;
  for (pid_t pid : {kPid, kChildren[0], kChildren[1], kChildren[2]}) {
    const UserFrame frame = Symbolize(&symbolizer, pid, pc);
    EXPECT_EQ(frame.function_name, "tiny_target") << pid;
  }
  EXPECT_EQ(symbolizer.stats().maps_reads, 1u);
  EXPECT_EQ(symbolizer.space_count(), 1u);
  // One execs: it maps another program, and reads its own maps.
  AddProcess(5001, "20000-21000 r-xp 00000000 00:00 0 \n");
  symbolizer.ProcessExeced(5001);
  EXPECT_EQ(symbolizer.space_count(), 2u);
  EXPECT_EQ(Symbolize(&symbolizer, 5001, 0x20010).rel_pc, 0x10u);
  EXPECT_FALSE(Symbolize(&symbolizer, 5001, pc, UserSymbolizer::Position::kCaller).has_mapping);
  EXPECT_EQ(symbolizer.stats().maps_reads, 2u);
  // Its fork, read late (another CPU's records), does not undo the exec.
  symbolizer.ProcessForked(kPid, 5001);
  EXPECT_FALSE(Symbolize(&symbolizer, 5001, pc, UserSymbolizer::Position::kCaller).has_mapping);
  // The others still share theirs, whoever of them exits.
  symbolizer.ForgetProcess(5002);
  symbolizer.ForgetProcess(kPid);
  EXPECT_EQ(Symbolize(&symbolizer, 5003, pc).function_name, "tiny_target");
  EXPECT_EQ(symbolizer.stats().maps_reads, 2u);
  symbolizer.ForgetProcess(5001);
  symbolizer.ForgetProcess(5003);
  EXPECT_EQ(symbolizer.process_count(), 0u);
  EXPECT_EQ(symbolizer.space_count(), 0u);
  EXPECT_EQ(symbolizer.process_memory_bytes(), 0u);
}

// A child that loaded a library its parent has not reads its own maps,
// and leaves its family theirs.
TEST_F(UserSymbolizerFakeProcTest, AChildsInnermostFrameInNoMappingGivesItMapsOfItsOwn) {
  WriteMaps("10000-11000 r-xp 00000000 00:00 0 \n");
  UserSymbolizer symbolizer(options_);
  symbolizer.ProcessForked(kPid, 5001);
  EXPECT_TRUE(Symbolize(&symbolizer, kPid, 0x10010).has_mapping);
  AddProcess(5001, "10000-11000 r-xp 00000000 00:00 0 \n30000-31000 r-xp 00000000 00:00 0 \n");
  EXPECT_TRUE(Symbolize(&symbolizer, 5001, 0x30010).has_mapping);
  EXPECT_EQ(symbolizer.stats().maps_reads, 2u);
  EXPECT_EQ(symbolizer.space_count(), 2u);
  // The parent does not map it, and its maps were not touched.
  EXPECT_FALSE(
      Symbolize(&symbolizer, kPid, 0x30010, UserSymbolizer::Position::kCaller).has_mapping);
  EXPECT_EQ(symbolizer.stats().maps_reads, 2u);
}

// What a caller may keep of the names: a family shares one space id; a
// new read of the maps (a child's library) or an exec gives a new one; an
// unknown process has none.
TEST_F(UserSymbolizerFakeProcTest, ASpaceIdChangesWithEveryReadOfItsMapsAndEveryExec) {
  WriteMaps("10000-11000 r-xp 00000000 00:00 0 \n");
  UserSymbolizer symbolizer(options_);
  EXPECT_EQ(symbolizer.SpaceId(kPid), 0u);
  symbolizer.ProcessForked(kPid, 5001);
  symbolizer.ProcessForked(kPid, 5002);
  EXPECT_NE(symbolizer.SpaceId(kPid), 0u);
  EXPECT_EQ(symbolizer.SpaceId(5001), symbolizer.SpaceId(kPid));
  EXPECT_TRUE(Symbolize(&symbolizer, kPid, 0x10010).has_mapping);
  const uint64_t family = symbolizer.SpaceId(kPid);
  EXPECT_EQ(symbolizer.SpaceId(5002), family);
  // 5001 loaded a library: its innermost frame there reads maps of its own.
  AddProcess(5001, "10000-11000 r-xp 00000000 00:00 0 \n30000-31000 r-xp 00000000 00:00 0 \n");
  EXPECT_TRUE(Symbolize(&symbolizer, 5001, 0x30010).has_mapping);
  EXPECT_NE(symbolizer.SpaceId(5001), family);
  EXPECT_EQ(symbolizer.SpaceId(5002), family);  // The others keep theirs.
  // 5002 execs: another program, another id, never one used before.
  const uint64_t child = symbolizer.SpaceId(5001);
  symbolizer.ProcessExeced(5002);
  EXPECT_NE(symbolizer.SpaceId(5002), family);
  EXPECT_NE(symbolizer.SpaceId(5002), child);
  symbolizer.ForgetProcess(5002);
  EXPECT_EQ(symbolizer.SpaceId(5002), 0u);
}

// A family's maps read from a process gone by then are read again from
// the next of them that has a frame.
TEST_F(UserSymbolizerFakeProcTest, MapsUnreadableFromOneOfAFamilyAreReadFromTheNext) {
  WriteMaps("10000-11000 r-xp 00000000 00:00 0 \n");
  UserSymbolizer symbolizer(options_);
  symbolizer.ProcessForked(999999, 998888);
  symbolizer.ProcessForked(999999, kPid);
  EXPECT_FALSE(Symbolize(&symbolizer, 998888, 0x10010, UserSymbolizer::Position::kCaller)
                   .has_mapping);  // gone
  EXPECT_EQ(symbolizer.stats().maps_unreadable, 1u);
  EXPECT_TRUE(Symbolize(&symbolizer, kPid, 0x10010, UserSymbolizer::Position::kCaller).has_mapping);
  EXPECT_EQ(symbolizer.stats().maps_reads, 2u);
}

// The first of a family to name a frame may be gone by then, its files
// with it; the next, alive, opens them through its own /proc.
TEST_F(UserSymbolizerFakeProcTest, AFileUnreadableFromOneOfAFamilyIsOpenedByTheNext) {
  testing::NmSymbol target;
  if (!BuildTiny("tiny", "tiny_target", &target)) GTEST_SKIP() << "no cc to build a test binary";
  WriteMaps(MapsLine(kBase, dir_.Path("tiny")));
  UserSymbolizer symbolizer(options_);
  symbolizer.ProcessForked(kPid, 5001);
  // 5001 has its maps but no root to open files under: as if it had exited
  // after its maps were read.
  std::filesystem::create_directories(dir_.Path("proc/5001"));
  dir_.Write("proc/5001/maps", MapsLine(kBase, dir_.Path("tiny")));
  EXPECT_TRUE(Symbolize(&symbolizer, 5001, kBase + 0x10).function_name.empty());
  EXPECT_TRUE(Symbolize(&symbolizer, 5001, kBase + 0x10).function_name.empty());
  EXPECT_EQ(symbolizer.stats().mappings_unreadable, 1u);  // tried once
  const UserFrame frame = Symbolize(&symbolizer, kPid, kBase + 0x10);
  EXPECT_FALSE(frame.mapping.build_id.empty());
  EXPECT_EQ(symbolizer.stats().mappings_unreadable, 1u);
  EXPECT_EQ(symbolizer.stats().maps_reads, 1u);
}

// Processes whose exit was never seen (a lost record, a source without the
// process group) do not pile up: past max_process_bytes the least recently
// symbolized go, and one that comes back is read again.
TEST_F(UserSymbolizerFakeProcTest, TheProcessesMapsStayWithinTheirBudget) {
  std::string maps;
  for (int i = 0; i < 200; i++) {
    const uint64_t start = 0x10000 + static_cast<uint64_t>(i) * 0x2000;
    maps +=
        absl::StrCat(absl::Hex(start), "-", absl::Hex(start + 0x1000), " r-xp 00000000 00:00 0 \n");
  }
  constexpr int kProcesses = 20;
  for (pid_t pid = 1; pid <= kProcesses; pid++) {
    std::filesystem::create_directories(dir_.Path(absl::StrCat("proc/", pid)));
    dir_.Write(absl::StrCat("proc/", pid, "/maps"), maps);
  }
  UserSymbolizer probe(options_);
  Symbolize(&probe, 1, 0x10000);
  const size_t one = probe.process_memory_bytes();
  ASSERT_GT(one, 200 * sizeof(MapsEntry));
  options_.max_process_bytes = 3 * one + one / 2;
  UserSymbolizer symbolizer(options_);
  for (pid_t pid = 1; pid <= kProcesses; pid++) {
    EXPECT_TRUE(Symbolize(&symbolizer, pid, 0x10000).has_mapping);
    EXPECT_LE(symbolizer.process_memory_bytes(), options_.max_process_bytes);
  }
  EXPECT_EQ(symbolizer.process_count(), 3u);
  EXPECT_EQ(symbolizer.stats().processes_evicted, uint64_t{kProcesses - 3});
  EXPECT_EQ(symbolizer.stats().maps_reads, uint64_t{kProcesses});
  // The newest are held; the first comes back and is read again.
  Symbolize(&symbolizer, kProcesses, 0x12000);
  EXPECT_EQ(symbolizer.stats().maps_reads, uint64_t{kProcesses});
  Symbolize(&symbolizer, 1, 0x12000);
  EXPECT_EQ(symbolizer.stats().maps_reads, uint64_t{kProcesses + 1});
  // What ForgetProcess drops leaves the count.
  const size_t before = symbolizer.process_memory_bytes();
  symbolizer.ForgetProcess(1);
  EXPECT_EQ(symbolizer.process_memory_bytes(), before - one);
}

TEST_F(UserSymbolizerFakeProcTest, ACacheSmallerThanTwoTablesEvictsAndStillNamesBoth) {
  testing::NmSymbol a, b;
  if (!BuildTiny("a", "function_of_a", &a) || !BuildTiny("b", "function_of_b", &b)) {
    GTEST_SKIP() << "no cc to build test binaries";
  }
  WriteMaps(MapsLine(kBase, dir_.Path("a")) + MapsLine(kBase + 0x100000, dir_.Path("b")));
  // Room for one table and its entry, not for two.
  UserSymbolizer probe(options_);
  Symbolize(&probe, kPid, kBase);
  const size_t one_table = probe.cache_memory_bytes();
  ASSERT_GT(one_table, 0u);
  options_.cache_bytes = one_table + one_table / 2;
  UserSymbolizer symbolizer(options_);
  const uint64_t bias = Symbolize(&symbolizer, kPid, kBase).mapping.load_bias;
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(Symbolize(&symbolizer, kPid, kBase + a.value - bias).function_name, "function_of_a");
    EXPECT_EQ(Symbolize(&symbolizer, kPid, kBase + 0x100000 + b.value - bias).function_name,
              "function_of_b");
  }
  // a, b (evicts a), a (evicts b), b (evicts a).
  EXPECT_EQ(symbolizer.stats().cache_evictions, 3u);
  EXPECT_EQ(symbolizer.stats().frames_named, 4u);
  EXPECT_LE(symbolizer.cache_memory_bytes(), options_.cache_bytes);
}

TEST_F(UserSymbolizerFakeProcTest, ATableLargerThanTheWholeCacheIsLeftUnnamed) {
  testing::NmSymbol target;
  if (!BuildTiny("tiny", "tiny_target", &target)) GTEST_SKIP() << "no cc to build a test binary";
  WriteMaps(MapsLine(kBase, dir_.Path("tiny")));
  options_.cache_bytes = 64;
  UserSymbolizer symbolizer(options_);
  const UserFrame frame = Symbolize(&symbolizer, kPid, kBase + 0x10);
  EXPECT_EQ(frame.function_name, "");
  EXPECT_EQ(symbolizer.stats().tables_over_budget, 1u);
}

// map_files opens the very file mapped, even deleted: a copy of a binary
// mapped into this process, then unlinked. Needs CAP_SYS_ADMIN.
TEST_F(UserSymbolizerTest, NamesAFunctionInADeletedFileThroughMapFiles) {
  ScratchDir dir;
  const std::string path = testing::BuildTinyBinary(dir, "tiny", "tiny_target");
  if (path.empty()) GTEST_SKIP() << "no cc to build a test binary";
  const std::optional<testing::NmSymbol> target = testing::NmLookup(path, "tiny_target");
  ASSERT_TRUE(target);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* map = mmap(nullptr, 0x4000, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  ASSERT_NE(map, MAP_FAILED);
  const uint64_t base = reinterpret_cast<uintptr_t>(map);
  const std::string link =
      absl::StrCat("/proc/self/map_files/", absl::Hex(base), "-", absl::Hex(base + 0x4000));
  if (access(link.c_str(), R_OK) != 0) {
    munmap(map, 0x4000);
    GTEST_SKIP() << "map_files unreadable here (needs CAP_SYS_ADMIN)";
  }
  std::filesystem::remove(path);
  UserSymbolizer symbolizer;
  const uint64_t bias = Symbolize(&symbolizer, getpid(), base).mapping.load_bias;
  const UserFrame frame = Symbolize(&symbolizer, getpid(), base + target->value - bias);
  munmap(map, 0x4000);
  ASSERT_TRUE(frame.has_mapping);
  EXPECT_TRUE(frame.mapping.deleted);
  EXPECT_EQ(frame.mapping.path, path);
  EXPECT_EQ(frame.function_name, "tiny_target");
  EXPECT_EQ(frame.rel_pc, target->value);
}

}  // namespace
}  // namespace ringside::agent
