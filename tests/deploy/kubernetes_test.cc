// deploy/kubernetes/: the manifests pass the Kubernetes API's schemas
// (tests/deploy/validate_manifests.mjs, with the tools `make deps`
// installs), and the DaemonSet gives the agent the paths, capabilities and
// budgets it has under systemd.

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/config/config_loader.h"
#include "agent/config/defaults.h"
#include "agent/descriptors/kubernetes_names.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/deploy/testing/deploy_files.h"
#include "tests/deploy/testing/kubernetes_manifests.h"

namespace ringside::deploy_testing {
namespace {

using nlohmann::json;

// "NAME[:TAG]@sha256:<64 lowercase hex digits>": an image reference that
// names its contents, not a tag.
bool IsPinnedByDigest(const std::string& image) {
  const size_t at = image.find("@sha256:");
  if (at == 0 || at == std::string::npos) return false;
  const std::string digest = image.substr(at + 8);
  return digest.size() == 64 && digest.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::string ManifestPaths() {
  std::string paths;
  for (const char* m : kKubernetesManifests) absl::StrAppend(&paths, " ", m);
  return paths;
}

class KubernetesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // make deps installs them; a machine without is not set up to test.
    ASSERT_TRUE(HaveProgram("node")) << "node is not installed: run make deps";
    ASSERT_EQ(RunShell("test -d " + ToolsDir() + "/node_modules/kubernetes-models").exit_code, 0)
        << "kubernetes-models is not installed in " << ToolsDir() << ": run make deps";
  }

  // Every document of every manifest, parsed (and validated) by the script
  // once per run of this binary: it takes a second.
  const json& Documents() {
    static const json* const documents = [] {
      absl::StatusOr<json> docs = KubernetesDocuments();
      EXPECT_TRUE(docs.ok()) << docs.status();
      return new json(docs.ok() ? *std::move(docs) : json::array());
    }();
    return *documents;
  }

  json Find(const std::string& kind) {
    for (const json& d : Documents()) {
      if (d["doc"]["kind"] == kind) return d["doc"];
    }
    ADD_FAILURE() << "no " << kind;
    return json::object();
  }
};

TEST_F(KubernetesTest, ManifestsPassTheKubernetesSchemas) {
  const CommandResult r = ValidateManifests(ManifestPaths());
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// `kubectl apply -f deploy/kubernetes/` applies every file there: each is
// one the tests validate.
TEST(KubernetesManifestsTest, EveryManifestInTheDirectoryIsChecked) {
  std::set<std::string> listed, found;
  for (const char* m : kKubernetesManifests) listed.insert(m);
  for (const auto& e : std::filesystem::directory_iterator(SourceDir() + "/deploy/kubernetes")) {
    found.insert("deploy/kubernetes/" + e.path().filename().string());
  }
  EXPECT_EQ(found, listed);
}

TEST_F(KubernetesTest, ValidatorRejectsWhatTheApiServerWould) {
  TempDir tmp;
  const std::string ds = ReadFile(SourceDir() + "/deploy/kubernetes/daemonset.yaml");
  // A field the API does not have, and a value of the wrong type.
  WriteFile(tmp.path() + "/misspelt.yaml", absl::StrReplaceAll(ds, {{"hostPID:", "hostPid:"}}));
  WriteFile(tmp.path() + "/mistyped.yaml",
            absl::StrReplaceAll(
                ds, {{"readOnlyRootFilesystem: true", "readOnlyRootFilesystem: \"yes\""}}));
  const CommandResult misspelt = ValidateManifests(tmp.path() + "/misspelt.yaml");
  EXPECT_EQ(misspelt.exit_code, 1) << misspelt.output;
  EXPECT_TRUE(absl::StrContains(misspelt.output, "hostPid")) << misspelt.output;
  const CommandResult mistyped = ValidateManifests(tmp.path() + "/mistyped.yaml");
  EXPECT_EQ(mistyped.exit_code, 1) << mistyped.output;
  EXPECT_TRUE(absl::StrContains(mistyped.output, "readOnlyRootFilesystem")) << mistyped.output;
}

TEST_F(KubernetesTest, ConfigMapHoldsTheShippedConfigAndItParses) {
  const json cm = Find("ConfigMap");
  const std::string text = cm["data"].value("agent.pbtxt", "");
  EXPECT_EQ(text, ReadFile(SourceDir() + "/deploy/configs/agent.pbtxt"))
      << "deploy/kubernetes/configmap.yaml differs from deploy/configs/agent.pbtxt";
  const absl::StatusOr<config::TraceConfig> cfg = agent::ParseConfig(text, "configmap.yaml");
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cm["metadata"]["namespace"], Find("Namespace")["metadata"]["name"]);
}

TEST_F(KubernetesTest, DaemonSetRunsTheAgentWithTheNodesProcessesAndConfig) {
  const json ds = Find("DaemonSet");
  EXPECT_EQ(ds["metadata"]["namespace"], Find("Namespace")["metadata"]["name"]);
  const json& pod = ds["spec"]["template"]["spec"];
  EXPECT_EQ(pod.value("hostPID", false), true);
  ASSERT_EQ(pod["containers"].size(), 1u);
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["command"], json::array({"ringside", "agent", "-c", "/etc/ringside/agent.pbtxt",
                                       "--machine-name=$(NODE_NAME)", "--metrics-listen=:9464"}));
  // Its metrics, where Prometheus' Kubernetes discovery looks for them.
  const json& annotations = ds["spec"]["template"]["metadata"]["annotations"];
  EXPECT_EQ(annotations.value("prometheus.io/scrape", ""), "true");
  EXPECT_EQ(annotations.value("prometheus.io/port", ""), "9464");
  ASSERT_EQ(c["ports"].size(), 1u);
  EXPECT_EQ(c["ports"][0],
            json({{"name", "metrics"}, {"containerPort", 9464}, {"protocol", "TCP"}}));
  ASSERT_EQ(c["env"].size(), 1u);
  EXPECT_EQ(c["env"][0]["name"], "NODE_NAME");
  EXPECT_EQ(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName");
  EXPECT_EQ(c["livenessProbe"]["exec"]["command"], json::array({"ringside", "status"}));
  ASSERT_EQ(pod["tolerations"].size(), 1u);
  EXPECT_EQ(pod["tolerations"][0], json({{"operator", "Exists"}}));
}

TEST_F(KubernetesTest, DaemonSetMountsWhatTheAgentReadsAndWrites) {
  const json ds = Find("DaemonSet");
  const json& pod = ds["spec"]["template"]["spec"];
  const json& c = pod["containers"][0];
  json volumes = json::object();
  for (const json& v : pod["volumes"]) volumes[v["name"].get<std::string>()] = v;
  json mounts = json::object();  // By mount path: {readOnly, volume}.
  for (const json& m : c["volumeMounts"]) {
    mounts[m["mountPath"].get<std::string>()] = {{"readOnly", m.value("readOnly", false)},
                                                 {"volume", volumes[m["name"].get<std::string>()]}};
  }
  auto host_path = [&](const std::string& at) {
    return mounts[at]["volume"]["hostPath"].value("path", "");
  };
  // tracefs: the agent makes its instance there.
  EXPECT_EQ(host_path("/sys/kernel/tracing"), "/sys/kernel/tracing");
  EXPECT_EQ(mounts["/sys/kernel/tracing"]["readOnly"], false);
  EXPECT_EQ(host_path("/sys/kernel/btf"), "/sys/kernel/btf");
  EXPECT_EQ(mounts["/sys/kernel/btf"]["readOnly"], true);
  EXPECT_EQ(host_path("/sys/fs/cgroup"), "/sys/fs/cgroup");
  EXPECT_EQ(mounts["/sys/fs/cgroup"]["readOnly"], true);
  // The kubelet's log directories, whose names name the pods' processes
  // (KubernetesNames reads kDefaultLogDir): only read.
  ASSERT_EQ(std::string(agent::KubernetesNames::kDefaultLogDir), "/var/log");
  for (const char* dir : {"/var/log/pods", "/var/log/containers"}) {
    EXPECT_EQ(host_path(dir), dir);
    EXPECT_EQ(mounts[dir]["readOnly"], true) << dir;
  }
  // Snapshots on the node, where the default output_dir is.
  const config::TraceConfig cfg = agent::DefaultAgentConfig();
  ASSERT_TRUE(absl::StartsWith(cfg.output_dir(), "/var/lib/ringside/"));
  EXPECT_EQ(host_path("/var/lib/ringside"), "/var/lib/ringside");
  EXPECT_EQ(mounts["/var/lib/ringside"]["volume"]["hostPath"]["type"], "DirectoryOrCreate");
  EXPECT_EQ(mounts["/var/lib/ringside"]["readOnly"], false);
  // The lock file and control socket, where `ringside status` looks: the
  // agent makes the run directory itself in an emptyDir mounted above it,
  // since the kubelet makes an emptyDir writable by all, and the agent
  // refuses such a run directory (DaemonSetStartTest starts it).
  ASSERT_EQ(std::string(agent::kDefaultRunDir), "/run/ringside");
  ASSERT_TRUE(absl::StartsWith(cfg.control_socket(), "/run/ringside/"));
  EXPECT_TRUE(mounts["/run"]["volume"].contains("emptyDir"));
  EXPECT_FALSE(mounts.contains("/run/ringside"));
  EXPECT_EQ(mounts["/etc/ringside"]["volume"]["configMap"]["name"],
            Find("ConfigMap")["metadata"]["name"]);
}

// The metrics port is the privileged pod's one TCP surface: a policy admits
// only the scrapers to it, and nothing else to the pod, nor the pod to
// anything (NetworkPolicy semantics: a pod selected for a policy type takes
// only what the rules list).
TEST_F(KubernetesTest, NetworkPolicyAdmitsOnlyTheScrapersToTheMetricsPort) {
  const json policy = Find("NetworkPolicy");
  ASSERT_TRUE(policy.contains("spec")) << policy;
  const json& spec = policy["spec"];
  const json ds = Find("DaemonSet");
  EXPECT_EQ(policy["metadata"]["namespace"], ds["metadata"]["namespace"]);
  // It selects the agent's pods (every label it matches, they carry).
  const json selected = spec.value("podSelector", json::object()).value("matchLabels", json());
  ASSERT_TRUE(selected.is_object() && !selected.empty()) << policy;
  const json& labels = ds["spec"]["template"]["metadata"]["labels"];
  for (const auto& [key, value] : selected.items()) {
    EXPECT_EQ(labels.value(key, ""), value) << key << ": not a label of the agent's pods";
  }
  EXPECT_EQ(spec.value("policyTypes", json()), json::array({"Ingress", "Egress"}));
  EXPECT_EQ(spec.value("egress", json::array()), json::array()) << "no egress";
  // One rule: the container's metrics port, from selected pods only.
  const json ingress = spec.value("ingress", json::array());
  ASSERT_EQ(ingress.size(), 1u) << policy;
  const json& port = ds["spec"]["template"]["spec"]["containers"][0]["ports"][0];
  ASSERT_EQ(port["name"], "metrics");
  EXPECT_EQ(ingress[0].value("ports", json()),
            json::array({{{"protocol", "TCP"}, {"port", port["containerPort"]}}}));
  ASSERT_TRUE(ingress[0].contains("from")) << "no `from`: any peer";
  ASSERT_FALSE(ingress[0]["from"].empty());
  for (const json& peer : ingress[0]["from"]) {
    EXPECT_FALSE(peer.contains("ipBlock")) << peer;
    // Both selectors in one peer: those pods in that namespace; an empty
    // selector would match every namespace or every pod.
    for (const char* selector : {"namespaceSelector", "podSelector"}) {
      EXPECT_FALSE(
          peer.value(selector, json::object()).value("matchLabels", json::object()).empty())
          << selector << " in " << peer;
    }
  }
}

// deploy/shipping/kubernetes.yaml: ringside-ship beside the agent on every
// node, moving what the agent writes where it writes it.
TEST_F(KubernetesTest, TheShippersDaemonSetPassesTheSchemasAndShipsTheAgentsFiles) {
  const CommandResult r = ValidateManifests("--json deploy/shipping/kubernetes.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<std::string> lines = absl::StrSplit(r.output, '\n', absl::SkipEmpty());
  ASSERT_FALSE(lines.empty());
  const json docs = json::parse(lines.back());
  const json ds = FindDocument(docs, "DaemonSet", "ringside-ship");
  ASSERT_TRUE(ds.is_object()) << r.output;
  EXPECT_EQ(ds["metadata"]["namespace"], Find("Namespace")["metadata"]["name"]);
  const json& pod = ds["spec"]["template"]["spec"];
  ASSERT_EQ(pod["containers"].size(), 1u);
  const json& c = pod["containers"][0];
  const std::string output_dir = agent::DefaultAgentConfig().output_dir();
  const std::string loop = c["args"][0].get<std::string>();
  EXPECT_TRUE(absl::StrContains(loop, "/opt/ringside-ship/ringside-ship " + output_dir + " "))
      << loop;
  json volumes = json::object();
  for (const json& v : pod["volumes"]) volumes[v["name"].get<std::string>()] = v;
  bool shipped_from_the_node = false;
  for (const json& m : c["volumeMounts"]) {
    const json& v = volumes[m["name"].get<std::string>()];
    if (m["mountPath"] == output_dir) {
      EXPECT_EQ(v["hostPath"]["path"], output_dir);
      EXPECT_NE(m.value("readOnly", false), true);  // It removes what it moved.
      shipped_from_the_node = true;
    }
    if (m["mountPath"] == "/opt/ringside-ship") {
      EXPECT_EQ(v["configMap"]["name"], "ringside-ship");
    }
  }
  EXPECT_TRUE(shipped_from_the_node);
  EXPECT_EQ(c["securityContext"]["capabilities"]["drop"], json::array({"ALL"}));
  EXPECT_FALSE(c["securityContext"]["capabilities"].contains("add"));
  EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true);
  // Root with the remote's credentials: an image by digest, which no one
  // can move as a tag can be.
  const std::string image = c["image"];
  EXPECT_TRUE(IsPinnedByDigest(image)) << image << ": not NAME[:TAG]@sha256:<64 hex digits>";
}

TEST(ImageDigestTest, OnlyAFullSha256DigestPins) {
  EXPECT_TRUE(IsPinnedByDigest("rclone/rclone:1.68.2@sha256:" + std::string(64, 'a')));
  EXPECT_TRUE(IsPinnedByDigest("registry.example:5000/x@sha256:" + std::string(64, '0')));
  EXPECT_FALSE(IsPinnedByDigest("rclone/rclone:1.68"));
  EXPECT_FALSE(IsPinnedByDigest("rclone/rclone:1.68.2@sha256:" + std::string(63, 'a')));
  EXPECT_FALSE(IsPinnedByDigest("rclone/rclone@sha256:" + std::string(64, 'A')));
  EXPECT_FALSE(IsPinnedByDigest("@sha256:" + std::string(64, 'a')));
}

TEST_F(KubernetesTest, DaemonSetHasTheUnitsCapabilitiesAndBudgets) {
  const json c = Find("DaemonSet")["spec"]["template"]["spec"]["containers"][0];
  const json& sc = c["securityContext"];
  EXPECT_EQ(sc.value("privileged", true), false);
  EXPECT_EQ(sc.value("allowPrivilegeEscalation", true), false);
  EXPECT_EQ(sc.value("readOnlyRootFilesystem", false), true);
  EXPECT_EQ(sc["capabilities"]["drop"], json::array({"ALL"}));

  const std::string unit = ReadFile(SourceDir() + "/deploy/systemd/ringside.service");
  std::set<std::string> unit_caps;
  for (const std::string& v : UnitValues(unit, "CapabilityBoundingSet")) {
    for (absl::string_view cap : absl::StrSplit(v, ' ', absl::SkipEmpty())) {
      unit_caps.emplace(absl::StripPrefix(cap, "CAP_"));
    }
  }
  std::set<std::string> pod_caps;
  for (const json& cap : sc["capabilities"]["add"]) pod_caps.insert(cap.get<std::string>());
  EXPECT_EQ(pod_caps, unit_caps);

  // systemd's M is MiB; CPUQuota=50% is half a CPU.
  ASSERT_EQ(UnitValues(unit, "MemoryMax"), std::vector<std::string>{"320M"});
  ASSERT_EQ(UnitValues(unit, "CPUQuota"), std::vector<std::string>{"50%"});
  EXPECT_EQ(c["resources"]["limits"]["memory"], "320Mi");
  EXPECT_EQ(c["resources"]["limits"]["cpu"], "500m");
}

}  // namespace
}  // namespace ringside::deploy_testing
