#include "base/owner_thread.h"

#include <thread>

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

TEST(OwnerThreadTest, TheFirstUserOwnsItAndMayUseItAgain) {
  base::OwnerThread owner("the test's state");
  owner.Check();
  owner.Check();
}

TEST(OwnerThreadTest, AThreadThatClaimedItOwnsItAndHandsItBackAfterTheJoin) {
  base::OwnerThread owner("the test's state");
  owner.Check();  // Main first, as a source's Start() does.
  std::thread reader([&] {
    owner.Claim();
    owner.Check();
  });
  reader.join();
  owner.Claim();  // As Stop() does after the join.
  owner.Check();
}

TEST(OwnerThreadDeathTest, UseAfterAnotherThreadClaimedItStopsTheProcessNamingTheState) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        base::OwnerThread owner("BpfDataSource's reader state");
        std::thread reader([&] { owner.Claim(); });
        reader.join();
        owner.Check();  // Main, without claiming it back.
      },
      "internal error: BpfDataSource's reader state used on thread .*, owned by thread");
}

TEST(OwnerThreadDeathTest, UseFromASecondThreadStopsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        base::OwnerThread owner("a stream's write side");
        owner.Check();  // Main claims it by using it.
        std::thread other([&] { owner.Check(); });
        other.join();
      },
      "a stream's write side used on thread");
}

}  // namespace
}  // namespace ringside::agent
