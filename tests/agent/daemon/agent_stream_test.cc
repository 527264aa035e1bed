#include "agent/daemon/agent_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "agent/config/config_loader.h"
#include "agent/output/file_retention.h"
#include "base/scoped_fd.h"
#include "gtest/gtest.h"
#include "tests/agent/testing/control_peer.h"
#include "tests/agent/testing/dir_entries.h"

namespace ringside::agent {
namespace {

using testing::ScratchDir;

// The stream's files are named after the config's machine_name (a
// DaemonSet's node; its pods' host names are new with every pod), and what
// an agent killed before machine_name was set left under the host name is
// finished and kept as this machine's.
TEST(AgentStreamTest, FilesAreNamedAfterTheMachineNameAndTheHostNamedOnesAreFinished) {
  ScratchDir dir;
  const std::string left = AgentFileStem(LocalHostname(), absl::Now()) + "-000001.pftrace";
  std::ofstream(dir.Join(left + ".partial")) << std::string("\x0a\x02pp", 4);
  absl::StatusOr<config::TraceConfig> cfg = ParseConfig(
      "buffers { size_kb: 1024 }\nwrite_into_file: true\nmachine_name: \"node-7\"\noutput_dir: \"" +
          dir.path() + "\"\n",
      "t.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(null_fd, 0);
  AgentLog log(null_fd);
  absl::StatusOr<std::unique_ptr<RotatingTraceFile>> stream = OpenAgentStream(*cfg, {}, log);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const std::string open = (*stream)->display_name();
  EXPECT_TRUE(absl::StartsWith(open, dir.Join("node-7-"))) << open;
  (*stream)->WaitForSidecars();
  EXPECT_EQ(testing::ListDir(dir.path()),
            (std::set<std::string>{left, left + ".json", open.substr(dir.path().size() + 1)}));
  stream->reset();
  close(null_fd);
}

// The session streams into the compressing sink when the config compresses,
// else into the files; a config that does not stream opens nothing.
TEST(AgentStreamTest, TheSinkIsTheCompressionInFrontOfTheFilesWhenTheConfigCompresses) {
  ScratchDir dir;
  const base::ScopedFd null_fd(open("/dev/null", O_WRONLY | O_CLOEXEC));
  ASSERT_TRUE(null_fd);
  AgentLog log(null_fd.get());
  const std::string base =
      "buffers { size_kb: 1024 }\nmachine_name: \"node-7\"\noutput_dir: \"" + dir.path() + "\"\n";

  absl::StatusOr<config::TraceConfig> none = ParseConfig(base, "t.pbtxt");
  ASSERT_TRUE(none.ok()) << none.status();
  absl::StatusOr<AgentStream> empty = OpenAgentStreamSink(*none, {}, log);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->files, nullptr);
  EXPECT_EQ(empty->sink, nullptr);

  absl::StatusOr<config::TraceConfig> plain =
      ParseConfig(base + "write_into_file: true\n", "t.pbtxt");
  ASSERT_TRUE(plain.ok()) << plain.status();
  absl::StatusOr<AgentStream> files = OpenAgentStreamSink(*plain, {}, log);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_NE(files->files, nullptr);
  EXPECT_EQ(files->compression, nullptr);
  EXPECT_EQ(files->sink, files->files.get());
  files->files->WaitForSidecars();

  absl::StatusOr<config::TraceConfig> zstd =
      ParseConfig(base + "write_into_file: true\ncompression { zstd {} }\n", "t.pbtxt");
  ASSERT_TRUE(zstd.ok()) << zstd.status();
  absl::StatusOr<AgentStream> compressed = OpenAgentStreamSink(*zstd, {}, log);
  ASSERT_TRUE(compressed.ok()) << compressed.status();
  ASSERT_NE(compressed->compression, nullptr);
  EXPECT_EQ(compressed->sink, compressed->compression.get());
  compressed->files->WaitForSidecars();
}

}  // namespace
}  // namespace ringside::agent
