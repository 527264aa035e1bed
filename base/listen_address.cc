#include "base/listen_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ringside::base {

absl::StatusOr<ListenAddress> ParseListenAddress(const std::string& text) {
  const auto bad = [&text](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "': ", why,
        " (HOST:PORT with a numeric IPv4 HOST, [IPv6]:PORT, or :PORT for every address)"));
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return bad("no port");
  uint32_t port = 0;
  const std::string port_text = text.substr(colon + 1);
  if (port_text.empty() || port_text.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(port_text, &port) || port > 65535) {
    return bad("the port is a number from 0 to 65535");
  }
  ListenAddress a;
  a.port = static_cast<uint16_t>(port);
  const std::string host = text.substr(0, colon);
  if (host.empty()) {
    a.any = true;
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.addr);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_any;
    in6->sin6_port = htons(a.port);
    a.len = sizeof(sockaddr_in6);
  } else if (host.front() == '[') {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.addr);
    if (host.back() != ']' ||
        inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &in6->sin6_addr) != 1) {
      return bad("not a numeric IPv6 address in brackets");
    }
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(a.port);
    a.len = sizeof(sockaddr_in6);
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.addr);
    if (inet_pton(AF_INET, host.c_str(), &in->sin_addr) != 1) {
      return bad("not a numeric IPv4 address (names are not looked up)");
    }
    in->sin_family = AF_INET;
    in->sin_port = htons(a.port);
    a.len = sizeof(sockaddr_in);
  }
  return a;
}

}  // namespace ringside::base
