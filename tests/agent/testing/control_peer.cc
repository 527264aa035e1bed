#include "tests/agent/testing/control_peer.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/control/control_frame.h"

namespace ringside::agent::testing {
namespace {

bool PollFor(int fd, short events, absl::Duration timeout) {
  pollfd p = {fd, events, 0};
  return poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) > 0;
}

int ConnectTo(const std::string& path) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return -ENAMETOOLONG;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    close(fd);
    return -err;
  }
  return fd;
}

}  // namespace

ScratchDir::ScratchDir() {
  char templ[] = "/tmp/ringside-control-test-XXXXXX";
  if (mkdtemp(templ) != nullptr) {
    path_ = templ;
    chmod(path_.c_str(), 0755);
  }
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

RawClient::RawClient(const std::string& socket_path) {
  const int fd = ConnectTo(socket_path);
  if (fd >= 0) fd_ = fd;
}

RawClient::~RawClient() {
  if (fd_ >= 0) close(fd_);
}

bool RawClient::Send(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool RawClient::Send(const control::Request& request) { return Send(EncodeFrame(request)); }

absl::StatusOr<control::Reply> RawClient::ReadReply(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  FrameReader reader(1 << 20);
  std::string payload;
  while (reader.Next(&payload) != FrameReader::Result::kComplete) {
    if (!PollFor(fd_, POLLIN, deadline - absl::Now())) {
      return absl::DeadlineExceededError("no reply in time");
    }
    char buf[4096];
    const ssize_t n = recv(fd_, buf, std::min(sizeof(buf), reader.room()), 0);
    if (n <= 0) return absl::UnavailableError(n == 0 ? "closed" : strerror(errno));
    reader.Append(buf, static_cast<size_t>(n));
  }
  control::Reply reply;
  if (!reply.ParseFromString(payload)) return absl::DataLossError("reply does not parse");
  return reply;
}

bool RawClient::ClosedByServer(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (PollFor(fd_, POLLIN, deadline - absl::Now())) {
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    if (n < 0) return false;
  }
  return false;
}

absl::StatusOr<std::string> RunAs(uid_t uid, gid_t gid, const std::vector<gid_t>& groups,
                                  const std::function<std::string()>& body) {
  // A thread of its own, whose credentials alone change: the kernel keeps
  // them per thread, and glibc's setuid() family, which makes every thread
  // of the process follow, is bypassed with the raw system calls. (A forked
  // child of this threaded process could not allocate before exec without
  // risking a wait forever on a lock another thread held at the fork.)
  bool dropped = false;
  std::string out;
  std::thread thread([&] {
    if (syscall(SYS_setgroups, groups.size(), groups.data()) != 0 ||
        syscall(SYS_setresgid, gid, gid, gid) != 0 || syscall(SYS_setresuid, uid, uid, uid) != 0) {
      return;  // Dies with the thread, as whatever it did change does.
    }
    dropped = true;
    out = body();
  });
  thread.join();
  if (!dropped) return absl::InternalError("could not drop privileges");
  return out;
}

std::string ExchangeRaw(const std::string& socket_path, const std::string& bytes) {
  const int fd = ConnectTo(socket_path);
  if (fd < 0) return std::string("connect: ") + strerrorname_np(-fd);
  std::string out;
  // A refused peer may be closed before its request is in: what the server
  // sent is still there to read.
  (void)!send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  char buf[4096];
  while (PollFor(fd, POLLIN, absl::Seconds(5))) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() >= kFrameHeaderBytes) {
      uint32_t length = 0;
      for (size_t i = 0; i < kFrameHeaderBytes; i++) {
        length |= static_cast<uint32_t>(static_cast<unsigned char>(out[i])) << (8 * i);
      }
      if (out.size() >= kFrameHeaderBytes + length) break;
    }
  }
  close(fd);
  return out;
}

}  // namespace ringside::agent::testing
