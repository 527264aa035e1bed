#include "agent/sources/told_tasks.h"

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

// A task is told of once; once it leaves (its exit), the same id is a new
// task to tell of, even when other ids that share its place in the front
// come and go in between.
TEST(ToldTasksTest, ATaskIsNewOnceAndAgainOnlyAfterItLeaves) {
  ToldTasks told;
  EXPECT_TRUE(told.Insert(7));
  EXPECT_FALSE(told.Insert(7));
  // 7 + 1024 and 7 + 2048 share 7's place in the front.
  EXPECT_TRUE(told.Insert(7 + 1024));
  EXPECT_FALSE(told.Insert(7));  // Still told, though the front now holds another.
  EXPECT_TRUE(told.Insert(7 + 2048));
  told.Erase(7 + 1024);
  EXPECT_FALSE(told.Insert(7 + 2048));
  EXPECT_FALSE(told.Insert(7));
  EXPECT_TRUE(told.Insert(7 + 1024));  // Left, so new again.
  told.Erase(7);
  EXPECT_TRUE(told.Insert(7));
  EXPECT_FALSE(told.Insert(7));
  told.Erase(7);  // While the front holds it.
  EXPECT_TRUE(told.Insert(7));
  EXPECT_EQ(told.size(), 3u);
}

TEST(ToldTasksTest, ClearForgetsEveryTask) {
  ToldTasks told;
  for (int32_t tid = 1; tid <= 3000; tid++) EXPECT_TRUE(told.Insert(tid));
  EXPECT_EQ(told.size(), 3000u);
  told.Clear();
  EXPECT_EQ(told.size(), 0u);
  for (int32_t tid = 1; tid <= 3000; tid++) EXPECT_TRUE(told.Insert(tid)) << tid;
}

}  // namespace
}  // namespace ringside::agent
