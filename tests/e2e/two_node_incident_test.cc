// One incident on two nodes, end to end: two agents, each in UTS, mount and
// network namespaces of its own (its own host name and /etc/machine-id, as
// two machines have), a process of one node sending a message over a socket
// to a process of the other, then `ringside snapshot --around` the moment
// of the send on both, and the two files opened together in Perfetto's
// trace processor, merged by `ringside merge` and as a plain `tar` of the
// two: two named machines, each with its CPUs, processes and scheduling,
// the send before the receive on one timeline, no error.
//
// Both "nodes" share this machine's kernel, so both record its scheduling
// and their clocks agree: what this proves is that each file keeps to its
// machine and that the importer places both on one timeline; lining up
// machines whose clocks differ is the importer's (REALTIME, in the merged
// archive's manifest).

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/agent/testing/trace_processor_query.h"
#include "tests/testing/kernel_tracefs.h"
#include "tests/testing/paths.h"

namespace ringside::agent::testing {
namespace {

constexpr char kConfig[] = R"pb(
  buffers { size_kb: 8192 }
  data_sources { config { name: "linux.bpf" } }
  durable_buffer_size_kb: 2048
  snapshot_request_cooldown_ms: 0
)pb";

// How long each side of the message waits, so that its slices around the
// message stand apart from the rest.
constexpr absl::Duration kQuiet = absl::Milliseconds(400);

void Spin(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
  }
}

int64_t RealtimeNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// A node: an agent in namespaces of its own.
struct Node {
  std::string name;
  std::string dir;
  pid_t pid = -1;
  std::string socket() const { return dir + "/control.sock"; }
};

class TwoNodeIncidentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "agents in namespaces of their own need root";
  }
  void TearDown() override {
    // A message's side that failed or hung, then the agents.
    for (pid_t child : children_) {
      if (waitpid(child, nullptr, WNOHANG) == 0) {
        kill(child, SIGKILL);
        waitpid(child, nullptr, 0);
      }
    }
    for (Node* n : {&a_, &b_}) {
      if (n->pid <= 0) continue;
      int code = -1;
      RunRingsideCapture({"stop", "--wait", "--socket", n->socket()}, &code);
      kill(n->pid, SIGKILL);  // Stopped by now; in case it was not.
      waitpid(n->pid, nullptr, 0);
    }
  }

  // Starts `node`'s agent: unshare makes its namespaces, the shell gives
  // it its host name and machine id, then becomes the agent.
  void Start(Node* node, const std::string& name, const std::string& machine_id) {
    node->name = name;
    node->dir = dir_.Join(name);
    ASSERT_EQ(mkdir(node->dir.c_str(), 0700), 0);
    ASSERT_EQ(mkdir((node->dir + "/run").c_str(), 0755), 0);
    ASSERT_TRUE(WriteTextFile(node->dir + "/agent.pbtxt", kConfig));
    ASSERT_TRUE(WriteTextFile(node->dir + "/machine-id", machine_id + "\n"));
    // Without /etc/machine-id here, the id is a hash of the host name.
    const std::string bind = access("/etc/machine-id", F_OK) == 0
                                 ? "mount --bind " + node->dir + "/machine-id /etc/machine-id && "
                                 : "";
    const std::string script = absl::StrCat(
        bind, "hostname ", name, " && exec ", ringside::testing::RingsideBinary(), " agent -c ",
        node->dir, "/agent.pbtxt --socket ", node->socket(), " --run-dir ", node->dir,
        "/run --output-dir ", node->dir, "/out 2>", node->dir, "/agent.log");
    node->pid = fork();
    ASSERT_GE(node->pid, 0);
    if (node->pid == 0) {
      execl("/usr/bin/unshare", "unshare", "--mount", "--uts", "--net", "--propagation", "private",
            "/bin/sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    int code = -1;
    RunRingsideCapture({"status", "--wait", "--timeout", "60s", "--socket", node->socket()}, &code);
    ASSERT_EQ(code, 0) << name << "'s agent did not start; it said:\n"
                       << ReadFileOr(node->dir + "/agent.log");
  }

  static std::string ReadFileOr(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // A child in `node`'s namespaces named `comm`: runs `body`, exits 0 if it
  // returns true.
  template <typename Body>
  pid_t RunIn(const Node& node, const char* comm, Body body) {
    const pid_t pid = fork();
    if (pid != 0) {
      if (pid > 0) children_.push_back(pid);
      return pid;
    }
    for (const char* ns : {"uts", "net", "mnt"}) {
      const int fd = open(absl::StrCat("/proc/", node.pid, "/ns/", ns).c_str(), O_RDONLY);
      if (fd < 0 || setns(fd, 0) != 0) _exit(100);
      close(fd);
    }
    prctl(PR_SET_NAME, comm);
    _exit(body() ? 0 : 1);
  }

  ScratchDir dir_;
  Node a_, b_;
  std::vector<pid_t> children_;  // Reaped by the test, or killed after it.
};

TEST_F(TwoNodeIncidentTest, AMessageBetweenNodesIsInOrderOnOneTimelineOfTwoMachines) {
  RINGSIDE_REQUIRE_TRACEFS();
  RINGSIDE_REQUIRE_TRACE_PROCESSOR(tp);
  ASSERT_NO_FATAL_FAILURE(Start(&a_, "rs-node-a", "0123456789abcdef0123456789abcdef"));
  ASSERT_NO_FATAL_FAILURE(Start(&b_, "rs-node-b", "fedcba9876543210fedcba9876543210"));

  // The message: a datagram over a socket in the directory both nodes see.
  const std::string path = dir_.Join("message.sock");
  int ready[2], sent[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(sent), 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  // Each side holds only the pipe end it writes, so that a side that dies
  // ends the parent's read instead of leaving it waiting.
  const pid_t receiver = RunIn(b_, "rs-recv", [&] {
    close(ready[0]);
    close(sent[0]);
    close(sent[1]);
    const int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    if (s < 0 || bind(s, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) return false;
    if (write(ready[1], "r", 1) != 1) return false;
    char buf[16];
    if (recv(s, buf, sizeof(buf), 0) != 4) return false;  // Blocks until the send.
    Spin(absl::Milliseconds(5));
    return true;
  });
  close(ready[1]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1) << "the receiver did not start";
  const pid_t sender = RunIn(a_, "rs-send", [&] {
    close(ready[0]);
    close(sent[0]);
    absl::SleepFor(kQuiet);
    Spin(absl::Milliseconds(5));
    const int64_t when = RealtimeNs();
    const int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    if (s < 0 ||
        sendto(s, "ping", 4, 0, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 4) {
      return false;
    }
    if (write(sent[1], &when, sizeof(when)) != sizeof(when)) return false;
    absl::SleepFor(kQuiet);
    return true;
  });
  close(sent[1]);
  int64_t moment = 0;
  const ssize_t got = read(sent[0], &moment, sizeof(moment));
  for (int fd : {ready[0], sent[0]}) close(fd);
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof(moment))) << "the sender did not send";
  for (pid_t p : {sender, receiver}) {
    int status = 0;
    ASSERT_EQ(waitpid(p, &status, 0), p);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exit " << status;
  }

  // Both nodes' window around the moment of the send, as a fan-out asks.
  const std::string around =
      absl::StrFormat("%d.%09d", moment / 1'000'000'000, moment % 1'000'000'000);
  std::vector<std::string> files;
  for (const Node* n : {&a_, &b_}) {
    int code = -1;
    std::string out = RunRingsideCapture(
        {"snapshot", "--socket", n->socket(), "--around", around, "--window", "3s"}, &code);
    ASSERT_EQ(code, 0) << n->name << ": " << ReadFileOr(n->dir + "/agent.log");
    ASSERT_FALSE(out.empty());
    out.pop_back();
    const std::string file = dir_.Join(n->name + ".pftrace");
    ASSERT_EQ(rename(out.c_str(), file.c_str()), 0) << out;
    files.push_back(file);
  }
  const std::string merged = dir_.Join("merged.tar"), plain = dir_.Join("plain.tar");
  ASSERT_EQ(RunRingside({"merge", "-o", merged, files[0], files[1]}), 0);
  int code = -1;
  RunProgramCapture("/bin/tar",
                    {"cf", plain, "-C", dir_.path(), "rs-node-a.pftrace", "rs-node-b.pftrace"},
                    &code);
  ASSERT_EQ(code, 0);

  // The slices of `comm` on `machine`'s CPUs that follow a quiet gap: the
  // receiver's after its wait, the sender's after its sleep (the send).
  auto after_quiet = [&](const std::string& archive, const std::string& comm,
                         const std::string& machine) {
    return Query(
        tp, archive,
        absl::StrCat("with s as (select s.ts, s.dur, lag(s.ts + s.dur) over (order by s.ts) as "
                     "prev_end from sched s join thread t using (utid) join cpu c using (ucpu) "
                     "join machine m on c.machine_id = m.id where t.name = '",
                     comm, "' and m.name = '", machine,
                     "') select ts, ts + dur from s where ts - prev_end > ",
                     absl::ToInt64Nanoseconds(kQuiet) / 2, " order by ts limit 1"));
  };
  for (const std::string& archive : {merged, plain}) {
    SCOPED_TRACE(archive);
    const auto machines = Query(tp, archive,
                                "select m.name, "
                                "(select count(*) from cpu c where c.machine_id = m.id), "
                                "(select count(*) from process p where p.machine_id = m.id), "
                                "(select count(*) from sched s join cpu c using (ucpu) "
                                "where c.machine_id = m.id) "
                                "from machine m order by m.name");
    ASSERT_EQ(machines.size(), 2u);
    EXPECT_EQ(machines[0][0], "rs-node-a");
    EXPECT_EQ(machines[1][0], "rs-node-b");
    for (const auto& m : machines) {
      SCOPED_TRACE(m[0]);
      int64_t cpus = 0, processes = 0, switches = 0;
      ASSERT_TRUE(absl::SimpleAtoi(m[1], &cpus) && absl::SimpleAtoi(m[2], &processes) &&
                  absl::SimpleAtoi(m[3], &switches));
      EXPECT_EQ(cpus, sysconf(_SC_NPROCESSORS_CONF));
      EXPECT_GT(processes, 1);
      EXPECT_GT(switches, 0);
    }
    // The send (node A's sender, its slice after its sleep) before the
    // receive (node B's receiver, its slice after its wait), close together.
    const auto send = after_quiet(archive, "rs-send", "rs-node-a");
    const auto receive = after_quiet(archive, "rs-recv", "rs-node-b");
    ASSERT_EQ(send.size(), 1u);
    ASSERT_EQ(receive.size(), 1u);
    int64_t send_start = 0, send_end = 0, receive_start = 0, receive_end = 0;
    ASSERT_TRUE(absl::SimpleAtoi(send[0][0], &send_start) &&
                absl::SimpleAtoi(send[0][1], &send_end) &&
                absl::SimpleAtoi(receive[0][0], &receive_start) &&
                absl::SimpleAtoi(receive[0][1], &receive_end));
    std::printf("%s: send in %lld .. %lld, receive from %lld\n", archive.c_str(),
                static_cast<long long>(send_start), static_cast<long long>(send_end),
                static_cast<long long>(receive_start));
    EXPECT_LT(send_start, receive_start);
    EXPECT_LT(receive_start - send_end, 200'000'000) << "the receive is far from the send";
    EXPECT_TRUE(Query(tp, archive, "select name from stats where value > 0 and severity = 'error'")
                    .empty());
  }
}

}  // namespace
}  // namespace ringside::agent::testing
