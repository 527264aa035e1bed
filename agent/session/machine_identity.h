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
  std::string name;     // The configured machine_name, else the host name.
  uint32_t id = 0;      // Never 0: the importer's own host has 0.
  std::string boot_id;  // The kernel's, "" when unreadable.
  // Where `id` came from:
  //   "machine_name": a configured name's hash, so that nodes cloned from
  //     one image (one /etc/machine-id) are told apart by their names;
  //   "/etc/machine-id": systemd's application-specific id of ringside
  //     (sd_id128_get_machine_app_specific: a keyed hash, so a file does not
  //     reveal the machine id, which machine-id(5) asks to keep private), the
  //     same on every boot of the machine;
  //   "host name": without either (a container that does not mount the
  //     host's /etc/machine-id), the host name's hash.
  std::string id_source;
};

// Reads this machine's identity; `configured_name` is the config's
// machine_name ("" when unset).
MachineIdentity ReadMachineIdentity(const std::string& configured_name);

// A name's id (FNV-1a of its bytes), never 0.
uint32_t MachineIdFromName(const std::string& name);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SESSION_MACHINE_IDENTITY_H_
