#ifndef RINGSIDE_AGENT_SOURCES_BOOT_RECORDER_H_
#define RINGSIDE_AGENT_SOURCES_BOOT_RECORDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "agent/sources/previous_boot_reader.h"

namespace ringside::ftrace {
class Instance;
class Tracefs;
}  // namespace ringside::ftrace

namespace ringside::agent {

// The agent's recording into the kernel's persistent ftrace instance: a
// ring buffer in memory reserved at boot (Linux 6.12+, `reserve_mem=12M:
// 4096:trace trace_instance=boot_mapped^traceoff@trace`), which a warm
// reboot leaves as it was, so that the events before a kernel panic can be
// read at the next boot.
//
// At the agent's start it finds instances/<name>, claims it with the lock
// every ringside instance has (ftrace::Instance::Adopt), and looks at what
// it holds before touching it:
//  - nothing (tracing off, no event or tracer set, every CPU's buffer
//    readably empty): it records into it;
//  - ringside's events of this boot (its marker names this boot's id, and
//    what is set is ringside's events or none: an agent of this boot stopped
//    or was killed): it records on, keeping them;
//  - ringside's events of an earlier boot, tracing off and nothing set (as
//    a reboot leaves it): handed to Options::take_previous_boot (a reader
//    of the pages and the boot's marker), which writes them into a
//    snapshot; then the instance is cleared and records this boot. When
//    the marker names another kernel release (this kernel's event formats
//    could misread its records) they are cleared unread, and said so
//    (Report::previous_boot_error). Left as they are when nothing takes
//    them or they cannot be read;
//  - anything else (events or a tracer another tool set, events without a
//    marker of ours, a buffer it cannot read): another tool's, left alone.
// Recording: the trace clock set to `boot` (CLOCK_BOOTTIME, the clock of
// ringside's files), the events that explain a death (Events(), those this
// kernel has), then a marker line in the buffer, written again by Mark():
//   ringside-boot boot_id=<id> kernel=<release> boottime_ns=<n>
//     realtime_ns=<n> machine=<name, to the end of the line>
// so that the next boot knows whose events these are and when they were,
// however often the ring wrapped. On destruction (the agent stops) tracing
// is switched off and the events disabled, the buffer kept: a later agent
// of the same boot records on.
class BootRecorder {
 public:
  // The events recorded, in tracefs' group/name form; those the kernel has
  // not are skipped.
  static const std::vector<std::string>& Events();

  // A marker: whose events these are (boot, kernel, machine) and when
  // (a BOOTTIME of that boot and the REALTIME it was).
  struct Marker {
    std::string boot_id;
    std::string kernel;   // uname's release; "" when the marker has none.
    std::string machine;  // May hold spaces: the marker's last field.
    int64_t boottime_ns = 0;
    int64_t realtime_ns = 0;
  };
  // Takes an earlier boot's events: reads them all from `reader` (whose
  // pages are gone from the instance once read) and keeps them; says why
  // not when it could not. `buffer_kb`: the instance's size.
  using TakePreviousBoot = std::function<absl::Status(PreviousBootReader* reader,
                                                      const Marker& marker, uint64_t buffer_kb)>;
  struct Options {
    std::string name = "boot_mapped";     // instances/<name>
    std::string boot_id;                  // This boot's, /proc/sys/kernel/random/boot_id.
    std::string machine;                  // The machine's name for the marker.
    TakePreviousBoot take_previous_boot;  // Unset: an earlier boot's events are left.
  };
  // What the start found and did, for `status` and the log.
  struct Report {
    enum class State {
      kOff,           // Not asked for (no name).
      kUnavailable,   // No such instance, not a persistent one, or held by another ringside.
      kRecording,     // Recording into it.
      kPreviousBoot,  // Holds ringside's events of an earlier boot: left as they are.
      kOtherTool,     // Holds or records another tool's events: left alone.
    };
    State state = State::kOff;
    std::string instance;  // Its path.
    std::string detail;    // Why, in a sentence, for every state but kRecording.
    // The earlier boot whose events it held (its marker's): kPreviousBoot,
    // or kRecording after they were taken.
    std::string previous_boot_id;
    // kRecording: the earlier boot's events were there and are gone from
    // the instance now (taken, or cleared: previous_boot_error).
    bool previous_boot_taken = false;
    // kRecording: why they are not in a snapshot, though gone from the
    // instance (another kernel's, cleared unread; or taking them failed
    // after their pages were read); empty when they were taken.
    std::string previous_boot_error;
    bool resumed = false;             // kRecording: on top of this boot's earlier events.
    std::vector<std::string> events;  // kRecording: the events enabled.
    uint64_t buffer_kb = 0;           // Its buffer, all CPUs together.
  };
  static const char* StateName(Report::State state);

  // Looks, and records when it may; `*report` says what it found. Null
  // unless recording. The first finds tracefs itself (ftrace::Tracefs::Open).
  static std::unique_ptr<BootRecorder> Start(const Options& options, Report* report);
  static std::unique_ptr<BootRecorder> Start(const ftrace::Tracefs& tracefs, const Options& options,
                                             Report* report);
  ~BootRecorder();
  // Writes the marker again (the agent does, every second), so that the
  // ring holds a recent one whatever it overwrote. False when the write
  // failed.
  bool Mark();
  BootRecorder(const BootRecorder&) = delete;
  BootRecorder& operator=(const BootRecorder&) = delete;

  // The newest marker in a line of an instance's text (`trace`), if any.
  static std::optional<Marker> ParseMarkerLine(std::string_view line);
  static std::string MarkerText(const Marker& marker);

 private:
  BootRecorder(std::unique_ptr<ftrace::Instance> instance, Options options);
  // Sets the clock, enables the events, switches tracing on and writes the
  // marker.
  bool Record(bool resumed, Report* report);
  // Hands an earlier boot's events to options_.take_previous_boot, then
  // clears the instance. False (with `report` saying why) when they were
  // not taken.
  bool TakePreviousBootEvents(const Marker& marker, Report* report);
  void StopRecording();

  std::unique_ptr<ftrace::Instance> instance_;
  const Options options_;
  bool recording_ = false;  // Record() succeeded: stopped on destruction.
  // tracefs mounted for everyone to find the instance (it was mounted
  // nowhere): unmounted again on destruction.
  std::unique_ptr<ftrace::Tracefs> mounted_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_BOOT_RECORDER_H_
