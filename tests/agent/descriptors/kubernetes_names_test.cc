#include "agent/descriptors/kubernetes_names.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "agent/descriptors/container_identity.h"
#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

namespace fs = std::filesystem;

constexpr char kWebUid[] = "0c7e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b";
constexpr char kDbUid[] = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a";
const std::string kNginxId(64, 'a');
const std::string kSidecarId(64, 'b');
const std::string kPostgresId(64, 'c');
const std::string kSandboxId(64, 'd');

// /var/log as the kubelet lays it out, in a directory of the test's own.
class KubeletLogs {
 public:
  KubeletLogs() {
    char dir[] = "/tmp/ringside_kubelet_logs_XXXXXX";
    root_ = mkdtemp(dir) != nullptr ? dir : "";
    fs::create_directories(root_ + "/pods");
    fs::create_directories(root_ + "/containers");
  }
  ~KubeletLogs() {
    if (!root_.empty()) fs::remove_all(root_);
  }
  const std::string& root() const { return root_; }

  // The pod's directory, and a container's log and its symlink.
  void AddPod(const std::string& ns, const std::string& pod, const std::string& uid) {
    fs::create_directories(PodDir(ns, pod, uid));
  }
  void AddContainer(const std::string& ns, const std::string& pod, const std::string& uid,
                    const std::string& name, const std::string& id) {
    const std::string log = PodDir(ns, pod, uid) + "/" + name + "/0.log";
    fs::create_directories(fs::path(log).parent_path());
    std::ofstream(log) << "";
    fs::create_symlink(log, ContainerLink(ns, pod, name, id));
  }
  void RemovePod(const std::string& ns, const std::string& pod, const std::string& uid) {
    fs::remove_all(PodDir(ns, pod, uid));
    for (const auto& e : fs::directory_iterator(root_ + "/containers")) {
      if (e.path().filename().string().rfind(pod + "_" + ns + "_", 0) == 0) fs::remove(e.path());
    }
  }
  void AddEntry(const std::string& dir, const std::string& name) {
    fs::create_directories(root_ + "/" + dir + "/" + name);
  }

 private:
  std::string PodDir(const std::string& ns, const std::string& pod, const std::string& uid) {
    return root_ + "/pods/" + ns + "_" + pod + "_" + uid;
  }
  std::string ContainerLink(const std::string& ns, const std::string& pod, const std::string& name,
                            const std::string& id) {
    return root_ + "/containers/" + pod + "_" + ns + "_" + name + "-" + id + ".log";
  }

  std::string root_;
};

ContainerIdentity Id(const std::string& pod_uid, const std::string& container_id) {
  ContainerIdentity id;
  id.pod_uid = pod_uid;
  id.container_id = container_id;
  return id;
}

// A clock the test moves.
struct FakeClock {
  int64_t now_ns = 1'000'000'000;
  std::function<int64_t()> Fn() {
    return [this] { return now_ns; };
  }
};

TEST(KubernetesNamesTest, NamesPodsAndContainersFromTheKubeletsLayout) {
  KubeletLogs logs;
  logs.AddPod("shop", "web-7d4b9", kWebUid);
  logs.AddContainer("shop", "web-7d4b9", kWebUid, "nginx", kNginxId);
  logs.AddContainer("shop", "web-7d4b9", kWebUid, "log-shipper", kSidecarId);
  logs.AddPod("payments", "db-0", kDbUid);
  logs.AddContainer("payments", "db-0", kDbUid, "postgres", kPostgresId);
  KubernetesNames names(logs.root());
  EXPECT_EQ(names.Lookup(Id(kWebUid, kNginxId)), (PodNames{"shop", "web-7d4b9", "nginx"}));
  EXPECT_EQ(names.Lookup(Id(kWebUid, kSidecarId)), (PodNames{"shop", "web-7d4b9", "log-shipper"}));
  EXPECT_EQ(names.Lookup(Id(kDbUid, kPostgresId)), (PodNames{"payments", "db-0", "postgres"}));
  // The pod's own cgroup (no container), and its sandbox (no log of it).
  EXPECT_EQ(names.Lookup(Id(kDbUid, "")), (PodNames{"payments", "db-0", ""}));
  EXPECT_EQ(names.Lookup(Id(kDbUid, kSandboxId)), (PodNames{"payments", "db-0", ""}));
  // No pod UID (a bare docker container), or a pod the node has not.
  EXPECT_EQ(names.Lookup(Id("", kNginxId)), std::nullopt);
  EXPECT_EQ(names.Lookup(Id("11111111-2222-4333-8444-555555555555", kNginxId)), std::nullopt);
  EXPECT_EQ(names.stats().pods, 2u);
  EXPECT_EQ(names.stats().containers, 3u);
}

TEST(KubernetesNamesTest, EntriesNotLaidOutByTheKubeletAreSkipped) {
  KubeletLogs logs;
  logs.AddPod("shop", "web-7d4b9", kWebUid);
  logs.AddEntry("pods", "not-a-pod");
  logs.AddEntry("pods", std::string("Upper_case_") + kDbUid);             // Not a Kubernetes name.
  logs.AddEntry("pods", "a_b_c_" + std::string(kDbUid));                  // Four parts.
  logs.AddEntry("pods", "shop_web_0c7e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5");  // A short UID.
  logs.AddEntry("containers", "web-7d4b9_shop_nginx-" + kNginxId);        // No ".log".
  logs.AddEntry("containers", "web-7d4b9_shop_nginx-" + kNginxId.substr(1) + ".log");
  logs.AddEntry("containers", "web-7d4b9_nginx-" + kNginxId + ".log");  // No namespace.
  KubernetesNames names(logs.root());
  EXPECT_EQ(names.Lookup(Id(kWebUid, kNginxId)), (PodNames{"shop", "web-7d4b9", ""}));
  EXPECT_EQ(names.stats().pods, 1u);
  EXPECT_EQ(names.stats().containers, 0u);
  EXPECT_EQ(names.stats().skipped, 7u);
}

TEST(KubernetesNamesTest, PodsThatComeAndGoAreFoundAndForgotten) {
  KubeletLogs logs;
  FakeClock clock;
  KubernetesNames names(logs.root(), clock.Fn());
  EXPECT_EQ(names.Lookup(Id(kWebUid, kNginxId)), std::nullopt);
  EXPECT_EQ(names.stats().scans, 1u);
  logs.AddPod("shop", "web-7d4b9", kWebUid);
  logs.AddContainer("shop", "web-7d4b9", kWebUid, "nginx", kNginxId);
  // A miss reads the directories again, at most once per interval.
  EXPECT_EQ(names.Lookup(Id(kWebUid, kNginxId)), std::nullopt);
  EXPECT_EQ(names.stats().scans, 1u);
  clock.now_ns += KubernetesNames::kRescanIntervalNs;
  EXPECT_EQ(names.Lookup(Id(kWebUid, kNginxId)), (PodNames{"shop", "web-7d4b9", "nginx"}));
  EXPECT_EQ(names.stats().scans, 2u);
  // Hits read nothing.
  clock.now_ns += KubernetesNames::kRescanIntervalNs;
  EXPECT_EQ(names.Lookup(Id(kWebUid, kNginxId)), (PodNames{"shop", "web-7d4b9", "nginx"}));
  EXPECT_EQ(names.stats().scans, 2u);
  // A container the kubelet names after it started: found at the next read.
  logs.AddContainer("shop", "web-7d4b9", kWebUid, "log-shipper", kSidecarId);
  EXPECT_EQ(names.Lookup(Id(kWebUid, kSidecarId)), (PodNames{"shop", "web-7d4b9", "log-shipper"}));
  // A pod gone is forgotten at the next read, for whatever missed.
  logs.RemovePod("shop", "web-7d4b9", kWebUid);
  clock.now_ns += KubernetesNames::kRescanIntervalNs;
  EXPECT_EQ(names.Lookup(Id(kDbUid, kPostgresId)), std::nullopt);
  EXPECT_EQ(names.stats().pods, 0u);
  EXPECT_EQ(names.stats().containers, 0u);
}

TEST(KubernetesNamesTest, ANodeWithoutTheKubeletsDirectoriesNamesNothing) {
  KubernetesNames names("/nonexistent-ringside-test");
  EXPECT_EQ(names.Lookup(Id(kWebUid, kNginxId)), std::nullopt);
  EXPECT_EQ(names.stats().pods, 0u);
}

TEST(KubernetesNamesTest, KubernetesNamesAreLowercaseDnsNames) {
  EXPECT_TRUE(IsKubernetesName("web-7d4b9"));
  EXPECT_TRUE(IsKubernetesName("kube-system"));
  EXPECT_TRUE(IsKubernetesName("a.b-c"));
  EXPECT_TRUE(IsKubernetesName(std::string(253, 'a')));
  EXPECT_FALSE(IsKubernetesName(std::string(254, 'a')));
  EXPECT_FALSE(IsKubernetesName(""));
  EXPECT_FALSE(IsKubernetesName("Web"));
  EXPECT_FALSE(IsKubernetesName("web_0"));
  EXPECT_FALSE(IsKubernetesName("-web"));
  EXPECT_FALSE(IsKubernetesName("web."));
  EXPECT_FALSE(IsKubernetesName("web/0"));
}

}  // namespace
}  // namespace ringside::agent
