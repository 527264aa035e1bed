#ifndef RINGSIDE_TESTS_AGENT_SYMBOLS_TEST_BINARIES_H_
#define RINGSIDE_TESTS_AGENT_SYMBOLS_TEST_BINARIES_H_

// What the tests of agent/symbols/ build and ask of binutils: small ELF
// binaries compiled into a scratch directory, and what readelf and nm say
// of them (independently of the code under test).

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace ringside::agent::testing {

// A directory under /tmp of the test's own, removed with what is in it.
class ScratchDir {
 public:
  ScratchDir() {
    char dir[] = "/tmp/ringside_symbols_XXXXXX";
    if (mkdtemp(dir) != nullptr) path_ = dir;
  }
  ~ScratchDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Path(const std::string& name) const { return path_ + "/" + name; }
  std::string Write(const std::string& name, const std::string& contents) const {
    std::ofstream(Path(name), std::ios::binary) << contents;
    return Path(name);
  }

 private:
  std::string path_;
};

// What `command` (run by sh) prints on stdout, or nullopt when it fails.
inline std::optional<std::string> RunCommand(const std::string& command) {
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

inline bool HaveTool(const std::string& tool) {
  return RunCommand("command -v " + tool).has_value();
}

// The build id `readelf -n` prints for `path` (hex), or "".
inline std::string ReadelfBuildId(const std::string& path) {
  const std::optional<std::string> out = RunCommand("readelf -n '" + path + "'");
  if (!out) return "";
  const size_t at = out->find("Build ID: ");
  if (at == std::string::npos) return "";
  std::istringstream rest(out->substr(at + 10));
  std::string id;
  rest >> id;
  return id;
}

// A symbol's value and size as `nm -S` prints them; nullopt when absent.
struct NmSymbol {
  uint64_t value = 0;
  uint64_t size = 0;
};
inline std::optional<NmSymbol> NmLookup(const std::string& path, const std::string& name) {
  const std::optional<std::string> out = RunCommand("nm -S '" + path + "'");
  if (!out) return std::nullopt;
  std::istringstream lines(*out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string value, size, type, symbol;
    if (fields >> value >> size >> type >> symbol && symbol == name) {
      return NmSymbol{std::stoull(value, nullptr, 16), std::stoull(size, nullptr, 16)};
    }
  }
  return std::nullopt;
}

// Compiles a small program whose function `function` exists and has a size
// into `dir`/`name`, linked by lld when it is installed (lld lays the code
// out with p_vaddr 0x1000 above p_offset: a load bias to account for).
// Returns the path, or "" when no compiler works here.
inline std::string BuildTinyBinary(const ScratchDir& dir, const std::string& name,
                                   const std::string& function) {
  const std::string source =
      dir.Write(name + ".c", "__attribute__((noinline)) int " + function +
                                 "(int x) { return x * 3 + 1; }\n"
                                 "int main(int argc, char** argv) { (void)argv; return " +
                                 function + "(argc); }\n");
  const std::string out = dir.Path(name);
  const std::string linker = HaveTool("ld.lld") ? " -fuse-ld=lld -Wl,--build-id" : "";
  if (!RunCommand("cc -O1 -o '" + out + "' '" + source + "'" + linker)) return "";
  return out;
}

}  // namespace ringside::agent::testing

#endif  // RINGSIDE_TESTS_AGENT_SYMBOLS_TEST_BINARIES_H_
