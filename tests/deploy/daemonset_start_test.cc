// deploy/kubernetes/daemonset.yaml started the way a node would start it:
// the container's command, read from the manifest, run as root in the
// image deploy/container/Dockerfile builds, with the pod's volumes mounted
// as the kubelet mounts them and the container's read-only root,
// capabilities and no_new_privs; the agent must answer the manifest's
// liveness probe, take a snapshot into the node's directory, and stop
// cleanly on SIGTERM within the pod's grace period.
//
// What is simulated, and how (tests/deploy/testing/sandbox.h does it in a
// mount namespace of the agent's own):
//   - the image: a read-only tmpfs root with the Debian base's directories,
//     this machine's /usr for the base's libraries (ContainerTest checks the
//     runtime stage installs what the binary loads), and the final stage's
//     COPY lines applied to `make install DESTDIR=` as its builder stage runs it;
//   - the runtime's /proc (the node's pids: hostPID), read-only /sys and a
//     /dev of its own;
//   - hostPath volumes: the node's own /sys paths; any other path a scratch
//     directory standing in for the node's (never this machine's);
//   - emptyDir: a tmpfs of mode 0777 (the kubelet makes an emptyDir's
//     directory 0777), of the volume's sizeLimit;
//   - configMap: the kubelet's layout (..data and a symlink per key) of the
//     manifest's ConfigMap, read-only.
//   - the pod's network namespace (not hostNetwork): a new one, where the
//     agent's metrics listener binds;
//   - the pod's UTS namespace (not hostNetwork): its host name is the pod's
//     name, as the kubelet sets it.
// Not simulated: the seccomp and AppArmor profiles, cgroup limits.

#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "agent/config/config_loader.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/agent/testing/scratch_cgroup.h"
#include "tests/agent/testing/trace_processor_query.h"
#include "tests/deploy/testing/deploy_files.h"
#include "tests/deploy/testing/kubernetes_manifests.h"
#include "tests/deploy/testing/sandbox.h"

namespace ringside::deploy_testing {
namespace {

// The node the simulated pod runs on (the downward API's spec.nodeName),
// and the pod's name, its host name.
constexpr char kNodeName[] = "ringside-test-node";
constexpr char kPodName[] = "ringside-x7k2p";

using nlohmann::json;

// debian:bookworm-slim's ENV PATH; the Dockerfile sets none of its own.
constexpr char kImagePath[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
// Where the Dockerfile's builder stage installs (make install DESTDIR=).
constexpr char kBuilderDestDir[] = "/out";

// The `COPY --from=builder SRC DST` lines of the Dockerfile's last stage.
std::vector<std::pair<std::string, std::string>> RuntimeCopies() {
  const std::string dockerfile =
      absl::StrReplaceAll(ReadFile(SourceDir() + "/deploy/container/Dockerfile"), {{"\\\n", " "}});
  std::vector<std::pair<std::string, std::string>> copies;
  const size_t last_from = dockerfile.rfind("\nFROM ");
  if (last_from == std::string::npos) return copies;
  for (absl::string_view line : absl::StrSplit(dockerfile.substr(last_from), '\n')) {
    if (!absl::ConsumePrefix(&line, "COPY ")) continue;
    const std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() == 3 && words[0] == "--from=builder") {
      copies.emplace_back(words[1], words[2]);
    } else {
      ADD_FAILURE() << "a COPY this test does not simulate: " << line;
    }
  }
  return copies;
}

// CAP_BPF for "BPF", as a container's securityContext names them.
std::optional<int> CapabilityNumber(const std::string& name) {
  static const std::pair<const char*, int> kCaps[] = {
      {"CHOWN", CAP_CHOWN},           {"DAC_OVERRIDE", CAP_DAC_OVERRIDE},
      {"FOWNER", CAP_FOWNER},         {"KILL", CAP_KILL},
      {"SETUID", CAP_SETUID},         {"SETGID", CAP_SETGID},
      {"SYS_ADMIN", CAP_SYS_ADMIN},   {"SYS_RESOURCE", CAP_SYS_RESOURCE},
      {"SYS_PTRACE", CAP_SYS_PTRACE}, {"IPC_LOCK", CAP_IPC_LOCK},
      {"PERFMON", CAP_PERFMON},       {"BPF", CAP_BPF}};
  for (const auto& [n, cap] : kCaps) {
    if (name == n) return cap;
  }
  return std::nullopt;
}

int PathDepth(const std::string& path) {
  return static_cast<int>(std::count(path.begin(), path.end(), '/'));
}

// A pod's container as the node has it: a process in the container's
// cgroup (containerd's systemd names in a cgroupfs layout, where one
// component names both the pod and the container) below a cgroup of the
// test's own, and the kubelet's log of it, unless it is the pod's sandbox.
class FakeContainer {
 public:
  // `pod_uid` with dashes; `name` empty: the sandbox, which has no log.
  FakeContainer(const std::string& pod_uid, const std::string& id)
      : cgroup_(absl::StrCat("kubepods-besteffort-pod", absl::StrReplaceAll(pod_uid, {{"-", "_"}}),
                             ".slice:cri-containerd:", id)) {}
  ~FakeContainer() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  const agent::testing::ScratchCgroup& cgroup() const { return cgroup_; }
  pid_t pid() const { return pid_; }

  // Starts `sh -c script` (by default a sleep) in the container's cgroup:
  // it moves there, then execs.
  bool Start(const char* script = "exec /bin/sleep 120") {
    if (!cgroup_.ok()) return false;
    const std::string procs = cgroup_.dir() + "/cgroup.procs";
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || write(fd, "0", 1) != 1) _exit(127);
      close(fd);
      execl("/bin/sh", "sh", "-c", script, static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid_ > 0;
  }
  // Waits for it to end (a crash).
  void Wait() {
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  agent::testing::ScratchCgroup cgroup_;
  pid_t pid_ = -1;
};

// Container ids of this test process's own: its pid leads them.
std::string OwnContainerId(char fill) {
  return absl::StrFormat("%08x", static_cast<uint32_t>(getpid())) + std::string(56, fill);
}

class DaemonSetStartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: mount namespaces, mounts, pivot_root";
    ASSERT_TRUE(HaveProgram("node")) << "node is not installed: run make deps";
    ASSERT_EQ(RunShell("test -d " + ToolsDir() + "/node_modules/kubernetes-models").exit_code, 0)
        << "kubernetes-models is not installed in " << ToolsDir() << ": run make deps";
    if (RunShell(absl::StrCat("make -q BUILD=", BuildDir(), " ", BuildDir(), "/ringside"))
            .exit_code != 0) {
      GTEST_SKIP() << BuildDir() << "/ringside is not up to date: run make first";
    }
    // The builder stage's install, into a directory of ours.
    const CommandResult install =
        RunShell(absl::StrCat("make --no-print-directory install BUILD=", BuildDir(),
                              " PREFIX=/usr DESTDIR=", Scratch("out")));
    ASSERT_EQ(install.exit_code, 0) << install.output;
    absl::StatusOr<json> docs = KubernetesDocuments();
    ASSERT_TRUE(docs.ok()) << docs.status();
    docs_ = *std::move(docs);
    daemonset_ = FindDocument(docs_, "DaemonSet");
    ASSERT_TRUE(daemonset_.is_object());
    ASSERT_EQ(Pod()["containers"].size(), 1u);
  }

  const json& Pod() const { return daemonset_["spec"]["template"]["spec"]; }
  const json& Container() const { return Pod()["containers"][0]; }

  // A directory of the test's scratch space, made on first use.
  std::string Scratch(const std::string& name) {
    const std::string path = scratch_.path() + "/" + name;
    std::filesystem::create_directories(path);
    return path;
  }
  // Where the node's hostPath directories are, for paths that are not the
  // node's kernel's (/sys).
  std::string NodeDir() { return Scratch("node"); }

  // The kubelet's log of a pod's container, in the node's /var/log: the
  // pod's directory, the container's, and the container's symlink.
  void AddContainerLog(const std::string& ns, const std::string& pod, const std::string& uid,
                       const std::string& name, const std::string& id) {
    const std::string log = absl::StrCat("/var/log/pods/", ns, "_", pod, "_", uid, "/", name);
    std::filesystem::create_directories(NodeDir() + log);
    WriteFile(NodeDir() + log + "/0.log", "");
    std::filesystem::create_directories(NodeDir() + "/var/log/containers");
    std::filesystem::create_symlink(
        log + "/0.log",
        absl::StrCat(NodeDir(), "/var/log/containers/", pod, "_", ns, "_", name, "-", id, ".log"));
  }

  // The pod's container as the runtime sets it up, from the manifests.
  SandboxSpec ContainerSandbox() {
    SandboxSpec spec;
    // The image: the Debian base, then the runtime stage's COPY lines.
    std::vector<std::pair<std::string, std::string>> files;
    for (const auto& [from, to] : RuntimeCopies()) {
      absl::string_view src = from;
      EXPECT_TRUE(absl::ConsumePrefix(&src, kBuilderDestDir)) << from;
      files.emplace_back(absl::StrCat(Scratch("out"), src), to);
    }
    EXPECT_FALSE(files.empty()) << "the Dockerfile's last stage copies nothing";
    for (const char* dir : {"/etc", "/run", "/var/lib", "/home"}) spec.Dir(dir);
    spec.Dir("/tmp", 01777);
    spec.Dir("/var/tmp", 01777);
    spec.Dir("/root", 0700);
    AddHostSystem(&spec, files);
    // What every container gets from the runtime; /sys read-only as for
    // any container that is not privileged.
    spec.Proc("/proc");
    spec.Sysfs("/sys", /*read_only=*/true);
    AddPrivateDev(&spec);

    // The volumes, parents before the mounts inside them (as containerd
    // orders them).
    json volumes = json::object();
    for (const json& v : Pod()["volumes"]) volumes[v["name"].get<std::string>()] = v;
    std::vector<json> mounts(Container()["volumeMounts"].begin(),
                             Container()["volumeMounts"].end());
    std::stable_sort(mounts.begin(), mounts.end(), [](const json& a, const json& b) {
      return PathDepth(a["mountPath"]) < PathDepth(b["mountPath"]);
    });
    for (const json& m : mounts) AddVolume(&spec, m, volumes[m["name"].get<std::string>()]);

    const json& sc = Container()["securityContext"];
    spec.private_network = !Pod().value("hostNetwork", false);
    if (spec.private_network) spec.hostname = kPodName;
    spec.read_only_root = sc.value("readOnlyRootFilesystem", false);
    spec.no_new_privs = !sc.value("allowPrivilegeEscalation", true);
    EXPECT_EQ(sc.value("runAsUser", 0), 0) << "the test runs the agent as root only";
    EXPECT_FALSE(sc.value("privileged", false)) << "a privileged container is not simulated";
    EXPECT_EQ(sc["capabilities"]["drop"], json::array({"ALL"}));
    uint64_t caps = 0;
    for (const json& name : sc["capabilities"]["add"]) {
      const std::optional<int> cap = CapabilityNumber(name.get<std::string>());
      if (cap) {
        caps |= uint64_t{1} << *cap;
      } else {
        ADD_FAILURE() << "capability " << name << " is not known to this test";
      }
    }
    spec.capabilities = caps;
    spec.env = {kImagePath, absl::StrCat("HOSTNAME=", kPodName)};
    for (const auto& [name, value] : Env()) spec.env.push_back(absl::StrCat(name, "=", value));
    return spec;
  }

  // The container's env as the kubelet gives it: values, and the pod's node
  // name for the downward API's spec.nodeName.
  std::vector<std::pair<std::string, std::string>> Env() const {
    std::vector<std::pair<std::string, std::string>> env;
    for (const json& e : Container().value("env", json::array())) {
      std::string value = e.value("value", "");
      if (e.contains("valueFrom")) {
        const std::string field = e["valueFrom"]["fieldRef"].value("fieldPath", "");
        if (field == "spec.nodeName") {
          value = kNodeName;
        } else {
          ADD_FAILURE() << "env " << e << " is not known to this test";
        }
      }
      env.emplace_back(e["name"].get<std::string>(), value);
    }
    return env;
  }

  // The container's command with the kubelet's $(VAR) references to its env
  // expanded.
  std::vector<std::string> Command() const {
    std::vector<std::string> command = Container()["command"];
    for (std::string& arg : command) {
      for (const auto& [name, value] : Env()) {
        arg = absl::StrReplaceAll(arg, {{absl::StrCat("$(", name, ")"), value}});
      }
    }
    return command;
  }

  void AddVolume(SandboxSpec* spec, const json& mount, const json& volume) {
    const std::string at = mount["mountPath"];
    const bool read_only = mount.value("readOnly", false);
    if (volume.contains("hostPath")) {
      const std::string path = volume["hostPath"]["path"];
      if (absl::StartsWith(path, "/sys/")) {
        if (path == "/sys/kernel/tracing") spec->host_tracefs = true;
        spec->Bind(path, at, read_only);
        return;
      }
      // DirectoryOrCreate makes it 0755, root's; Directory finds it there.
      const std::string node_path = NodeDir() + path;
      std::filesystem::create_directories(node_path);
      chmod(node_path.c_str(), 0755);
      spec->Bind(node_path, at, read_only);
    } else if (volume.contains("emptyDir")) {
      const json& empty = volume["emptyDir"];
      std::string options = "mode=0777";
      if (empty.contains("sizeLimit")) {
        const std::optional<uint64_t> bytes = QuantityBytes(empty["sizeLimit"]);
        ASSERT_TRUE(bytes.has_value()) << empty["sizeLimit"];
        absl::StrAppend(&options, ",size=", *bytes);
      }
      if (empty.value("medium", "") == "Memory") {
        spec->Tmpfs(at, options);
      } else {
        const std::string dir = Scratch("emptydir/" + mount["name"].get<std::string>());
        chmod(dir.c_str(), 0777);
        spec->Bind(dir, at, read_only);
      }
    } else if (volume.contains("configMap")) {
      const std::string name = volume["configMap"]["name"];
      const json cm = FindDocument(docs_, "ConfigMap", name);
      ASSERT_TRUE(cm.is_object()) << "no ConfigMap " << name << " in the manifests";
      // The kubelet's atomic writer: the files in a timestamped directory,
      // ..data pointing at it, and a symlink per key through ..data.
      const std::string dir = Scratch("configmap/" + name);
      const std::string data = "..2025_01_01_00_00_00.000000001";
      std::filesystem::create_directories(dir + "/" + data);
      std::filesystem::create_directory_symlink(data, dir + "/..data");
      for (const auto& [key, value] : cm["data"].items()) {
        WriteFile(dir + "/" + data + "/" + key, value.get<std::string>());
        chmod((dir + "/" + data + "/" + key).c_str(), 0644);
        std::filesystem::create_symlink("..data/" + key, dir + "/" + key);
      }
      spec->Bind(dir, at, /*read_only=*/true);
    } else {
      ADD_FAILURE() << "volume " << volume << " is of a kind this test does not simulate";
    }
  }

  // The container's command, started in `spec`; the probe's command run
  // beside it as the kubelet would until it passes. OK once it passed; the
  // agent's log otherwise.
  ::testing::AssertionResult StartsAndPassesItsProbe(SandboxProcess* agent) {
    const json& probe = Container()["livenessProbe"];
    const std::vector<std::string> probe_command = probe["exec"]["command"];
    // The kubelet restarts the container after failureThreshold failed
    // probes, the first initialDelaySeconds after the start.
    const absl::Duration restart_after =
        absl::Seconds(probe.value("initialDelaySeconds", 0) +
                      probe.value("periodSeconds", 10) * probe.value("failureThreshold", 3));
    const absl::Duration probe_timeout = absl::Seconds(probe.value("timeoutSeconds", 1));
    const absl::Time deadline = absl::Now() + restart_after;
    CommandResult last;
    while (absl::Now() < deadline) {
      if (agent->Exited()) {
        const std::optional<int> status = agent->WaitExit(absl::Seconds(5));
        return ::testing::AssertionFailure()
               << "the agent exited before its probe passed (wait status "
               << (status ? absl::StrCat(*status) : "unknown") << "); its log:\n"
               << agent->Log();
      }
      last = agent->RunInside(probe_command, probe_timeout);
      if (last.exit_code == 0) return ::testing::AssertionSuccess();
      absl::SleepFor(absl::Milliseconds(200));
    }
    return ::testing::AssertionFailure()
           << "the probe (" << absl::StrJoin(probe_command, " ") << ") did not pass within "
           << restart_after << "; it printed:\n"
           << last.output << "\nthe agent's log:\n"
           << agent->Log();
  }

  TempDir scratch_;
  json docs_;
  json daemonset_;
};

TEST_F(DaemonSetStartTest, AgentStartsAsThePodsContainerAndStopsOnSigterm) {
  const std::vector<std::string> command = Command();
  ASSERT_FALSE(command.empty());
  const SandboxSpec spec = ContainerSandbox();
  ASSERT_FALSE(HasFailure());
  SandboxProcess agent(spec, Scratch("root"), command, Scratch("logs") + "/agent.log");
  ASSERT_TRUE(StartsAndPassesItsProbe(&agent));
  // Started whole: with the container's capabilities and mounts, no data
  // source was left out (the agent degrades rather than fails).
  const CommandResult status_json =
      agent.RunInside({"ringside", "status", "--json"}, absl::Seconds(10));
  ASSERT_EQ(status_json.exit_code, 0) << status_json.output;
  const json sources =
      json::parse(status_json.output, nullptr, /*allow_exceptions=*/false)["sources"];
  ASSERT_TRUE(sources.is_array() && !sources.empty()) << status_json.output;
  for (const json& source : sources) {
    EXPECT_EQ(source.value("state", ""), "RUNNING") << source << "\nthe agent's log:\n"
                                                    << agent.Log();
    EXPECT_EQ(source.value("error", ""), "") << source;
  }
  // Its metrics listener took the manifest's port, on every address (the
  // log names the address bound: [::] where IPv6 is, else 0.0.0.0).
  EXPECT_TRUE(absl::StrContains(agent.Log(), "metrics: http://[::]:9464/metrics") ||
              absl::StrContains(agent.Log(), "metrics: http://0.0.0.0:9464/metrics"))
      << agent.Log();

  // `kubectl exec POD -- ringside snapshot --wait`, as the manifest's
  // header shows: the file lands in the node's /var/lib/ringside.
  const CommandResult snapshot = agent.RunInside(
      {"ringside", "snapshot", "--wait", "--reason", "deploy-test"}, absl::Seconds(120));
  ASSERT_EQ(snapshot.exit_code, 0) << snapshot.output << "\nthe agent's log:\n" << agent.Log();
  const std::string path(absl::StripAsciiWhitespace(snapshot.output));
  ASSERT_TRUE(absl::StartsWith(path, agent::DefaultAgentConfig().output_dir())) << path;
  struct stat st;
  ASSERT_EQ(stat((NodeDir() + path).c_str(), &st), 0) << NodeDir() << path;
  EXPECT_GT(st.st_size, 0);
  // It names its machine after the node (the pod's name changes with every
  // restart): snapshots of several nodes open as a machine per node.
  const CommandResult inspected =
      agent.RunInside({"ringside", "inspect", "--json", path}, absl::Seconds(60));
  ASSERT_EQ(inspected.exit_code, 0) << inspected.output;
  const json machine =
      json::parse(inspected.output, nullptr, /*allow_exceptions=*/false)["machine"];
  EXPECT_EQ(machine.value("name", ""), kNodeName) << inspected.output;
  // So does its file's name: the next pod (another host name) finds its
  // files as its own, for retention and to finish them.
  const std::string file = path.substr(path.find_last_of('/') + 1);
  EXPECT_TRUE(absl::StartsWith(file, absl::StrCat(kNodeName, "-"))) << file;

  // The kubelet's SIGTERM, then the grace period.
  ASSERT_TRUE(agent.Signal(SIGTERM));
  const std::optional<int> status =
      agent.WaitExit(absl::Seconds(Pod().value("terminationGracePeriodSeconds", 30)));
  ASSERT_TRUE(status.has_value()) << "not stopped within the grace period; log:\n" << agent.Log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << "wait status " << *status << "; log:\n"
      << agent.Log();
}

// Two pods on the node, laid out as the kubelet lays them out: the agent
// names each of their processes by namespace, pod and container, in the
// snapshot's descriptors (`ringside inspect`, and the pods its sidecar
// lists) and in the labels trace_processor and ui.perfetto.dev show. One
// container's log appears only after its process started, as the kubelet
// makes it; the pod's sandbox has none.
TEST_F(DaemonSetStartTest, ProcessesOfPodsCarryTheirKubernetesNames) {
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  const std::string web_uid = absl::StrFormat("%08x-3c4d-4e5f-8a9b-0c1d2e3f4a5b", getpid());
  const std::string db_uid = absl::StrFormat("%08x-5b4a-4392-8170-6f5e4d3c2b1a", getpid());
  const std::string nginx_id = OwnContainerId('a');
  const std::string sandbox_id = OwnContainerId('b');
  const std::string postgres_id = OwnContainerId('c');
  std::filesystem::create_directories(
      absl::StrCat(NodeDir(), "/var/log/pods/payments_db-0_", db_uid));
  AddContainerLog("shop", "web-7d4b9", web_uid, "nginx", nginx_id);
  FakeContainer nginx(web_uid, nginx_id);
  FakeContainer sandbox(db_uid, sandbox_id);
  FakeContainer postgres(db_uid, postgres_id);
  ASSERT_TRUE(nginx.cgroup().ok()) << nginx.cgroup().error();
  ASSERT_TRUE(nginx.Start() && sandbox.Start());

  const SandboxSpec spec = ContainerSandbox();
  ASSERT_FALSE(HasFailure());
  SandboxProcess agent(spec, Scratch("root"), Command(), Scratch("logs") + "/agent.log");
  ASSERT_TRUE(StartsAndPassesItsProbe(&agent));
  // Started while the agent runs; its log only after (the kubelet's order).
  ASSERT_TRUE(postgres.Start());
  absl::SleepFor(absl::Milliseconds(300));
  AddContainerLog("payments", "db-0", db_uid, "postgres", postgres_id);
  // The agent looks names up again at its flushes (flush_period_ms), the
  // kubelet's directories at most once a second.
  absl::SleepFor(absl::Seconds(3));
  const CommandResult snapshot = agent.RunInside(
      {"ringside", "snapshot", "--wait", "--reason", "pods-test"}, absl::Seconds(120));
  ASSERT_EQ(snapshot.exit_code, 0) << snapshot.output << "\nthe agent's log:\n" << agent.Log();
  const std::string path(absl::StripAsciiWhitespace(snapshot.output));

  struct Expected {
    pid_t pid;
    std::string ns, pod, container;
  };
  const std::vector<Expected> expected = {{nginx.pid(), "shop", "web-7d4b9", "nginx"},
                                          {sandbox.pid(), "payments", "db-0", ""},
                                          {postgres.pid(), "payments", "db-0", "postgres"}};
  // `ringside inspect --json`, in the pod.
  const CommandResult inspected =
      agent.RunInside({"ringside", "inspect", "--json", path}, absl::Seconds(60));
  ASSERT_EQ(inspected.exit_code, 0) << inspected.output;
  const json summary = json::parse(inspected.output, nullptr, /*allow_exceptions=*/false);
  for (const Expected& e : expected) {
    json process;
    for (const json& p : summary["processes"]) {
      if (p["pid"] == e.pid) process = p;
    }
    EXPECT_EQ(process.value("pod_namespace", ""), e.ns) << e.pid << " " << process;
    EXPECT_EQ(process.value("pod_name", ""), e.pod) << e.pid << " " << process;
    EXPECT_EQ(process.value("container_name", ""), e.container) << e.pid << " " << process;
  }
  // The pods its sidecar lists.
  const json sidecar = json::parse(ReadFile(NodeDir() + path + ".json"), nullptr, false);
  std::map<std::string, std::string> pods;  // uid -> namespace/name.
  for (const json& p : sidecar["pods"]) {
    if (p["uid"] == web_uid || p["uid"] == db_uid) {
      pods[p["uid"]] = absl::StrCat(p.value("namespace", "?"), "/", p.value("name", "?"));
    }
  }
  EXPECT_EQ(pods, (std::map<std::string, std::string>{{web_uid, "shop/web-7d4b9"},
                                                      {db_uid, "payments/db-0"}}))
      << sidecar["pods"];
  // trace_processor: the process's labels, and no import error.
  const std::string trace = NodeDir() + path;
  for (const Expected& e : expected) {
    const auto rows = agent::testing::Query(
        tp, trace,
        absl::StrCat("SELECT EXTRACT_ARG(arg_set_id, 'chrome.process_label[0]'), "
                     "EXTRACT_ARG(arg_set_id, 'chrome.process_label[1]'), "
                     "EXTRACT_ARG(arg_set_id, 'chrome.process_label[2]') "
                     "FROM process WHERE pid = ",
                     e.pid));
    ASSERT_EQ(rows.size(), 1u) << "pid " << e.pid << " is not one process";
    EXPECT_EQ(rows[0], (std::vector<std::string>{
                           "namespace=" + e.ns, "pod=" + e.pod,
                           e.container.empty() ? "[NULL]" : "container=" + e.container}));
  }
  EXPECT_EQ(agent::testing::QueryInt(
                tp, trace, "SELECT COUNT(*) FROM stats WHERE severity = 'error' AND value > 0"),
            0);
  ASSERT_TRUE(agent.Signal(SIGTERM));
  EXPECT_TRUE(agent.WaitExit(absl::Seconds(30)).has_value());
}

// A trigger that names pods fires for an incident of a task in one of them
// and for no other: the agent finds the task's pod from the incident's
// cgroup, as the kubelet names it on the node.
TEST_F(DaemonSetStartTest, ATriggerThatNamesPodsFiresOnlyForThem) {
  // The ConfigMap's config, with a trigger for crashes in db-* pods of
  // namespaces payments or team-*.
  json* cm = nullptr;
  for (json& entry : docs_) {
    json& doc = entry["doc"];
    if (doc["kind"] == "ConfigMap" && doc["metadata"]["name"] == "ringside-config") cm = &doc;
  }
  ASSERT_NE(cm, nullptr);
  std::string config = (*cm)["data"]["agent.pbtxt"];
  const std::string mode = "trigger_mode: CLONE_SNAPSHOT\n";
  ASSERT_NE(config.find(mode), std::string::npos);
  config.insert(config.find(mode) + mode.size(),
                "  triggers { name: \"db-crash\" stop_delay_ms: 100 incident { kinds: FATAL_SIGNAL "
                "signals: 11 pod_namespaces: \"payments\" pod_namespaces: \"team-*\" pods: "
                "\"db-*\" } }\n");
  (*cm)["data"]["agent.pbtxt"] = config;
  const std::string web_uid = absl::StrFormat("%08x-3c4d-4e5f-8a9b-1c1d2e3f4a5b", getpid());
  const std::string db_uid = absl::StrFormat("%08x-5b4a-4392-8170-7f5e4d3c2b1a", getpid());
  const std::string web_id = OwnContainerId('e');
  const std::string db_id = OwnContainerId('f');
  AddContainerLog("shop", "db-1", web_uid, "app", web_id);  // db-* in another namespace.
  AddContainerLog("payments", "db-0", db_uid, "postgres", db_id);
  FakeContainer web(web_uid, web_id);
  FakeContainer db(db_uid, db_id);
  ASSERT_TRUE(web.cgroup().ok()) << web.cgroup().error();

  const SandboxSpec spec = ContainerSandbox();
  ASSERT_FALSE(HasFailure());
  SandboxProcess agent(spec, Scratch("root"), Command(), Scratch("logs") + "/agent.log");
  ASSERT_TRUE(StartsAndPassesItsProbe(&agent));
  // Fires of each trigger, from `ringside status --json` (which lists the
  // triggers that have fired or been suppressed).
  auto fired = [&](const std::string& name) -> int64_t {
    const CommandResult status =
        agent.RunInside({"ringside", "status", "--json"}, absl::Seconds(10));
    const json j = json::parse(status.output, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(j["snapshots"]["triggers"].is_array()) << status.output;
    for (const json& t : j["snapshots"]["triggers"]) {
      if (t["name"] == name) return t["fired"].get<int64_t>() + t["suppressed"].get<int64_t>();
    }
    return 0;
  };
  auto await = [&](const std::string& name, int64_t n) {
    for (int i = 0; i < 100 && fired(name) < n; i++) absl::SleepFor(absl::Milliseconds(100));
    return fired(name);
  };
  constexpr char kCrash[] = "kill -SEGV $$";
  ASSERT_TRUE(web.Start(kCrash));
  web.Wait();
  // The crash trigger saw it; the pods' trigger did not fire.
  ASSERT_EQ(await("crash", 1), 1) << agent.Log();
  EXPECT_EQ(fired("db-crash"), 0) << agent.Log();
  ASSERT_TRUE(db.Start(kCrash));
  db.Wait();
  EXPECT_EQ(await("db-crash", 1), 1) << agent.Log();
  ASSERT_TRUE(agent.Signal(SIGTERM));
  EXPECT_TRUE(agent.WaitExit(absl::Seconds(30)).has_value());
}

}  // namespace
}  // namespace ringside::deploy_testing
