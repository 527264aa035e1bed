#ifndef RINGSIDE_BASE_DIR_STREAM_H_
#define RINGSIDE_BASE_DIR_STREAM_H_

#include <dirent.h>

#include <memory>

namespace ringside::base {

struct DirStreamCloser {
  void operator()(DIR* d) const { closedir(d); }
};
// A readdir() stream that closes itself.
using DirStream = std::unique_ptr<DIR, DirStreamCloser>;

// The entries of the directory open at `dir_fd`, from its first, read
// through a descriptor of their own: a duplicate (close-on-exec), rewound,
// as a duplicate shares its offset with `dir_fd`. The caller's descriptor
// stays open and its own. Null when the stream cannot be opened; errno
// then says why.
DirStream OpenDirStream(int dir_fd);

}  // namespace ringside::base

#endif  // RINGSIDE_BASE_DIR_STREAM_H_
