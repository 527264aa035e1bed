#include "tests/testing/root_only_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace ringside::testing {

RootOnlyDir::RootOnlyDir() {
  if (geteuid() != 0) {
    why_ = "needs root: the directory must be root's";
    return;
  }
  for (const char* dir : {"/", "/run"}) {
    struct stat st;
    if (stat(dir, &st) != 0 || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      why_ = std::string(dir) + " is not root's alone: no root-only scratch directory";
      return;
    }
  }
  char tmpl[] = "/run/ringside-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    why_ = std::string("mkdtemp under /run: ") + std::strerror(errno);
    return;
  }
  path_ = tmpl;
}

RootOnlyDir::~RootOnlyDir() {
  if (path_.empty()) return;
  // Our own directory only: remove_all does not follow the links a test
  // made in it.
  std::error_code ignored;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ignored);
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace ringside::testing
