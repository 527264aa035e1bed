#include "agent/session/machine_identity.h"

#include <sys/utsname.h>
#include <systemd/sd-id128.h>

#include "absl/strings/ascii.h"
#include "base/small_file.h"

namespace ringside::agent {
namespace {

// ringside's application id for sd_id128_get_machine_app_specific: the key
// of the hash that turns /etc/machine-id into the id ringside's files carry.
// Never to change: a node's files would stop matching its earlier ones.
constexpr sd_id128_t kRingsideAppId = {{0xa0, 0x0b, 0xc6, 0x16, 0xa7, 0xd7, 0xb8, 0x5c, 0x9a, 0xc5,
                                        0x3a, 0x2f, 0xd6, 0xbc, 0x0b, 0xd3}};

// The first line of `path`, trimmed; "" when unreadable.
std::string FirstLine(const std::string& path) {
  const std::string text = base::ReadSmallFileOrEmpty(path);
  return std::string(absl::StripAsciiWhitespace(text.substr(0, text.find('\n'))));
}

}  // namespace

uint32_t MachineIdFromName(const std::string& name) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 16777619u;
  }
  return hash != 0 ? hash : 1;
}

MachineIdentity ReadMachineIdentity(const std::string& configured_name) {
  MachineIdentity m;
  m.boot_id = FirstLine("/proc/sys/kernel/random/boot_id");
  utsname u;
  const std::string host = uname(&u) == 0 ? u.nodename : "";
  m.name = configured_name.empty() ? host : configured_name;
  if (!configured_name.empty()) {
    m.id = MachineIdFromName(configured_name);
    m.id_source = "machine_name";
    return m;
  }
  sd_id128_t app_specific;
  if (sd_id128_get_machine_app_specific(kRingsideAppId, &app_specific) == 0) {
    for (int i = 0; i < 16 && m.id == 0; i += 4) {
      m.id = uint32_t{app_specific.bytes[i]} << 24 | uint32_t{app_specific.bytes[i + 1]} << 16 |
             uint32_t{app_specific.bytes[i + 2]} << 8 | app_specific.bytes[i + 3];
    }
    if (m.id != 0) {
      m.id_source = "/etc/machine-id";
      return m;
    }
  }
  m.id = MachineIdFromName(host);
  m.id_source = "host name";
  return m;
}

}  // namespace ringside::agent
