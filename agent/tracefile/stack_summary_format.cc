// StackSummary as `ringside inspect` prints it.
//
// A stack is printed one frame a line, the innermost first, as perf
// report's call chains and bcc's offcputime print them: the frames that
// tell stacks apart (where a thread waited: pipe_read, futex_wait; what it
// ran) come first, the ones every stack shares (the syscall entry, main,
// _start, clone) last, where a cut loses little. Each run of kernel frames
// and of user frames is cut on its own, so that a blocked stack's user
// frames (the program's function that made the call) are never crowded out
// by the kernel's.

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/tracefile/stack_summary.h"
#include "agent/tracefile/untrusted_text.h"

namespace ringside::agent {
namespace {

// Frames of a run (consecutive kernel or user frames) the text shows, and
// frames of a stack in all; --json has them all, up to kMaxFramesInJson.
constexpr size_t kMaxFramesPerRun = 6;
constexpr size_t kMaxFramesPerStack = 16;
constexpr size_t kMaxFramesInJson = 512;

std::string Seconds(uint64_t ns) {
  return absl::StrFormat("%.3f s", static_cast<double>(ns) / 1e9);
}

double Share(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

std::string ThreadLabel(const StackSummary::Thread& t, const TaskNames& names) {
  if (t.tid == t.tgid) {
    // A process's main thread (or a kernel thread): one name, one id.
    const std::string& name = names.process.empty() ? names.thread : names.process;
    return name.empty() ? absl::StrCat("pid ", t.tgid)
                        : absl::StrFormat("%s (pid %d)", PrintableText(name), t.tgid);
  }
  std::string out = names.thread.empty()
                        ? absl::StrCat("thread ", t.tid)
                        : absl::StrFormat("%s (tid %d)", PrintableText(names.thread), t.tid);
  absl::StrAppend(&out, " of ",
                  names.process.empty()
                      ? absl::StrCat("pid ", t.tgid)
                      : absl::StrFormat("%s (pid %d)", PrintableText(names.process), t.tgid));
  return out;
}

// Whose the stack is: its thread, the thread that weighs at least half of
// it, or how many threads and processes share it.
std::string Owner(const StackSummary::Stack& s, TaskNamer names) {
  if (s.threads.empty()) return "no thread";
  const StackSummary::Thread& top = s.threads.front();
  const std::string label = ThreadLabel(top, names(top.tid, top.tgid));
  if (s.thread_count == 1) return label;
  const double share =
      s.weight_ns > 0 ? Share(top.weight_ns, s.weight_ns) : Share(top.samples, s.samples);
  if (share >= 50.0) {
    return absl::StrFormat("mostly %s (%.0f%%; %u threads)", label, share, s.thread_count);
  }
  if (s.process_count == 1) {
    const std::string process = names(top.tgid, top.tgid).process;
    return absl::StrFormat("%u threads of %s", s.thread_count,
                           process.empty()
                               ? absl::StrCat("pid ", top.tgid)
                               : absl::StrFormat("%s (pid %d)", PrintableText(process), top.tgid));
  }
  return absl::StrFormat("%u threads of %u processes", s.thread_count, s.process_count);
}

void AppendFrames(std::string& out, const std::vector<StackFrame>& frames) {
  size_t shown = 0;
  for (size_t i = 0; i < frames.size();) {
    size_t end = i;
    while (end < frames.size() && frames[end].kernel == frames[i].kernel) end++;
    const char* mark = frames[i].kernel ? "[k]" : "[.]";
    for (size_t k = i; k < end && k < i + kMaxFramesPerRun; k++) {
      if (shown == kMaxFramesPerStack) {
        absl::StrAppendFormat(&out, "       ... %u more frames\n", frames.size() - k);
        return;
      }
      absl::StrAppendFormat(&out, "       %s %s\n", mark, PrintableText(frames[k].name));
      shown++;
    }
    if (end - i > kMaxFramesPerRun) {
      absl::StrAppendFormat(&out, "       %s ... %u more %s frames\n", mark,
                            end - i - kMaxFramesPerRun, frames[i].kernel ? "kernel" : "user");
    }
    i = end;
  }
}

void AppendTop(std::string& out, const char* title, const StackSummary::Kind& kind,
               const char* weighs, TaskNamer names) {
  if (kind.top.empty()) return;
  absl::StrAppendFormat(&out, "\nTop %s (%u of %u; innermost frame first):\n", title,
                        kind.top.size(), kind.distinct_stacks);
  for (size_t i = 0; i < kind.top.size(); i++) {
    const StackSummary::Stack& s = kind.top[i];
    absl::StrAppendFormat(&out, "  %u. %s %s (%.1f%%), %u samples: %s\n", i + 1,
                          Seconds(s.weight_ns), weighs, Share(s.weight_ns, kind.weight_ns),
                          s.samples, Owner(s, names));
    AppendFrames(out, s.frames);
  }
}

nlohmann::json KindJson(const StackSummary::Kind& kind, TaskNamer names) {
  nlohmann::json top = nlohmann::json::array();
  for (const StackSummary::Stack& s : kind.top) {
    nlohmann::json frames = nlohmann::json::array();
    for (size_t i = 0; i < s.frames.size() && i < kMaxFramesInJson; i++) {
      frames.push_back({{"name", s.frames[i].name}, {"kernel", s.frames[i].kernel}});
    }
    const size_t omitted = s.frames.size() - frames.size();
    nlohmann::json threads = nlohmann::json::array();
    for (const StackSummary::Thread& t : s.threads) {
      const TaskNames n = names(t.tid, t.tgid);
      threads.push_back({{"tid", t.tid},
                         {"tgid", t.tgid},
                         {"thread_name", n.thread},
                         {"process_name", n.process},
                         {"samples", t.samples},
                         {"weight_ns", t.weight_ns}});
    }
    top.push_back({{"samples", s.samples},
                   {"weight_ns", s.weight_ns},
                   {"frames", std::move(frames)},
                   {"frames_omitted", omitted},
                   {"thread_count", s.thread_count},
                   {"process_count", s.process_count},
                   {"threads", std::move(threads)}});
  }
  return {{"samples", kind.samples},
          {"weight_ns", kind.weight_ns},
          {"distinct_stacks", kind.distinct_stacks},
          {"top", std::move(top)}};
}

}  // namespace

std::string StacksToText(const StackSummary& s, TaskNamer names) {
  if (s.empty()) return "\nStacks: none\n";
  std::string out = absl::StrFormat(
      "\nStacks: %u blocked-stack samples (%s off CPU), %u CPU samples (%s on CPU)\n",
      s.blocked.samples, Seconds(s.blocked.weight_ns), s.cpu.samples, Seconds(s.cpu.weight_ns));
  absl::StrAppendFormat(&out, "  frames: %u interned, %u without a function name\n",
                        s.frames_interned, s.frames_unnamed);
  if (s.maps_reads > 0) {
    absl::StrAppendFormat(&out,
                          "  naming user frames: %u in no mapping (most, a frame-pointer chain "
                          "broken past its first frames); %u maps read, %u unreadable (the "
                          "process gone); %u binaries unreadable\n",
                          s.user_frames_unmapped, s.maps_reads, s.maps_unreadable,
                          s.binaries_unreadable);
  }
  if (s.other_samples > 0) {
    absl::StrAppendFormat(&out, "  %u samples of another counter\n", s.other_samples);
  }
  if (s.samples_without_callstack + s.frame_ids_unresolved + s.name_ids_unresolved > 0) {
    absl::StrAppendFormat(&out,
                          "  not in the file: the callstack of %u samples, %u frames, %u "
                          "function names\n",
                          s.samples_without_callstack, s.frame_ids_unresolved,
                          s.name_ids_unresolved);
  }
  if (!s.losses.empty()) {
    absl::StrAppend(&out, "  lost:");
    for (const auto& [kind, lost] : s.losses) {
      absl::StrAppend(&out, " ", PrintableText(kind), " ", lost);
    }
    absl::StrAppend(&out, " (docs/losses.md)\n");
  }
  if (s.blocked_period_ns > 0) {
    absl::StrAppendFormat(&out,
                          "  blocked stacks: blocks under %.3f ms sampled (each taken one weighs "
                          "the period); %u shorter blocks (%.3f ms) not taken\n",
                          static_cast<double>(s.blocked_period_ns) / 1e6, s.blocked_unsampled,
                          static_cast<double>(s.blocked_unsampled_ns) / 1e6);
  } else if (s.blocked_at_switch) {
    absl::StrAppend(&out,
                    "  blocked stacks: every block, taken as threads left the CPU (a kernel "
                    "without kprobes)\n");
  }
  AppendTop(out, "blocked stacks, by time off CPU", s.blocked, "off CPU", names);
  AppendTop(out, "CPU stacks, by time sampled on CPU", s.cpu, "on CPU", names);
  return out;
}

nlohmann::json StacksToJson(const StackSummary& s, TaskNamer names) {
  nlohmann::json losses = nlohmann::json::object();
  for (const auto& [kind, lost] : s.losses) losses[kind] = lost;
  return {{"blocked", KindJson(s.blocked, names)},
          {"cpu", KindJson(s.cpu, names)},
          {"other_samples", s.other_samples},
          {"frames_interned", s.frames_interned},
          {"frames_unnamed", s.frames_unnamed},
          {"unresolved",
           {{"samples_without_callstack", s.samples_without_callstack},
            {"frame_ids", s.frame_ids_unresolved},
            {"function_name_ids", s.name_ids_unresolved}}},
          {"losses", std::move(losses)},
          {"blocked_taken",
           {{"period_ns", s.blocked_period_ns},
            {"at_switch", s.blocked_at_switch},
            {"unsampled", s.blocked_unsampled},
            {"unsampled_ns", s.blocked_unsampled_ns}}},
          {"user_naming",
           {{"frames_unmapped", s.user_frames_unmapped},
            {"maps_reads", s.maps_reads},
            {"maps_unreadable", s.maps_unreadable},
            {"binaries_unreadable", s.binaries_unreadable}}}};
}

}  // namespace ringside::agent
