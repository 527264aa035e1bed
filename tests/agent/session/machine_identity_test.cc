#include "agent/session/machine_identity.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "agent/session/service_packets.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

// A configured name gives the id: nodes cloned from one image (one
// /etc/machine-id) are told apart by the names their configs give them.
TEST(MachineIdentityTest, AConfiguredNameGivesTheIdAndTheName) {
  const MachineIdentity m = ReadMachineIdentity("db-1");
  EXPECT_EQ(m.name, "db-1");
  EXPECT_EQ(m.id, MachineIdFromName("db-1"));
  EXPECT_NE(m.id, MachineIdFromName("db-2"));
  EXPECT_EQ(m.id_source, "machine_name");
}

// Without one: the host name, and an id from /etc/machine-id that is the
// same each time but does not show the machine id itself (machine-id(5)
// asks for it to stay private).
TEST(MachineIdentityTest, WithoutANameTheIdIsAKeyedHashOfTheMachineId) {
  utsname u;
  ASSERT_EQ(uname(&u), 0);
  const MachineIdentity m = ReadMachineIdentity("");
  EXPECT_EQ(m.name, u.nodename);
  EXPECT_NE(m.id, 0u);
  EXPECT_EQ(ReadMachineIdentity("").id, m.id);
  std::ifstream in("/etc/machine-id");
  std::string machine_id;
  if (!(in >> machine_id) || machine_id.size() != 32) {
    EXPECT_EQ(m.id_source, "host name");
    EXPECT_EQ(m.id, MachineIdFromName(u.nodename));
    return;
  }
  EXPECT_EQ(m.id_source, "/etc/machine-id");
  for (size_t at = 0; at < 32; at += 8) {
    uint32_t part = 0;
    ASSERT_TRUE(absl::SimpleHexAtoi(machine_id.substr(at, 8), &part));
    EXPECT_NE(m.id, part) << "the id is a part of /etc/machine-id";
  }
}

TEST(MachineIdentityTest, TheBootIdIsTheKernels) {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  ASSERT_TRUE(in >> boot_id);
  EXPECT_EQ(ReadMachineIdentity("").boot_id, boot_id);
}

// An id of 0 would be the importer's own host: never given.
TEST(MachineIdentityTest, ANamesIdIsNeverZero) {
  EXPECT_NE(MachineIdFromName(""), 0u);
  EXPECT_NE(MachineIdFromName("a"), MachineIdFromName("b"));
}

TEST(MachineIdentityPacketsTest, SystemInfoNamesTheMachineAndEveryServicePacketCarriesItsId) {
  const MachineIdentity m{"db-1", 0x3d1219c7, "boot", "/etc/machine-id"};
  const trace::TracePacket info = SystemInfoPacket(m);
  EXPECT_EQ(info.system_info().machine_name(), "db-1");
  EXPECT_EQ(info.system_info().boot_id(), "boot");
  EXPECT_EQ(info.system_info().machine_id_source(), "/etc/machine-id");
  std::string framed;
  AppendServicePacket(info, m.id, &framed);
  trace::Trace t;
  ASSERT_TRUE(t.ParseFromString(framed));
  ASSERT_EQ(t.packet_size(), 1);
  EXPECT_EQ(t.packet(0).machine_id(), 0x3d1219c7u);
}

}  // namespace
}  // namespace ringside::agent
