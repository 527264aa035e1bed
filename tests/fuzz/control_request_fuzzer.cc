// libFuzzer target: the bytes a control-socket peer sends, through the
// agent's framing and request decoder, the way the server reads them.
//
// Input: byte 0 picks the size of the reads (1..256 bytes: a peer's bytes
// arrive split anywhere), byte 1 the request size limit (16..4096 bytes, so
// that frames at and over the limit are within reach; the production limit
// is the same code with a larger number); the rest is the stream. Checked:
// the reader never holds more than one frame of the largest size, never
// hands out a payload over the limit, and every request it lets through
// has a kind and survives a round trip. The seeds (tests/fuzz/corpus/
// control_request) are each kind of request, reads split byte by byte,
// pipelined requests, garbage, an oversized length and a half frame.

#include <cstdlib>
#include <string>

#include "agent/control/control_frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ringside::agent::FrameReader;
  if (size < 2) return 0;
  const size_t read_size = 1 + data[0];
  const uint32_t limit = 16u * (1u + data[1]);
  const char* stream = reinterpret_cast<const char*>(data) + 2;
  const size_t stream_size = size - 2;

  FrameReader reader(limit);
  std::string payload;
  size_t at = 0;
  while (true) {
    const FrameReader::Result result = reader.Next(&payload);
    if (result == FrameReader::Result::kTooLarge) {
      if (reader.announced_length() <= limit) std::abort();
      break;  // The server answers with an error and closes.
    }
    if (result == FrameReader::Result::kComplete) {
      if (payload.size() > limit) std::abort();
      const absl::StatusOr<ringside::control::Request> request =
          ringside::agent::DecodeRequestUntrusted(payload);
      if (request.ok()) {
        if (request->request_case() == ringside::control::Request::REQUEST_NOT_SET) std::abort();
        const std::string frame = ringside::agent::EncodeFrame(*request);
        const absl::StatusOr<ringside::control::Request> again =
            ringside::agent::DecodeRequestUntrusted(
                absl::string_view(frame).substr(ringside::agent::kFrameHeaderBytes));
        if (!again.ok() || again->request_case() != request->request_case()) std::abort();
      } else if (request.status().message().rfind("malformed request", 0) != 0) {
        std::abort();
      }
      continue;
    }
    if (at == stream_size) break;  // The peer stopped mid-frame: a timeout drops it.
    const size_t room = reader.room();
    if (room == 0) std::abort();  // kIncomplete always has room for more.
    const size_t n = std::min({read_size, room, stream_size - at});
    reader.Append(stream + at, n);
    at += n;
    if (reader.buffered() > ringside::agent::kFrameHeaderBytes + limit) std::abort();
  }
  return 0;
}
