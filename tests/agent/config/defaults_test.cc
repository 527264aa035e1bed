#include "agent/config/defaults.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "agent/config/config_loader.h"
#include "buffer/chunk_abi.h"
#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

constexpr size_t kChunk = buffer::kMinChunkSize;

// The staging memory one CPU count takes, in KiB: BPF rings, ftrace
// buffers and the two sources' chunk pools of the default config.
uint64_t StagingKb(uint64_t budget_kb, int cpus) {
  const StagingShares s =
      StagingSharesFor(budget_kb, cpus, FtraceShare::kBesideBpfScheduling, kChunk);
  return uint64_t{s.bpf_ring_kb} * static_cast<uint64_t>(cpus) +
         uint64_t{s.ftrace_buffer_kb} * static_cast<uint64_t>(cpus) +
         2 * uint64_t{s.chunk_pool_chunks} * kChunk / 1024;
}

TEST(StagingSharesTest, SmallMachinesKeepTheSizesOfBefore) {
  // 2 MiB ftrace buffers per CPU and 1 MiB chunk pools: what a fixed size
  // per CPU gave. BPF rings: 8 MiB on one or two CPUs, 4 MiB on four.
  for (int cpus : {1, 2, 4}) {
    const StagingShares s =
        StagingSharesFor(kDefaultStagingBudgetKb, cpus, FtraceShare::kBesideBpfScheduling, kChunk);
    EXPECT_EQ(s.bpf_ring_kb, cpus <= 2 ? 8192u : 4096u) << cpus << " CPUs";
    EXPECT_EQ(s.ftrace_buffer_kb, 2048u) << cpus << " CPUs";
    EXPECT_EQ(s.chunk_pool_chunks, 256u) << cpus << " CPUs";
  }
}

TEST(StagingSharesTest, TheBpfRingsTakeTheSameFromTwoCpusToTwoHundredFiftySix) {
  // The agent's memory must not grow with the machine's CPUs (issue 57):
  // the BPF rings, counted in its cgroup and its own pages, are the default
  // budget's half whatever the CPU count, until the floor.
  for (int cpus : {2, 4, 8, 16, 32, 64, 128, 256}) {
    const StagingShares s =
        StagingSharesFor(kDefaultStagingBudgetKb, cpus, FtraceShare::kBesideBpfScheduling, kChunk);
    EXPECT_EQ(uint64_t{s.bpf_ring_kb} * static_cast<uint64_t>(cpus), kDefaultStagingBudgetKb / 2)
        << cpus << " CPUs";
  }
}

TEST(StagingSharesTest, TheBudgetHoldsUpToTheFloors) {
  // The memory stays within the budget while every share is above its
  // floor, whatever the CPU count.
  for (int cpus : {1, 2, 3, 6, 8, 16, 24, 32, 48, 64}) {
    EXPECT_LE(StagingKb(kDefaultStagingBudgetKb, cpus), kDefaultStagingBudgetKb) << cpus << " CPUs";
  }
  // At 96 CPUs: 128 KiB rings (a power of two, rounded down), 85 KiB
  // ftrace buffers rounded down to pages.
  const StagingShares s96 =
      StagingSharesFor(kDefaultStagingBudgetKb, 96, FtraceShare::kBesideBpfScheduling, kChunk);
  EXPECT_EQ(s96.bpf_ring_kb, 128u);
  EXPECT_EQ(s96.ftrace_buffer_kb, 84u);
  EXPECT_EQ(s96.chunk_pool_chunks, 4u * 96);
}

TEST(StagingSharesTest, FloorsBoundEachCpusShare) {
  const StagingShares s =
      StagingSharesFor(kDefaultStagingBudgetKb, 1024, FtraceShare::kBesideBpfScheduling, kChunk);
  EXPECT_EQ(s.bpf_ring_kb, kMinBpfRingSizeKb);
  EXPECT_EQ(s.ftrace_buffer_kb, kMinFtraceBufferSizeKb);
  EXPECT_EQ(s.chunk_pool_chunks, 4u * 1024) << "each CPU's writer keeps a chunk open";
  // 256 CPUs, the largest machine the README's formula is given for.
  EXPECT_LE(StagingKb(kDefaultStagingBudgetKb, 256), 40u * 1024);
}

TEST(StagingSharesTest, FtraceTakesWhatTheBpfRingsLeave) {
  const auto ftrace_kb = [](int cpus, FtraceShare share) {
    return StagingSharesFor(kDefaultStagingBudgetKb, cpus, share, kChunk).ftrace_buffer_kb;
  };
  EXPECT_EQ(ftrace_kb(32, FtraceShare::kBesideBpfScheduling), 256u);
  EXPECT_EQ(ftrace_kb(32, FtraceShare::kBesideBpf), 512u);
  EXPECT_EQ(ftrace_kb(32, FtraceShare::kAlone), 768u);
  EXPECT_EQ(ftrace_kb(2, FtraceShare::kAlone), kMaxDefaultFtraceAloneBufferSizeKb);
  // Rings and ftrace buffers together stay within the budget in every
  // case (the chunk pools come on top).
  for (int cpus : {2, 16, 64}) {
    const StagingShares s =
        StagingSharesFor(kDefaultStagingBudgetKb, cpus, FtraceShare::kBesideBpf, kChunk);
    EXPECT_LE((uint64_t{s.bpf_ring_kb} + s.ftrace_buffer_kb) * static_cast<uint64_t>(cpus),
              kDefaultStagingBudgetKb)
        << cpus << " CPUs";
  }
}

TEST(StagingSharesTest, TheConfigSaysWhichShareFtraceGets) {
  config::TraceConfig cfg;
  EXPECT_EQ(FtraceShareOf(cfg), FtraceShare::kAlone);
  config::DataSourceConfig* bpf = cfg.add_data_sources()->mutable_config();
  bpf->set_name("linux.bpf");
  EXPECT_EQ(FtraceShareOf(cfg), FtraceShare::kBesideBpfScheduling) << "sched is on by default";
  bpf->mutable_bpf_config()->set_sched(false);
  EXPECT_EQ(FtraceShareOf(cfg), FtraceShare::kBesideBpf);
}

TEST(StagingSharesTest, RingsArePowersOfTwo) {
  for (uint64_t budget : {kMinStagingBudgetKb, uint64_t{5000}, uint64_t{32768}, uint64_t{100000}}) {
    for (int cpus : {1, 3, 7, 12, 100}) {
      const uint32_t ring =
          StagingSharesFor(budget, cpus, FtraceShare::kBesideBpfScheduling, kChunk).bpf_ring_kb;
      EXPECT_EQ(ring & (ring - 1), 0u) << budget << " KiB on " << cpus << " CPUs: " << ring;
      EXPECT_GE(ring, kMinBpfRingSizeKb);
      EXPECT_LE(ring, kMaxDefaultBpfRingSizeKb);
    }
  }
}

TEST(StagingSharesTest, TheEffectiveConfigStatesTheSharesAndKeepsExplicitSizes) {
  config::TraceConfig cfg;
  cfg.add_buffers()->set_size_kb(1024);
  cfg.add_data_sources()->mutable_config()->set_name("linux.bpf");
  auto* f = cfg.add_data_sources()->mutable_config();
  f->set_name("linux.ftrace");
  f->mutable_ftrace_config()->add_ftrace_events("power/cpu_idle");
  config::TraceConfig a = cfg;
  ApplyDefaults(&a, 64);
  EXPECT_EQ(a.staging_budget_kb(), kDefaultStagingBudgetKb);
  EXPECT_EQ(a.data_sources(0).config().bpf_config().ring_size_kb(), 256u);
  EXPECT_EQ(a.data_sources(1).config().ftrace_config().buffer_size_kb(), 128u);

  config::TraceConfig b = cfg;
  b.set_staging_budget_kb(8192);
  b.mutable_data_sources(1)->mutable_config()->mutable_ftrace_config()->set_buffer_size_kb(1000);
  ApplyDefaults(&b, 64);
  EXPECT_EQ(b.data_sources(0).config().bpf_config().ring_size_kb(), 64u);
  EXPECT_EQ(b.data_sources(1).config().ftrace_config().buffer_size_kb(), 1000u)
      << "an explicit per-CPU size is the user's";
  // Applying again changes nothing.
  config::TraceConfig again = b;
  ApplyDefaults(&again, 64);
  EXPECT_EQ(again.SerializeAsString(), b.SerializeAsString());
}

TEST(StagingSharesTest, ABudgetOutOfBoundsIsRefusedNamingTheField) {
  for (const char* value : {"0", "512", "5000000"}) {
    const absl::StatusOr<config::TraceConfig> cfg = ParseConfig(
        absl::StrCat("buffers { size_kb: 1024 }\nstaging_budget_kb: ", value, "\n"), "s.pbtxt");
    ASSERT_FALSE(cfg.ok()) << value;
    EXPECT_NE(cfg.status().message().find("s.pbtxt: line 2"), std::string::npos) << cfg.status();
    EXPECT_NE(cfg.status().message().find("staging_budget_kb is"), std::string::npos)
        << cfg.status();
  }
  EXPECT_TRUE(ParseConfig("buffers { size_kb: 1024 }\nstaging_budget_kb: 1024\n", "s.pbtxt").ok());
}

}  // namespace
}  // namespace ringside::agent
