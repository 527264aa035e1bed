// deploy/container/Dockerfile, without Docker: the runtime stage installs
// Debian packages that exist and that hold every library the binary loads.

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/deploy/testing/deploy_files.h"

namespace ringside::deploy_testing {
namespace {

// The packages of the last stage's `apt-get install` (continuation lines
// joined; options and shell words after && left out).
std::vector<std::string> RuntimePackages() {
  const std::string dockerfile =
      absl::StrReplaceAll(ReadFile(SourceDir() + "/deploy/container/Dockerfile"), {{"\\\n", " "}});
  const size_t last_from = dockerfile.rfind("\nFROM ");
  std::vector<std::string> packages;
  if (last_from == std::string::npos) return packages;
  for (absl::string_view line : absl::StrSplit(dockerfile.substr(last_from), '\n')) {
    const size_t install = line.find("apt-get install");
    if (install == absl::string_view::npos) continue;
    absl::string_view rest = line.substr(install + strlen("apt-get install"));
    rest = rest.substr(0, rest.find("&&"));
    for (absl::string_view w : absl::StrSplit(rest, ' ', absl::SkipEmpty())) {
      if (!absl::StartsWith(w, "-")) packages.emplace_back(w);
    }
  }
  return packages;
}

class ContainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveProgram("apt-cache") || !HaveProgram("dpkg")) {
      GTEST_SKIP() << "not a Debian machine (no apt-cache, dpkg)";
    }
  }
};

TEST_F(ContainerTest, RuntimePackagesExistInDebian) {
  const std::vector<std::string> packages = RuntimePackages();
  ASSERT_FALSE(packages.empty());
  for (const std::string& p : packages) {
    const CommandResult r = RunShell("apt-cache show --no-all-versions " + p);
    EXPECT_TRUE(r.exit_code == 0 && absl::StrContains(r.output, "Package: " + p))
        << p << ": " << r.output;
  }
}

TEST_F(ContainerTest, RuntimePackagesHoldEveryLibraryTheBinaryLoads) {
  // The runtime packages and everything they depend on.
  std::set<std::string> closure;
  const CommandResult deps = RunShell(absl::StrCat(
      "apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks "
      "--no-replaces --no-enhances ",
      absl::StrJoin(RuntimePackages(), " ")));
  ASSERT_EQ(deps.exit_code, 0) << deps.output;
  for (absl::string_view line : absl::StrSplit(deps.output, '\n', absl::SkipEmpty())) {
    if (line[0] != ' ' && line[0] != '<') closure.emplace(absl::StripAsciiWhitespace(line));
  }

  // ldd: "libbpf.so.1 => /lib/x86_64-linux-gnu/libbpf.so.1 (0x...)".
  const CommandResult ldd = RunShell(absl::StrCat("ldd ", BuildDir(), "/ringside"));
  ASSERT_EQ(ldd.exit_code, 0) << ldd.output;
  int libraries = 0;
  for (absl::string_view line : absl::StrSplit(ldd.output, '\n', absl::SkipEmpty())) {
    const size_t arrow = line.find("=> /");
    if (arrow == absl::string_view::npos) continue;
    absl::string_view path = line.substr(arrow + 3);
    path = path.substr(0, path.find(' '));
    // `make asan` builds this binary with the sanitizers' runtimes; the
    // image's build (deploy/container/Dockerfile) has none.
    const absl::string_view name = path.substr(path.rfind('/') + 1);
    if (absl::StartsWith(name, "libasan.") || absl::StartsWith(name, "libubsan.") ||
        absl::StartsWith(name, "liblsan.") || absl::StartsWith(name, "libtsan.")) {
      continue;
    }
    // dpkg knows a file by the path its package ships it at: with merged
    // /usr, ldd's /lib/... may be /usr/lib/... to dpkg, or the other way.
    const CommandResult owner =
        RunShell(absl::StrCat("dpkg -S ", path, " 2>/dev/null || dpkg -S /usr", path,
                              " 2>/dev/null || dpkg -S \"$(readlink -f ", path, ")\""));
    ASSERT_EQ(owner.exit_code, 0) << path << ": " << owner.output;
    // "libbpf1:amd64: /usr/lib/x86_64-linux-gnu/libbpf.so.1"
    const std::string package = std::string(owner.output.substr(0, owner.output.find(':')));
    EXPECT_EQ(closure.count(package), 1u)
        << path << " is in " << package << ", which the runtime stage does not install";
    libraries++;
  }
  EXPECT_GT(libraries, 5);
}

}  // namespace
}  // namespace ringside::deploy_testing
