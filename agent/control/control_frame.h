#ifndef RINGSIDE_AGENT_CONTROL_CONTROL_FRAME_H_
#define RINGSIDE_AGENT_CONTROL_CONTROL_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// The control socket's framing, shared by the server and the client:
//
//   +-----------------------+-----------------------------+
//   | length: u32, little   | payload: `length` bytes,    |
//   | endian, payload only  | one serialized Request/Reply|
//   +-----------------------+-----------------------------+
//
// Frames follow each other on a connection with nothing in between.
inline constexpr size_t kFrameHeaderBytes = 4;

// `message` serialized and framed.
std::string EncodeFrame(const google::protobuf::MessageLite& message);

// Collects the bytes a peer sends and cuts them into frames, holding at most
// one frame of the largest allowed size: a peer that announces a larger
// length gets kTooLarge before any of it is buffered, so an untrusted length
// can never make us allocate it.
// Not thread-safe.
class FrameReader {
 public:
  enum class Result {
    kIncomplete,  // Needs more bytes.
    kComplete,    // A whole frame's payload was taken out.
    kTooLarge,    // The next frame announces more than max_payload_bytes.
  };

  explicit FrameReader(uint32_t max_payload_bytes) : max_payload_bytes_(max_payload_bytes) {}

  // How many bytes Append() takes now: what the frame being collected can
  // still need, at most; 0 while a whole frame waits to be taken by Next().
  size_t room() const;
  // REQUIRES: size <= room().
  void Append(const char* data, size_t size);

  // Takes the next whole frame's payload out into *payload.
  Result Next(std::string* payload);

  // The length the next frame announces; 0 before its header is in.
  uint32_t announced_length() const;
  // Bytes held that are not a whole frame yet (a peer that stops here is
  // stalled in the middle of a request).
  size_t buffered() const { return buffer_.size() - consumed_; }
  uint32_t max_payload_bytes() const { return max_payload_bytes_; }

 private:
  void Compact();

  const uint32_t max_payload_bytes_;
  std::string buffer_;
  size_t consumed_ = 0;  // Bytes at the front of buffer_ already taken out.
};

// Whether `s` is strict UTF-8 (no overlong forms, no surrogates, nothing
// above U+10FFFF): what a request's text must be. Clients check it before
// sending, so that a user hears about a bad reason before anything happens.
bool IsUtf8(absl::string_view s);

// The longest snapshot reason: it is recorded in the snapshot and shown by
// `ringside status`, a label rather than a report. The client checks it
// before sending; the agent refuses longer ones.
inline constexpr size_t kMaxSnapshotReasonBytes = 200;

// `ringside snapshot --around TIME` without --window: the window around
// TIME a snapshot is asked to hold (TIME in its middle).
inline constexpr absl::Duration kDefaultSnapshotWindow = absl::Seconds(30);
// The longest such window: a ring holds minutes to hours. The client
// checks it before waiting for the window's end; the agent refuses longer
// ones.
inline constexpr absl::Duration kMaxSnapshotWindow = absl::Hours(24);

// Parses a frame's payload as a Request: a message that does not parse,
// that carries no request this agent knows, or whose text (snapshot reason,
// trigger name) is not UTF-8, is kInvalidArgument with a message that starts
// with "malformed request".
absl::StatusOr<control::Request> DecodeRequestUntrusted(absl::string_view payload);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CONTROL_CONTROL_FRAME_H_
