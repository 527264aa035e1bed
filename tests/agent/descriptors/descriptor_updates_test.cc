#include "agent/descriptors/descriptor_updates.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "buffer/durable_store.h"
#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

using Kind = DescriptorUpdates::Kind;

// The store's entries, as "<kind>:<id>=<packet>" in the order written.
std::vector<std::string> Entries(buffer::DurableStore& store) {
  std::vector<std::string> out;
  store.ForEach([&](Kind kind, uint64_t id, std::string_view packet) {
    out.push_back(std::to_string(static_cast<int>(kind)) + ":" + std::to_string(id) + "=" +
                  std::string(packet));
  });
  return out;
}

// Each batch holds what was queued since the last, in order, and is
// applied so; the store's ended entries are marked.
TEST(DescriptorUpdatesTest, EachBatchIsWhatWasQueuedSinceTheLastInOrder) {
  buffer::DurableStore store(1 << 20, 1 << 20);
  DescriptorUpdates updates;
  updates.Put(Kind::kProcess, 7, /*ended=*/false, "seven");
  updates.Put(Kind::kThread, 8, /*ended=*/false, "eight");
  updates.Put(Kind::kProcess, 7, /*ended=*/false, "seven again");
  DescriptorUpdates::Batch batch = updates.Take();
  EXPECT_EQ(batch.size(), 3u);
  EXPECT_EQ(updates.size(), 0u);
  updates.Put(Kind::kThread, 9, /*ended=*/true, "nine");  // While the batch is applied.
  DescriptorUpdates::Apply(&store, &batch);
  EXPECT_TRUE(batch.empty());
  updates.GiveBack(std::move(batch));
  EXPECT_EQ(Entries(store), (std::vector<std::string>{"2:8=eight", "1:7=seven again"}));

  updates.End(Kind::kThread, 8);
  batch = updates.Take();
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].packet, "nine");
  EXPECT_EQ(batch[1].op, DescriptorUpdates::Update::Op::kEnd);
  DescriptorUpdates::Apply(&store, &batch);
  updates.GiveBack(std::move(batch));
  EXPECT_EQ(Entries(store), (std::vector<std::string>{"2:8=eight", "1:7=seven again", "2:9=nine"}));
  EXPECT_TRUE(updates.Take().empty());
}

// The queue and the batch taken out of it take turns in two blocks of
// memory, both kept: once each has held the largest batch, the queue grows
// no more. A batch over kMaxKept updates is let go.
TEST(DescriptorUpdatesTest, TheMemoryOfABatchAppliedIsKeptUpToABound) {
  buffer::DurableStore store(64 << 20, 64 << 20);
  DescriptorUpdates updates;
  // Queues n updates, applies them; returns the capacity they were in.
  auto pass = [&](size_t n) {
    for (size_t i = 0; i < n; i++) updates.End(Kind::kThread, i);
    DescriptorUpdates::Batch batch = updates.Take();
    const size_t capacity = batch.capacity();
    DescriptorUpdates::Apply(&store, &batch);
    updates.GiveBack(std::move(batch));
    return capacity;
  };
  EXPECT_GE(pass(1000), 1000u);
  EXPECT_GE(pass(1000), 1000u);
  for (int i = 0; i < 4; i++) EXPECT_GE(pass(10), 1000u) << "queued into a kept block, pass " << i;
  EXPECT_GT(pass(DescriptorUpdates::kMaxKept + 1), DescriptorUpdates::kMaxKept);
  EXPECT_GE(pass(10), 1000u) << "the other block, kept meanwhile";
  EXPECT_LT(pass(10), 1000u) << "the block grown past kMaxKept was let go";
}

}  // namespace
}  // namespace ringside::agent
