// deploy/systemd/ringside.service: systemd accepts it as installed, and it
// gives the agent what the agent's defaults need, no more.

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/config/config_loader.h"
#include "agent/config/defaults.h"
#include "buffer/chunk_abi.h"
#include "gtest/gtest.h"
#include "tests/deploy/testing/deploy_files.h"

namespace ringside::deploy_testing {
namespace {

std::string UnitTemplate() { return ReadFile(SourceDir() + "/deploy/systemd/ringside.service"); }

std::string OnlyValue(const std::string& unit, const std::string& key) {
  const std::vector<std::string> values = UnitValues(unit, key);
  EXPECT_EQ(values.size(), 1u) << key;
  return values.empty() ? "" : values.back();
}

std::set<std::string> Words(const std::string& value) {
  std::set<std::string> words;
  for (absl::string_view w : absl::StrSplit(value, ' ', absl::SkipEmpty())) words.emplace(w);
  return words;
}

// Every word of every `key=` line of `unit`.
std::set<std::string> AllWords(const std::string& unit, const std::string& key) {
  std::set<std::string> words;
  for (const std::string& v : UnitValues(unit, key)) words.merge(Words(v));
  return words;
}

// The drop-in docs/metrics.md gives for metrics_listen: the commented lines
// from "# [Service]" on in its section on HTTP, uncommented.
std::string MetricsDropIn() {
  const std::string doc = ReadFile(SourceDir() + "/docs/metrics.md");
  const size_t section = doc.find("## HTTP");
  const size_t at = section == std::string::npos ? section : doc.find("# [Service]", section);
  std::string dropin;
  if (at == std::string::npos) return dropin;
  for (absl::string_view line : absl::StrSplit(doc.substr(at), '\n')) {
    if (!absl::ConsumePrefix(&line, "# ")) break;
    absl::StrAppend(&dropin, line, "\n");
  }
  return dropin;
}

// `systemd-analyze verify` on a unit installed into a DESTDIR: systemd
// checks that ExecStart= names an executable, which is under the DESTDIR
// until the package lands. The copy it checks differs from the installed
// unit in that path only (--root= would also move /bin/kill and the
// system's targets out of its sight).
class UnitVerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveProgram("systemd-analyze")) GTEST_SKIP() << "systemd-analyze is not installed";
    if (RunShell(absl::StrCat("make -q BUILD=", BuildDir(), " ", BuildDir(), "/ringside"))
            .exit_code != 0) {
      GTEST_SKIP() << BuildDir() << "/ringside is not up to date: run make first";
    }
    const CommandResult r =
        RunShell(absl::StrCat("make --no-print-directory install BUILD=", BuildDir(),
                              " PREFIX=/usr DESTDIR=", dest_.path()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    installed_ = ReadFile(dest_.path() + "/usr/lib/systemd/system/ringside.service");
  }

  // The installed unit with ExecStart pointing into the DESTDIR, written to
  // a directory of its own; its path.
  std::string CheckableCopy(const std::string& unit) {
    const std::string from = "ExecStart=/usr/bin/ringside ";
    const std::string to = absl::StrCat("ExecStart=", dest_.path(), "/usr/bin/ringside ");
    EXPECT_EQ(absl::StrReplaceAll(unit, {{from, to}}).size() - unit.size(), to.size() - from.size())
        << "exactly one ExecStart= line names the binary";
    const std::string path = unit_dir_.path() + "/ringside.service";
    WriteFile(path, absl::StrReplaceAll(unit, {{from, to}}));
    return path;
  }

  TempDir dest_;
  TempDir unit_dir_;
  std::string installed_;
};

TEST_F(UnitVerifyTest, InstalledUnitPassesSystemdAnalyzeVerify) {
  const CommandResult r = RunShell("systemd-analyze verify " + CheckableCopy(installed_));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(absl::StrContains(r.output, "ringside.service")) << r.output;
}

// The shipping units (deploy/shipping/), installed beside the agent's.
TEST_F(UnitVerifyTest, InstalledShippingUnitsPassSystemdAnalyzeVerify) {
  const std::string from = "ExecStart=/usr/lib/ringside/ringside-ship ";
  const std::string to =
      absl::StrCat("ExecStart=", dest_.path(), "/usr/lib/ringside/ringside-ship ");
  const std::string unit = ReadFile(dest_.path() + "/usr/lib/systemd/system/ringside-ship.service");
  ASSERT_TRUE(absl::StrContains(unit, from)) << unit;
  WriteFile(unit_dir_.path() + "/ringside-ship.service", absl::StrReplaceAll(unit, {{from, to}}));
  WriteFile(unit_dir_.path() + "/ringside-ship.timer",
            ReadFile(dest_.path() + "/usr/lib/systemd/system/ringside-ship.timer"));
  const CommandResult r =
      RunShell(absl::StrCat("systemd-analyze verify ", unit_dir_.path(), "/ringside-ship.service ",
                            unit_dir_.path(), "/ringside-ship.timer"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(absl::StrContains(r.output, "ringside-ship")) << r.output;
}

TEST(ShippingUnitTest, ShipsFromTheAgentsDefaultOutputDirAndNothingElseIsWritable) {
  const std::string unit = ReadFile(SourceDir() + "/deploy/shipping/ringside-ship.service");
  const std::string output_dir = agent::DefaultAgentConfig().output_dir();
  EXPECT_EQ(OnlyValue(unit, "ExecStart"), absl::StrCat("@SHIPDIR@/ringside-ship ", output_dir,
                                                       " ${RINGSIDE_SHIP_TO} --log-level NOTICE"));
  EXPECT_EQ(OnlyValue(unit, "ProtectSystem"), "strict");
  EXPECT_EQ(UnitValues(unit, "ReadWritePaths"), std::vector<std::string>{output_dir});
  EXPECT_EQ(OnlyValue(unit, "Type"), "oneshot");
}

// The agent's unit with docs/metrics.md's drop-in for metrics_listen, as
// `systemctl edit` writes it: systemd takes every line of it.
TEST_F(UnitVerifyTest, MetricsDropInPassesSystemdAnalyzeVerify) {
  const std::string dropin = MetricsDropIn();
  ASSERT_TRUE(absl::StartsWith(dropin, "[Service]\n")) << dropin;
  const std::string unit = CheckableCopy(installed_);
  std::filesystem::create_directories(unit + ".d");
  WriteFile(unit + ".d/override.conf", dropin);
  const CommandResult r = RunShell(
      absl::StrCat("SYSTEMD_UNIT_PATH=", unit_dir_.path(), ": systemd-analyze verify ", unit));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(absl::StrContains(r.output, "ringside.service")) << r.output;
  // It is read: a key systemd does not know is named.
  WriteFile(unit + ".d/override.conf", dropin + "IPAdressAllow=192.0.2.1\n");
  const CommandResult typo = RunShell(
      absl::StrCat("SYSTEMD_UNIT_PATH=", unit_dir_.path(), ": systemd-analyze verify ", unit));
  EXPECT_TRUE(absl::StrContains(typo.output, "IPAdressAllow")) << typo.output;
}

// The port the drop-in opens is the scrapers' only: the unit's
// IPAddressDeny=any stays (an empty IPAddressDeny= would clear it, opening
// the agent, root, to every address), and IPAddressAllow= names addresses.
TEST(MetricsDropInTest, LetsOnlyTheScrapersAddressesThrough) {
  const std::string dropin = MetricsDropIn();
  ASSERT_FALSE(dropin.empty()) << "no drop-in in docs/metrics.md";
  EXPECT_EQ(UnitValues(UnitTemplate(), "IPAddressDeny"), std::vector<std::string>{"any"});
  EXPECT_TRUE(UnitValues(dropin, "IPAddressDeny").empty())
      << "the drop-in resets the unit's IPAddressDeny=any";
  const std::set<std::string> allowed = AllWords(dropin, "IPAddressAllow");
  EXPECT_FALSE(allowed.empty()) << dropin;
  for (const char* everyone : {"any", "0.0.0.0/0", "::/0", "link-local", "multicast"}) {
    EXPECT_EQ(allowed.count(everyone), 0u) << everyone;
  }
  EXPECT_EQ(OnlyValue(dropin, "PrivateNetwork"), "no");
  EXPECT_EQ(Words(OnlyValue(dropin, "RestrictAddressFamilies")),
            (std::set<std::string>{"AF_UNIX", "AF_INET", "AF_INET6"}));
}

// ringside-ship runs rclone, which talks to the network, as root (the
// owner of the agent's files) without capabilities: root still reads what
// root owns, so the unit hides the machine's secrets, in a mount namespace
// it cannot leave (no CAP_SYS_ADMIN), and none of what it needs.
TEST(ShippingUnitTest, HidesTheMachinesSecretsAndNothingItNeeds) {
  const std::string unit = ReadFile(SourceDir() + "/deploy/shipping/ringside-ship.service");
  std::set<std::string> hidden;
  for (const std::string& w : AllWords(unit, "InaccessiblePaths")) {
    hidden.insert(std::string(absl::StripPrefix(w, "-")));
  }
  for (const char* secret : {"/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/ssl/private",
                             "/etc/sudoers", "/etc/kubernetes", "/var/lib/kubelet"}) {
    EXPECT_EQ(hidden.count(secret), 1u) << secret << " is readable to rclone";
  }
  EXPECT_EQ(OnlyValue(unit, "ProtectHome"), "yes");  // /root, /home.
  EXPECT_EQ(OnlyValue(unit, "CapabilityBoundingSet"), "");
  EXPECT_EQ(OnlyValue(unit, "NoNewPrivileges"), "yes");
  const std::string output_dir = agent::DefaultAgentConfig().output_dir();
  for (const std::string& needed :
       {output_dir, std::string("/etc/ringside/rclone.conf"), std::string("/etc/ssl/certs"),
        std::string("/etc/resolv.conf"), std::string("/etc/hosts")}) {
    for (const std::string& h : hidden) {
      EXPECT_FALSE(needed == h || absl::StartsWith(needed, h + "/"))
          << h << " hides " << needed << ", which it needs";
    }
  }
}

TEST_F(UnitVerifyTest, VerifyCatchesABrokenUnit) {
  // The check above can fail: the same unit with a typo does not pass.
  const std::string broken = absl::StrReplaceAll(installed_, {{"Type=notify", "Type=notfy"}});
  ASSERT_NE(broken, installed_);
  const CommandResult r = RunShell("systemd-analyze verify " + CheckableCopy(broken));
  EXPECT_TRUE(r.exit_code != 0 || absl::StrContains(r.output, "notfy")) << r.output;
}

TEST(SystemdUnitTest, TalksToSystemdTheWayTheAgentDoes) {
  const std::string unit = UnitTemplate();
  EXPECT_EQ(OnlyValue(unit, "Type"), "notify");
  EXPECT_FALSE(OnlyValue(unit, "WatchdogSec").empty());
  EXPECT_EQ(OnlyValue(unit, "ExecStart"), "@BINDIR@/ringside agent -c /etc/ringside/agent.pbtxt");
  EXPECT_EQ(OnlyValue(unit, "ExecReload"), "/bin/kill -HUP $MAINPID");
  EXPECT_EQ(OnlyValue(unit, "Restart"), "on-failure");
  EXPECT_FALSE(OnlyValue(unit, "StartLimitIntervalSec").empty());
  EXPECT_FALSE(OnlyValue(unit, "StartLimitBurst").empty());
}

TEST(SystemdUnitTest, WritableDirectoriesAreTheAgentsDefaults) {
  const std::string unit = UnitTemplate();
  EXPECT_EQ(OnlyValue(unit, "ProtectSystem"), "strict");
  EXPECT_EQ(OnlyValue(unit, "StateDirectory"), "ringside");
  EXPECT_EQ(OnlyValue(unit, "RuntimeDirectory"), "ringside");
  EXPECT_EQ(OnlyValue(unit, "RuntimeDirectoryPreserve"), "no");
  EXPECT_TRUE(UnitValues(unit, "ReadWritePaths").empty());
  // What systemd makes writable is where the agent writes by default.
  const config::TraceConfig cfg = agent::DefaultAgentConfig();
  EXPECT_TRUE(absl::StartsWith(cfg.output_dir(), "/var/lib/ringside/")) << cfg.output_dir();
  EXPECT_TRUE(absl::StartsWith(cfg.control_socket(), "/run/ringside/")) << cfg.control_socket();
  EXPECT_EQ(std::string(agent::kDefaultRunDir), "/run/ringside");
}

TEST(SystemdUnitTest, KeepsOnlyTheCapabilitiesTheAgentUses) {
  const std::string unit = UnitTemplate();
  const std::set<std::string> caps = {"CAP_BPF", "CAP_PERFMON", "CAP_CHOWN"};
  EXPECT_EQ(Words(OnlyValue(unit, "CapabilityBoundingSet")), caps);
  EXPECT_EQ(Words(OnlyValue(unit, "AmbientCapabilities")), caps);
  EXPECT_EQ(OnlyValue(unit, "NoNewPrivileges"), "yes");
  EXPECT_EQ(OnlyValue(unit, "LimitMEMLOCK"), "infinity");
  // Either would stop the agent: tracefs below /sys is written, every
  // process's /proc entries are read.
  EXPECT_TRUE(UnitValues(unit, "ProtectKernelTunables").empty());
  EXPECT_TRUE(UnitValues(unit, "ProtectProc").empty());
  EXPECT_TRUE(UnitValues(unit, "ProcSubset").empty());
  EXPECT_EQ(OnlyValue(unit, "RestrictAddressFamilies"), "AF_UNIX");
}

TEST(SystemdUnitTest, MemoryMaxHoldsTheDefaultConfigOnAnyNumberOfCpus) {
  const std::string unit = UnitTemplate();
  const std::string max_value = OnlyValue(unit, "MemoryMax");
  absl::string_view max = max_value;
  ASSERT_TRUE(absl::ConsumeSuffix(&max, "M")) << "MemoryMax in M (MiB to systemd)";
  uint64_t max_mib = 0;
  ASSERT_TRUE(absl::SimpleAtoi(max, &max_mib));

  // The unit's comment: the ring and its snapshot copy, the durable store
  // and its copy, the BPF rings and the two chunk pools of the staging
  // budget's split for that many CPUs, 32 MiB for the rest.
  const config::TraceConfig cfg = agent::DefaultAgentConfig();
  ASSERT_EQ(cfg.buffers_size(), 1);
  // The default's rings are the budget's share here, not a size per CPU.
  const uint32_t here =
      agent::StagingSharesFor(cfg.staging_budget_kb(), agent::PossibleCpus(),
                              agent::FtraceShare::kBesideBpfScheduling, buffer::kMinChunkSize)
          .bpf_ring_kb;
  for (const auto& ds : cfg.data_sources()) {
    if (ds.config().name() == "linux.bpf") {
      EXPECT_EQ(ds.config().bpf_config().ring_size_kb(), here);
    }
  }
  for (int cpus : {1, 2, 16, 64, 96, 256, 1024}) {
    const agent::StagingShares s =
        agent::StagingSharesFor(cfg.staging_budget_kb(), cpus,
                                agent::FtraceShare::kBesideBpfScheduling, buffer::kMinChunkSize);
    const uint64_t need_kb =
        2 * uint64_t{cfg.buffers(0).size_kb()} + 2 * uint64_t{cfg.durable_buffer_size_kb()} +
        uint64_t{s.bpf_ring_kb} * static_cast<uint64_t>(cpus) +
        2 * uint64_t{s.chunk_pool_chunks} * buffer::kMinChunkSize / 1024 + 32 * 1024;
    EXPECT_LE(need_kb, max_mib * 1024) << "MemoryMax=" << max_mib << "M, the default needs "
                                       << need_kb / 1024 << " MiB on " << cpus << " CPUs";
  }
  EXPECT_EQ(OnlyValue(unit, "CPUQuota"), "50%");
}

}  // namespace
}  // namespace ringside::deploy_testing
