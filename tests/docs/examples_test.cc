// The shell examples of README.md and docs/*.md, run exactly as written.
//
// Every ```sh block of a file is a command a reader will paste: the file's
// blocks run in order in one bash (`set -euo pipefail`), so that an agent
// started in the background by one block answers the next. A block is left
// out only when the line before its fence is `<!-- not run: REASON -->`
// (systemd as pid 1, docker, kubectl, `make test` itself), and the reason
// must be given.
//
// Where they run: as root, in a mount and PID namespace of their own (every
// process they start dies with it, and /proc shows only theirs), with
// private empty directories over /run/ringside, /var/lib/ringside and
// /etc/ringside (so the default paths work and nothing reaches the host's),
// `ringside` (the built binary) first on PATH (and deploy/shipping/ last),
// `sudo` a no-op (root already;
// Debian's sudo would also reset PATH), in a scratch working directory.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/testing/paths.h"

namespace ringside::docs {
namespace {

using ::ringside::testing::BuildDir;
using ::ringside::testing::SourceDir;

// The ringside paths the examples may use, private to their namespace.
constexpr const char* kPrivateDirs[] = {"/run/ringside", "/var/lib/ringside", "/etc/ringside"};
// A whole file's examples, agents started and stopped included.
constexpr absl::Duration kFileTimeout = absl::Seconds(180);

struct Block {
  int line = 0;  // Of the opening fence, 1-based.
  std::string text;
  std::string not_run;  // The reason given, when left out.
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fence that closes a block: backticks alone (an opening one names a
// language).
bool IsClosingFence(absl::string_view line) {
  line = absl::StripTrailingAsciiWhitespace(line);
  return absl::StartsWith(line, "```") && line.find_first_not_of('`') == absl::string_view::npos;
}

// The ```sh blocks of a Markdown text.
std::vector<Block> ShellBlocks(const std::string& markdown) {
  std::vector<Block> blocks;
  std::istringstream in(markdown);
  std::string line, previous;
  int n = 0;
  Block* open = nullptr;
  while (std::getline(in, line)) {
    n++;
    if (open != nullptr) {
      if (IsClosingFence(line)) {
        open = nullptr;
      } else {
        absl::StrAppend(&open->text, line, "\n");
      }
    } else if (line == "```sh") {
      Block& b = blocks.emplace_back();
      b.line = n;
      absl::string_view p = absl::StripAsciiWhitespace(previous);
      if (absl::ConsumePrefix(&p, "<!-- not run:") && absl::ConsumeSuffix(&p, "-->")) {
        b.not_run = std::string(absl::StripAsciiWhitespace(p));
        if (b.not_run.empty()) b.not_run = "?";  // Flagged below: no reason given.
      }
      open = &b;
    } else if (absl::StartsWith(line, "```")) {
      // Another language's block: skipped whole, so that a ```sh inside it
      // (an example of Markdown) is not taken for a block.
      while (std::getline(in, line)) {
        n++;
        if (IsClosingFence(line)) break;
      }
    }
    previous = line;
  }
  return blocks;
}

// README.md and docs/*.md (docs/design/ holds no commands to run), by path
// below the source tree.
std::vector<std::string> AllMarkdownFiles() {
  std::vector<std::string> files = {"README.md"};
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(SourceDir() + "/docs", ec)) {
    if (e.is_regular_file() && e.path().extension() == ".md") {
      files.push_back("docs/" + e.path().filename().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Creates `dir` when it is missing; removes what it created when it goes
// (empty: the examples' files went into the namespace's private copy).
class MadeDirs {
 public:
  ~MadeDirs() {
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) rmdir(it->c_str());
  }
  void Make(const std::string& dir) {
    struct stat st;
    if (stat(dir.c_str(), &st) == 0) return;
    if (mkdir(dir.c_str(), 0755) == 0) made_.push_back(dir);
  }

 private:
  std::vector<std::string> made_;
};

// The files with a shell example to run.
std::vector<std::string> FilesWithExamples() {
  std::vector<std::string> files;
  for (const std::string& f : AllMarkdownFiles()) {
    for (const Block& b : ShellBlocks(ReadFile(SourceDir() + "/" + f))) {
      if (b.not_run.empty()) {
        files.push_back(f);
        break;
      }
    }
  }
  return files;
}

// A shell block left out says why, in every file.
TEST(ExamplesTest, EveryBlockNotRunSaysWhy) {
  int files = 0;
  for (const std::string& f : AllMarkdownFiles()) {
    files++;
    for (const Block& b : ShellBlocks(ReadFile(SourceDir() + "/" + f))) {
      EXPECT_NE(b.not_run, "?") << f << ":" << b.line << ": `<!-- not run: -->` without why";
    }
  }
  EXPECT_GT(files, 5) << "README.md and docs/*.md not found below " << SourceDir();
}

class FileExamplesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FileExamplesTest, EveryShellBlockRunsAsWritten) {
  const std::string file = GetParam();
  const std::vector<Block> blocks = ShellBlocks(ReadFile(SourceDir() + "/" + file));
  std::vector<const Block*> run;
  for (const Block& b : blocks) {
    if (b.not_run.empty()) run.push_back(&b);
  }
  ASSERT_FALSE(run.empty());
  if (geteuid() != 0) GTEST_SKIP() << "the examples run as root (they record the kernel)";

  char tmpl[] = "/tmp/ringside_docs_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string scratch = tmpl;
  const std::string work = scratch + "/work", shim = scratch + "/bin";
  const std::string mark = scratch + "/block", log = scratch + "/log";
  ASSERT_EQ(mkdir(work.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(shim.c_str(), 0755), 0);
  std::ofstream(shim + "/sudo") << "#!/bin/sh\nexec \"$@\"\n";
  chmod((shim + "/sudo").c_str(), 0755);
  MadeDirs made;
  made.Make("/var/lib/ringside");
  made.Make("/etc/ringside");
  made.Make("/run/ringside");

  // The namespace's setup, then each block after a line naming it.
  std::string script = "set -euo pipefail\n";
  for (const char* d : kPrivateDirs)
    absl::StrAppend(&script, "mount -t tmpfs -o mode=0755 ringside-docs ", d, "\n");
  absl::StrAppend(&script, "cd ", work, "\n");
  for (const Block* b : run) {
    absl::StrAppend(&script, "echo ", file, ":", b->line, " > ", mark, "\n", b->text);
  }
  absl::StrAppend(&script, "echo done > ", mark, "\n");
  const std::string script_path = scratch + "/examples.sh";
  std::ofstream(script_path) << script;

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    // Last, the repository's deploy/shipping/ (ringside-ship), which the
    // examples add to PATH where `make install` puts it.
    setenv("PATH",
           absl::StrCat(shim, ":", BuildDir(), ":/usr/sbin:/usr/bin:/sbin:/bin:", SourceDir(),
                        "/deploy/shipping")
               .c_str(),
           1);
    setpgid(0, 0);
    execl("/usr/bin/unshare", "unshare", "--mount", "--propagation", "private", "--pid", "--fork",
          "--mount-proc", "bash", script_path.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const absl::Time deadline = absl::Now() + kFileTimeout;
  int status = 0;
  bool timed_out = false;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      timed_out = true;
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  const std::string at = std::string(absl::StripAsciiWhitespace(ReadFile(mark)));
  const std::string output = ReadFile(log);
  EXPECT_FALSE(timed_out) << "still running after " << kFileTimeout << " in the block at " << at
                          << "\n"
                          << output;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the example at " << at << " failed (exit "
      << (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) << "):\n"
      << output;
  EXPECT_EQ(at, "done");
  std::printf("%s: %zu examples run, %zu not; their output:\n%s", file.c_str(), run.size(),
              blocks.size() - run.size(), output.c_str());
  std::filesystem::remove_all(scratch);
}

INSTANTIATE_TEST_SUITE_P(Docs, FileExamplesTest, ::testing::ValuesIn(FilesWithExamples()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// The parser itself: fences, reasons, other languages' blocks.
TEST(ShellBlocksTest, FindsShellBlocksTheirLinesAndWhyOneIsNotRun) {
  const std::vector<Block> blocks = ShellBlocks(
      "# t\n"
      "```sh\n"
      "ringside list\n"
      "```\n"
      "<!-- not run: needs systemd as pid 1 -->\n"
      "```sh\n"
      "systemctl start ringside\n"
      "```\n"
      "```text\n"
      "```sh\n"
      "```\n"
      "<!-- not run: -->\n"
      "```sh\n"
      "x\n"
      "```\n");
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].line, 2);
  EXPECT_EQ(blocks[0].text, "ringside list\n");
  EXPECT_EQ(blocks[0].not_run, "");
  EXPECT_EQ(blocks[1].not_run, "needs systemd as pid 1");
  EXPECT_EQ(blocks[1].text, "systemctl start ringside\n");
  EXPECT_EQ(blocks[2].line, 13);
  EXPECT_EQ(blocks[2].not_run, "?");
}

}  // namespace
}  // namespace ringside::docs
