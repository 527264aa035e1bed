#include "base/private_directory.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringside::base {

absl::Status CheckOnlyWeCanWrite(int dir_fd, absl::string_view what, absl::string_view setting) {
  struct stat st;
  if (fstat(dir_fd, &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat ", what));
  }
  if (st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " belongs to uid ", st.st_uid, ", not to uid ", geteuid(),
                     " that runs the agent; use a directory of its own (", setting, ")"));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " can be written by others (mode ", absl::StrFormat("%04o", st.st_mode & 07777),
        "); use a directory only the agent's user can write (", setting, ")"));
  }
  return absl::OkStatus();
}

}  // namespace ringside::base
