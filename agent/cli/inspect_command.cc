#include "agent/cli/inspect_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/tracefile/trace_archive.h"
#include "agent/tracefile/trace_inspector.h"
#include "agent/tracefile/untrusted_text.h"
#include "base/json_text.h"
#include "base/scoped_fd.h"
#include "nlohmann/json.hpp"

namespace ringside::agent {

const CommandSpec& InspectCommandSpec() {
  static const CommandSpec* spec = new CommandSpec{
      .name = "inspect",
      .synopsis = "ringside inspect [--json] [--top N] FILE",
      .summary =
          "Summarizes any Perfetto-format trace: packets by type and by sequence, losses\n"
          "(previous_packet_dropped marks and every non-zero stat), the time range, and\n"
          "the processes and threads named. Streams the file, so large traces are fine;\n"
          "a truncated or corrupt file is summarized up to the bad byte, then an error\n"
          "names its offset (exit 1). FILE may be gzip'd (known by its magic bytes); -\n"
          "reads the trace from standard input. A TAR archive (what `ringside merge`\n"
          "writes) is summarized file by file. A file that is no trace is named for what\n"
          "it is (exit 1). Names from the file are printed with control characters\n"
          "escaped (\\x1b). Stack samples (bpf_config.stacks) are summed per stack: the\n"
          "heaviest blocked stacks (time off CPU) and CPU stacks, innermost frame first.",
      .flags = {{0, "json", "", "print the summary as one JSON object", false},
                {0, "top", "N", "list the N heaviest blocked and CPU stacks (default 5; 0 to 1000)",
                 false}},
      .examples =
          "  ringside inspect trace.pftrace\n"
          "  ringside inspect --json trace.pftrace | jq .packets_by_type\n"
          "  ringside inspect trace.pftrace.gz\n"
          "  ssh host cat trace.pftrace | ringside inspect -\n",
      .max_positional = 1,
      .rest_is_command = false,
  };
  return *spec;
}

namespace {

// The TAR archive `merge` writes (or any): each trace member summarized in
// turn, under "ARCHIVE[MEMBER]", and what the others are. Exit 1 when a
// trace member is corrupt or none is a trace.
int InspectArchive(const std::string& path, int fd, bool json, size_t top_stacks) {
  absl::StatusOr<std::vector<TarMember>> members = ReadTarMembers(fd, path);
  if (!members.ok()) {
    const std::string message(members.status().message());
    if (json) {
      nlohmann::json j = {{"file", path}, {"error", {{"offset", nullptr}, {"message", message}}}};
      std::printf("%s\n", base::JsonText(j).c_str());
    }
    std::fprintf(stderr, "ringside inspect: %s\n", PrintableText(message).c_str());
    return kExitFailure;
  }
  nlohmann::json j = {{"file", path}, {"archive", "tar"}, {"members", nlohmann::json::array()}};
  std::string text =
      absl::StrFormat("%s: a TAR archive of %u files\n", PrintableText(path), members->size());
  std::vector<std::string> errors;
  size_t traces = 0;
  for (const TarMember& m : *members) {
    const std::string shown = absl::StrCat(path, "[", m.name, "]");
    absl::StatusOr<TraceSummary> s = InspectTraceRange(fd, shown, m.offset, m.size, top_stacks);
    if (s.ok() && !s->error && s->packets == 0) {
      s->error = TraceSummary::Error{0, "the file is empty: it holds no trace packets", true};
    }
    if (!s.ok() || (s->error && s->error->not_a_trace)) {
      const std::string what = s.ok() ? s->error->message : std::string(s.status().message());
      absl::StrAppendFormat(&text, "\n%s: %u bytes, %s\n", PrintableText(shown), m.size,
                            PrintableText(what));
      j["members"].push_back({{"member", m.name}, {"size_bytes", m.size}, {"not_a_trace", what}});
      continue;
    }
    traces++;
    absl::StrAppend(&text, "\n", SummaryToText(shown, *s));
    nlohmann::json member = SummaryToJson(shown, *s);
    member["member"] = m.name;
    member["size_bytes"] = m.size;
    j["members"].push_back(std::move(member));
    if (s->error) {
      errors.push_back(absl::StrFormat("%s: byte offset %u: %s", PrintableText(shown),
                                       s->error->offset, s->error->message));
    }
  }
  if (traces == 0)
    errors.push_back(absl::StrCat(PrintableText(path), ": no file in it is a trace"));
  j["error"] = errors.empty() ? nlohmann::json(nullptr)
                              : nlohmann::json{{"offset", nullptr}, {"message", errors[0]}};
  if (json) {
    std::printf("%s\n", base::JsonText(j).c_str());
  } else {
    std::fputs(text.c_str(), stdout);
  }
  std::fflush(stdout);
  for (const std::string& e : errors) std::fprintf(stderr, "ringside inspect: %s\n", e.c_str());
  return errors.empty() ? kExitOk : kExitFailure;
}

// The TAR archive at `path`, open; none when `path` is no such archive.
base::ScopedFd OpenIfArchive(const std::string& path) {
  if (path == "-") return base::ScopedFd();
  base::ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) return fd;
  struct stat st;
  char head[512];
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      pread(fd.get(), head, sizeof(head), 0) != static_cast<ssize_t>(sizeof(head)) ||
      !IsTarHeader(std::string_view(head, sizeof(head)))) {
    return base::ScopedFd();
  }
  return fd;
}

}  // namespace

int RunInspectCommand(const ParsedArgs& args) {
  if (args.positional.size() != 1) return UsageError(InspectCommandSpec(), "needs a FILE");
  const std::string& path = args.positional[0];
  const bool json = args.Has("json");
  size_t top_stacks = TraceSummarizer::kTopStacks;
  if (args.Has("top") && (!absl::SimpleAtoi(args.Get("top"), &top_stacks) || top_stacks > 1000)) {
    return UsageError(InspectCommandSpec(),
                      absl::StrCat("--top ", args.Get("top"), ": a number from 0 to 1000"));
  }
  if (const base::ScopedFd fd = OpenIfArchive(path); fd.valid()) {
    return InspectArchive(path, fd.get(), json, top_stacks);
  }
  absl::StatusOr<TraceSummary> summary = InspectTraceFile(path, top_stacks);
  if (!summary.ok()) {
    const std::string message(summary.status().message());
    // A script reading --json looks at "error", so it says why here too.
    if (json) {
      nlohmann::json j = {{"file", path}, {"error", {{"offset", nullptr}, {"message", message}}}};
      std::printf("%s\n", base::JsonText(j).c_str());
      std::fflush(stdout);
    }
    std::fprintf(stderr, "ringside inspect: %s\n", message.c_str());
    return kExitUsage;
  }
  // An empty file reads cleanly but is no trace: it fails like a corrupt one,
  // and the summary carries the reason so that --json says it.
  const bool empty = !summary->error && summary->packets == 0;
  if (empty) {
    summary->error = TraceSummary::Error{0, "the file is empty: it holds no trace packets"};
  }
  // Text: a file of which nothing could be read gets no report of zeros,
  // only the error.
  if (json) {
    std::printf("%s\n", SummaryToJsonText(path, *summary).c_str());
  } else if (summary->packets > 0 || !summary->error) {
    std::fputs(SummaryToText(path, *summary).c_str(), stdout);
  }
  std::fflush(stdout);
  if (empty) {
    std::fprintf(stderr, "ringside inspect: %s: %s\n", path.c_str(),
                 summary->error->message.c_str());
    return kExitFailure;
  }
  if (summary->error && summary->error->not_a_trace) {
    std::fprintf(stderr, "ringside inspect: %s: %s\n", PrintableText(path).c_str(),
                 summary->error->message.c_str());
    return kExitFailure;
  }
  if (summary->error) {
    std::fprintf(
        stderr, "ringside inspect: %s: byte offset %llu: %s\n", PrintableText(path).c_str(),
        static_cast<unsigned long long>(summary->error->offset), summary->error->message.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace ringside::agent
