#ifndef RINGSIDE_TESTS_BUFFER_TESTING_BUFFER_HARNESS_H_
#define RINGSIDE_TESTS_BUFFER_TESTING_BUFFER_HARNESS_H_

// A script interpreter that drives one TraceBuffer with well-behaved writers
// (modelled on a real TraceWriter: packets split over chunks, patches,
// scraping, out-of-order batches, dropped packets, empty chunks flushed inside
// a split packet, ChunkIDs starting anywhere) and a hostile producer, and
// checks after every operation what a user relies on:
//
//  - every packet read from a well-behaved sequence is exactly a packet its
//    writer wrote (each packet carries its sequence, serial number and a
//    checksum of itself);
//  - packets of a sequence come out in the order they were written, and the
//    first packet after any lost one carries previous_packet_dropped;
//  - stats never go down.
//
// While the buffer has not wrapped or discarded anything, it also compares
// against a reference model (a per-sequence list of written packets plus the
// readability rules of the design doc): the buffer must emit exactly the
// packets and loss flags the model predicts, no more, no fewer.
//
// The fuzzer, the model-based test and the seed-corpus generator all run
// scripts through RunBufferScript().

#include <cstddef>
#include <cstdint>
#include <string>

namespace ringside::buffer::testing {

struct HarnessOptions {
  // 0: taken from the script's first bytes (4..16 KiB, so wraps are frequent).
  size_t buffer_size = 0;
  // Check against the reference model while nothing has been overwritten.
  bool check_model = true;
  // Let the script drive the hostile producer.
  bool allow_hostile = true;
};

struct HarnessResult {
  bool ok = true;
  std::string failure;  // What went wrong, with the operation index.
  uint64_t operations = 0;
  uint64_t packets_read = 0;
  uint64_t packets_checked_against_model = 0;
  uint64_t losses_flagged = 0;
  // Copy-on-write clones read against an eager clone of the same moment, and
  // how many of them the original wrote over while they were in progress.
  uint64_t cow_clones_checked = 0;
  uint64_t cow_clones_written_over = 0;
  // Clones of CloneScope::kEverything checked against the unread clone of
  // the same moment, and the packets they had that it did not (read before).
  uint64_t everything_clones_checked = 0;
  uint64_t everything_clone_packets_reread = 0;
  bool wrapped = false;
};

HarnessResult RunBufferScript(const uint8_t* data, size_t size, const HarnessOptions& options);

// Packet encoding used by the well-behaved writers (exposed for tests).
std::string MakeHarnessPacket(uint16_t producer, uint16_t writer, uint32_t serial, size_t size);
bool ParseHarnessPacket(const std::string& bytes, uint16_t* producer, uint16_t* writer,
                        uint32_t* serial);

}  // namespace ringside::buffer::testing

#endif  // RINGSIDE_TESTS_BUFFER_TESTING_BUFFER_HARNESS_H_
