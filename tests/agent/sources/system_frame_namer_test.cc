#include "agent/sources/system_frame_namer.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

// A function of this binary for the namer to find by its address.
__attribute__((noinline)) int FunctionToName(int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}

uint64_t AddressToName() { return reinterpret_cast<uint64_t>(&FunctionToName) + 1; }

// In the host's PID namespace, a user frame is named from the process's
// own mappings and symbol table.
TEST(SystemFrameNamerTest, InTheHostsPidNamespaceUserFramesAreNamed) {
  if (geteuid() != 0) GTEST_SKIP() << "reading /proc/1/ns/pid needs root";
  std::unique_ptr<FrameNamer> namer = MakeSystemFrameNamer();
  EXPECT_EQ(namer->user_frames_unnamed_reason(), "");
  const FrameNamer::Frame f = namer->User(getpid(), AddressToName(), true);
  EXPECT_EQ(f.function, "ringside::agent::(anonymous namespace)::FunctionToName(int)");
  EXPECT_NE(f.mapping, "");
  EXPECT_TRUE(f.final_name);  // Its file was read.
  // An address of this thread's stack: mapped, but no file to read.
  int on_the_stack = 0;
  const FrameNamer::Frame stack =
      namer->User(getpid(), reinterpret_cast<uint64_t>(&on_the_stack), false);
  EXPECT_NE(stack.end, 0u);  // In a mapping: [stack].
  EXPECT_EQ(stack.function, "");
  EXPECT_FALSE(stack.final_name);
}

// The agent's own binary is read as the namer is set up, not at the first
// frame of the agent's threads, on the BPF reader's path: its maps were
// read once, and naming one of its functions reads nothing more.
TEST(SystemFrameNamerTest, ItsOwnBinaryIsReadAtSetUp) {
  if (geteuid() != 0) GTEST_SKIP() << "reading /proc/1/ns/pid needs root";
  std::unique_ptr<FrameNamer> namer = MakeSystemFrameNamer();
  EXPECT_EQ(namer->user_stats().maps_reads, 1u);
  EXPECT_EQ(namer->user_stats().frames_named, 0u);
  // It holds the binary's symbol table (this test binary's: thousands of
  // functions), which one asked not to preload does not.
  EXPECT_GT(namer->memory_bytes(), MakeSystemFrameNamer("/proc", false)->memory_bytes() + 16384);
  const FrameNamer::Frame f = namer->User(getpid(), AddressToName(), true);
  EXPECT_EQ(f.function, "ringside::agent::(anonymous namespace)::FunctionToName(int)");
  EXPECT_EQ(namer->user_stats().maps_reads, 1u);
  EXPECT_EQ(namer->user_stats().frames_named, 1u);
}

// C++ names are written demangled; others, and what does not demangle, as
// they are.
TEST(SystemFrameNamerTest, CppNamesAreDemangledOthersKept) {
  EXPECT_EQ(DemangledName("_ZN3foo3barEi"), "foo::bar(int)");
  EXPECT_EQ(DemangledName("main"), "main");
  EXPECT_EQ(DemangledName("_Znot a symbol"), "_Znot a symbol");
  EXPECT_EQ(DemangledName(""), "");
}

// In a PID namespace of its own with its own /proc, the host's pids that
// the BPF programs give would find other processes (or none): no user frame
// is named, never wrongly, and the namer says why.
TEST(SystemFrameNamerTest, InAPidNamespaceOfItsOwnUserFramesStayUnnamedAndItSaysWhy) {
  if (geteuid() != 0) GTEST_SKIP() << "a PID namespace of its own needs root (CAP_SYS_ADMIN)";
  const pid_t host_pid = getpid();
  const uint64_t address = AddressToName();
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t child = fork();
  if (child == 0) {
    close(out[0]);
    if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) _exit(10);
    const pid_t inner = fork();  // Pid 1 of the new namespace.
    if (inner < 0) _exit(11);
    if (inner > 0) {
      int status = 0;
      waitpid(inner, &status, 0);
      _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 12);
    }
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
      _exit(13);
    }
    std::unique_ptr<FrameNamer> namer = MakeSystemFrameNamer();
    const FrameNamer::Frame f = namer->User(host_pid, address, true);
    const std::string said = namer->user_frames_unnamed_reason() + "\n" + f.function + "\n" +
                             f.mapping + "\n" + std::to_string(f.rel_pc);
    if (write(out[1], said.data(), said.size()) != static_cast<ssize_t>(said.size())) _exit(14);
    _exit(0);
  }
  close(out[1]);
  std::string said;
  char buf[1024];
  for (ssize_t n; (n = read(out[0], buf, sizeof(buf))) > 0;)
    said.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child exit " << status;
  EXPECT_EQ(said,
            "/proc belongs to a PID namespace other than the host's, so the processes the "
            "stacks name are not found under their pids: user frames keep their addresses, "
            "unnamed (run the agent in the host's PID namespace: hostPID in Kubernetes)\n"
            "\n\n" +
                std::to_string(address));
}

}  // namespace
}  // namespace ringside::agent
