// agent/symbols/kernel_symbols.h: a kernel address names the function it is
// in, or nothing, never a wrong name.
#include "agent/symbols/kernel_symbols.h"

#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "base/small_file.h"
#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

// A kallsyms of the test's own: the kernel image's text between _stext and
// _etext with a data symbol inside it, init text, and two modules.
constexpr char kKallsyms[] =
    "ffffffff81000000 T _stext\n"
    "ffffffff81000000 T _text\n"
    "ffffffff81000000 T startup_64\n"
    "ffffffff81000100 t __pfx_do_one\n"
    "ffffffff81000110 t do_one\n"
    "ffffffff81000200 T schedule\n"
    "ffffffff81000300 W weak_thing\n"
    "ffffffff81000400 D some_data_in_text\n"
    "ffffffff81000500 T __entry_text_start\n"
    "ffffffff81000500 T entry_SYSCALL_64\n"
    "ffffffff81000600 T __entry_text_end\n"
    "ffffffff81000700 T pipe_read\n"
    "ffffffff81000800 T _etext\n"
    "ffffffff82000000 D some_data\n"
    "ffffffff83000000 T _sinittext\n"
    "ffffffff83000000 t init_thing\n"
    "ffffffff83001000 T _einittext\n"
    "ffffffffc0001000 t ext4_thing\t[ext4]\n"
    "ffffffffc0001100 T ext4_other\t[ext4]\n"
    "ffffffffc0002000 t xfs_thing\t[xfs]\n";

KernelSymbols MustParse(const std::string& text) {
  auto symbols = KernelSymbols::Parse(text, "test-kallsyms");
  EXPECT_TRUE(symbols.ok()) << symbols.status();
  return *std::move(symbols);
}

std::string NameAt(const KernelSymbols& symbols, uint64_t addr) {
  const std::optional<KernelSymbol> s = symbols.Find(addr);
  if (!s) return "(none)";
  std::string name(s->name);
  if (!s->module.empty()) name += " [" + std::string(s->module) + "]";
  if (s->offset != 0) name += "+" + std::to_string(s->offset);
  return name;
}

TEST(KernelSymbolsTest, NamesAnAddressAtAFunctionsStart) {
  const KernelSymbols symbols = MustParse(kKallsyms);
  EXPECT_EQ(NameAt(symbols, 0xffffffff81000200), "schedule");
  const std::optional<KernelSymbol> s = symbols.Find(0xffffffff81000200);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->start, 0xffffffff81000200u);
  EXPECT_EQ(s->offset, 0u);
}

TEST(KernelSymbolsTest, NamesAnAddressInsideAFunctionWithItsOffset) {
  const KernelSymbols symbols = MustParse(kKallsyms);
  EXPECT_EQ(NameAt(symbols, 0xffffffff81000234), "schedule+52");
  EXPECT_EQ(NameAt(symbols, 0xffffffff810002ff), "schedule+255");
  EXPECT_EQ(NameAt(symbols, 0xffffffff81000301), "weak_thing+1");
  EXPECT_EQ(NameAt(symbols, 0xffffffff83000010), "init_thing+16");
}

TEST(KernelSymbolsTest, NamesNothingBelowTheFirstSymbol) {
  const KernelSymbols symbols = MustParse(kKallsyms);
  EXPECT_EQ(NameAt(symbols, 0), "(none)");
  EXPECT_EQ(NameAt(symbols, 0xffffffff80ffffff), "(none)");
}

TEST(KernelSymbolsTest, NamesNothingPastTheEndOfText) {
  const KernelSymbols symbols = MustParse(kKallsyms);
  EXPECT_EQ(NameAt(symbols, 0xffffffff810007ff), "pipe_read+255");
  EXPECT_EQ(NameAt(symbols, 0xffffffff81000800), "(none)");  // _etext itself
  EXPECT_EQ(NameAt(symbols, 0xffffffff81000900), "(none)");
  EXPECT_EQ(NameAt(symbols, 0xffffffff82000010), "(none)");  // data
  EXPECT_EQ(NameAt(symbols, 0xffffffff83001000), "(none)");  // _einittext
}

TEST(KernelSymbolsTest, DataAboveAFunctionEndsIt) {
  const KernelSymbols symbols = MustParse(kKallsyms);
  EXPECT_EQ(NameAt(symbols, 0xffffffff810003ff), "weak_thing+255");
  EXPECT_EQ(NameAt(symbols, 0xffffffff81000400), "(none)");
}

TEST(KernelSymbolsTest, ASectionsEndMarkerNamesNothing) {
  const KernelSymbols symbols = MustParse(kKallsyms);
  EXPECT_EQ(NameAt(symbols, 0xffffffff81000650), "(none)");
}

TEST(KernelSymbolsTest, AtASharedAddressTheFunctionWinsOverMarkers) {
  const KernelSymbols symbols = MustParse(kKallsyms);
  EXPECT_EQ(NameAt(symbols, 0xffffffff81000000), "startup_64");
  EXPECT_EQ(NameAt(symbols, 0xffffffff81000500), "entry_SYSCALL_64");
  EXPECT_EQ(NameAt(symbols, 0xffffffff83000000), "init_thing");
}

TEST(KernelSymbolsTest, NamesModuleFunctionsWithTheirModule) {
  const KernelSymbols symbols = MustParse(kKallsyms);
  EXPECT_EQ(NameAt(symbols, 0xffffffffc0001000), "ext4_thing [ext4]");
  EXPECT_EQ(NameAt(symbols, 0xffffffffc0001180), "ext4_other [ext4]+128");
  EXPECT_EQ(NameAt(symbols, 0xffffffffc0002010), "xfs_thing [xfs]+16");
}

TEST(KernelSymbolsTest, NamesNothingFarPastTheLastSymbol) {
  const KernelSymbols symbols = MustParse(kKallsyms);
  const uint64_t last = 0xffffffffc0002000;
  EXPECT_EQ(NameAt(symbols, last + KernelSymbols::kMaxFunctionBytes - 1),
            "xfs_thing [xfs]+" + std::to_string(KernelSymbols::kMaxFunctionBytes - 1));
  EXPECT_EQ(NameAt(symbols, last + KernelSymbols::kMaxFunctionBytes), "(none)");
  EXPECT_EQ(NameAt(symbols, ~uint64_t{0}), "(none)");
}

TEST(KernelSymbolsTest, KeepsOneFunctionPerAddress) {
  const KernelSymbols symbols = MustParse(kKallsyms);
  // startup_64 __pfx_do_one do_one schedule weak_thing entry_SYSCALL_64
  // pipe_read init_thing ext4_thing ext4_other xfs_thing
  EXPECT_EQ(symbols.function_count(), 11u);
  EXPECT_GT(symbols.memory_bytes(), 11 * 16u);
}

TEST(KernelSymbolsTest, SkipsMalformedLines) {
  const KernelSymbols symbols = MustParse(
      "garbage\n"
      "\n"
      "ffffffff81000000\n"
      "ffffffff81000000 T\n"
      "1ffffffff81000000 T too_long_an_address\n"
      "ffffffff8100zz00 T bad_hex\n"
      "ffffffff81000100 T unclosed\t[mod\n"
      "ffffffff81000200 T good\n"
      "ffffffff81000300 T last_without_newline");
  EXPECT_EQ(symbols.function_count(), 2u);
  EXPECT_EQ(NameAt(symbols, 0xffffffff81000210), "good+16");
  EXPECT_EQ(NameAt(symbols, 0xffffffff81000300), "last_without_newline");
}

TEST(KernelSymbolsTest, AllZeroAddressesSayTheKernelHidesThem) {
  const auto symbols = KernelSymbols::Parse(
      "0000000000000000 T _stext\n"
      "0000000000000000 T schedule\n"
      "0000000000000000 t ext4_thing\t[ext4]\n",
      "/proc/kallsyms");
  EXPECT_EQ(symbols.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(symbols.status().message().find("/proc/kallsyms"), std::string::npos);
  EXPECT_NE(symbols.status().message().find("kptr_restrict"), std::string::npos);
  EXPECT_NE(symbols.status().message().find("CAP_SYSLOG"), std::string::npos);
}

TEST(KernelSymbolsTest, NoFunctionAtAllIsAnError) {
  const auto symbols = KernelSymbols::Parse("ffffffff82000000 D some_data\n", "x");
  EXPECT_EQ(symbols.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KernelSymbolsTest, AMissingFileIsNamed) {
  const auto symbols = KernelSymbols::Load("/nonexistent/kallsyms");
  EXPECT_EQ(symbols.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(symbols.status().message().find("/nonexistent/kallsyms"), std::string::npos);
}

// Load reads the file in chunks; lines that straddle two give the same
// table Parse gives of the whole text.
TEST(KernelSymbolsTest, LoadAcrossReadChunksMatchesParse) {
  char dir[] = "/tmp/ringside_kallsyms_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/kallsyms";
  std::string text;
  for (int i = 0; i < 20000; ++i) {
    char line[96];
    snprintf(line, sizeof(line), "%016llx %c function_number_%d%s\n",
             0xffffffff81000000ull + 64ull * i, i % 3 ? 't' : 'T', i, i % 7 ? "" : "\t[mod]");
    text += line;
  }
  std::ofstream(path) << text;
  const absl::StatusOr<KernelSymbols> loaded = KernelSymbols::Load(path);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const KernelSymbols parsed = MustParse(text);
  EXPECT_EQ(loaded->function_count(), 20000u);
  EXPECT_EQ(loaded->function_count(), parsed.function_count());
  for (int i = 0; i < 20000; i += 997) {
    const uint64_t addr = 0xffffffff81000000ull + 64ull * i + 5;
    EXPECT_EQ(NameAt(*loaded, addr), NameAt(parsed, addr));
    EXPECT_EQ(NameAt(*loaded, addr),
              "function_number_" + std::to_string(i) + (i % 7 ? "" : " [mod]") + "+5");
  }
}

// The running kernel's own functions name back by their own addresses, read
// from the same file independently of the parser.
TEST(KernelSymbolsTest, TheRunningKernelNamesItsOwnFunctions) {
  const std::optional<std::string> text = base::ReadSmallFile("/proc/kallsyms");
  if (!text) GTEST_SKIP() << "no /proc/kallsyms";
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<KernelSymbols> symbols = KernelSymbols::Load();
  const auto took = std::chrono::steady_clock::now() - start;
  if (symbols.status().code() == absl::StatusCode::kPermissionDenied) {
    GTEST_SKIP() << "addresses hidden: needs CAP_SYSLOG and kernel.kptr_restrict <= 1 ("
                 << symbols.status() << ")";
  }
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  printf("kallsyms: %zu functions, %zu bytes, loaded in %.1f ms\n", symbols->function_count(),
         symbols->memory_bytes(), std::chrono::duration<double, std::milli>(took).count());

  int found = 0;
  for (const char* want : {"schedule", "pipe_read", "vfs_read"}) {
    uint64_t addr = 0;
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      std::vector<absl::string_view> f = absl::StrSplit(line, absl::ByAnyChar(" \t"));
      if (f.size() >= 3 && f[2] == want && (f[1] == "T" || f[1] == "t") &&
          absl::SimpleHexAtoi(f[0], &addr)) {
        break;
      }
      addr = 0;
    }
    if (addr == 0) {
      printf("kallsyms: %s is not in this kernel\n", want);
      continue;
    }
    ++found;
    const std::optional<KernelSymbol> s = symbols->Find(addr);
    ASSERT_TRUE(s) << want;
    EXPECT_EQ(s->name, want);
    EXPECT_EQ(s->offset, 0u);
    EXPECT_EQ(s->module, "");
    const std::optional<KernelSymbol> inside = symbols->Find(addr + 3);
    ASSERT_TRUE(inside) << want;
    EXPECT_EQ(inside->name, want);
    EXPECT_EQ(inside->offset, 3u);
  }
  EXPECT_GE(found, 1) << "none of schedule, pipe_read, vfs_read in /proc/kallsyms";
}

}  // namespace
}  // namespace ringside::agent
