#include "agent/daemon/control_frame.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringside::agent {
namespace {

uint32_t ReadLittleEndian32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
         static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
}

}  // namespace

std::string EncodeFrame(const google::protobuf::MessageLite& message) {
  const std::string payload = message.SerializeAsString();
  const auto length = static_cast<uint32_t>(payload.size());
  std::string frame(kFrameHeaderBytes, '\0');
  for (size_t i = 0; i < kFrameHeaderBytes; i++) frame[i] = static_cast<char>(length >> (8 * i));
  frame += payload;
  return frame;
}

uint32_t FrameReader::announced_length() const {
  if (buffered() < kFrameHeaderBytes) return 0;
  return ReadLittleEndian32(buffer_.data() + consumed_);
}

size_t FrameReader::room() const {
  const size_t held = buffered();
  if (held < kFrameHeaderBytes) return kFrameHeaderBytes - held;
  const uint32_t length = announced_length();
  // An oversized frame takes nothing more: Next() reports it.
  if (length > max_payload_bytes_) return 0;
  const size_t frame_bytes = kFrameHeaderBytes + length;
  return held < frame_bytes ? frame_bytes - held : 0;
}

void FrameReader::Append(const char* data, size_t size) {
  Compact();
  buffer_.append(data, size);
}

FrameReader::Result FrameReader::Next(std::string* payload) {
  if (buffered() < kFrameHeaderBytes) return Result::kIncomplete;
  const uint32_t length = announced_length();
  if (length > max_payload_bytes_) return Result::kTooLarge;
  if (buffered() < kFrameHeaderBytes + length) return Result::kIncomplete;
  payload->assign(buffer_, consumed_ + kFrameHeaderBytes, length);
  consumed_ += kFrameHeaderBytes + length;
  Compact();
  return Result::kComplete;
}

void FrameReader::Compact() {
  if (consumed_ == 0) return;
  buffer_.erase(0, consumed_);
  consumed_ = 0;
  // A peer that once sent the largest frame does not keep us holding its
  // size for the rest of the connection.
  if (buffer_.empty()) std::string().swap(buffer_);
}

absl::StatusOr<control::Request> DecodeRequestUntrusted(absl::string_view payload) {
  control::Request request;
  if (!request.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::InvalidArgumentError(absl::StrCat("malformed request: ", payload.size(),
                                                   " bytes that are not a ringside control "
                                                   "Request message"));
  }
  if (request.request_case() == control::Request::REQUEST_NOT_SET) {
    return absl::InvalidArgumentError(
        "malformed request: it asks for nothing this agent knows (empty, or from a newer "
        "ringside than the agent's)");
  }
  return request;
}

}  // namespace ringside::agent
