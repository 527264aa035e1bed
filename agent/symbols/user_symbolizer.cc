#include "agent/symbols/user_symbolizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/symbols/internal/mapped_file.h"

namespace ringside::agent {
namespace {

// The heap a string holds past its inline buffer.
size_t HeapBytes(const std::string& s) {
  return s.capacity() > std::string().capacity() ? s.capacity() + 1 : 0;
}

internal::FileIdentity IdentityOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
          static_cast<int64_t>(st.st_size)};
}

}  // namespace

UserSymbolizer::UserSymbolizer(Options options)
    : options_(std::move(options)), cache_(options_.cache_bytes) {}

UserFrame UserSymbolizer::Symbolize(pid_t pid, uint64_t pc, Position position) {
  UserFrame frame;
  ProcessState* process = &Process(pid);
  process->last_used = ++uses_;
  AddressSpace* space = process->space.get();
  // A space shared with a process whose maps could not be read (gone by
  // then) is read again from this one's.
  if (!space->read || (!space->readable && space->read_from != pid)) {
    space = ReadMaps(pid, process, /*own=*/false);
  }
  const MapsEntry* entry = space->maps.Find(pc);
  if (entry == nullptr && position == Position::kInnermost && !exited_.contains(pid) &&
      (space->read_from != pid ||
       std::chrono::steady_clock::now() - space->read_at >= options_.min_maps_refresh)) {
    space = ReadMaps(pid, process, /*own=*/true);  // a library loaded since the last read
    entry = space->maps.Find(pc);
  }
  // Erasing others moves no element of the map, and `process` holds its
  // space: `process`, `space` and `entry` stay.
  if (process_bytes_ > options_.max_process_bytes) TrimProcesses(pid);
  if (entry == nullptr) {
    ++stats_.frames_unmapped;
    return frame;
  }
  frame.has_mapping = true;
  frame.mapping.start = entry->start;
  frame.mapping.end = entry->end;
  frame.mapping.pgoff = entry->pgoff;
  frame.mapping.path = entry->path;
  frame.mapping.deleted = entry->deleted;
  frame.rel_pc = pc - entry->start + entry->pgoff;
  const size_t index = static_cast<size_t>(entry - space->maps.entries().data());
  const ElfFile* file =
      entry->kind == MapsEntry::Kind::kFile ? ResolveFile(pid, space, index) : nullptr;
  if (file == nullptr) {
    ++stats_.frames_unnamed;
    return frame;
  }
  frame.file_read = true;
  NameFrame(*file, space->mappings[index].handle, &frame);
  return frame;
}

UserSymbolizer::ProcessState& UserSymbolizer::Process(pid_t pid) {
  auto [it, added] = processes_.try_emplace(pid);
  if (added) {
    process_bytes_ += kProcessBytes;
    it->second.space = NewSpace();
  }
  return it->second;
}

void UserSymbolizer::Erase(absl::flat_hash_map<pid_t, ProcessState>::iterator it) {
  Release(&it->second.space);
  process_bytes_ -= kProcessBytes;
  processes_.erase(it);
}

std::shared_ptr<UserSymbolizer::AddressSpace> UserSymbolizer::NewSpace() {
  ++spaces_;
  auto space = std::make_shared<AddressSpace>();
  space->id = ++last_space_id_;
  SetSpaceBytes(space.get(), kSpaceBytes);
  return space;
}

void UserSymbolizer::Release(std::shared_ptr<AddressSpace>* space) {
  if (*space == nullptr) return;
  if (space->use_count() == 1) {
    process_bytes_ -= (*space)->bytes;
    --spaces_;
  }
  space->reset();
}

uint64_t UserSymbolizer::SpaceId(pid_t pid) const {
  auto it = processes_.find(pid);
  return it == processes_.end() ? 0 : it->second.space->id;
}

void UserSymbolizer::ProcessForked(pid_t parent, pid_t child) {
  if (parent == child || processes_.contains(child)) return;
  std::shared_ptr<AddressSpace> space = Process(parent).space;
  ProcessState& state = processes_[child];
  process_bytes_ += kProcessBytes;
  state.space = std::move(space);
  state.last_used = ++uses_;
  if (process_bytes_ > options_.max_process_bytes) TrimProcesses(child);
}

void UserSymbolizer::ProcessExeced(pid_t pid) {
  ProcessState& process = Process(pid);
  if (!process.space->read && process.space.use_count() == 1) return;  // nothing to forget
  Release(&process.space);
  process.space = NewSpace();
}

void UserSymbolizer::Preload(pid_t pid, uint64_t pc) {
  const UserSymbolizerStats before = stats_;
  Symbolize(pid, pc);
  stats_.frames_named = before.frames_named;
  stats_.frames_unnamed = before.frames_unnamed;
  stats_.frames_unmapped = before.frames_unmapped;
}

void UserSymbolizer::NameFrame(const ElfFile& file, const internal::ElfCache::Handle& handle,
                               UserFrame* frame) {
  const uint64_t file_offset = frame->rel_pc;  // before the bias is added
  frame->mapping.build_id = file.build_id();
  frame->mapping.build_id_hex = cache_.BuildIdHex(handle);
  frame->mapping.load_bias = file.load_bias();
  frame->rel_pc = file_offset + file.load_bias();
  const std::optional<uint64_t> vaddr = file.FileOffsetToVaddr(file_offset);
  const std::optional<ElfFunction> function =
      vaddr ? file.FindFunction(*vaddr) : std::optional<ElfFunction>();
  if (!function) {
    ++stats_.frames_unnamed;
    return;
  }
  frame->function_name = function->name;
  frame->function_offset = function->offset;
  ++stats_.frames_named;
}

UserSymbolizer::AddressSpace* UserSymbolizer::ReadMaps(pid_t pid, ProcessState* process, bool own) {
  if (own && process->space.use_count() > 1) {
    // The others keep what they share.
    Release(&process->space);
    process->space = NewSpace();
  }
  AddressSpace* space = process->space.get();
  ++stats_.maps_reads;
  space->id = ++last_space_id_;  // What its addresses mean may change.
  space->read = true;
  space->read_from = pid;
  space->read_at = std::chrono::steady_clock::now();
  // An exited process's maps are gone: not even an open of /proc/PID/maps
  // (microseconds, for every short-lived process whose stack is read after
  // its exit), nor a read of another process's that took its id.
  absl::StatusOr<ProcessMaps> maps =
      exited_.contains(pid) ? absl::NotFoundError(absl::StrCat("process ", pid, " exited"))
                            : ProcessMaps::Read(options_.proc_root, pid);
  space->readable = maps.ok();
  if (!maps.ok()) {
    ++stats_.maps_unreadable;
    space->maps = ProcessMaps();
  } else {
    space->maps = *std::move(maps);
  }
  space->mappings.assign(space->maps.entries().size(), MappingState());
  SetSpaceBytes(space, kSpaceBytes + space->maps.memory_bytes() +
                           space->mappings.capacity() * sizeof(MappingState));
  return space;
}

void UserSymbolizer::SetSpaceBytes(AddressSpace* space, size_t bytes) {
  process_bytes_ = process_bytes_ - space->bytes + bytes;
  space->bytes = bytes;
}

void UserSymbolizer::TrimProcesses(pid_t keep) {
  while (process_bytes_ > options_.max_process_bytes && processes_.size() > 1) {
    auto oldest = processes_.end();
    for (auto it = processes_.begin(); it != processes_.end(); ++it) {
      if (it->first != keep &&
          (oldest == processes_.end() || it->second.last_used < oldest->second.last_used)) {
        oldest = it;
      }
    }
    Erase(oldest);
    ++stats_.processes_evicted;
  }
}

const ElfFile* UserSymbolizer::ResolveFile(pid_t pid, AddressSpace* space, size_t index) {
  MappingState& state = space->mappings[index];
  switch (state.status) {
    case MappingState::Status::kUnreadable:
      if (state.failed_for == pid) return nullptr;
      break;
    case MappingState::Status::kRead:
      if (cache_.Valid(state.handle)) return &cache_.Use(state.handle);
      // Something was evicted since: find it again (perhaps still there,
      // perhaps read again).
      if (!state.cache_key.empty() && cache_.FindByKey(state.cache_key, &state.handle)) {
        return &cache_.Use(state.handle);
      }
      break;
    case MappingState::Status::kUnread:
      break;
  }
  const size_t key_bytes = HeapBytes(state.cache_key);
  const bool loaded = LoadFile(pid, space->maps.entries()[index], &state);
  SetSpaceBytes(space, space->bytes - key_bytes + HeapBytes(state.cache_key));
  if (!loaded) {
    state.status = MappingState::Status::kUnreadable;
    state.failed_for = pid;
    return nullptr;
  }
  state.status = MappingState::Status::kRead;
  return &cache_.Use(state.handle);
}

bool UserSymbolizer::LoadFile(pid_t pid, const MapsEntry& entry, MappingState* state) {
  absl::StatusOr<internal::MappedFile> mapped =
      internal::OpenMappedFile(options_.proc_root, pid, entry, options_.max_binary_bytes);
  if (!mapped.ok()) {
    ++stats_.mappings_unreadable;
    return false;
  }
  const internal::FileIdentity identity = IdentityOf(mapped->st);
  if (cache_.FindByIdentity(identity, &state->handle)) {
    state->cache_key = cache_.KeyOf(state->handle);
    return true;
  }
  absl::StatusOr<base::ScopedFd> fd = mapped->OpenForReading();
  if (!fd.ok()) {
    ++stats_.mappings_unreadable;
    return false;
  }
  absl::StatusOr<ElfFile> file = ElfFile::Read(fd->get(), entry.path);
  if (!file.ok()) {
    ++stats_.mappings_unreadable;
    return false;
  }
  std::string key = file->build_id().empty()
                        ? absl::StrCat("file:", identity.dev, ":", identity.inode, ":",
                                       identity.mtime_ns, ":", identity.size)
                        : file->build_id_hex();
  state->cache_key = key;
  if (cache_.FindByKey(key, &state->handle)) {
    cache_.AddIdentity(state->handle, identity);
    return true;
  }
  const uint64_t evictions = cache_.evictions();
  const bool added = cache_.Insert(std::move(key), identity, *std::move(file), &state->handle);
  stats_.cache_evictions += cache_.evictions() - evictions;
  if (!added) ++stats_.tables_over_budget;
  return added;
}

void UserSymbolizer::ProcessExited(pid_t pid) { exited_.insert(pid); }

void UserSymbolizer::ForgetProcess(pid_t pid) {
  exited_.erase(pid);
  auto it = processes_.find(pid);
  if (it == processes_.end()) return;
  Erase(it);
}

size_t UserSymbolizer::memory_bytes() const {
  // The table's empty slots, beside what process_bytes_ counts, and the
  // exited processes' ids.
  return sizeof(*this) + cache_.memory_bytes() +
         (processes_.capacity() - processes_.size()) * kProcessBytes + process_bytes_ +
         exited_.capacity() * (sizeof(pid_t) + 1);
}

}  // namespace ringside::agent
