// base/status.h: an errno error keeps its canonical code, the call it
// stopped and the system's text for it.
#include "base/status.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside::base {
namespace {

using ::testing::HasSubstr;

TEST(ErrnoToStatusTest, MapsErrnoToTheCanonicalCode) {
  const struct {
    int err;
    absl::StatusCode code;
  } cases[] = {
      {ENOENT, absl::StatusCode::kNotFound},
      {EACCES, absl::StatusCode::kPermissionDenied},
      {EPERM, absl::StatusCode::kPermissionDenied},
      {EEXIST, absl::StatusCode::kAlreadyExists},
      {EINVAL, absl::StatusCode::kInvalidArgument},
      {ENOSPC, absl::StatusCode::kResourceExhausted},
      {EMFILE, absl::StatusCode::kResourceExhausted},
      {ENFILE, absl::StatusCode::kResourceExhausted},
      {EAGAIN, absl::StatusCode::kUnavailable},
      {EBUSY, absl::StatusCode::kFailedPrecondition},
      {EIO, absl::StatusCode::kUnknown},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ErrnoToStatus(c.err, "x").code(), c.code) << std::strerror(c.err);
  }
}

TEST(ErrnoToStatusTest, MessageIsWhatThenTheSystemsText) {
  const absl::Status st = ErrnoToStatus(ENOENT, "opening /no/such/file");
  EXPECT_EQ(st.message(), absl::StrCat("opening /no/such/file: ", std::strerror(ENOENT)));
  EXPECT_EQ(ErrnoMessage(EACCES, "writing x"), absl::StrCat("writing x: ", std::strerror(EACCES)));
}

TEST(ErrnoToStatusTest, ErrnoStatusTakesTheCurrentErrno) {
  errno = EEXIST;
  const absl::Status st = ErrnoStatus("creating y");
  EXPECT_EQ(st.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(st.message(), HasSubstr("creating y"));
  EXPECT_THAT(st.message(), HasSubstr(std::strerror(EEXIST)));
}

}  // namespace
}  // namespace ringside::base
