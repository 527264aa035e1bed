#ifndef RINGSIDE_AGENT_SYMBOLS_USER_SYMBOLIZER_H_
#define RINGSIDE_AGENT_SYMBOLS_USER_SYMBOLIZER_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "agent/symbols/internal/elf_cache.h"
#include "agent/symbols/process_maps.h"

namespace ringside::agent {

// The mapping a user frame lies in, in the terms of Perfetto's Mapping
// (protos/perfetto/trace/profiling/profile_common.proto). The views point
// into the UserSymbolizer and are valid until its next non-const call.
struct UserMapping {
  uint64_t start = 0;  // Mapping.start
  uint64_t end = 0;    // Mapping.end
  // Mapping.exact_offset: the file offset of `start`. (Mapping.start_offset
  // is 0: an ELF file here starts at its file's first byte, not inside an
  // APK as on Android.)
  uint64_t pgoff = 0;
  absl::string_view path;  // as /proc/PID/maps gives it (" (deleted)" removed)
  bool deleted = false;
  // The file's GNU build id: its bytes (what InternedData.build_ids
  // carries) and in hex. Empty when the file has none or was unreadable.
  absl::string_view build_id;
  absl::string_view build_id_hex;
  // Mapping.load_bias: p_vaddr - p_offset of the file's first executable
  // PT_LOAD segment (ElfFile::load_bias()); 0 when the file was unreadable.
  uint64_t load_bias = 0;
};

// One user stack address, named.
struct UserFrame {
  // False when the address lies in no mapping of the process (or its maps
  // could not be read): nothing else is set.
  bool has_mapping = false;
  UserMapping mapping;
  // Perfetto's Frame.rel_pc, exactly libunwindstack's (Elf::GetRelPc),
  // which Perfetto's offline symbolizer (traceconv symbolize: the
  // stack_profile_frame's rel_pc with its mapping's build_id and load_bias)
  // hands to llvm-symbolizer as an ELF virtual address:
  //
  //   rel_pc = pc - mapping.start + mapping.pgoff + mapping.load_bias
  //
  // i.e. the offset of pc in the file, plus p_vaddr - p_offset of the first
  // executable PT_LOAD. For a pc in that segment (code, all but exotic
  // linker layouts) this is the ELF virtual address, the st_value scale of
  // the file's symbols, whatever the linker's layout (lld leaves p_vaddr
  // 0x1000 above p_offset; GNU ld usually equal). Perfetto's symbolizer
  // compares load_bias with the bias of the file it finds by build id and
  // adds the difference when ours is lower, so the two must agree. An
  // unreadable file has load_bias 0 and no build id: rel_pc is then the
  // file offset, which nothing can name later.
  uint64_t rel_pc = 0;
  // The function's name (mangled, as the file has it; the stack writer's
  // namer demangles it)
  // and pc's offset in it; empty when no symbol covers the address. Named
  // from the exact ELF address (the PT_LOAD holding the file offset).
  absl::string_view function_name;
  uint64_t function_offset = 0;
  // The mapping's file was read: function_name is what this address is
  // named while the process maps what it maps now (empty: the file has no
  // symbol there, as in a stripped binary). One exception: files of one
  // build id share their symbol table, so a stripped copy read first names
  // an unstripped one's frames too, without names (their build id and
  // rel_pc still name them offline). False for an anonymous mapping or a
  // file that could not be read (yet).
  bool file_read = false;
};

// What UserSymbolizer did, for the trace's stats. Every Symbolize() call
// counts once in frames_named, frames_unnamed or frames_unmapped.
struct UserSymbolizerStats {
  uint64_t frames_named = 0;
  // In a mapping, but no name: an anonymous or special mapping ([vdso],
  // JIT code), an unreadable file, or no symbol covers it (stripped).
  uint64_t frames_unnamed = 0;
  uint64_t frames_unmapped = 0;  // in no mapping, even after a re-read
  // Files that could not be read (gone, not regular, too large, not the
  // mapped inode, a libelf error), once per mapping, read of the maps and
  // process that tried.
  uint64_t mappings_unreadable = 0;
  // Symbol tables larger than the whole cache: left unnamed.
  uint64_t tables_over_budget = 0;
  // Reads of a process's maps. One of a process known to have exited
  // (ProcessExited) is not tried, and counts in both maps_reads and
  // maps_unreadable, as the failed read it replaces did.
  uint64_t maps_reads = 0;
  uint64_t maps_unreadable = 0;  // process gone, or no PTRACE_MODE_READ
  uint64_t cache_evictions = 0;
  // Processes forgotten to keep the maps within max_process_bytes (their
  // exit missed, or more processes at once than it holds).
  uint64_t processes_evicted = 0;
};

// Names user-space instruction addresses (frame-pointer stacks from
// bpf_get_stackid): the process's mapping of the address, the mapped ELF
// file's build id and load bias, Perfetto's rel_pc, and the function from
// the file's .symtab or .dynsym. A frame it cannot name keeps the build id
// and rel_pc that let Perfetto's offline symbolizer name it later.
//
// Caches:
//   - per address space, the parsed maps and, per mapping, its resolved ELF
//     file. A process forked from another (ProcessForked) shares its
//     parent's until it execs (ProcessExeced) or maps something the parent
//     had not: a thousand workers forked from one server read one maps file
//     and open each library once, not a thousand times. The maps are read
//     on the first frame of a space, and read again (by that process, into
//     a space of its own) when an innermost frame, the address the thread
//     ran, falls in no mapping: a library loaded since. A caller's return
//     address in no mapping does not: without frame pointers the chain of
//     callers is garbage past the first frames, and reading the maps again
//     for each would cost far more than the rare library it could find.
//     At most once per min_maps_refresh per process. A process is dropped
//     by ForgetProcess (call it when the process exits). All spaces
//     together are bounded by max_process_bytes: past it the least
//     recently symbolized processes go (an exit that was missed, a lost
//     record, must not leak), and are read again if they come back.
//   - per ELF file, the parsed tables in an LRU (internal::ElfCache) bounded
//     by cache_bytes, shared by every process mapping the same file (by
//     build id, else by dev/inode/mtime/size; a file already there is
//     found by what fstat says of it, before it is opened for reading).
//
// Files are opened as internal::OpenMappedFile says (map_files, else the
// process's root through openat2 RESOLVE_IN_ROOT; regular files only, at
// most max_binary_bytes). What reading /proc/PID needs: PTRACE_MODE_READ on
// the process (CAP_SYS_PTRACE for another uid's), and CAP_SYS_ADMIN for
// map_files (without it, deleted files stay unnamed).
//
// Not thread-safe: one thread (the stack writer's) owns it.
class UserSymbolizer {
 public:
  struct Options {
    std::string proc_root = "/proc";  // tests give a tree of their own
    size_t cache_bytes = 64 << 20;
    // The processes' maps, mapping states and entries, all together; one
    // process larger than this is still held, alone.
    size_t max_process_bytes = 32 << 20;
    uint64_t max_binary_bytes = uint64_t{1} << 30;
    std::chrono::milliseconds min_maps_refresh{100};
  };

  UserSymbolizer() : UserSymbolizer(Options()) {}
  explicit UserSymbolizer(Options options);

  // Where a frame lies in its stack: the innermost is the address the
  // thread ran, a caller's a return address.
  enum class Position : uint8_t { kInnermost, kCaller };

  // Names `pc` in process `pid`. For a caller, pass the return address
  // minus 1, as libunwindstack does before computing its rel_pc: a call
  // that is the last instruction of a function returns past its end.
  // Never fails; what it could not do is counted in stats().
  UserFrame Symbolize(pid_t pid, uint64_t pc, Position position = Position::kInnermost);

  // Reads now what naming `pc` in `pid` takes (the maps, the mapped file's
  // symbol table), for a process whose frames are sure to come: its reads
  // are counted in stats(), but no frame is.
  void Preload(pid_t pid, uint64_t pc);

  // Process `child` was forked from `parent` (a new process, not a
  // thread): it maps what its parent mapped, and shares its parent's space
  // (read when either first needs it). Nothing when `child` is known
  // already: its exec, or a frame of its, came first.
  void ProcessForked(pid_t parent, pid_t child);
  // Process `pid` ran execve: it maps another program now, read afresh.
  void ProcessExeced(pid_t pid);
  // Process `pid` exited: its maps are not read from now on (/proc has
  // none, or a new process's under a reused id), and its frames are named
  // from what was read before, if anything, until ForgetProcess (a fork or
  // exec under its id before that may be its own, read late).
  void ProcessExited(pid_t pid);
  // Drops what is held for `pid` (its maps and mapping states, unless
  // processes forked from it, or it from, share them).
  void ForgetProcess(pid_t pid);

  // What `pid`'s addresses mean now: while two calls (for any pids) give
  // the same non-zero value, Symbolize() names an address alike for both,
  // wherever it names a function or says file_read. Each read of a space's
  // maps, and each exec, gives a new value; none is used twice. 0: `pid` is
  // not known. For callers that keep what Symbolize() named.
  uint64_t SpaceId(pid_t pid) const;

  const UserSymbolizerStats& stats() const { return stats_; }
  size_t process_count() const { return processes_.size(); }
  // Distinct address spaces held (processes forked from one another share
  // one).
  size_t space_count() const { return spaces_; }
  // The heap held: the ELF cache, and each process's maps and states. O(1).
  size_t memory_bytes() const;
  // The processes' part of it: their spaces, and each process's entry (at
  // most Options::max_process_bytes, unless one process alone is larger).
  size_t process_memory_bytes() const { return process_bytes_; }
  // The ELF cache's part of it (at most Options::cache_bytes).
  size_t cache_memory_bytes() const { return cache_.memory_bytes(); }

 private:
  // What became of one mapping's file, read lazily on its first frame.
  struct MappingState {
    enum class Status : uint8_t { kUnread, kRead, kUnreadable };
    Status status = Status::kUnread;
    // kUnreadable through this process's /proc: another that shares the
    // space tries its own (this one may be gone, the file still mapped).
    pid_t failed_for = 0;
    std::string cache_key;  // ElfCache key, to find it again once evicted
    internal::ElfCache::Handle handle;
  };
  // What one process maps, or several forked from one another.
  struct AddressSpace {
    uint64_t id = 0;    // SpaceId(): new at each read of the maps.
    bool read = false;  // Its maps were read, or tried.
    bool readable = false;
    pid_t read_from = 0;  // Whose /proc/PID/maps they are.
    ProcessMaps maps;
    std::vector<MappingState> mappings;  // parallel to maps.entries()
    std::chrono::steady_clock::time_point read_at;
    size_t bytes = 0;  // Its share of process_bytes_.
  };
  struct ProcessState {
    std::shared_ptr<AddressSpace> space;
    uint64_t last_used = 0;  // uses_ at its last Symbolize() or fork.
  };

  // A process's slot in processes_, and a space's allocation (the
  // shared_ptr's counts beside it): counted in process_bytes_ with the maps.
  static constexpr size_t kProcessBytes = sizeof(pid_t) + sizeof(ProcessState);
  static constexpr size_t kSpaceBytes = sizeof(AddressSpace) + 16;

  // `pid`'s state, with a space of its own (unread) when it was unknown.
  ProcessState& Process(pid_t pid);
  void Erase(absl::flat_hash_map<pid_t, ProcessState>::iterator it);
  std::shared_ptr<AddressSpace> NewSpace();
  // Lets go of `space`, and of its bytes when no other process holds it.
  void Release(std::shared_ptr<AddressSpace>* space);
  // Reads `pid`'s maps into its space: the one it shares, as its family's
  // maps, or (`own`) one of its own.
  AddressSpace* ReadMaps(pid_t pid, ProcessState* process, bool own);
  // Forgets the least recently used processes but `keep` while the
  // spaces take more than max_process_bytes.
  void TrimProcesses(pid_t keep);
  void SetSpaceBytes(AddressSpace* space, size_t bytes);
  // The cached file of mapping `index`, reading it if need be; null when
  // it cannot be read.
  const ElfFile* ResolveFile(pid_t pid, AddressSpace* space, size_t index);
  bool LoadFile(pid_t pid, const MapsEntry& entry, MappingState* state);
  void NameFrame(const ElfFile& file, const internal::ElfCache::Handle& handle, UserFrame* frame);

  const Options options_;
  internal::ElfCache cache_;
  absl::flat_hash_map<pid_t, ProcessState> processes_;
  // ProcessExited's, until ForgetProcess: a set apart from processes_, so
  // that an exit read before the process's fork (another CPU's records)
  // leaves the fork free to share the parent's space, and an exit costs no
  // state of its own.
  absl::flat_hash_set<pid_t> exited_;
  size_t spaces_ = 0;  // Distinct spaces the processes hold.
  uint64_t last_space_id_ = 0;
  // The spaces' `bytes`, and kProcessBytes a process.
  size_t process_bytes_ = 0;
  uint64_t uses_ = 0;
  UserSymbolizerStats stats_;
};

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_SYMBOLS_USER_SYMBOLIZER_H_
