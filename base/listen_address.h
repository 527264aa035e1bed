#ifndef RINGSIDE_BASE_LISTEN_ADDRESS_H_
#define RINGSIDE_BASE_LISTEN_ADDRESS_H_

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ringside::base {

// An address to listen on, as metrics_listen says it: "HOST:PORT" with a
// numeric IPv4 host ("0.0.0.0:9464", "127.0.0.1:9464"), "[IPv6]:PORT"
// ("[::]:9464"), or ":PORT" (every IPv4 and IPv6 address). No names: the
// agent never asks DNS.
struct ListenAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
  bool any = false;  // ":PORT": both families.
  uint16_t port = 0;
};
absl::StatusOr<ListenAddress> ParseListenAddress(const std::string& text);

}  // namespace ringside::base

#endif  // RINGSIDE_BASE_LISTEN_ADDRESS_H_
