#include "agent/descriptors/container_identity.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

const std::string kId = "3f4b1c2d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809";
const std::string kUid = "0c7e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b";
const std::string kUidSystemd = "0c7e1a2b_3c4d_4e5f_8a9b_0c1d2e3f4a5b";

struct Case {
  std::string name;
  std::string path;
  std::string container_id;
  std::string pod_uid;
  std::string runtime;
};

std::vector<Case> Cases() {
  const std::string upper = absl::StrCat("3F4B", kId.substr(4));
  return {
      {"DockerCgroupfs", "/docker/" + kId, kId, "", "docker"},
      {"DockerSystemd", "/system.slice/docker-" + kId + ".scope", kId, "", "docker"},
      {"ContainerdSystemdBurstable",
       "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidSystemd +
           ".slice/cri-containerd-" + kId + ".scope",
       kId, kUid, "containerd"},
      {"ContainerdSystemdBesteffort",
       "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + kUidSystemd +
           ".slice/cri-containerd-" + kId + ".scope",
       kId, kUid, "containerd"},
      {"ContainerdSystemdGuaranteed",
       "/kubepods.slice/kubepods-pod" + kUidSystemd + ".slice/cri-containerd-" + kId + ".scope",
       kId, kUid, "containerd"},
      {"ContainerdCgroupfsBurstable", "/kubepods/burstable/pod" + kUid + "/" + kId, kId, kUid, ""},
      {"ContainerdCgroupfsBesteffort", "/kubepods/besteffort/pod" + kUid + "/" + kId, kId, kUid,
       ""},
      {"ContainerdCgroupfsGuaranteed", "/kubepods/pod" + kUid + "/" + kId, kId, kUid, ""},
      {"ContainerdSystemdNamesInCgroupfsLayout",
       "/system.slice/containerd.service/kubepods-burstable-pod" + kUidSystemd +
           ".slice:cri-containerd:" + kId,
       kId, kUid, "containerd"},
      {"CrioScope",
       "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidSystemd +
           ".slice/crio-" + kId + ".scope",
       kId, kUid, "cri-o"},
      {"CrioConmonIsNotTheContainer",
       "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidSystemd +
           ".slice/crio-conmon-" + kId + ".scope",
       "", kUid, ""},
      {"Podman",
       "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + kId + ".scope", kId, "",
       "podman"},
      {"PodmanConmonIsNotTheContainer", "/machine.slice/libpod-conmon-" + kId + ".scope", "", "",
       ""},
      {"SubCgroupOfAContainer", "/system.slice/docker-" + kId + ".scope/init.scope", kId, "",
       "docker"},
      {"DeepestContainerWins", "/docker/" + std::string(64, 'a') + "/docker/" + kId, kId, "",
       "docker"},
      {"PodSliceWithoutContainer",
       "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidSystemd + ".slice",
       "", kUid, ""},
      {"HostService", "/system.slice/sshd.service", "", "", ""},
      {"Root", "/", "", "", ""},
      {"Empty", "", "", "", ""},
      {"IdTooShort", "/docker/" + kId.substr(1), "", "", ""},
      {"IdTooLong", "/docker/" + kId + "0", "", "", ""},
      {"IdUppercase", "/docker/" + upper, "", "", ""},
      {"IdNotHex", "/system.slice/docker-" + std::string(63, 'a') + "g.scope", "", "", ""},
      {"ScopeOfAnotherKind", "/system.slice/session-" + kId + ".scope", "", "", ""},
      {"PodUidWithDashesInASlice",
       "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUid + ".slice", "", "",
       ""},
      {"PodDirOutsideKubepods", "/mine/pod" + kUid + "/x", "", "", ""},
      {"PodUidBadGroup", "/kubepods/pod0c7e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5/" + kId, kId, "", ""},
      {"ColonFormWrongPrefix", "/x/kubepods-pod" + kUidSystemd + ".slice:runc:" + kId, "", kUid,
       ""},
      {"NulAndSlashes", std::string("/docker/\0/", 10) + kId + "//", kId, "", ""},
  };
}

class ContainerIdentityTest : public ::testing::TestWithParam<Case> {};

TEST_P(ContainerIdentityTest, ParsesPath) {
  const Case& c = GetParam();
  const ContainerIdentity got = ParseContainerIdentity(c.path);
  EXPECT_EQ(got.container_id, c.container_id) << c.path;
  EXPECT_EQ(got.pod_uid, c.pod_uid) << c.path;
  EXPECT_EQ(got.runtime, c.runtime) << c.path;
}

INSTANTIATE_TEST_SUITE_P(Paths, ContainerIdentityTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

TEST(ContainerIdentityFunctionsTest, ShortIdIsTwelveDigits) {
  EXPECT_EQ(ShortContainerId(kId), kId.substr(0, 12));
  EXPECT_EQ(ShortContainerId("abc"), "abc");
}

TEST(ContainerIdentityFunctionsTest, AnyBytesAreSafe) {
  // Every prefix of a long path, and every byte value in a component.
  const std::string path = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                           kUidSystemd + ".slice/cri-containerd-" + kId + ".scope";
  for (size_t n = 0; n <= path.size(); n++) ParseContainerIdentity(path.substr(0, n));
  for (int b = 0; b < 256; b++) {
    std::string id = kId;
    id[10] = static_cast<char>(b);
    const ContainerIdentity got = ParseContainerIdentity("/docker/" + id);
    EXPECT_EQ(got.container_id.empty(), !((b >= '0' && b <= '9') || (b >= 'a' && b <= 'f'))) << b;
  }
}

}  // namespace
}  // namespace ringside::agent
