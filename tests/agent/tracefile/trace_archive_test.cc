#include "agent/tracefile/trace_archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/tracefile/trace_sink.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/ringside_cli.h"

namespace ringside::agent {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// GNU tar (which checks every header's checksum) lists and extracts what
// TarWriter wrote, byte for byte: a member of an odd size, an empty one, and
// one copied from a file of more than the 1 MiB copied at a time.
TEST(TarWriterTest, GnuTarExtractsEveryMemberByteForByte) {
  testing::ScratchDir dir;
  std::string big;
  for (int i = 0; big.size() < (3 << 20) / 2; i++) absl::StrAppend(&big, i, ",");
  std::ofstream(dir.Join("big.pftrace"), std::ios::binary) << big;
  StringSink sink;
  TarWriter tar(&sink);
  ASSERT_TRUE(tar.AddFile("manifest.json", "{\"x\": 1}\n", 1795000000).ok());
  ASSERT_TRUE(tar.AddFile("empty", "", 1795000000).ok());
  ASSERT_TRUE(tar.AddFileFrom("node-a.pftrace", dir.Join("big.pftrace")).ok());
  ASSERT_TRUE(tar.Finish().ok());
  EXPECT_TRUE(sink.finished());
  EXPECT_EQ(sink.data().size() % 512, 0u);
  const std::string archive = dir.Join("a.tar");
  std::ofstream(archive, std::ios::binary) << sink.data();
  ASSERT_EQ(mkdir(dir.Join("out").c_str(), 0700), 0);
  int code = -1;
  const std::string listing = testing::RunProgramCapture("/bin/tar", {"tvf", archive}, &code);
  ASSERT_EQ(code, 0) << listing;
  EXPECT_NE(listing.find("-rw-r--r-- root/root         9 2026-11-18 "), std::string::npos)
      << listing;
  testing::RunProgramCapture("/bin/tar", {"xf", archive, "-C", dir.Join("out")}, &code);
  ASSERT_EQ(code, 0);
  EXPECT_EQ(ReadFile(dir.Join("out/manifest.json")), "{\"x\": 1}\n");
  EXPECT_EQ(ReadFile(dir.Join("out/empty")), "");
  EXPECT_EQ(ReadFile(dir.Join("out/node-a.pftrace")), big);
}

TEST(TarWriterTest, NamesThatAreNotOneMemberAreRefused) {
  StringSink sink;
  TarWriter tar(&sink);
  for (const std::string& name : {std::string(), std::string(101, 'n'), std::string("a/b"),
                                  std::string(".."), std::string(".")}) {
    const absl::Status st = tar.AddFile(name, "x", 0);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(st.message().find("1 to 100 bytes, no '/'"), absl::string_view::npos) << st;
  }
  EXPECT_TRUE(sink.data().empty());
  EXPECT_TRUE(tar.AddFile(std::string(100, 'n'), "x", 0).ok());
}

TEST(TarWriterTest, AFileThatIsNotThereIsAnErrorNamingIt) {
  StringSink sink;
  TarWriter tar(&sink);
  const absl::Status st = tar.AddFileFrom("x.pftrace", "/nonexistent/x.pftrace");
  EXPECT_NE(st.message().find("/nonexistent/x.pftrace: No such file or directory"),
            absl::string_view::npos)
      << st;
}

// What `inspect` reads of a TAR: the members' names and where their bytes
// are, from what TarWriter wrote and from GNU tar's own archive.
TEST(ReadTarMembersTest, FindsEachMemberOfTarWritersAndOfGnuTars) {
  testing::ScratchDir dir;
  StringSink sink;
  TarWriter tar(&sink);
  ASSERT_TRUE(tar.AddFile("m.json", "{}\n", 0).ok());
  ASSERT_TRUE(tar.AddFile("a.pftrace", std::string(700, 'a'), 0).ok());
  ASSERT_TRUE(tar.Finish().ok());
  const std::string ours = dir.Join("ours.tar");
  std::ofstream(ours, std::ios::binary) << sink.data();
  EXPECT_TRUE(IsTarHeader(std::string_view(sink.data()).substr(0, 512)));
  const int fd = open(ours.c_str(), O_RDONLY | O_CLOEXEC);
  absl::StatusOr<std::vector<TarMember>> members = ReadTarMembers(fd, ours);
  close(fd);
  ASSERT_TRUE(members.ok()) << members.status();
  ASSERT_EQ(members->size(), 2u);
  EXPECT_EQ((*members)[0].name, "m.json");
  EXPECT_EQ((*members)[0].offset, 512u);
  EXPECT_EQ((*members)[0].size, 3u);
  EXPECT_EQ((*members)[1].name, "a.pftrace");
  EXPECT_EQ((*members)[1].offset, 1536u);
  EXPECT_EQ((*members)[1].size, 700u);

  // GNU tar's, with a directory and a name longer than 100 bytes.
  const std::string long_name = std::string(120, 'x') + ".pftrace";
  ASSERT_EQ(mkdir(dir.Join("d").c_str(), 0700), 0);
  std::ofstream(dir.Join("d/" + long_name)) << "trace";
  const std::string gnu = dir.Join("gnu.tar");
  int code = -1;
  testing::RunProgramCapture("/bin/tar", {"cf", gnu, "-C", dir.path(), "d"}, &code);
  ASSERT_EQ(code, 0);
  const int gnu_fd = open(gnu.c_str(), O_RDONLY | O_CLOEXEC);
  members = ReadTarMembers(gnu_fd, gnu);
  close(gnu_fd);
  ASSERT_TRUE(members.ok()) << members.status();
  ASSERT_EQ(members->size(), 1u);
  EXPECT_EQ((*members)[0].name, "d/" + long_name);
  EXPECT_EQ((*members)[0].size, 5u);
}

// Untrusted bytes: a header that does not add up, or a member past the end,
// is an error naming where, never a read past the file.
TEST(ReadTarMembersTest, ABrokenArchiveIsAnErrorNamingWhere) {
  testing::ScratchDir dir;
  StringSink sink;
  TarWriter tar(&sink);
  ASSERT_TRUE(tar.AddFile("a.pftrace", std::string(2000, 'a'), 0).ok());
  ASSERT_TRUE(tar.Finish().ok());
  struct Case {
    std::string bytes;
    std::string says;
  };
  std::string bad_sum = sink.data();
  bad_sum[0] = 'b';
  for (const Case& c : {Case{sink.data().substr(0, 1024), "past the end of the archive"},
                        Case{bad_sum, "byte 0: not a TAR header"},
                        Case{sink.data().substr(0, 2560), "without its end-of-archive blocks"}}) {
    const std::string path = dir.Join("bad.tar");
    std::ofstream(path, std::ios::binary | std::ios::trunc) << c.bytes;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    absl::StatusOr<std::vector<TarMember>> members = ReadTarMembers(fd, path);
    close(fd);
    ASSERT_FALSE(members.ok()) << c.says;
    EXPECT_NE(members.status().message().find(c.says), absl::string_view::npos) << members.status();
  }
}

}  // namespace
}  // namespace ringside::agent
