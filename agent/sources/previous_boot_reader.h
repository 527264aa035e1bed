#ifndef RINGSIDE_AGENT_SOURCES_PREVIOUS_BOOT_READER_H_
#define RINGSIDE_AGENT_SOURCES_PREVIOUS_BOOT_READER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/writer/trace_writer.h"
#include "ftrace/cpu_reader.h"
#include "ftrace/event_table.h"
#include "ftrace/page_parser.h"

namespace ringside::ftrace {
class Instance;
}  // namespace ringside::ftrace

namespace ringside::agent {

class FtraceBundleWriter;

// The events an earlier boot left in the kernel's persistent ftrace
// instance (BootRecorder's), read once, at the next boot, with ringside's
// own page reader: every CPU's trace_pipe_raw, page by page, as the
// ftrace source reads its own instance, written as FtraceEventBundle
// packets. Reading consumes the pages: once read, they are gone from the
// instance.
//
// The records are decoded with this boot's event formats, which are the
// previous boot's when the kernel is the same (the caller checks the
// release the marker names). The pages are untrusted: a malformed one
// (PageParser's checks) ends that page, is counted and named, and reading
// goes on with the next; a record of an event id this kernel has no format
// for is skipped and counted.
class PreviousBootReader {
 public:
  // What one CPU's pages held.
  struct CpuSpan {
    uint32_t cpu = 0;
    uint64_t pages = 0;
    uint64_t events = 0;
    uint64_t first_ns = 0;  // On the previous boot's trace clock (boot).
    uint64_t last_ns = 0;
  };
  struct Stats {
    uint64_t pages = 0;
    uint64_t events = 0;
    // Pages that failed the parser's checks, and reads that failed or gave
    // part of a page (which end that CPU's pages).
    uint64_t pages_malformed = 0;
    std::string first_malformed;  // "cpu 1, page 17: ...": the first one, if any.
    // Pages after a gap: the kernel overwrote older pages (the ring
    // wrapped) or lost events there; `lost_stored` of them it counted.
    uint64_t pages_with_lost = 0;
    uint64_t lost_stored = 0;
    uint64_t unknown_events = 0;  // Ids this kernel has no format for: skipped.
    // The boot recorder's markers among them (kMarkerPrefix), which the
    // file carries as its boot id and clock snapshots instead: left out.
    uint64_t markers = 0;
    std::vector<CpuSpan> cpus;  // The CPUs that held events, in CPU order.
    // The span of all CPUs' events; 0 when there were none.
    uint64_t first_ns() const;
    uint64_t last_ns() const;
  };

  // Opens every per_cpu/cpuN/trace_pipe_raw of `instance`, with this
  // kernel's page layout (events/header_page, header_event) and the formats
  // of the `events` ("group/name") that it has, and ftrace/print's
  // (markers).
  static absl::StatusOr<std::unique_ptr<PreviousBootReader>> Open(
      const ftrace::Instance& instance, const std::vector<std::string>& events);
  // A reader of given readers (crafted pages), table and page layout.
  static std::unique_ptr<PreviousBootReader> ForTesting(
      ftrace::EventTable table, ftrace::PageParser parser,
      std::vector<std::unique_ptr<ftrace::CpuReader>> readers);

  // Reads every CPU's pages to the end and writes their events through
  // `writer`: one bundle per run of at most kPagesPerBundle pages without a
  // gap between them (a page after a gap starts a bundle that says so).
  // `after_bundle` is called after each, for the caller to move the chunks
  // on. Once.
  Stats ReadAll(TraceWriter* writer, const std::function<void()>& after_bundle);

  static constexpr size_t kPagesPerBundle = 16;
  // What every marker of BootRecorder's begins with.
  static constexpr char kMarkerPrefix[] = "ringside-boot ";
  ~PreviousBootReader();

 private:
  PreviousBootReader(ftrace::EventTable table, ftrace::PageParser parser,
                     std::vector<std::unique_ptr<ftrace::CpuReader>> readers);
  // Takes the markers out of events[from...]; counts them in `stats`.
  void RemoveMarkers(size_t from, std::vector<ftrace::RawEvent>* events, Stats* stats) const;
  // Reads one CPU's pages into bundles; adds to `stats`.
  void ReadCpu(ftrace::CpuReader* reader, TraceWriter* writer,
               const std::function<void()>& after_bundle, Stats* stats);

  ftrace::EventTable table_;
  ftrace::PageParser parser_;
  std::vector<std::unique_ptr<ftrace::CpuReader>> readers_;
  std::unique_ptr<FtraceBundleWriter> bundles_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SOURCES_PREVIOUS_BOOT_READER_H_
