#include "agent/symbols/user_symbolizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/symbols/internal/mapped_file.h"

namespace ringside::agent {
namespace {

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
  if (added) ReadMaps(pid, process);
  const MapsEntry* entry = process->maps.Find(pc);
  if (entry == nullptr &&
      std::chrono::steady_clock::now() - process->read_at >= options_.min_maps_refresh) {
    ReadMaps(pid, process);  // a library loaded since the last read
    entry = process->maps.Find(pc);
  }
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
  if (!LoadFile(pid, process->maps.entries()[index], &state)) {
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

void UserSymbolizer::ForgetProcess(pid_t pid) { processes_.erase(pid); }

size_t UserSymbolizer::memory_bytes() const {
  size_t bytes = sizeof(*this) + cache_.memory_bytes() +
                 processes_.capacity() * (sizeof(pid_t) + sizeof(ProcessState));
  for (const auto& [pid, process] : processes_) {
    bytes += process.maps.memory_bytes() + process.mappings.capacity() * sizeof(MappingState);
    for (const MappingState& m : process.mappings) {
      if (m.cache_key.capacity() > 15) bytes += m.cache_key.capacity() + 1;
    }
  }
  return bytes;
}

}  // namespace ringside::agent
