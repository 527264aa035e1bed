#include "agent/sources/compact_sched.h"

#include <cstring>

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

using Comm = char[CommInterner::kCommBytes];

TEST(CommInternerTest, ARecordsCommIsInternedOnceAndNamedUpToItsNul) {
  CommInterner interned;
  Comm a = "storm-pipe", b = "swapper/0";
  const uint32_t ia = interned.Intern(a);
  const uint32_t ib = interned.Intern(b);
  EXPECT_NE(ia, ib);
  EXPECT_EQ(interned.Intern(a), ia);
  EXPECT_EQ(interned.Intern(b), ib);
  EXPECT_EQ(interned.Intern(a), ia);
  ASSERT_EQ(interned.size(), 2u);
  EXPECT_EQ(interned[ia], "storm-pipe");
  EXPECT_EQ(interned[ib], "swapper/0");
}

TEST(CommInternerTest, BytesAfterTheNulNeverReachTheName) {
  // Kernels before strscpy_pad left the old name's tail after the NUL.
  CommInterner interned;
  Comm padded = "cat", unpadded;
  std::memcpy(unpadded, "cat\0ld-name-tail", sizeof(unpadded));
  const uint32_t i = interned.Intern(padded);
  const uint32_t j = interned.Intern(unpadded);
  EXPECT_EQ(interned[i], "cat");
  EXPECT_EQ(interned[j], "cat");
  EXPECT_EQ(interned.Intern(unpadded), j);
}

TEST(CommInternerTest, AnEmptyNameAndAFullSixteenByteOneAreInternedOnceEach) {
  CommInterner interned;
  Comm empty = {}, full;
  std::memcpy(full, "0123456789abcdef", sizeof(full));  // No NUL at all.
  const uint32_t e = interned.Intern(empty);
  EXPECT_EQ(interned.Intern(empty), e);
  const uint32_t f = interned.Intern(full);
  EXPECT_EQ(interned.Intern(full), f);
  ASSERT_EQ(interned.size(), 2u);
  EXPECT_EQ(interned[e], "");
  EXPECT_EQ(interned[f], "0123456789abcdef");
}

TEST(CommInternerTest, ClearStartsANewTableAndStringsAreFoundByText) {
  CommInterner interned;
  Comm a = "a", b = "b";
  interned.Intern(a);
  interned.Intern(b);
  interned.Clear();
  EXPECT_EQ(interned.size(), 0u);
  EXPECT_EQ(interned.Intern(b), 0u);  // Not the index it had before.
  EXPECT_EQ(interned[0], "b");
  EXPECT_EQ(interned.Intern(absl::string_view("kworker/0:1")), 1u);
  EXPECT_EQ(interned.Intern(absl::string_view("kworker/0:1")), 1u);
  EXPECT_EQ(interned.Intern(absl::string_view("b")), 0u);
}

}  // namespace
}  // namespace ringside::agent
