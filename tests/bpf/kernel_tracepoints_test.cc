// KernelTracepoints: the running kernel's BTF scanned in place gives what
// libbpf's parse of it gives, and malformed BTF gives an error, never a read
// outside its bytes.
#include "bpf/kernel_tracepoints.h"

#include <bpf/btf.h>
#include <linux/btf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bpf/btf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/root_only_dir.h"

namespace ringside::bpf {
namespace {

using ::testing::HasSubstr;

constexpr char kKernelBtf[] = "/sys/kernel/btf/vmlinux";

// Raw BTF built type by type, ids from 1 in the order added.
class BtfBuilder {
 public:
  BtfBuilder() { strings_.push_back('\0'); }
  uint32_t Int() { return Add(0, BTF_KIND_INT, 0, 4, {0x20}); }  // 32 bits.
  uint32_t Ptr(uint32_t to) { return Add(0, BTF_KIND_PTR, 0, to, {}); }
  uint32_t Const(uint32_t of) { return Add(0, BTF_KIND_CONST, 0, of, {}); }
  uint32_t Typedef(const std::string& name, uint32_t of) {
    return Add(Name(name), BTF_KIND_TYPEDEF, 0, of, {});
  }
  // (name_off, type) pairs: the parameters.
  uint32_t Proto(const std::vector<uint32_t>& param_types) {
    std::vector<uint32_t> trailer;
    for (uint32_t t : param_types) {
      trailer.push_back(0);
      trailer.push_back(t);
    }
    return Add(0, BTF_KIND_FUNC_PROTO, static_cast<uint32_t>(param_types.size()), 0, trailer);
  }
  // A typedef btf_trace_<name> of a pointer to a prototype taking the
  // context (void*) and `args`.
  void Probe(const std::string& name, std::vector<uint32_t> args) {
    args.insert(args.begin(), Ptr(0));
    Typedef("btf_trace_" + name, Ptr(Proto(args)));
  }
  uint32_t Raw(uint32_t kind, uint32_t vlen, uint32_t type) { return Add(0, kind, vlen, type, {}); }

  std::string Bytes() const {
    btf_header h{};
    h.magic = BTF_MAGIC;
    h.version = BTF_VERSION;
    h.hdr_len = sizeof(h);
    h.type_off = 0;
    h.type_len = static_cast<uint32_t>(types_.size());
    h.str_off = h.type_len;
    h.str_len = static_cast<uint32_t>(strings_.size());
    std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
    out += types_;
    out += strings_;
    return out;
  }

 private:
  uint32_t Name(const std::string& name) {
    const uint32_t off = static_cast<uint32_t>(strings_.size());
    strings_ += name;
    strings_.push_back('\0');
    return off;
  }
  uint32_t Add(uint32_t name_off, uint32_t kind, uint32_t vlen, uint32_t size_or_type,
               const std::vector<uint32_t>& trailer) {
    btf_type t{};
    t.name_off = name_off;
    t.info = (kind << 24) | vlen;
    t.type = size_or_type;
    types_.append(reinterpret_cast<const char*>(&t), sizeof(t));
    types_.append(reinterpret_cast<const char*>(trailer.data()), trailer.size() * 4);
    return ++count_;
  }

  std::string types_;
  std::string strings_;
  uint32_t count_ = 0;
};

TEST(KernelTracepointsTest, ProbesArePointersToPrototypesNamedBtfTrace) {
  BtfBuilder b;
  const uint32_t i = b.Int();
  const uint32_t task = b.Typedef("task_t", b.Int());
  b.Probe("two_args", {b.Const(b.Typedef("task_ptr", b.Ptr(task))), i});
  b.Probe("int_first", {i, b.Ptr(i)});
  b.Probe("no_args", {});
  b.Typedef("btf_trace_not_a_pointer", i);
  b.Typedef("btf_trace_pointer_to_int", b.Ptr(i));
  b.Typedef("not_a_probe", b.Ptr(b.Proto({b.Ptr(0), b.Ptr(i)})));
  absl::StatusOr<KernelTracepoints> k = KernelTracepoints::FromRawBtf(b.Bytes());
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->probes().size(), 3u);
  EXPECT_TRUE(k->Has("two_args"));
  EXPECT_EQ(k->NumArgs("two_args"), 2);
  EXPECT_TRUE(k->FirstArgIsPointer("two_args"));  // Through a const and a typedef.
  EXPECT_EQ(k->NumArgs("int_first"), 2);
  EXPECT_FALSE(k->FirstArgIsPointer("int_first"));
  EXPECT_EQ(k->NumArgs("no_args"), 0);
  EXPECT_FALSE(k->FirstArgIsPointer("no_args"));
  for (const char* absent : {"not_a_pointer", "pointer_to_int", "not_a_probe", "sched_switch"}) {
    EXPECT_FALSE(k->Has(absent)) << absent;
    EXPECT_EQ(k->NumArgs(absent), -1) << absent;
  }
}

TEST(KernelTracepointsTest, MalformedBtfIsAnErrorThatSaysWhat) {
  BtfBuilder b;
  b.Probe("x", {b.Int()});
  const std::string good = b.Bytes();

  std::string bad_magic = good;
  bad_magic[0] = 0x12;
  EXPECT_THAT(std::string(KernelTracepoints::FromRawBtf(bad_magic).status().message()),
              HasSubstr("magic"));
  std::string past_end = good;
  btf_header h;
  std::memcpy(&h, past_end.data(), sizeof(h));
  h.str_len += 1;
  std::memcpy(past_end.data(), &h, sizeof(h));
  EXPECT_THAT(std::string(KernelTracepoints::FromRawBtf(past_end).status().message()),
              HasSubstr("ends past"));
  BtfBuilder unknown;
  unknown.Int();
  unknown.Raw(NR_BTF_KINDS + 3, 0, 0);
  absl::Status st = KernelTracepoints::FromRawBtf(unknown.Bytes()).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()),
              HasSubstr(absl::StrCat("type 2 is of kind ", NR_BTF_KINDS + 3)));

  // Every cut of a good BTF: an error or fewer probes, never a read past
  // its end (an exactly sized copy each, for ASan).
  for (size_t n = 0; n < good.size(); n++) {
    std::unique_ptr<char[]> copy(new char[n + 1]);
    std::memcpy(copy.get(), good.data(), n);
    absl::StatusOr<KernelTracepoints> k = KernelTracepoints::FromRawBtf({copy.get(), n});
    if (k.ok()) {
      EXPECT_LE(k->probes().size(), 1u);
    }
  }
}

TEST(KernelTracepointsTest, ReferencesOutOfRangeOrInALoopEndTheWalk) {
  BtfBuilder b;
  // Typedefs 1 -> 2 -> 1: a loop where the first argument's type should be.
  const uint32_t loop_a = b.Typedef("a", 2);
  b.Typedef("b", loop_a);
  b.Probe("looped", {loop_a});
  b.Typedef("btf_trace_dangling", 9999);
  b.Typedef("btf_trace_dangling_proto", b.Ptr(9999));
  b.Probe("dangling_arg", {9999});
  absl::StatusOr<KernelTracepoints> k = KernelTracepoints::FromRawBtf(b.Bytes());
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->NumArgs("looped"), 1);
  EXPECT_FALSE(k->FirstArgIsPointer("looped"));
  EXPECT_FALSE(k->Has("dangling"));
  EXPECT_FALSE(k->Has("dangling_proto"));
  EXPECT_EQ(k->NumArgs("dangling_arg"), 1);
  EXPECT_FALSE(k->FirstArgIsPointer("dangling_arg"));
}

// The oracle: libbpf's own parse and lookups, as the loader used before.
KernelTracepoints::Probe ProbeByLibbpf(const btf* b, const btf_type* def) {
  const btf_type* ptr = btf__type_by_id(b, def->type);
  EXPECT_TRUE(ptr != nullptr && btf_is_ptr(ptr));
  const btf_type* proto = btf__type_by_id(b, ptr->type);
  EXPECT_TRUE(proto != nullptr && btf_is_func_proto(proto));
  KernelTracepoints::Probe p;
  p.num_args = static_cast<int>(btf_vlen(proto)) - 1;
  if (btf_vlen(proto) >= 2) {
    const btf_type* t = btf__type_by_id(b, btf_params(proto)[1].type);
    while (t != nullptr && (btf_is_typedef(t) || btf_is_mod(t))) t = btf__type_by_id(b, t->type);
    p.first_arg_is_pointer = t != nullptr && btf_is_ptr(t);
  }
  return p;
}

TEST(KernelTracepointsTest, TheRunningKernelsProbesAreLibbpfsToo) {
  struct stat st;
  if (stat(kKernelBtf, &st) != 0) GTEST_SKIP() << "needs the kernel's BTF: no " << kKernelBtf;
  absl::StatusOr<KernelTracepoints> k = KernelTracepoints::Running();
  ASSERT_TRUE(k.ok()) << k.status();
  btf* b = btf__load_vmlinux_btf();
  ASSERT_NE(b, nullptr);
  size_t compared = 0;
  for (uint32_t id = 1; id < btf__type_cnt(b); id++) {
    const btf_type* t = btf__type_by_id(b, id);
    const char* name = btf__name_by_offset(b, t->name_off);
    if (!btf_is_typedef(t) || name == nullptr || !absl::StartsWith(name, "btf_trace_")) continue;
    const std::string tracepoint = name + std::strlen("btf_trace_");
    const KernelTracepoints::Probe want = ProbeByLibbpf(b, t);
    EXPECT_EQ(k->NumArgs(tracepoint), want.num_args) << tracepoint;
    EXPECT_EQ(k->FirstArgIsPointer(tracepoint), want.first_arg_is_pointer) << tracepoint;
    compared++;
  }
  btf__free(b);
  EXPECT_EQ(compared, k->probes().size());
  EXPECT_GT(compared, 100u);
  // What the loader asks: sched_switch passes (preempt, prev, next) and,
  // since 5.18, prev_state; sched_process_fork's first is a task.
  EXPECT_GE(k->NumArgs("sched_switch"), 3);
  EXPECT_FALSE(k->FirstArgIsPointer("sched_switch"));
  EXPECT_TRUE(k->FirstArgIsPointer("sched_process_fork"));
}

TEST(KernelTracepointsTest, AFileGivesWhatTheKernelDoes) {
  struct stat st;
  if (stat(kKernelBtf, &st) != 0) GTEST_SKIP() << "needs the kernel's BTF: no " << kKernelBtf;
  const ringside::testing::RootOnlyDir dir;
  if (dir.path().empty()) GTEST_SKIP() << dir.why();
  const std::string path = dir.Path("vmlinux.btf");
  {
    std::ifstream in(kKernelBtf, std::ios::binary);
    std::ofstream out(path, std::ios::binary);
    out << in.rdbuf();
  }
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  absl::StatusOr<std::unique_ptr<BtfFile>> file = BtfFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<KernelTracepoints> from_file = KernelTracepoints::FromBtfFile(**file);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  absl::StatusOr<KernelTracepoints> running = KernelTracepoints::Running();
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(from_file->probes().size(), running->probes().size());
  for (const auto& [name, probe] : running->probes()) {
    EXPECT_EQ(from_file->NumArgs(name), probe.num_args) << name;
    EXPECT_EQ(from_file->FirstArgIsPointer(name), probe.first_arg_is_pointer) << name;
  }
}

}  // namespace
}  // namespace ringside::bpf
