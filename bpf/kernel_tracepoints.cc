#include "bpf/kernel_tracepoints.h"

#include <fcntl.h>
#include <linux/btf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/file_io.h"
#include "base/scoped_fd.h"
#include "bpf/btf_file.h"

namespace ringside::bpf {
namespace {

constexpr char kKernelBtf[] = "/sys/kernel/btf/vmlinux";
constexpr absl::string_view kTypedefPrefix = "btf_trace_";

// Bytes that follow a type's btf_type, by kind; nullopt for a kind this
// reader does not know (or 0, which no type has).
std::optional<uint64_t> TrailerBytes(uint32_t kind, uint32_t vlen) {
  switch (kind) {
    case BTF_KIND_PTR:
    case BTF_KIND_FWD:
    case BTF_KIND_TYPEDEF:
    case BTF_KIND_VOLATILE:
    case BTF_KIND_CONST:
    case BTF_KIND_RESTRICT:
    case BTF_KIND_FUNC:
    case BTF_KIND_FLOAT:
    case BTF_KIND_TYPE_TAG:
      return 0;
    case BTF_KIND_INT:
      return sizeof(uint32_t);
    case BTF_KIND_ARRAY:
      return sizeof(struct btf_array);
    case BTF_KIND_STRUCT:
    case BTF_KIND_UNION:
      return uint64_t{vlen} * sizeof(struct btf_member);
    case BTF_KIND_ENUM:
      return uint64_t{vlen} * sizeof(struct btf_enum);
    case BTF_KIND_FUNC_PROTO:
      return uint64_t{vlen} * sizeof(struct btf_param);
    case BTF_KIND_VAR:
      return sizeof(struct btf_var);
    case BTF_KIND_DATASEC:
      return uint64_t{vlen} * sizeof(struct btf_var_secinfo);
    case BTF_KIND_DECL_TAG:
      return sizeof(struct btf_decl_tag);
    case BTF_KIND_ENUM64:
      return uint64_t{vlen} * sizeof(struct btf_enum64);
    default:
      return std::nullopt;
  }
}

// The type section, walked once: where each type id starts (ids count from
// 1; 0 is void).
class TypeTable {
 public:
  explicit TypeTable(absl::string_view types) : types_(types) {}

  // A type's header, or nullopt for void or an id past the last type.
  std::optional<btf_type> Get(uint32_t id) const {
    if (id == 0 || id > offsets_.size()) return std::nullopt;
    btf_type t;
    std::memcpy(&t, types_.data() + offsets_[id - 1], sizeof(t));
    return t;
  }
  // The i-th parameter of FUNC_PROTO `id` (the walk checked it is there).
  btf_param Param(uint32_t id, uint32_t i) const {
    btf_param p;
    std::memcpy(&p, types_.data() + offsets_[id - 1] + sizeof(btf_type) + i * sizeof(p), sizeof(p));
    return p;
  }
  void Add(uint32_t offset) { offsets_.push_back(offset); }

 private:
  absl::string_view types_;
  std::vector<uint32_t> offsets_;  // The section's length is a u32.
};

bool IsModifierOrTypedef(uint32_t kind) {
  return kind == BTF_KIND_TYPEDEF || kind == BTF_KIND_VOLATILE || kind == BTF_KIND_CONST ||
         kind == BTF_KIND_RESTRICT || kind == BTF_KIND_TYPE_TAG;
}

// Typedef `id` (btf_trace_<name>) as a probe: a pointer to a prototype
// whose first parameter is the context. nullopt when it is not one.
std::optional<KernelTracepoints::Probe> ProbeOf(const TypeTable& table, uint32_t id) {
  const std::optional<btf_type> def = table.Get(id);
  if (!def) return std::nullopt;
  const std::optional<btf_type> ptr = table.Get(def->type);
  if (!ptr || BTF_INFO_KIND(ptr->info) != BTF_KIND_PTR) return std::nullopt;
  const std::optional<btf_type> proto = table.Get(ptr->type);
  if (!proto || BTF_INFO_KIND(proto->info) != BTF_KIND_FUNC_PROTO) return std::nullopt;
  const uint32_t params = BTF_INFO_VLEN(proto->info);
  if (params == 0) return std::nullopt;
  KernelTracepoints::Probe probe;
  probe.num_args = static_cast<int>(params) - 1;
  if (params >= 2) {
    std::optional<btf_type> t = table.Get(table.Param(ptr->type, 1).type);
    // Bounded: a malformed BTF may chain typedefs into a loop.
    for (int hops = 0; t && IsModifierOrTypedef(BTF_INFO_KIND(t->info)) && hops < 64; hops++) {
      t = table.Get(t->type);
    }
    probe.first_arg_is_pointer = t && BTF_INFO_KIND(t->info) == BTF_KIND_PTR;
  }
  return probe;
}

absl::Status Malformed(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("malformed BTF: ", why));
}

}  // namespace

absl::StatusOr<KernelTracepoints> KernelTracepoints::FromRawBtf(absl::string_view btf_untrusted) {
  const absl::string_view bytes = btf_untrusted;
  btf_header h;
  if (bytes.size() < sizeof(h)) return Malformed("shorter than its header");
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.magic != BTF_MAGIC) {
    return Malformed(absl::StrCat("magic 0x", absl::Hex(h.magic), ", not 0xeb9f in this ",
                                  "machine's byte order"));
  }
  if (h.hdr_len < sizeof(h) || h.hdr_len > bytes.size()) {
    return Malformed(absl::StrCat("header length ", h.hdr_len));
  }
  const absl::string_view body = bytes.substr(h.hdr_len);
  if (uint64_t{h.type_off} + h.type_len > body.size() ||
      uint64_t{h.str_off} + h.str_len > body.size()) {
    return Malformed(absl::StrCat("its type or string section (", h.type_off, "+", h.type_len, ", ",
                                  h.str_off, "+", h.str_len, ") ends past its ", body.size(),
                                  " bytes"));
  }
  const absl::string_view types = body.substr(h.type_off, h.type_len);
  const absl::string_view strings = body.substr(h.str_off, h.str_len);
  auto name_at = [&](uint32_t offset) -> absl::string_view {
    if (offset >= strings.size()) return {};
    const absl::string_view rest = strings.substr(offset);
    const size_t end = rest.find('\0');
    return end == absl::string_view::npos ? absl::string_view() : rest.substr(0, end);
  };

  TypeTable table(types);
  std::vector<std::pair<uint32_t, absl::string_view>> typedefs;  // id, tracepoint
  uint32_t id = 0;
  for (uint64_t at = 0; at < types.size();) {
    id++;
    btf_type t;
    if (types.size() - at < sizeof(t)) return Malformed(absl::StrCat("type ", id, " cut short"));
    std::memcpy(&t, types.data() + at, sizeof(t));
    const uint32_t kind = BTF_INFO_KIND(t.info);
    const std::optional<uint64_t> trailer = TrailerBytes(kind, BTF_INFO_VLEN(t.info));
    if (!trailer) {
      return Malformed(absl::StrCat("type ", id, " is of kind ", kind, ", unknown to this reader"));
    }
    if (types.size() - at - sizeof(t) < *trailer) {
      return Malformed(absl::StrCat("type ", id, " cut short"));
    }
    table.Add(static_cast<uint32_t>(at));
    if (kind == BTF_KIND_TYPEDEF) {
      absl::string_view name = name_at(t.name_off);
      if (absl::ConsumePrefix(&name, kTypedefPrefix)) typedefs.emplace_back(id, name);
    }
    at += sizeof(t) + *trailer;
  }

  KernelTracepoints out;
  out.probes_.reserve(typedefs.size());
  for (const auto& [typedef_id, name] : typedefs) {
    if (std::optional<Probe> probe = ProbeOf(table, typedef_id)) {
      out.probes_.try_emplace(name, *probe);
    }
  }
  return out;
}

absl::StatusOr<KernelTracepoints> KernelTracepoints::Running() {
  auto unreadable = [](const std::string& why) {
    return absl::UnavailableError(
        absl::StrCat("reading the kernel's BTF (", kKernelBtf, "): ", why));
  };
  const base::ScopedFd fd(open(kKernelBtf, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return unreadable(strerror(errno));
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return unreadable(strerror(errno));
  if (st.st_size <= 0) return unreadable("empty");
  const size_t size = static_cast<size_t>(st.st_size);
  absl::StatusOr<KernelTracepoints> out;
  // Mapped where the kernel allows it (6.16+): no copy of its 5 MB.
  void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (mapped != MAP_FAILED) {
    out = FromRawBtf(absl::string_view(static_cast<const char*>(mapped), size));
    munmap(mapped, size);
  } else {
    std::string bytes(size, '\0');
    // What could be read: a short BTF fails to parse below.
    bytes.resize(base::ReadFull(fd.get(), bytes.data(), size).bytes);
    out = FromRawBtf(bytes);
  }
  if (!out.ok()) return unreadable(std::string(out.status().message()));
  return out;
}

absl::StatusOr<KernelTracepoints> KernelTracepoints::FromBtfFile(const BtfFile& file) {
  absl::StatusOr<KernelTracepoints> out = FromRawBtf(file.raw());
  if (!out.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bpf_config.btf_path ", file.path(), ": ", out.status().message()));
  }
  return out;
}

}  // namespace ringside::bpf
