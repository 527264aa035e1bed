#include "agent/cli/merge_command.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "agent/output/output_file.h"
#include "agent/tracefile/shared_events.h"
#include "agent/tracefile/trace_archive.h"
#include "agent/tracefile/trace_inspector.h"
#include "agent/tracefile/untrusted_text.h"

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
  // CLOCK_BOOTTIME of its kernel events (unset: it has none).
  std::optional<uint64_t> first_event_ns, last_event_ns;
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

// `name` made a TAR member's name: a machine name from the file, kept to
// letters, digits, '.', '-' and '_', at most 40 bytes.
std::string MemberPrefix(const std::string& machine) {
  std::string out;
  for (char c : machine.substr(0, 40)) {
    out.push_back(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
                          (c == '.' && !out.empty())
                      ? c
                      : '_');
  }
  return out;
}

// Gives each input a member name of its own: its base name, and where two
// share one (per-node default names: a/ringside.pftrace, b/ringside.pftrace)
// "<machine>-<base name>", then "<stem>-2<ext>", "-3", ... as needed.
void NameMembers(std::vector<Input>* inputs, std::set<std::string> taken) {
  std::map<std::string, int> uses;
  for (const Input& in : *inputs) uses[Basename(in.path)]++;
  for (Input& in : *inputs) {
    const std::string base = Basename(in.path);
    std::string name = base;
    if (uses[base] > 1 || taken.count(name)) {
      const std::string prefix = MemberPrefix(in.machine);
      if (!prefix.empty() && prefix.size() + 1 + base.size() <= 100) {
        name = absl::StrCat(prefix, "-", base);
      }
    }
    const size_t dot = name.rfind('.');
    const std::string stem = dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
    const std::string ext = stem.size() == name.size() ? "" : name.substr(stem.size());
    for (int n = 2; taken.count(name); n++) name = absl::StrCat(stem, "-", n, ext);
    taken.insert(name);
    in.member = name;
  }
}

// Before anything is read: names the archive can hold, and an output that
// is none of the inputs (the archive would replace it). Adds the inputs'
// sizes to `*total_bytes`. nullopt, or the exit status when one cannot be
// merged.
std::optional<int> CheckInputPaths(const CommandSpec& spec, const ParsedArgs& args,
                                   const std::string& output, uint64_t* total_bytes) {
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
    *total_bytes += static_cast<uint64_t>(st.st_size);
  }
  return std::nullopt;
}

// Reads the trace file `path` whole into `*in` (all but its member name).
// nullopt, or the exit status when it is corrupt, empty or cannot be
// placed on REALTIME.
std::optional<int> ReadInput(const std::string& path, Input* in) {
  absl::StatusOr<TraceSummary> s = InspectTraceFile(path);
  if (!s.ok()) {
    std::fprintf(stderr, "ringside merge: %s; nothing written\n",
                 std::string(s.status().message()).c_str());
    return kExitFailure;
  }
  if (s->error.has_value() || s->packets == 0) {
    std::fprintf(
        stderr, "ringside merge: %s: %s; nothing written\n", path.c_str(),
        !s->error.has_value() ? "the file is empty"
        : s->error->not_a_trace
            ? s->error->message.c_str()
            : absl::StrCat("byte offset ", s->error->offset, ": ", s->error->message).c_str());
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
  in->path = path;
  if (s->machine.has_value()) {
    in->machine = s->machine->name;
    in->boot_id = s->machine->boot_id;
  }
  uint64_t most = 0;
  for (const auto& [id, packets] : s->packets_by_machine_id) {
    if (id != 0 && packets > most) {
      most = packets;
      in->machine_id = id;
    }
  }
  in->first_ns = range->first;
  in->last_ns = range->second;
  in->first_event_ns = s->first_event_ns;
  in->last_event_ns = s->last_event_ns;
  return std::nullopt;
}

// Warns of what the importer would make of two files of one machine id
// (`other` before `in`): two machines of one id, two boots at once, or
// kernel events both hold. nullopt, or the exit status when the events
// cannot be compared.
std::optional<int> WarnOfOneMachineId(const Input& other, const Input& in) {
  if (!other.machine.empty() && !in.machine.empty() && other.machine != in.machine) {
    std::fprintf(stderr,
                 "ringside merge: warning: %s (%s) and %s (%s) have one machine id, %08x: "
                 "the importer shows them as one machine (nodes cloned from one image "
                 "without a new /etc/machine-id? give each its own machine_name)\n",
                 other.path.c_str(), PrintableText(other.machine).c_str(), in.path.c_str(),
                 PrintableText(in.machine).c_str(), in.machine_id);
  } else if (!other.boot_id.empty() && !in.boot_id.empty() && other.boot_id != in.boot_id) {
    if (Overlap(other, in)) {
      std::fprintf(stderr,
                   "ringside merge: warning: %s and %s are of one machine (%08x) and overlap "
                   "in time with two boot ids at once, so two machines with one name or one "
                   "/etc/machine-id (give each its own machine_name)\n",
                   other.path.c_str(), in.path.c_str(), in.machine_id);
    }
  } else if (other.first_event_ns && in.first_event_ns &&
             std::max(*other.first_event_ns, *in.first_event_ns) <=
                 std::min(*other.last_event_ns, *in.last_event_ns)) {
    // A snapshot holds the whole ring, streamed files the same events:
    // the importer keeps both copies, and queries count them twice.
    // Rotated files of one stream interleave at their ends without
    // sharing an event: only events in both are an overlap.
    const uint64_t from = std::max(*other.first_event_ns, *in.first_event_ns);
    const uint64_t to = std::min(*other.last_event_ns, *in.last_event_ns);
    absl::StatusOr<uint64_t> shared = CountSharedKernelEvents(other.path, in.path, from, to);
    if (!shared.ok()) {
      std::fprintf(stderr, "ringside merge: %s; nothing written\n",
                   std::string(shared.status().message()).c_str());
      return kExitFailure;
    }
    if (*shared > 0) {
      std::fprintf(stderr,
                   "ringside merge: warning: %s and %s are of one machine (%08x) and hold "
                   "%llu of the same kernel events: the archive has them twice, and queries "
                   "count them twice; merge one of the two\n",
                   other.path.c_str(), in.path.c_str(), in.machine_id,
                   static_cast<unsigned long long>(*shared));
    }
  }
  return std::nullopt;
}

// What the importer would make of the inputs, as warnings. nullopt, or the
// exit status when two files cannot be compared.
std::optional<int> WarnOfMachineIds(const std::vector<Input>& inputs) {
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
      if (inputs[j].machine_id != in.machine_id) continue;
      if (auto status = WarnOfOneMachineId(inputs[j], in)) return status;
    }
  }
  return std::nullopt;
}

// Writes the manifest and every input into the TAR at `output`. nullopt,
// or the exit status when it cannot.
std::optional<int> WriteArchive(const ParsedArgs& args, const std::string& output,
                                const std::vector<Input>& inputs, uint64_t total_bytes) {
  absl::StatusOr<std::unique_ptr<OutputFile>> file = OutputFile::Open(
      output, OutputFile::Mode::kWholeFile, total_bytes + 1024 * (inputs.size() + 4),
      args.Has("follow-symlink") ? OutputFile::Symlinks::kFollowAny
                                 : OutputFile::Symlinks::kFollowOwn);
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
  return std::nullopt;
}

// What each machine's files cover together: rotated files of one node
// follow each other, and share no moment with each other by design.
struct MachineSpan {
  const Input* first = nullptr;  // Its file that begins first...
  const Input* last = nullptr;   // ...and the one that ends last.
};
// By machine id (and, for a file without an id, its index: its own).
using MachineSpans = std::map<std::pair<uint32_t, size_t>, MachineSpan>;

// Prints each input's line (member, machine, id, wall-clock range), and
// returns the span of each machine.
MachineSpans PrintInputs(const std::vector<Input>& inputs) {
  size_t width = 4;
  for (const Input& in : inputs) width = std::max(width, in.member.size());
  MachineSpans spans;
  for (size_t i = 0; i < inputs.size(); i++) {
    const Input& in = inputs[i];
    std::fprintf(
        stderr, "  %-*s  %-16s %08x  %s .. %s\n", static_cast<int>(width), in.member.c_str(),
        in.machine.empty() ? "(unnamed)" : PrintableText(in.machine).c_str(), in.machine_id,
        FormatRealtime(in.first_ns).c_str(), FormatRealtime(in.last_ns).c_str());
    MachineSpan& span = spans[{in.machine_id, in.machine_id == 0 ? i : 0}];
    if (span.first == nullptr || in.first_ns < span.first->first_ns) span.first = &in;
    if (span.last == nullptr || in.last_ns > span.last->last_ns) span.last = &in;
  }
  return spans;
}

// The range every machine's files cover, or the warning that there is
// none.
void PrintCommonRange(const MachineSpans& spans) {
  int64_t latest_first = INT64_MIN, earliest_last = INT64_MAX;
  const Input *latest = nullptr, *earliest = nullptr;
  for (const auto& [key, span] : spans) {
    if (span.first->first_ns > latest_first)
      latest_first = span.first->first_ns, latest = span.first;
    if (span.last->last_ns < earliest_last)
      earliest_last = span.last->last_ns, earliest = span.last;
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
          "to place it by, is refused and nothing is written. Each file keeps its base\n"
          "name in the archive; files of one name (a/trace.pftrace, b/trace.pftrace) are\n"
          "told apart by their machine's name (node-a-trace.pftrace), else a number.\n"
          "Warns of two files of one machine that hold the same kernel events. Prints\n"
          "each file's machine and wall-clock range, and the range all files cover.",
      .flags = {{'o', "output", "OUT",
                 "the archive to write (required; a symlink of your own is followed)", false},
                {0, "follow-symlink", "",
                 "follow -o's symlink even when another user owns it (refused by default: "
                 "it could point anywhere)",
                 false}},
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
  uint64_t total_bytes = 0;
  if (auto status = CheckInputPaths(spec, args, output, &total_bytes)) return *status;

  std::vector<Input> inputs;
  for (const std::string& path : args.positional) {
    if (auto status = ReadInput(path, &inputs.emplace_back())) return *status;
  }
  NameMembers(&inputs, {kManifestName});
  for (const Input& in : inputs) {
    if (in.member != Basename(in.path)) {
      std::fprintf(stderr, "ringside merge: %s is %s in the archive (another file has its name)\n",
                   in.path.c_str(), in.member.c_str());
    }
  }
  if (auto status = WarnOfMachineIds(inputs)) return *status;
  if (auto status = WriteArchive(args, output, inputs, total_bytes)) return *status;

  std::set<uint32_t> machines;
  for (const Input& in : inputs) machines.insert(in.machine_id);
  std::fprintf(stderr, "ringside merge: %s: %zu files of %zu machines, on REALTIME (%s)\n",
               output == "-" ? "standard output" : output.c_str(), inputs.size(), machines.size(),
               kManifestName);
  PrintCommonRange(PrintInputs(inputs));
  return kExitOk;
}

}  // namespace ringside::agent
