#ifndef RINGSIDE_TESTS_TESTING_ROOT_ONLY_DIR_H_
#define RINGSIDE_TESTS_TESTING_ROOT_ONLY_DIR_H_

#include <string>

namespace ringside::testing {

// A scratch directory that only root can change, down from "/" (every
// directory on its path root's and not writable by group or others), as
// ringside asks of a file it trusts (bpf_config.btf_path): made under /run,
// mode 0700, and removed with everything in it when this goes. /tmp will not
// do: others can write there.
class RootOnlyDir {
 public:
  RootOnlyDir();
  ~RootOnlyDir();
  RootOnlyDir(const RootOnlyDir&) = delete;
  RootOnlyDir& operator=(const RootOnlyDir&) = delete;

  // Empty when none could be made (not root, or /run not root's alone):
  // why() says why, for a GTEST_SKIP.
  const std::string& path() const { return path_; }
  const std::string& why() const { return why_; }
  // path() + "/" + name.
  std::string Path(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
  std::string why_;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_ROOT_ONLY_DIR_H_
