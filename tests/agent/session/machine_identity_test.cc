#include "agent/session/machine_identity.h"

#include <sys/stat.h>
#include <sys/utsname.h>

#include <fstream>
#include <string>

#include "agent/session/service_packets.h"
#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"
#include "ringside/trace/trace_packet.pb.h"
#include "tests/agent/testing/control_peer.h"

namespace ringside::agent {
namespace {

// A machine's /etc and /proc in a scratch directory.
class MachineIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(mkdir(dir_.Join("etc").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(dir_.Join("proc").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(dir_.Join("proc/sys").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(dir_.Join("proc/sys/kernel").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(dir_.Join("proc/sys/kernel/random").c_str(), 0755), 0);
  }
  void Write(const std::string& path, const std::string& text) {
    std::ofstream(dir_.Join(path)) << text;
  }
  testing::ScratchDir dir_;
};

// What `head -c8 /etc/machine-id` shows: the same id on every boot, for
// every file of the machine.
TEST_F(MachineIdentityTest, TheIdIsTheFirst32BitsOfEtcMachineId) {
  Write("etc/machine-id", "3d1219c7a0b1c2d3e4f5061728394a5b\n");
  Write("proc/sys/kernel/random/boot_id", "2b80db8d-68fb-4d46-8582-629db27d8174\n");
  const MachineIdentity m = ReadMachineIdentity("db-1", dir_.path());
  EXPECT_EQ(m.id, 0x3d1219c7u);
  EXPECT_EQ(m.id_source, "/etc/machine-id");
  EXPECT_EQ(m.name, "db-1");
  EXPECT_EQ(m.boot_id, "2b80db8d-68fb-4d46-8582-629db27d8174");
}

TEST_F(MachineIdentityTest, WithoutAMachineIdFileTheIdIsAHashOfTheName) {
  const MachineIdentity m = ReadMachineIdentity("db-1", dir_.path());
  EXPECT_EQ(m.id, MachineIdFromName("db-1"));
  EXPECT_NE(m.id, MachineIdFromName("db-2"));
  EXPECT_EQ(m.id_source, "machine_name");
  EXPECT_EQ(m.boot_id, "");
}

TEST_F(MachineIdentityTest, WithoutAConfiguredNameItIsTheHostName) {
  utsname u;
  ASSERT_EQ(uname(&u), 0);
  EXPECT_EQ(ReadMachineIdentity("", dir_.path()).name, u.nodename);
}

// An id of 0 would be the importer's own host: never given.
TEST(MachineIdTest, NeverZeroAndOnlyFromAWellFormedMachineId) {
  EXPECT_EQ(MachineIdFromMachineIdFile("00000000"
                                       "0badcafe"
                                       "0123456789abcdef"),
            0x0badcafeu);
  EXPECT_EQ(MachineIdFromMachineIdFile(std::string(32, '0')), 0u);
  EXPECT_EQ(MachineIdFromMachineIdFile("uninitialized"), 0u);  // systemd's first boot.
  EXPECT_EQ(MachineIdFromMachineIdFile("3d1219c7"), 0u);
  EXPECT_EQ(MachineIdFromMachineIdFile("3d1219c7a0b1c2d3e4f5061728394a5z"), 0u);
  EXPECT_EQ(MachineIdFromMachineIdFile(""), 0u);
  EXPECT_NE(MachineIdFromName(""), 0u);
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
