#ifndef RINGSIDE_AGENT_SESSION_MACHINE_IDENTITY_H_
#define RINGSIDE_AGENT_SESSION_MACHINE_IDENTITY_H_

#include <cstdint>
#include <string>

namespace ringside::agent {

// Which machine a trace comes from, as every file ringside writes says it:
// SystemInfo.machine_name, boot_id and machine_id_source, and the
// machine_id every packet carries. Files of several machines opened
// together (one TAR in trace_processor or ui.perfetto.dev) are kept apart
// by the id and lined up on the REALTIME of their clock snapshots.
struct MachineIdentity {
  std::string name;     // The config's machine_name, else the host name.
  uint32_t id = 0;      // Never 0: the importer's own host has 0.
  std::string boot_id;  // The kernel's, "" when unreadable.
  // Where `id` came from: "/etc/machine-id" (its first 32 bits: the same
  // on every boot of the machine, and what `head -c8 /etc/machine-id`
  // shows in hex) or, without one (a container that does not mount the
  // host's), "machine_name" (a hash of `name`).
  std::string id_source;
};

// Reads this machine's identity. `configured_name`: the config's
// machine_name ("" for the host name). `root` prefixes the paths read
// (/etc/machine-id, /proc/sys/kernel/random/boot_id), for tests.
MachineIdentity ReadMachineIdentity(const std::string& configured_name,
                                    const std::string& root = "");

// The id of a machine-id file's contents (32 hex digits, as systemd writes
// it): its first 8 digits, or the next 8 when those are all 0; 0 when the
// text is not a machine id.
uint32_t MachineIdFromMachineIdFile(const std::string& text);

// The id a machine without /etc/machine-id gets: a hash of its name (FNV-1a),
// never 0.
uint32_t MachineIdFromName(const std::string& name);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SESSION_MACHINE_IDENTITY_H_
