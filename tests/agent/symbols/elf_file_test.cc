// agent/symbols/elf_file.h: a binary's build id, load segments and
// functions, as binutils reads them; no name for what no symbol covers, and
// no crash on a broken file.
#include "agent/symbols/elf_file.h"

#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "base/scoped_fd.h"
#include "gtest/gtest.h"
#include "tests/agent/symbols/test_binaries.h"

extern "C" __attribute__((noinline, used)) int ringside_elf_file_test_target(int x) {
  asm volatile("" ::: "memory");
  return x * 7 + 3;
}

namespace ringside::agent {
namespace {

using testing::BuildTinyBinary;
using testing::NmLookup;
using testing::ScratchDir;

absl::StatusOr<ElfFile> ReadPath(const std::string& path) {
  base::ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::NotFoundError(path);
  return ElfFile::Read(fd.get(), path);
}

// The load bias of the main program as the dynamic loader applied it: a
// function's runtime address minus this is its ELF virtual address.
uintptr_t MainProgramLoadAddress() {
  uintptr_t base = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        *static_cast<uintptr_t*>(out) = info->dlpi_addr;
        return 1;  // the first is the main program
      },
      &base);
  return base;
}

TEST(ElfFileTest, ReadsTheBuildIdReadelfPrints) {
  const auto file = ReadPath("/proc/self/exe");
  ASSERT_TRUE(file.ok()) << file.status();
  // readelf's own /proc/self/exe is readelf: give it this binary's path.
  const std::string want =
      testing::ReadelfBuildId(std::filesystem::read_symlink("/proc/self/exe").string());
  if (want.empty()) GTEST_SKIP() << "readelf -n gives no build id here";
  EXPECT_EQ(file->build_id_hex(), want);
  EXPECT_EQ(file->build_id().size() * 2, want.size());
}

TEST(ElfFileTest, NamesItsOwnFunctionByItsVirtualAddress) {
  const auto file = ReadPath("/proc/self/exe");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE(file->functions_from_dynsym());
  const uint64_t vaddr =
      reinterpret_cast<uintptr_t>(&ringside_elf_file_test_target) - MainProgramLoadAddress();
  const std::optional<ElfFunction> at_start = file->FindFunction(vaddr);
  ASSERT_TRUE(at_start);
  EXPECT_EQ(at_start->name, "ringside_elf_file_test_target");
  EXPECT_EQ(at_start->start, vaddr);
  EXPECT_EQ(at_start->offset, 0u);
  const std::optional<ElfFunction> inside = file->FindFunction(vaddr + 2);
  ASSERT_TRUE(inside);
  EXPECT_EQ(inside->name, "ringside_elf_file_test_target");
  EXPECT_EQ(inside->offset, 2u);
}

TEST(ElfFileTest, KeepsCppNamesMangled) {
  const auto file = ReadPath("/proc/self/exe");
  ASSERT_TRUE(file.ok()) << file.status();
  const uint64_t vaddr = reinterpret_cast<uintptr_t>(&ReadPath) - MainProgramLoadAddress();
  const std::optional<ElfFunction> f = file->FindFunction(vaddr);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->name.substr(0, 2), "_Z") << f->name;
}

class ElfFileTinyBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    path_ = BuildTinyBinary(dir_, "tiny", "tiny_target");
    if (path_.empty()) GTEST_SKIP() << "no C compiler (cc) to build a test binary";
    const std::optional<testing::NmSymbol> symbol = NmLookup(path_, "tiny_target");
    ASSERT_TRUE(symbol) << "nm finds no tiny_target in " << path_;
    target_ = *symbol;
  }

  ScratchDir dir_;
  std::string path_;
  testing::NmSymbol target_;
};

TEST_F(ElfFileTinyBinaryTest, TurnsAFileOffsetIntoTheVirtualAddressOfItsSegment) {
  const auto file = ReadPath(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  const ElfFile::LoadSegment* exec = nullptr;
  for (const ElfFile::LoadSegment& s : file->segments()) {
    if (s.executable && exec == nullptr) exec = &s;
  }
  ASSERT_NE(exec, nullptr);
  EXPECT_EQ(file->load_bias(), exec->vaddr - exec->offset);
  printf("tiny: load bias 0x%llx\n", static_cast<unsigned long long>(file->load_bias()));
  const uint64_t file_offset = target_.value - exec->vaddr + exec->offset;
  EXPECT_EQ(file->FileOffsetToVaddr(file_offset), target_.value);
  EXPECT_EQ(file->FileOffsetToVaddr(file_offset), file_offset + file->load_bias());
  EXPECT_EQ(file->FileOffsetToVaddr(uint64_t{1} << 40), std::nullopt);
  const std::optional<ElfFunction> f = file->FindFunction(target_.value);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->name, "tiny_target");
}

TEST_F(ElfFileTinyBinaryTest, AnAddressPastAFunctionsSizeIsNotNamedAfterIt) {
  const auto file = ReadPath(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_GT(target_.size, 0u);
  const std::optional<ElfFunction> last = file->FindFunction(target_.value + target_.size - 1);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->name, "tiny_target");
  const std::optional<ElfFunction> past = file->FindFunction(target_.value + target_.size);
  EXPECT_TRUE(!past || past->name != "tiny_target");
}

// Names that share an address (a weak alias, a local one, as glibc has by
// the hundred): the frame is named after the global symbol, whichever
// order the table lists them in.
TEST(ElfFileTest, AnAddressWithAliasesIsNamedAfterItsGlobalSymbol) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string source =
      dir.Write("aliases.c",
                "static int local_first(int) __attribute__((alias(\"the_global\")));\n"
                "extern int weak_first(int) __attribute__((weak, alias(\"the_global\")));\n"
                "__attribute__((noinline)) int the_global(int x) { return x * 3 + 1; }\n"
                "int main(int argc, char** argv) {\n"
                "  (void)argv;\n"
                "  return local_first(argc) + weak_first(argc);\n"
                "}\n");
  const std::string out = dir.Path("aliases");
  if (!testing::RunCommand("cc -O1 -o '" + out + "' '" + source + "'")) {
    GTEST_SKIP() << "no C compiler (cc) to build a test binary";
  }
  const std::optional<testing::NmSymbol> global = NmLookup(out, "the_global");
  ASSERT_TRUE(global);
  ASSERT_EQ(NmLookup(out, "weak_first")->value, global->value) << "the alias is elsewhere";
  const auto file = ReadPath(out);
  ASSERT_TRUE(file.ok()) << file.status();
  const std::optional<ElfFunction> f = file->FindFunction(global->value + 1);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->name, "the_global");
  EXPECT_EQ(f->offset, 1u);
}

TEST_F(ElfFileTinyBinaryTest, AStrippedCopyKeepsItsBuildIdAndNamesNothingOfIts) {
  if (!testing::HaveTool("objcopy")) GTEST_SKIP() << "no objcopy";
  const std::string stripped = dir_.Path("tiny.stripped");
  ASSERT_TRUE(testing::RunCommand("objcopy --strip-all '" + path_ + "' '" + stripped + "'"));
  const auto full = ReadPath(path_);
  const auto file = ReadPath(stripped);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->functions_from_dynsym());
  EXPECT_EQ(file->build_id(), full->build_id());
  EXPECT_FALSE(file->build_id().empty());
  EXPECT_EQ(file->FindFunction(target_.value), std::nullopt);
}

TEST_F(ElfFileTinyBinaryTest, BrokenFilesAreErrorsNeverCrashes) {
  std::string bytes;
  {
    std::ifstream in(path_, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(bytes.size(), 1000u);
  EXPECT_FALSE(ReadPath(dir_.Write("empty", "")).ok());
  EXPECT_FALSE(ReadPath(dir_.Write("text", "#!/bin/sh\necho not an ELF file\n")).ok());
  EXPECT_FALSE(ReadPath(dir_.Write("magic",
                                   "\x7f"
                                   "ELF" +
                                       std::string(60, '\xff')))
                   .ok());
  EXPECT_FALSE(ReadPath(dir_.Write("header_only", bytes.substr(0, 64))).ok());
  for (size_t cut : {size_t{100}, size_t{1000}, bytes.size() / 2, bytes.size() - 1}) {
    (void)ReadPath(dir_.Write("truncated", bytes.substr(0, cut)));  // error or less; no crash
  }
  for (uint32_t seed = 1; seed <= 100; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    std::string broken = bytes;
    for (int i = 0; i < 20; ++i) broken[rng() % broken.size()] = static_cast<char>(rng());
    const auto file = ReadPath(dir_.Write("broken", broken));
    if (file.ok()) (void)file->FindFunction(target_.value);
  }
}

}  // namespace
}  // namespace ringside::agent
