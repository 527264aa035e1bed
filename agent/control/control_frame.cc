#include "agent/control/control_frame.h"

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

bool IsUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t extra;
    uint32_t cp;
    if (c < 0x80) {
      i++;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      extra = 1, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      extra = 2, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      extra = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i <= extra) return false;
    for (size_t k = 1; k <= extra; k++) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((extra == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (extra == 3 && (cp < 0x10000 || cp > 0x10ffff))) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

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
  if (!IsUtf8(request.snapshot().reason()) || !IsUtf8(request.trigger().name())) {
    return absl::InvalidArgumentError(
        "malformed request: its snapshot reason or trigger name is not UTF-8 text");
  }
  return request;
}

}  // namespace ringside::agent
