#include "agent/cli/merge_command.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "agent/files/output_file.h"
#include "agent/files/trace_archive.h"
#include "agent/files/trace_inspector.h"

namespace ringside::agent {
namespace {

// Perfetto's importer reads the first member whose text starts so as the
// TAR's manifest: the whole archive on REALTIME, so that a node that booted
// after another's file began keeps its earlier events (on one file's
// BOOTTIME they would fall before zero and be dropped). The files name
// their machines themselves (SystemInfo.machine_name, every packet's
// machine_id); naming them here too makes Perfetto v58.2 add an empty
// machine.
constexpr char kManifestName[] = "perfetto_manifest.json";
constexpr char kManifest[] =
    "{\"perfetto_manifest\": {\"version\": 1, \"trace_time\": {\"clock\": \"REALTIME\"}}}\n";

struct Input {
  std::string path;
  std::string member;  // Its name in the archive.
  std::string machine;
  std::string boot_id;
  uint32_t machine_id = 0;  // The id most of its packets carry; 0: none.
  // REALTIME of its kernel events (of all its packets when it has none): a
  // snapshot's or a rotated file's preamble is stamped with its session's
  // start, which may be days before what it recorded.
  int64_t first_ns = 0, last_ns = 0;
};

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// last - first, in seconds; modular, as an untrusted file's clocks may be
// anything.
std::string Duration(int64_t first, int64_t last) {
  return absl::StrFormat(
      "%.3f s",
      static_cast<double>(static_cast<uint64_t>(last) - static_cast<uint64_t>(first)) / 1e9);
}

bool Overlap(const Input& a, const Input& b) {
  return a.first_ns <= b.last_ns && b.first_ns <= a.last_ns;
}

}  // namespace

const CommandSpec& MergeCommandSpec() {
  static const CommandSpec* spec = new CommandSpec{
      .name = "merge",
      .synopsis = "ringside merge -o OUT.tar FILE...",
      .summary =
          "Puts trace files of several machines (snapshots, recordings, streamed files)\n"
          "into one TAR that trace_processor and ui.perfetto.dev open as one timeline:\n"
          "one machine per machine id the files' packets carry, named by each file's\n"
          "system info, all on REALTIME (a perfetto_manifest.json first). Every file is\n"
          "read whole first: one that is corrupt, or has no clock snapshot with REALTIME\n"
          "to place it by, is refused and nothing is written. Prints each file's\n"
          "machine and wall-clock range, and the range all files cover.",
      .flags = {{'o', "output", "OUT", "the archive to write (required)", false}},
      .examples =
          "  ringside merge -o incident.tar node-a/*.pftrace node-b/*.pftrace\n"
          "  ringside merge -o - a.pftrace b.pftrace | ssh laptop 'cat > incident.tar'\n",
      .max_positional = -1,
      .rest_is_command = false,
  };
  return *spec;
}

int RunMergeCommand(const ParsedArgs& args) {
  const CommandSpec& spec = MergeCommandSpec();
  if (!args.Has("output")) return UsageError(spec, "needs -o OUT.tar");
  if (args.positional.empty()) return UsageError(spec, "needs one FILE or more");
  const std::string output = args.Get("output");

  // Before anything is read: names the archive can hold, and an output
  // that is none of the inputs (the archive would replace it).
  std::set<std::string> members = {kManifestName};
  uint64_t total_bytes = 0;
  struct stat out_st;
  const bool out_exists = output != "-" && stat(output.c_str(), &out_st) == 0;
  for (const std::string& path : args.positional) {
    if (path == "-") return UsageError(spec, "reads files, not standard input: name each FILE");
    const std::string member = Basename(path);
    if (member.empty() || member.size() > 100) {
      std::fprintf(stderr,
                   "ringside merge: %s: a TAR member's name is 1 to 100 bytes; copy or rename "
                   "the file; nothing written\n",
                   path.c_str());
      return kExitFailure;
    }
    if (!members.insert(member).second) {
      std::fprintf(stderr,
                   "ringside merge: two files are named %s: the archive holds each by its name "
                   "alone; rename one; nothing written\n",
                   member.c_str());
      return kExitFailure;
    }
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      std::fprintf(stderr, "ringside merge: %s: %s; nothing written\n", path.c_str(),
                   std::strerror(errno));
      return kExitFailure;
    }
    if (out_exists && st.st_dev == out_st.st_dev && st.st_ino == out_st.st_ino) {
      std::fprintf(stderr,
                   "ringside merge: -o %s is one of the files to merge (%s): the archive would "
                   "replace it; nothing written\n",
                   output.c_str(), path.c_str());
      return kExitFailure;
    }
    total_bytes += static_cast<uint64_t>(st.st_size);
  }

  std::vector<Input> inputs;
  for (const std::string& path : args.positional) {
    absl::StatusOr<TraceSummary> s = InspectTraceFile(path);
    if (!s.ok()) {
      std::fprintf(stderr, "ringside merge: %s; nothing written\n",
                   std::string(s.status().message()).c_str());
      return kExitFailure;
    }
    if (s->error.has_value() || s->packets == 0) {
      std::fprintf(
          stderr, "ringside merge: %s: %s; nothing written\n", path.c_str(),
          s->error.has_value()
              ? absl::StrCat("byte offset ", s->error->offset, ": ", s->error->message).c_str()
              : "the file is empty");
      return kExitFailure;
    }
    auto range = s->RealtimeRange(/*events_only=*/true);
    if (!range.has_value()) range = s->RealtimeRange();
    if (!range.has_value()) {
      std::fprintf(stderr,
                   "ringside merge: %s has no clock snapshot with both BOOTTIME and REALTIME: "
                   "its events cannot be placed beside other machines'; nothing written\n",
                   path.c_str());
      return kExitFailure;
    }
    Input in;
    in.path = path;
    in.member = Basename(path);
    if (s->machine.has_value()) {
      in.machine = s->machine->name;
      in.boot_id = s->machine->boot_id;
    }
    uint64_t most = 0;
    for (const auto& [id, packets] : s->packets_by_machine_id) {
      if (id != 0 && packets > most) {
        most = packets;
        in.machine_id = id;
      }
    }
    in.first_ns = range->first;
    in.last_ns = range->second;
    inputs.push_back(std::move(in));
  }

  // What the importer would make of them.
  for (size_t i = 0; i < inputs.size(); i++) {
    const Input& in = inputs[i];
    if (in.machine_id == 0) {
      std::fprintf(stderr,
                   "ringside merge: warning: the packets of %s carry no machine id (a recorder "
                   "that does not stamp them): the importer puts them on one machine with "
                   "every other such file's\n",
                   in.path.c_str());
      continue;
    }
    for (size_t j = 0; j < i; j++) {
      const Input& other = inputs[j];
      if (other.machine_id != in.machine_id) continue;
      if (!other.machine.empty() && !in.machine.empty() && other.machine != in.machine) {
        std::fprintf(stderr,
                     "ringside merge: warning: %s (%s) and %s (%s) have one machine id, %08x: "
                     "the importer shows them as one machine (nodes cloned from one image "
                     "without a new /etc/machine-id? give each its own machine_name)\n",
                     other.path.c_str(), other.machine.c_str(), in.path.c_str(), in.machine.c_str(),
                     in.machine_id);
      } else if (Overlap(other, in)) {
        // A snapshot holds the whole ring, streamed files the same events:
        // the importer keeps both copies, and queries count them twice.
        const bool two_boots =
            !other.boot_id.empty() && !in.boot_id.empty() && other.boot_id != in.boot_id;
        std::fprintf(stderr,
                     "ringside merge: warning: %s and %s are of one machine (%08x) and overlap "
                     "in time: %s\n",
                     other.path.c_str(), in.path.c_str(), in.machine_id,
                     two_boots ? "with two boot ids at once, so two machines with one name or "
                                 "one /etc/machine-id (give each its own machine_name)"
                               : "the overlap's events are in the archive twice, and queries "
                                 "count them twice; merge one of the two");
      }
    }
  }

  absl::StatusOr<std::unique_ptr<OutputFile>> file = OutputFile::Open(
      output, OutputFile::Mode::kWholeFile, total_bytes + 1024 * (inputs.size() + 4));
  if (!file.ok()) {
    std::fprintf(stderr, "ringside merge: %s\n", std::string(file.status().message()).c_str());
    return kExitFailure;
  }
  TarWriter tar(file->get());
  absl::Status st = tar.AddFile(kManifestName, kManifest, absl::ToUnixSeconds(absl::Now()));
  for (size_t i = 0; st.ok() && i < inputs.size(); i++) {
    st = tar.AddFileFrom(inputs[i].member, inputs[i].path);
  }
  if (st.ok()) st = tar.Finish();
  if (!st.ok()) {
    std::fprintf(stderr, "ringside merge: %s; %s not written\n", std::string(st.message()).c_str(),
                 output.c_str());
    return kExitFailure;
  }

  const std::string shown = output == "-" ? "standard output" : output;
  std::set<uint32_t> machines;
  for (const Input& in : inputs) machines.insert(in.machine_id);
  std::fprintf(stderr, "ringside merge: %s: %zu files of %zu machines, on REALTIME (%s)\n",
               shown.c_str(), inputs.size(), machines.size(), kManifestName);
  size_t width = 4;
  for (const Input& in : inputs) width = std::max(width, in.member.size());
  int64_t latest_first = INT64_MIN, earliest_last = INT64_MAX;
  const Input *latest = nullptr, *earliest = nullptr;
  for (const Input& in : inputs) {
    std::fprintf(stderr, "  %-*s  %-16s %08x  %s .. %s\n", static_cast<int>(width),
                 in.member.c_str(), in.machine.empty() ? "(unnamed)" : in.machine.c_str(),
                 in.machine_id, FormatRealtime(in.first_ns).c_str(),
                 FormatRealtime(in.last_ns).c_str());
    if (in.first_ns > latest_first) latest_first = in.first_ns, latest = &in;
    if (in.last_ns < earliest_last) earliest_last = in.last_ns, earliest = &in;
  }
  if (latest_first <= earliest_last) {
    std::fprintf(stderr, "ringside merge: all files cover %s .. %s (%s)\n",
                 FormatRealtime(latest_first).c_str(), FormatRealtime(earliest_last).c_str(),
                 Duration(latest_first, earliest_last).c_str());
  } else {
    std::fprintf(stderr,
                 "ringside merge: warning: the files share no moment: %s begins at %s, after %s "
                 "ended at %s\n",
                 latest->member.c_str(), FormatRealtime(latest_first).c_str(),
                 earliest->member.c_str(), FormatRealtime(earliest_last).c_str());
  }
  return kExitOk;
}

}  // namespace ringside::agent
