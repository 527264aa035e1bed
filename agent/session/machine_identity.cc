#include "agent/session/machine_identity.h"

#include <sys/utsname.h>

#include <cctype>
#include <fstream>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace ringside::agent {
namespace {

// The first line of `path`, without surrounding white space; "" when it
// cannot be read. Files of a few dozen bytes: at most 4 KiB is read.
std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  const size_t newline = text.find('\n');
  if (newline != std::string::npos) text.resize(newline);
  return std::string(absl::StripAsciiWhitespace(text));
}

}  // namespace

uint32_t MachineIdFromMachineIdFile(const std::string& text) {
  const std::string id(absl::StripAsciiWhitespace(text));
  if (id.size() != 32) return 0;
  for (char c : id) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return 0;
  }
  for (size_t at = 0; at < id.size(); at += 8) {
    uint32_t value = 0;
    if (absl::SimpleHexAtoi(id.substr(at, 8), &value) && value != 0) return value;
  }
  return 0;
}

uint32_t MachineIdFromName(const std::string& name) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 16777619u;
  }
  return hash != 0 ? hash : 1;
}

MachineIdentity ReadMachineIdentity(const std::string& configured_name, const std::string& root) {
  MachineIdentity m;
  m.name = configured_name;
  if (m.name.empty()) {
    utsname u;
    m.name = uname(&u) == 0 ? u.nodename : "";
  }
  m.boot_id = ReadSmallFile(root + "/proc/sys/kernel/random/boot_id");
  m.id = MachineIdFromMachineIdFile(ReadSmallFile(root + "/etc/machine-id"));
  m.id_source = "/etc/machine-id";
  if (m.id == 0) {
    m.id = MachineIdFromName(m.name);
    m.id_source = "machine_name";
  }
  return m;
}

}  // namespace ringside::agent
