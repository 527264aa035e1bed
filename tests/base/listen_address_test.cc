// base/listen_address.h: what metrics_listen accepts. Numbers only: a name
// would need a resolver at start-up and could mean another address later.
#include "base/listen_address.h"

#include <sys/socket.h>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ringside::base {
namespace {

TEST(ListenAddressTest, NumericAddressesAndPortsOnly) {
  absl::StatusOr<ListenAddress> a = ParseListenAddress("0.0.0.0:9464");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->addr.ss_family, AF_INET);
  EXPECT_EQ(a->port, 9464);
  a = ParseListenAddress("[::1]:80");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->addr.ss_family, AF_INET6);
  a = ParseListenAddress(":9464");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->any);
  for (const char* bad : {"9464", "localhost:9464", "0.0.0.0:", "0.0.0.0:65536", "0.0.0.0:-1",
                          "[::1:80", "::1:80", "1.2.3:80", "0.0.0.0:9464x", ""}) {
    EXPECT_FALSE(ParseListenAddress(bad).ok()) << bad;
  }
  EXPECT_TRUE(absl::StrContains(ParseListenAddress("localhost:9464").status().message(),
                                "names are not looked up"));
}

}  // namespace
}  // namespace ringside::base
