#ifndef RINGSIDE_TESTS_AGENT_TESTING_SCRATCH_CGROUP_H_
#define RINGSIDE_TESTS_AGENT_TESTING_SCRATCH_CGROUP_H_

#include <cstdint>
#include <string>

namespace ringside::agent::testing {

// A cgroup v2 of the test's own, <cgroup2 mount>/ringside-test-<pid>/<leaf>,
// for tests that put a process into a container-like cgroup. On
// destruction, whatever tasks are still in the leaf move to this process's
// own cgroup and both directories are removed, so a failing test leaves
// nothing behind. Needs root and a cgroup2 mount; error() says which is
// missing.
class ScratchCgroup {
 public:
  // With `make_leaf` false, only the parent is made: the test makes the
  // leaf itself later (a container that starts after the recording).
  explicit ScratchCgroup(const std::string& leaf, bool make_leaf = true);
  ~ScratchCgroup();
  ScratchCgroup(const ScratchCgroup&) = delete;
  ScratchCgroup& operator=(const ScratchCgroup&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // Below the mount, as /proc/PID/cgroup shows it: "/ringside-test-12/<leaf>".
  const std::string& path() const { return path_; }
  // The directory, absolute: write a pid into dir() + "/cgroup.procs".
  const std::string& dir() const { return dir_; }
  // Its cgroup v2 id (the directory's inode number); 0 until it is made.
  uint64_t id() const { return id_; }

 private:
  std::string error_;
  std::string parent_dir_;
  std::string dir_;
  std::string path_;
  uint64_t id_ = 0;
};

}  // namespace ringside::agent::testing

#endif  // RINGSIDE_TESTS_AGENT_TESTING_SCRATCH_CGROUP_H_
