#include "agent/descriptors/process_scan.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringside/trace/trace_packet.pb.h"

namespace ringside::agent {
namespace {

namespace fs = std::filesystem;

// A /proc tree of the test's own, removed with it.
class FakeProc {
 public:
  FakeProc() {
    char dir[] = "/tmp/ringside_fake_proc_XXXXXX";
    root_ = mkdtemp(dir) != nullptr ? dir : "";
  }
  ~FakeProc() {
    if (!root_.empty()) fs::remove_all(root_);
  }
  const std::string& root() const { return root_; }
  void Write(const std::string& path, const std::string& contents) {
    const fs::path p = fs::path(root_) / path;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << contents;
  }

 private:
  std::string root_;
};

std::string Status(const std::string& name, int ppid) {
  return "Name:\t" + name + "\nUmask:\t0022\nState:\tS (sleeping)\nPPid:\t" + std::to_string(ppid) +
         "\nUid:\t1000\t1000\t1000\t1000\n";
}

struct Scanned {
  std::map<int32_t, trace::ProcessTree::Process> processes;
  std::map<int32_t, trace::ProcessTree::Thread> threads;
};

Scanned Scan(const std::string& root) {
  const trace::TracePacket packet = ScanProcessesIn(root, /*names=*/nullptr);
  Scanned s;
  for (const auto& p : packet.process_tree().processes()) s.processes[p.pid()] = p;
  for (const auto& t : packet.process_tree().threads()) s.threads[t.tid()] = t;
  return s;
}

TEST(ProcessScanTest, ReadsEachProcessAndItsThreads) {
  FakeProc proc;
  ASSERT_FALSE(proc.root().empty());
  proc.Write("200/status", Status("server", 1));
  const std::string argv[] = {"/usr/bin/server", "--port", "80"};
  std::string cmdline;
  for (const std::string& arg : argv) cmdline += arg + '\0';
  proc.Write("200/cmdline", cmdline);
  proc.Write("200/cgroup", "0::/system.slice/server.service\n");
  proc.Write("200/task/200/comm", "server\n");
  proc.Write("200/task/201/comm", "worker\n");
  proc.Write("2/status", Status("kthreadd", 0));
  proc.Write("2/cmdline", "");
  proc.Write("2/task/2/comm", "kthreadd\n");
  proc.Write("cpuinfo", "not a process");
  const Scanned s = Scan(proc.root());
  ASSERT_EQ(s.processes.size(), 2u);
  const trace::ProcessTree::Process& server = s.processes.at(200);
  EXPECT_EQ(server.ppid(), 1);
  EXPECT_EQ(server.uid(), 1000);
  ASSERT_EQ(server.cmdline_size(), 3);
  EXPECT_EQ(server.cmdline(2), "80");
  EXPECT_EQ(server.cgroup_path(), "/system.slice/server.service");
  EXPECT_EQ(s.processes.at(2).cmdline(0), "kthreadd");  // A kernel thread: its comm.
  EXPECT_EQ(s.threads.at(201).tgid(), 200);
  EXPECT_EQ(s.threads.at(201).name(), "worker");
  EXPECT_EQ(s.threads.size(), 3u);
}

// A process in a pod's container is named by its namespace, pod and
// container, from the kubelet's directories, and labelled so for
// trace_processor: the labels' track is the same in every scan.
TEST(ProcessScanTest, AProcessOfAPodCarriesItsKubernetesNames) {
  FakeProc proc;
  ASSERT_FALSE(proc.root().empty());
  const std::string uid = "0c7e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b";
  const std::string id(64, 'a');
  proc.Write("300/status", Status("nginx", 1));
  proc.Write("300/cmdline", std::string("nginx\0", 6));
  proc.Write("300/cgroup", "0::/kubepods/besteffort/pod" + uid + "/" + id + "\n");
  proc.Write("300/task/300/comm", "nginx\n");
  proc.Write("400/status", Status("cron", 1));
  proc.Write("400/cgroup", "0::/system.slice/cron.service\n");
  proc.Write("400/task/400/comm", "cron\n");
  proc.Write("logs/pods/shop_web-7d4b9_" + uid + "/nginx/0.log", "");
  fs::create_directories(proc.root() + "/logs/containers");
  fs::create_symlink(proc.root() + "/logs/pods/shop_web-7d4b9_" + uid + "/nginx/0.log",
                     proc.root() + "/logs/containers/web-7d4b9_shop_nginx-" + id + ".log");
  KubernetesNames names(proc.root() + "/logs");
  const trace::TracePacket scan = ScanProcessesIn(proc.root(), &names);
  std::map<int32_t, trace::ProcessTree::Process> processes;
  for (const auto& p : scan.process_tree().processes()) processes[p.pid()] = p;
  EXPECT_EQ(processes.at(300).k8s_namespace(), "shop");
  EXPECT_EQ(processes.at(300).k8s_pod(), "web-7d4b9");
  EXPECT_EQ(processes.at(300).k8s_container(), "nginx");
  EXPECT_FALSE(processes.at(400).has_k8s_pod());
  const std::vector<trace::TracePacket> labels = PodLabelsPackets(scan);
  ASSERT_EQ(labels.size(), 1u);
  EXPECT_EQ(labels[0].timestamp(), scan.timestamp());
  const trace::ProcessDescriptor& described = labels[0].track_descriptor().process();
  EXPECT_EQ(described.pid(), 300);
  EXPECT_EQ(std::vector<std::string>(described.process_labels().begin(),
                                     described.process_labels().end()),
            (std::vector<std::string>{"namespace=shop", "pod=web-7d4b9", "container=nginx"}));
  EXPECT_EQ(PodLabelsPackets(ScanProcessesIn(proc.root(), &names))[0].track_descriptor().uuid(),
            labels[0].track_descriptor().uuid());
}

// A process that ends between the reads of its files: it is listed with
// its main thread, named by the process's name (the importer would show a
// process whose main thread it never saw named as a nameless thread), and
// a thread that ended is left out rather than listed without a name.
TEST(ProcessScanTest, AProcessThatEndsMidScanKeepsItsMainThreadNamed) {
  FakeProc proc;
  ASSERT_FALSE(proc.root().empty());
  proc.Write("300/status", Status("sh", 1));
  proc.Write("300/cmdline", std::string("sh\0-c\0", 6));  // No task/: gone since.
  proc.Write("400/status", Status("app", 1));
  proc.Write("400/cmdline", std::string("app\0", 4));
  fs::create_directories(fs::path(proc.root()) / "400/task/400");  // comm gone.
  fs::create_directories(fs::path(proc.root()) / "400/task/401");
  proc.Write("400/task/402/comm", "app-io\n");
  proc.Write("500/cmdline", "");  // No status: gone before the scan read it.
  const Scanned s = Scan(proc.root());
  EXPECT_EQ(s.processes.size(), 2u);
  EXPECT_FALSE(s.processes.count(500));
  EXPECT_EQ(s.threads.at(300).name(), "sh");
  EXPECT_EQ(s.threads.at(300).tgid(), 300);
  EXPECT_EQ(s.threads.at(400).name(), "app");
  EXPECT_FALSE(s.threads.count(401));
  EXPECT_EQ(s.threads.at(402).name(), "app-io");
}

}  // namespace
}  // namespace ringside::agent
