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

UserFrame UserSymbolizer::Symbolize(pid_t pid, uint64_t pc) {
  UserFrame frame;
  auto [it, added] = processes_.try_emplace(pid);
  ProcessState* process = &it->second;
  process->last_used = ++uses_;
  if (added) ReadMaps(pid, process);
  const MapsEntry* entry = process->maps.Find(pc);
  if (entry == nullptr &&
      std::chrono::steady_clock::now() - process->read_at >= options_.min_maps_refresh) {
    ReadMaps(pid, process);  // a library loaded since the last read
    entry = process->maps.Find(pc);
  }
  // Erasing others moves no element of the map: `process` and `entry` stay.
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
  const size_t index = static_cast<size_t>(entry - process->maps.entries().data());
  const ElfFile* file =
      entry->kind == MapsEntry::Kind::kFile ? ResolveFile(pid, process, index) : nullptr;
  if (file == nullptr) {
    ++stats_.frames_unnamed;
    return frame;
  }
  NameFrame(*file, process->mappings[index].handle, &frame);
  return frame;
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

void UserSymbolizer::ReadMaps(pid_t pid, ProcessState* process) {
  ++stats_.maps_reads;
  process->read_at = std::chrono::steady_clock::now();
  absl::StatusOr<ProcessMaps> maps = ProcessMaps::Read(options_.proc_root, pid);
  if (!maps.ok()) {
    ++stats_.maps_unreadable;
    process->maps = ProcessMaps();
  } else {
    process->maps = *std::move(maps);
  }
  process->mappings.assign(process->maps.entries().size(), MappingState());
  SetProcessBytes(
      process, process->maps.memory_bytes() + process->mappings.capacity() * sizeof(MappingState));
}

void UserSymbolizer::SetProcessBytes(ProcessState* process, size_t bytes) {
  process_bytes_ = process_bytes_ - process->bytes + bytes;
  process->bytes = bytes;
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
    process_bytes_ -= oldest->second.bytes;
    processes_.erase(oldest);
    ++stats_.processes_evicted;
  }
}

const ElfFile* UserSymbolizer::ResolveFile(pid_t pid, ProcessState* process, size_t index) {
  MappingState& state = process->mappings[index];
  switch (state.status) {
    case MappingState::Status::kUnreadable:
      return nullptr;
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
  const bool loaded = LoadFile(pid, process->maps.entries()[index], &state);
  SetProcessBytes(process, process->bytes - key_bytes + HeapBytes(state.cache_key));
  if (!loaded) {
    state.status = MappingState::Status::kUnreadable;
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
  absl::StatusOr<ElfFile> file = ElfFile::Read(mapped->fd.get(), entry.path);
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

void UserSymbolizer::ForgetProcess(pid_t pid) {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return;
  process_bytes_ -= it->second.bytes;
  processes_.erase(it);
}

size_t UserSymbolizer::memory_bytes() const {
  return sizeof(*this) + cache_.memory_bytes() +
         processes_.capacity() * (sizeof(pid_t) + sizeof(ProcessState)) + process_bytes_;
}

}  // namespace ringside::agent
