#ifndef RINGSIDE_TESTS_DEPLOY_TESTING_DEPLOY_FILES_H_
#define RINGSIDE_TESTS_DEPLOY_TESTING_DEPLOY_FILES_H_

#include <map>
#include <string>
#include <vector>

namespace ringside::deploy_testing {

// The source tree, the build directory of this test binary, and where
// `make deps` installed the npm tools (the Makefile's TOOLS_DIR).
std::string SourceDir();
std::string BuildDir();
std::string ToolsDir();

// What a shell command printed (stdout and stderr together) and its exit
// status (-1 when it did not exit normally).
struct CommandResult {
  int exit_code = -1;
  std::string output;
};
// Runs `command` with /bin/sh in `dir`, without the make variables of a
// make that may have started this test (MAKEFLAGS would hand a sub-make the
// jobserver of the outer one).
CommandResult RunShell(const std::string& command, const std::string& dir = SourceDir());
// True if `program` is found on PATH.
bool HaveProgram(const std::string& program);

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& text);

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it
// when the object goes.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Every file and directory below `root`, by path relative to it, with its
// type and permission bits as `ls` shows them ("d0750", "f0644", "l").
std::map<std::string, std::string> Tree(const std::string& root);

// The `Key=value` lines of a systemd unit (every section), in order;
// comments and blank lines left out.
std::vector<std::pair<std::string, std::string>> UnitSettings(const std::string& unit_text);
// The values of `key` in `unit_text`, in order.
std::vector<std::string> UnitValues(const std::string& unit_text, const std::string& key);

}  // namespace ringside::deploy_testing

#endif  // RINGSIDE_TESTS_DEPLOY_TESTING_DEPLOY_FILES_H_
