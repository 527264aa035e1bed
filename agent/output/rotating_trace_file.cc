#include "agent/output/rotating_trace_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "agent/output/file_retention.h"
#include "base/dir_stream.h"
#include "base/scoped_fd.h"
#include "buffer/trace_packet.h"
#include "buffer/wire_format.h"

namespace ringside::agent {
namespace {

constexpr char kPartialSuffix[] = ".partial";
constexpr size_t kMinSeqDigits = 6;

bool IsSeq(absl::string_view s) {
  if (s.size() < kMinSeqDigits) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The end of the last whole packet of a trace file, reading only the
// packets' headers.
uint64_t EndOfLastWholePacket(int fd, uint64_t size) {
  uint64_t offset = 0;
  while (offset < size) {
    uint8_t header[1 + buffer::kMaxVarIntSize];
    const ssize_t n = pread(fd, header, sizeof(header), static_cast<off_t>(offset));
    if (n <= 0) break;
    const buffer::PacketFrame frame = buffer::ReadPacketFrame(header, header + n);
    if (frame.header_size == 0) break;  // Not a packet, or its header is cut.
    const uint64_t left = size - offset;
    if (frame.header_size > left || frame.packet_size > left - frame.header_size) break;  // Cut.
    offset += frame.size();
  }
  return offset;
}

}  // namespace

bool IsStreamFileName(absl::string_view name, const FileHost& host) {
  const std::optional<absl::string_view> rest = AgentFileRest(name, host);
  return rest.has_value() && IsSeq(*rest);
}

absl::StatusOr<std::unique_ptr<RotatingTraceFile>> RotatingTraceFile::Open(Options options) {
  std::unique_ptr<RotatingTraceFile> f(new RotatingTraceFile(std::move(options)));
  // Checked as the snapshots' directory is: only the agent's user may
  // write it (it exists already; the agent made it with its group).
  absl::StatusOr<std::unique_ptr<OutputDir>> dir = OutputDir::Open(f->options_.dir, std::nullopt);
  if (!dir.ok()) {
    return absl::Status(dir.status().code(), absl::StrCat("streaming into ", f->options_.dir, ": ",
                                                          dir.status().message()));
  }
  f->dir_ = std::move(*dir);
  const FileHost& host = f->options_.hostname;
  for (std::string& name : TracesWithoutSidecar(
           *f->dir_, [&host](absl::string_view name) { return IsStreamFileName(name, host); })) {
    f->sidecars_.Queue(f->dir_, std::move(name), f->options_.group);
  }
  if (absl::Status st = f->OpenFile(); !st.ok()) return st;
  return f;
}

RotatingTraceFile::~RotatingTraceFile() = default;

absl::Status RotatingTraceFile::OpenFile() {
  const absl::Time now = options_.now();
  const std::string stem = AgentFileStem(options_.hostname.name(), now);
  // The sequence numbers go on from this agent's last file; a name another
  // agent run took in the same second is skipped.
  for (int tries = 0; tries < 1000; tries++) {
    const std::string name = absl::StrFormat("%s-%06d.pftrace", stem, next_seq_++);
    const std::string partial = absl::StrCat(name, kPartialSuffix);
    struct stat st;
    if (fstatat(dir_->fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) continue;
    const std::string path = absl::StrCat(options_.dir, "/", partial);
    absl::StatusOr<std::unique_ptr<OutputFile>> file =
        OutputFile::CreateNew(dir_->fd(), partial, path, 0600);
    if (absl::IsAlreadyExists(file.status())) continue;
    if (file.ok() && options_.group.has_value()) {
      if (absl::Status st = (*file)->ShareWithGroup(*options_.group); !st.ok()) {
        unlinkat(dir_->fd(), partial.c_str(), 0);
        file = st;
      }
    }
    if (!file.ok()) {
      CountError(file.status());
      return file.status();
    }
    file_ = std::move(*file);
    partial_name_ = partial;
    display_name_ = path;
    opened_at_ = now;
    absl::MutexLock lock(&mu_);
    stats_.path = path;
    stats_.bytes = 0;
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("streaming into ", options_.dir, ": 1000 file names of ", stem, " are taken"));
}

absl::Status RotatingTraceFile::Write(absl::string_view packets) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("streaming into ", options_.dir, ": no file is open"));
  }
  absl::Status st = file_->Write(packets);
  if (!st.ok()) {
    CountError(st);
    return st;
  }
  absl::MutexLock lock(&mu_);
  stats_.bytes = file_->bytes_written();
  return absl::OkStatus();
}

uint64_t RotatingTraceFile::bytes_written() const {
  return file_ == nullptr ? 0 : file_->bytes_written();
}

bool RotatingTraceFile::FileDue() const {
  if (file_ == nullptr) return false;
  if (options_.max_file_bytes > 0 && file_->bytes_written() >= options_.max_file_bytes) return true;
  return options_.max_file_age > absl::ZeroDuration() &&
         options_.now() - opened_at_ >= options_.max_file_age;
}

absl::Status RotatingTraceFile::FinishFile() {
  std::unique_ptr<OutputFile> file = std::move(file_);
  const uint64_t bytes = file->bytes_written();
  // Room first, so that the directory never holds more than the limits.
  Prune(/*joining_bytes=*/bytes);
  // Written whole, then under its final name: a reader never sees part of it.
  absl::Status st = file->Finish();
  file.reset();
  const std::string final_name =
      partial_name_.substr(0, partial_name_.size() - (sizeof(kPartialSuffix) - 1));
  if (st.ok() && renameat2(dir_->fd(), partial_name_.c_str(), dir_->fd(), final_name.c_str(),
                           RENAME_NOREPLACE) != 0) {
    st = absl::UnavailableError(absl::StrCat("renaming ", display_name_, " to ", final_name, ": ",
                                             std::strerror(errno), " (the trace stays there)"));
  }
  if (st.ok()) {
    fsync(dir_->fd());
    sidecars_.Queue(dir_, final_name, options_.group);
  }
  absl::MutexLock lock(&mu_);
  stats_.path.clear();
  stats_.bytes = 0;
  if (!st.ok()) {
    stats_.write_errors++;
    stats_.last_error = std::string(st.message());
    return st;
  }
  stats_.files_finished++;
  stats_.bytes_finished += bytes;
  return st;
}

void RotatingTraceFile::Prune(uint64_t joining_bytes) {
  const FileHost& host = options_.hostname;
  absl::MutexLock publishing(&sidecars_.publish_mutex());
  const PruneResult r = PruneOldestFiles(
      *dir_, host,
      [&host](absl::string_view name) -> std::optional<int> {
        if (!IsStreamFileName(name, host)) return std::nullopt;
        return 0;
      },
      options_.max_files, options_.max_total_bytes, "", FileJoining{joining_bytes});
  absl::MutexLock lock(&mu_);
  stats_.files_deleted += r.files_deleted;
  stats_.bytes_deleted += r.bytes_deleted;
  if (!r.errors.empty()) {
    stats_.write_errors++;
    stats_.last_error = absl::StrCat("retention: ", r.errors.front());
  }
}

absl::Status RotatingTraceFile::NextFile() {
  if (file_ != nullptr) {
    // A file that could not be finished keeps its ".partial" name (still a
    // valid trace); the stream goes on in the next one regardless.
    (void)FinishFile();
  }
  return OpenFile();
}

absl::Status RotatingTraceFile::Finish() {
  if (file_ == nullptr) return absl::OkStatus();
  return FinishFile();
}

RotatingTraceFile::Stats RotatingTraceFile::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void RotatingTraceFile::CountError(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  stats_.write_errors++;
  stats_.last_error = std::string(status.message());
}

RecoveredFiles RecoverPartialStreamFiles(const std::string& dir, const FileHost& host) {
  RecoveredFiles recovered;
  const base::ScopedFd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd.valid()) return recovered;
  const base::DirStream d = base::OpenDirStream(dir_fd.get());
  if (d == nullptr) return recovered;
  while (const dirent* e = readdir(d.get())) {
    absl::string_view name = e->d_name;
    if (!absl::ConsumeSuffix(&name, kPartialSuffix) || !IsStreamFileName(name, host)) continue;
    const base::ScopedFd fd(
        openat(dir_fd.get(), e->d_name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd.valid()) continue;  // A symlink (ELOOP), or gone.
    struct stat st;
    if (fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        st.st_nlink == 1) {
      const uint64_t size = static_cast<uint64_t>(st.st_size);
      const uint64_t whole = EndOfLastWholePacket(fd.get(), size);
      if ((whole == size || ftruncate(fd.get(), static_cast<off_t>(whole)) == 0) &&
          fsync(fd.get()) == 0 &&
          renameat2(dir_fd.get(), e->d_name, dir_fd.get(), std::string(name).c_str(),
                    RENAME_NOREPLACE) == 0) {
        recovered.files++;
        recovered.bytes_cut += size - whole;
      }
    }
  }
  fsync(dir_fd.get());
  return recovered;
}

}  // namespace ringside::agent
