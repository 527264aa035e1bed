#include "agent/sources/stack_figures.h"

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

TEST(StackFiguresTest, AReportIsWhatWasPublishedLast) {
  StackFigures figures;
  EXPECT_TRUE(figures.Report(bpf::StackMaps(), 0).recorded)
      << "a source that records stacks, before any batch";
  EXPECT_EQ(figures.Report(bpf::StackMaps(), 0).blocked_samples, 0u);
  StackSampleWriter::Stats st;
  st.samples = 12;
  st.blocked_samples = 9;
  st.cpu_samples = 3;
  st.frames_named = 40;
  st.frames_unnamed = 2;
  st.callstacks = 7;
  st.interned_bytes = 900;
  st.generations = 2;
  st.remembered_stacks = 8;
  st.stacks_unreadable = 1;
  UserSymbolizerStats user;
  user.frames_unmapped = 30;
  user.maps_reads = 4;
  user.maps_unreadable = 1;
  user.mappings_unreadable = 2;
  user.processes_evicted = 3;
  figures.Publish(st, user, 5000, 600);
  const DataSource::StackReport r = figures.Report(bpf::StackMaps(), 0);
  EXPECT_EQ(r.blocked_samples, 9u);
  EXPECT_EQ(r.cpu_samples, 3u);
  EXPECT_EQ(r.frames_named, 40u);
  EXPECT_EQ(r.frames_unnamed, 2u);
  EXPECT_EQ(r.callstacks, 7u);
  EXPECT_EQ(r.interned_bytes, 900u);
  EXPECT_EQ(r.generations, 2u);
  EXPECT_EQ(r.remembered_stacks, 8u);
  EXPECT_EQ(r.symbol_bytes, 5000u);
  EXPECT_EQ(r.interning_bytes, 600u);
  EXPECT_EQ(figures.stacks_unreadable(), 1u);
  EXPECT_EQ(r.user_frames_unmapped, 30u);
  EXPECT_EQ(r.maps_reads, 4u);
  EXPECT_EQ(r.maps_unreadable, 1u);
  EXPECT_EQ(r.binaries_unreadable, 2u);
  EXPECT_EQ(r.processes_evicted, 3u);
}

}  // namespace
}  // namespace ringside::agent
