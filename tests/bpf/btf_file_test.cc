// BtfFile: bpf_config.btf_path is trusted only as root's own file, read once,
// and libbpf reads the copy that was checked, not the path.
#include "bpf/btf_file.h"

#include <bpf/btf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/root_only_dir.h"

namespace ringside::bpf {
namespace {

using ::ringside::testing::RootOnlyDir;
using ::testing::HasSubstr;

constexpr char kKernelBtf[] = "/sys/kernel/btf/vmlinux";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A root-only scratch directory holding a copy of the kernel's BTF as
// vmlinux.btf (0644, root's).
class BtfFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct stat st;
    if (stat(kKernelBtf, &st) != 0) GTEST_SKIP() << "needs the kernel's BTF: no " << kKernelBtf;
    if (dir_.path().empty()) GTEST_SKIP() << dir_.why();
    kernel_ = ReadFile(kKernelBtf);
    ASSERT_FALSE(kernel_.empty());
    btf_ = dir_.Path("vmlinux.btf");
    std::ofstream(btf_, std::ios::binary) << kernel_;
    ASSERT_EQ(chmod(btf_.c_str(), 0644), 0);
  }

  // The error Open gives for `path`; "" when it opens.
  static std::string Refusal(const std::string& path) {
    absl::StatusOr<std::unique_ptr<BtfFile>> f = BtfFile::Open(path);
    if (f.ok()) return "";
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
    return std::string(f.status().message());
  }

  RootOnlyDir dir_;
  std::string kernel_;
  std::string btf_;
};

TEST_F(BtfFileTest, LibbpfReadsTheCheckedCopyNotThePath) {
  absl::StatusOr<std::unique_ptr<BtfFile>> f = BtfFile::Open(btf_);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->raw(), kernel_);
  // The file changes after the check: what libbpf is handed does not.
  std::ofstream(btf_, std::ios::binary | std::ios::trunc) << "not BTF";
  const std::string& copy = (*f)->copy_path();
  EXPECT_THAT(copy, ::testing::StartsWith("/proc/self/fd/"));
  EXPECT_EQ(ReadFile(copy), kernel_);
  btf* parsed = btf__parse(copy.c_str(), nullptr);
  ASSERT_NE(parsed, nullptr);
  EXPECT_GT(btf__find_by_name_kind(parsed, "task_struct", BTF_KIND_STRUCT), 0);
  btf__free(parsed);
  // Nor can it be changed through its name: the copy is sealed.
  const int fd = open(copy.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    EXPECT_LT(write(fd, "x", 1), 0);
    close(fd);
  }
  EXPECT_EQ(ReadFile(copy), kernel_);
}

TEST_F(BtfFileTest, ASymbolicLinkAnywhereOnThePathIsRefused) {
  const std::string link = dir_.Path("link.btf");
  ASSERT_EQ(symlink(btf_.c_str(), link.c_str()), 0);
  EXPECT_THAT(Refusal(link), HasSubstr(absl::StrCat("bpf_config.btf_path ", link,
                                                    ": the file is a symbolic link")));
  const std::string linked_dir = dir_.Path("linked");
  ASSERT_EQ(symlink(dir_.path().c_str(), linked_dir.c_str()), 0);
  const std::string through = linked_dir + "/vmlinux.btf";
  EXPECT_THAT(Refusal(through), HasSubstr(absl::StrCat("bpf_config.btf_path ", through, ": ",
                                                       linked_dir, " is a symbolic link")));
  EXPECT_EQ(Refusal(btf_), "");
}

TEST_F(BtfFileTest, AFileOthersCanChangeIsRefused) {
  ASSERT_EQ(chmod(btf_.c_str(), 0664), 0);
  EXPECT_THAT(Refusal(btf_),
              HasSubstr(absl::StrCat(btf_, ": the file is writable by its group (mode 0664)")));
  ASSERT_EQ(chmod(btf_.c_str(), 0646), 0);
  EXPECT_THAT(Refusal(btf_),
              HasSubstr(absl::StrCat(btf_, ": the file is writable by others (mode 0646)")));
  ASSERT_EQ(chmod(btf_.c_str(), 0644), 0);
  ASSERT_EQ(chown(btf_.c_str(), 65534, 0), 0);
  EXPECT_THAT(Refusal(btf_),
              HasSubstr(absl::StrCat(btf_, ": the file is owned by uid 65534, not root")));
}

TEST_F(BtfFileTest, ADirectoryOthersCanWriteIsRefused) {
  const std::string sub = dir_.Path("sub");
  ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
  const std::string inside = sub + "/vmlinux.btf";
  std::ofstream(inside, std::ios::binary) << kernel_;
  ASSERT_EQ(chmod(inside.c_str(), 0644), 0);
  EXPECT_EQ(Refusal(inside), "");
  ASSERT_EQ(chmod(sub.c_str(), 0777), 0);
  EXPECT_THAT(Refusal(inside), HasSubstr(absl::StrCat("bpf_config.btf_path ", inside, ": ", sub,
                                                      " is writable by others (mode 0777)")));
  ASSERT_EQ(chmod(sub.c_str(), 0755), 0);
  ASSERT_EQ(chown(sub.c_str(), 65534, 65534), 0);
  EXPECT_THAT(Refusal(inside), HasSubstr(absl::StrCat(sub, " is owned by uid 65534, not root")));
  // /tmp: anyone may create files there.
  char tmp[] = "/tmp/ringside-btf-XXXXXX";
  const int fd = mkstemp(tmp);
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_THAT(Refusal(tmp), HasSubstr("/tmp is writable by others"));
  unlink(tmp);
}

TEST_F(BtfFileTest, WhatIsNoFileOfRootsIsNamed) {
  EXPECT_THAT(Refusal("vmlinux.btf"), HasSubstr("vmlinux.btf: not an absolute path"));
  const std::string missing = dir_.Path("missing.btf");
  EXPECT_THAT(Refusal(missing), HasSubstr(absl::StrCat(missing, ": no such file")));
  const std::string in_missing_dir = dir_.Path("none/vmlinux.btf");
  EXPECT_THAT(
      Refusal(in_missing_dir),
      HasSubstr(absl::StrCat(in_missing_dir, ": ", dir_.Path("none"), ": no such directory")));
  // A FIFO is refused, not read (which would wait for a writer).
  const std::string fifo = dir_.Path("fifo.btf");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(Refusal(fifo), HasSubstr(absl::StrCat(fifo, ": not a regular file")));
  EXPECT_THAT(Refusal(dir_.path()), HasSubstr("not a regular file"));
}

// What is not a regular file is refused without being opened: opening a
// device node can act on the device. A FIFO shows it: a writer waiting in
// open() is let through by the first reader, and the check must not be one.
TEST_F(BtfFileTest, WhatIsNoRegularFileIsRefusedWithoutBeingOpened) {
  const std::string fifo = dir_.Path("waiting.btf");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::atomic<bool> writer_opened{false};
  std::atomic<pid_t> writer_tid{0};
  std::thread writer([&] {
    writer_tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
    const int fd = open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
    writer_opened.store(true);
    if (fd >= 0) close(fd);
  });
  // The writer is waiting inside openat() before the check runs.
  const std::string in_openat = absl::StrCat(SYS_openat, " ");
  for (int i = 0; i < 10000; i++) {
    const pid_t tid = writer_tid.load();
    if (tid != 0 &&
        ReadFile(absl::StrCat("/proc/self/task/", tid, "/syscall")).rfind(in_openat, 0) == 0) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_THAT(Refusal(fifo), HasSubstr(absl::StrCat(fifo, ": not a regular file")));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(writer_opened.load()) << "the check opened the FIFO for reading";
  // Our own reader lets the writer go.
  const int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  writer.join();
  close(reader);
}

TEST_F(BtfFileTest, AFileThatIsNoWholeKernelsBtfIsNamed) {
  const std::string text = dir_.Path("text.btf");
  std::ofstream(text) << "not BTF\n";
  ASSERT_EQ(chmod(text.c_str(), 0644), 0);
  EXPECT_THAT(Refusal(text), HasSubstr(absl::StrCat(text, ": not a kernel's BTF")));
}

// An ELF whose .BTF section is the kernel's (as BTFHub ships them): libbpf's
// copy is the raw BTF alone.
TEST_F(BtfFileTest, AnElfsBtfSectionIsCopiedOutRaw) {
  const std::string elf = dir_.Path("vmlinux.o");
  const std::string cmd = absl::StrCat(
      "echo 'int x;' | cc -c -x c - -o ", elf, ".empty && ", "objcopy --add-section .BTF=", btf_,
      " --set-section-alignment .BTF=8 ", elf, ".empty ", elf, " 2>/dev/null");
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "cc and objcopy cannot make the ELF here";
  ASSERT_EQ(chmod(elf.c_str(), 0644), 0);
  absl::StatusOr<std::unique_ptr<BtfFile>> f = BtfFile::Open(elf);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->raw(), kernel_);
  EXPECT_EQ(ReadFile((*f)->copy_path()), kernel_);
}

}  // namespace
}  // namespace ringside::bpf
