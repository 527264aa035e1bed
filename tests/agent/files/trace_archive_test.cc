#include "agent/files/trace_archive.h"

#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/files/trace_sink.h"
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

}  // namespace
}  // namespace ringside::agent
