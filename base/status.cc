#include "base/status.h"

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace ringside::base {

std::string ErrnoMessage(int err, absl::string_view what) {
  // absl::ErrnoToStatus writes the same text; its code is the one we want.
  return std::string(absl::ErrnoToStatus(err, what).message());
}

absl::Status ErrnoToStatus(int err, absl::string_view what) {
  return absl::ErrnoToStatus(err, what);
}

absl::Status ErrnoStatus(absl::string_view what) { return base::ErrnoToStatus(errno, what); }

}  // namespace ringside::base
