#include "base/wakeable_epoll.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <thread>

#include "gtest/gtest.h"

namespace ringside::base {
namespace {

TEST(WakeableEpollTest, AWakeFromAnotherThreadEndsTheWaitWithItsToken) {
  absl::StatusOr<WakeableEpoll> w = WakeableEpoll::Make();
  ASSERT_TRUE(w.ok()) << w.status();
  std::thread waker([&] { w->Wake(); });
  epoll_event ev{};
  ASSERT_EQ(epoll_wait(w->epoll.get(), &ev, 1, 10000), 1);
  EXPECT_EQ(ev.data.u64, WakeableEpoll::kWakeToken);
  waker.join();
}

TEST(WakeableEpollTest, AnAddedFdComesWithItsOwnData) {
  absl::StatusOr<WakeableEpoll> w = WakeableEpoll::Make();
  ASSERT_TRUE(w.ok()) << w.status();
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  ASSERT_TRUE(w->Add(p[0], EPOLLIN, 7).ok());
  ASSERT_EQ(write(p[1], "x", 1), 1);
  epoll_event ev{};
  ASSERT_EQ(epoll_wait(w->epoll.get(), &ev, 1, 10000), 1);
  EXPECT_EQ(ev.data.u64, 7u);
  EXPECT_FALSE(w->Add(-1, EPOLLIN, 8).ok());
  close(p[0]);
  close(p[1]);
}

}  // namespace
}  // namespace ringside::base
