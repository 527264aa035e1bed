#include "agent/sources/previous_boot_reader.h"

#include <dirent.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/sources/ftrace_bundle_writer.h"
#include "ftrace/event_format.h"
#include "ftrace/tracefs.h"

namespace ringside::agent {
namespace {

// The CPUs the instance has a buffer for (per_cpu/cpuN), in order.
std::vector<int> InstanceCpus(const ftrace::Instance& instance) {
  std::vector<int> cpus;
  const std::string per_cpu = instance.path() + "/per_cpu";
  DIR* dir = opendir(per_cpu.c_str());
  if (dir == nullptr) return cpus;
  while (const dirent* entry = readdir(dir)) {
    absl::string_view name(entry->d_name);
    int cpu = 0;
    if (absl::ConsumePrefix(&name, "cpu") && absl::SimpleAtoi(name, &cpu) && cpu >= 0) {
      cpus.push_back(cpu);
    }
  }
  closedir(dir);
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

}  // namespace

uint64_t PreviousBootReader::Stats::first_ns() const {
  uint64_t first = 0;
  for (const CpuSpan& c : cpus) {
    if (c.events > 0 && (first == 0 || c.first_ns < first)) first = c.first_ns;
  }
  return first;
}

uint64_t PreviousBootReader::Stats::last_ns() const {
  uint64_t last = 0;
  for (const CpuSpan& c : cpus) last = std::max(last, c.last_ns);
  return last;
}

absl::StatusOr<std::unique_ptr<PreviousBootReader>> PreviousBootReader::Open(
    const ftrace::Instance& instance, const std::vector<std::string>& events) {
  const ftrace::Tracefs& tracefs = instance.tracefs();
  std::vector<std::string> formats{"ftrace/print"};
  for (const std::string& e : events) {
    if (tracefs.Exists(absl::StrCat("events/", e, "/format"))) formats.push_back(e);
  }
  absl::StatusOr<ftrace::EventTable> table = ftrace::EventTable::Load(tracefs, formats);
  if (!table.ok()) return table.status();
  absl::StatusOr<std::string> header_page = tracefs.Read("events/header_page");
  if (!header_page.ok()) return header_page.status();
  absl::StatusOr<std::string> header_event = tracefs.Read("events/header_event");
  if (!header_event.ok()) return header_event.status();
  absl::StatusOr<ftrace::PageHeaderFormat> page = ftrace::ParseHeaderPage(*header_page);
  if (!page.ok()) return page.status();
  absl::StatusOr<ftrace::EventHeaderFormat> event = ftrace::ParseHeaderEvent(*header_event);
  if (!event.ok()) return event.status();
  std::vector<std::unique_ptr<ftrace::CpuReader>> readers;
  for (int cpu : InstanceCpus(instance)) {
    absl::StatusOr<std::unique_ptr<ftrace::CpuReader>> r =
        ftrace::CpuReader::Open(instance, cpu, page->page_size());
    if (!r.ok()) return r.status();
    readers.push_back(std::move(*r));
  }
  if (readers.empty()) {
    return absl::NotFoundError(absl::StrCat(instance.path(), " has no per_cpu buffers"));
  }
  return std::unique_ptr<PreviousBootReader>(new PreviousBootReader(
      std::move(*table), ftrace::PageParser(*page, *event), std::move(readers)));
}

std::unique_ptr<PreviousBootReader> PreviousBootReader::ForTesting(
    ftrace::EventTable table, ftrace::PageParser parser,
    std::vector<std::unique_ptr<ftrace::CpuReader>> readers) {
  return std::unique_ptr<PreviousBootReader>(
      new PreviousBootReader(std::move(table), parser, std::move(readers)));
}

PreviousBootReader::PreviousBootReader(ftrace::EventTable table, ftrace::PageParser parser,
                                       std::vector<std::unique_ptr<ftrace::CpuReader>> readers)
    : table_(std::move(table)), parser_(parser), readers_(std::move(readers)) {
  uint32_t num_cpus = 1;
  for (const auto& r : readers_) num_cpus = std::max(num_cpus, static_cast<uint32_t>(r->cpu()) + 1);
  // No descriptor tracker: the tasks of another boot are not this one's;
  // their names come with their own events (sched_switch's comms,
  // task_newtask, task_rename, sched_process_exec).
  bundles_ = std::make_unique<FtraceBundleWriter>(
      &table_, FtraceBundleWriter::Options{.compact_sched = true, .num_cpus = num_cpus});
}

PreviousBootReader::~PreviousBootReader() = default;

void PreviousBootReader::RemoveMarkers(size_t from, std::vector<ftrace::RawEvent>* events,
                                       Stats* stats) const {
  const auto is_marker = [&](const ftrace::RawEvent& e) {
    const ftrace::EventTable::Entry* entry = table_.Find(ftrace::EventTable::EventId(e));
    if (entry == nullptr || entry->known != ftrace::KnownEvent::kPrint) return false;
    return absl::StartsWith(ftrace::EventTable::ReadString(e, entry->format.FindField("buf")),
                            kMarkerPrefix);
  };
  const auto first = events->begin() + static_cast<ptrdiff_t>(from);
  const auto removed = std::remove_if(first, events->end(), is_marker);
  stats->markers += static_cast<uint64_t>(events->end() - removed);
  events->erase(removed, events->end());
}

PreviousBootReader::Stats PreviousBootReader::ReadAll(TraceWriter* writer,
                                                      const std::function<void()>& after_bundle) {
  Stats stats;
  for (const auto& reader : readers_) ReadCpu(reader.get(), writer, after_bundle, &stats);
  stats.unknown_events = bundles_->stats().unknown_events;
  readers_.clear();
  return stats;
}

void PreviousBootReader::ReadCpu(ftrace::CpuReader* reader, TraceWriter* writer,
                                 const std::function<void()>& after_bundle, Stats* stats) {
  const size_t page_size = parser_.page_format().page_size();
  const uint32_t cpu = static_cast<uint32_t>(reader->cpu());
  CpuSpan span{.cpu = cpu};
  std::vector<uint8_t> pages;
  std::vector<ftrace::RawEvent> events;
  bool lost_at_start = false;
  auto write = [&] {
    if (events.empty() && !lost_at_start) return;
    for (const ftrace::RawEvent& e : events) {
      if (span.events == 0 || e.timestamp < span.first_ns) span.first_ns = e.timestamp;
      span.last_ns = std::max(span.last_ns, e.timestamp);
      span.events++;
    }
    bundles_->WriteBundle(writer, cpu, events, lost_at_start);
    writer->Flush();
    if (after_bundle) after_bundle();
    events.clear();
    lost_at_start = false;
  };
  for (bool more = true; more;) {
    // A page at a time, so that a read that fails (or gives part of a
    // page, which ends the CPU's pages) loses none read before it.
    pages.clear();
    size_t n = 0;
    while (n < kPagesPerBundle) {
      absl::StatusOr<size_t> got = reader->ReadPages(1, &pages);
      if (!got.ok() && stats->pages_malformed++ == 0) {
        stats->first_malformed = absl::StrCat("cpu ", cpu, ": ", got.status().message());
      }
      if (!got.ok() || *got == 0) {
        more = false;
        break;
      }
      n++;
    }
    for (size_t p = 0; p < n; p++) {
      const size_t before = events.size();
      const ftrace::PageParser::PageResult r =
          parser_.Parse(pages.data() + p * page_size, page_size, &events);
      span.pages++;
      if (r.error != ftrace::PageParser::Error::kNone) {
        if (stats->pages_malformed++ == 0) {
          stats->first_malformed = absl::StrCat("cpu ", cpu, ", page ", span.pages, ": ",
                                                ftrace::PageErrorName(r.error));
        }
      }
      RemoveMarkers(before, &events, stats);
      if (r.lost_events) {
        stats->pages_with_lost++;
        stats->lost_stored += r.lost_count;
        // The bundle so far ends before the gap; the page's events start
        // one that says there was a gap before them.
        std::vector<ftrace::RawEvent> tail(events.begin() + static_cast<ptrdiff_t>(before),
                                           events.end());
        events.resize(before);
        write();
        events = std::move(tail);
        lost_at_start = true;
      }
    }
    write();
  }
  stats->pages += span.pages;
  stats->events += span.events;
  if (span.events > 0) stats->cpus.push_back(span);
}

}  // namespace ringside::agent
