#ifndef RINGSIDE_AGENT_FILES_STATS_MERGING_SINK_H_
#define RINGSIDE_AGENT_FILES_STATS_MERGING_SINK_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "agent/files/trace_sink.h"
#include "ringside/trace/trace_stats.pb.h"

namespace ringside::agent {

// A sink in front of another that merges `extra` into the trace_stats of
// the trace passing through: what only the writer of the file knows (the
// agent's trigger tally, the triggers a snapshot answers) joins the stats
// the session wrote, in the same packet, so readers that take one
// trace_stats per trace (Perfetto's importer) see both.
//
// The session writes trace_stats as the trace's last packet but one Write()
// before Finish(); this sink holds the last whole packet of each Write()
// back until the next Write() or Finish(), and at Finish() merges `extra`
// into it if it is a trace_stats packet. If it is not, it is written as it
// came and merged() stays false. Bytes that are not whole framed packets
// pass through unchanged (nothing is held back).
//
// Not thread-safe.
class StatsMergingSink : public TraceSink {
 public:
  // `inner` outlives this sink.
  StatsMergingSink(TraceSink* inner, trace::TraceStats extra);

  // A failure may have written the packet held from the Write() before.
  absl::Status Write(absl::string_view packets) override;
  absl::Status Finish() override;
  const std::string& display_name() const override { return inner_->display_name(); }
  uint64_t bytes_written() const override { return inner_->bytes_written() + held_.size(); }

  // `extra` went into a trace_stats packet.
  bool merged() const { return merged_; }

 private:
  TraceSink* const inner_;
  const trace::TraceStats extra_;
  std::string held_;  // The last whole framed packet of the last Write().
  bool merged_ = false;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_FILES_STATS_MERGING_SINK_H_
