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

}  // namespace
}  // namespace ringside::agent
