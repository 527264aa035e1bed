#include "tests/deploy/testing/deploy_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tests/testing/paths.h"

namespace ringside::deploy_testing {

std::string SourceDir() { return ringside::testing::SourceDir(); }
std::string BuildDir() { return ringside::testing::BuildDir(); }
std::string ToolsDir() { return ringside::testing::ToolsDir(); }

CommandResult RunShell(const std::string& command, const std::string& dir) {
  const std::string full = absl::StrCat(
      "cd '", dir, "' && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES /bin/sh -c '",
      absl::StrReplaceAll(command, {{"'", "'\\''"}}), "' 2>&1");
  CommandResult result;
  FILE* pipe = popen(full.c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  const int status = pclose(pipe);
  if (status != -1 && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

bool HaveProgram(const std::string& program) {
  return RunShell(absl::StrCat("command -v ", program, " >/dev/null")).exit_code == 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

TempDir::TempDir() {
  const char* tmp = getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/ringside-deploy-XXXXXX");
  if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::map<std::string, std::string> Tree(const std::string& root) {
  std::map<std::string, std::string> tree;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0) continue;
    const std::string rel = std::filesystem::relative(it->path(), root).string();
    if (S_ISLNK(st.st_mode)) {
      tree[rel] = "l";
    } else {
      tree[rel] = absl::StrFormat("%c%04o", S_ISDIR(st.st_mode) ? 'd' : 'f', st.st_mode & 07777);
    }
  }
  return tree;
}

std::vector<std::pair<std::string, std::string>> UnitSettings(const std::string& unit_text) {
  std::vector<std::pair<std::string, std::string>> settings;
  for (absl::string_view line : absl::StrSplit(unit_text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#' || line[0] == ';' || line[0] == '[') continue;
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) continue;
    settings.emplace_back(std::string(absl::StripAsciiWhitespace(line.substr(0, eq))),
                          std::string(absl::StripAsciiWhitespace(line.substr(eq + 1))));
  }
  return settings;
}

std::vector<std::string> UnitValues(const std::string& unit_text, const std::string& key) {
  std::vector<std::string> values;
  for (const auto& [k, v] : UnitSettings(unit_text)) {
    if (k == key) values.push_back(v);
  }
  return values;
}

}  // namespace ringside::deploy_testing
