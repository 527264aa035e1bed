#include "agent/sources/cgroup_selector.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

const std::string kA = "3f4b1c2d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809";
const std::string kB = "3f4b1c2d5e6f000000000000000000000000000000000000000000000000beef";
const std::string kC = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

// A hierarchy of a node: path -> id.
const std::map<std::string, uint64_t>& Tree() {
  static const auto* tree = new std::map<std::string, uint64_t>{
      {"/", 1},
      {"/system.slice", 2},
      {"/system.slice/nginx.service", 3},
      {"/system.slice/docker-" + kA + ".scope", 10},
      {"/system.slice/docker-" + kA + ".scope/init.scope", 11},
      {"/system.slice/docker-" + kB + ".scope", 20},
      {"/kubepods/besteffort/pod0c7e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b/" + kC, 30},
  };
  return *tree;
}

CgroupSelector::Selection Select(const CgroupSelector& s) {
  return s.Select(
      [](const std::function<void(const std::string&, uint64_t)>& visit) {
        for (const auto& [path, id] : Tree()) visit(path, id);
      },
      [](const std::string& path) -> std::optional<uint64_t> {
        auto it = Tree().find(path);
        if (it == Tree().end()) return std::nullopt;
        return it->second;
      });
}

TEST(CgroupSelectorTest, AFullIdSelectsTheContainerAndItsSubCgroups) {
  const auto got = Select(CgroupSelector({kA}, {}, 256));
  EXPECT_EQ(got.cgroup_ids, (std::vector<uint64_t>{10, 11}));
  EXPECT_TRUE(got.unmatched.empty());
  EXPECT_FALSE(got.truncated);
}

TEST(CgroupSelectorTest, APrefixSelectsEveryContainerItStarts) {
  EXPECT_EQ(Select(CgroupSelector({kA.substr(0, 12)}, {}, 256)).cgroup_ids,
            (std::vector<uint64_t>{10, 11, 20}));
  EXPECT_EQ(Select(CgroupSelector({kC.substr(0, 20)}, {}, 256)).cgroup_ids,
            (std::vector<uint64_t>{30}));
}

TEST(CgroupSelectorTest, APathSelectsThatCgroupOnly) {
  EXPECT_EQ(Select(CgroupSelector({}, {"/system.slice"}, 256)).cgroup_ids,
            (std::vector<uint64_t>{2}));
}

TEST(CgroupSelectorTest, ValuesThatNameNothingAreListedInConfigOrder) {
  const auto got = Select(CgroupSelector({"dddddddddddd", kC}, {"/nope", "/system.slice"}, 256));
  EXPECT_EQ(got.cgroup_ids, (std::vector<uint64_t>{2, 30}));
  EXPECT_EQ(got.unmatched, (std::vector<std::string>{"dddddddddddd", "/nope"}));
}

TEST(CgroupSelectorTest, MoreMatchesThanTheFilterHoldsAreCut) {
  const auto got = Select(CgroupSelector({kA.substr(0, 12)}, {"/"}, 2));
  EXPECT_EQ(got.cgroup_ids, (std::vector<uint64_t>{1, 10}));
  EXPECT_TRUE(got.truncated);
}

}  // namespace
}  // namespace ringside::agent
