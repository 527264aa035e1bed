#include "bpf/load_errors.h"

#include <bpf/libbpf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_io.h"
#include "base/scoped_fd.h"

namespace ringside::bpf {
namespace {

// libbpf's messages, kept for the error of a failed load (the verifier log).
std::string& LibbpfLog() {
  static std::string log;
  return log;
}

int CaptureLibbpfOutput(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  // Whole: libbpf prints a verifier's log in one call, and its reason for
  // refusing a program is at the end.
  va_list copy;
  va_copy(copy, args);
  const int size = vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string& log = LibbpfLog();
  if (size <= 0 || log.size() + static_cast<size_t>(size) > (4 << 20)) return 0;
  std::string text(static_cast<size_t>(size) + 1, '\0');
  vsnprintf(text.data(), text.size(), format, args);
  text.resize(static_cast<size_t>(size));
  log += text;
  return 0;
}

}  // namespace

std::string VerifierSummary(absl::string_view log) {
  // libbpf: "prog 'NAME': -- BEGIN PROG LOAD LOG --" ... "-- END PROG LOAD LOG --".
  const size_t begin = log.find("-- BEGIN PROG LOAD LOG --");
  if (begin == absl::string_view::npos) return "";
  std::string program;
  const size_t quote = log.rfind("prog '", begin);
  if (quote != absl::string_view::npos) {
    const size_t end = log.find('\'', quote + 6);
    if (end != absl::string_view::npos && end < begin) {
      program = std::string(log.substr(quote + 6, end - quote - 6));
    }
  }
  absl::string_view body = log.substr(begin);
  body = body.substr(0, std::min(body.size(), body.find("-- END PROG LOAD LOG --")));
  // The verifier's reason is its last line before its closing figures.
  std::string reason;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "-- BEGIN") ||
        absl::StartsWith(line, "processed ") || absl::StartsWith(line, "verification time") ||
        absl::StartsWith(line, "stack depth") || absl::StartsWith(line, "libbpf:")) {
      continue;
    }
    reason = std::string(line);
  }
  if (program.empty()) return reason;
  return absl::StrCat(program, ": ", reason);
}

namespace {

// Writes the whole libbpf and verifier log to the file RINGSIDE_BPF_LOG
// names, a new file only (never through a symlink, never over one): ""
// when unset, else what to tell the user.
std::string WriteWholeLog(const std::string& log) {
  const char* path = std::getenv("RINGSIDE_BPF_LOG");
  if (path == nullptr || *path == '\0') {
    return "; RINGSIDE_BPF_LOG=FILE writes the verifier's whole log";
  }
  const base::ScopedFd fd(open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    return absl::StrCat("; the whole log not written to ", path, ": ", std::strerror(errno));
  }
  const base::IoResult written = base::WriteAll(fd.get(), log);
  if (!written.ok()) {
    return absl::StrCat("; the verifier's log is cut short in ", path, " (", written.bytes, " of ",
                        log.size(), " bytes): ", std::strerror(written.err));
  }
  return absl::StrCat("; the verifier's whole log is in ", path);
}

}  // namespace

absl::Status LoadError(int err, const std::string& what) {
  // The verifier refuses a program with EACCES as well: libbpf then logs
  // the verifier's reasons, and those are the error, not privileges.
  const std::string summary = VerifierSummary(LibbpfLog());
  const bool verifier = absl::StrContains(LibbpfLog(), "BEGIN PROG LOAD LOG");
  if ((err == EPERM || err == EACCES) && !verifier) {
    return absl::PermissionDeniedError(absl::StrCat(
        what, ": ", std::strerror(err),
        " (BPF needs root or CAP_BPF + CAP_PERFMON; check kernel.unprivileged_bpf_disabled)"));
  }
  if (err == ENOMEM) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": out of locked memory; raise RLIMIT_MEMLOCK (ulimit -l) or the memcg limit"));
  }
  if (verifier) {
    // One line: the program and the verifier's reason; the whole log (can
    // be thousands of lines) only where asked for.
    return absl::InvalidArgumentError(absl::StrCat(what, ": the kernel's verifier refused ",
                                                   summary, WriteWholeLog(LibbpfLog())));
  }
  // libbpf's own lines (a missing map, a relocation it cannot make): few.
  std::string log = LibbpfLog();
  if (log.size() > 4096) log = absl::StrCat("...", log.substr(log.size() - 4096));
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", std::strerror(err), "\n", log));
}

std::string LoadFailureSummary(int err) {
  const std::string verifier = VerifierSummary(LibbpfLog());
  if (!verifier.empty()) return absl::StrCat("the kernel's verifier refused ", verifier);
  absl::string_view last = absl::StripTrailingAsciiWhitespace(LibbpfLog());
  last = last.substr(last.rfind('\n') == absl::string_view::npos ? 0 : last.rfind('\n') + 1);
  return absl::StrCat(std::strerror(err), last.empty() ? "" : ": ", last);
}

void CaptureLibbpfLog() {
  libbpf_set_print(CaptureLibbpfOutput);
  LibbpfLog().clear();
}

}  // namespace ringside::bpf
