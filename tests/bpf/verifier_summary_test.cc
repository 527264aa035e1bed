#include <string>

#include "bpf/load_errors.h"
#include "gtest/gtest.h"

namespace ringside::bpf {
namespace {

// What libbpf printed when Debian's 6.1 refused bpf/sched (shortened): the
// first line is a note the verifier ignores for a main program; the reason
// is the last line before its figures.
constexpr char kRefusedOn61[] =
    "libbpf: prog 'handle_sched_switch': BPF program load failed: Permission denied\n"
    "libbpf: prog 'handle_sched_switch': -- BEGIN PROG LOAD LOG --\n"
    "reg type unsupported for arg#0 function handle_sched_switch#49\n"
    "0: R1=ctx(off=0,imm=0) R10=fp0\n"
    "; if (cpu < RS_MAX_CPUS) batch_waiting[cpu * 8] = 0;\n"
    "591: (7b) *(u64 *)(r2 +0) = r1\n"
    "R2 unbounded memory access, make sure to bounds check any such access\n"
    "processed 283 insns (limit 1000000) max_states_per_insn 0 total_states 15 peak_states 15\n"
    "-- END PROG LOAD LOG --\n"
    "libbpf: prog 'handle_sched_switch': failed to load: -13\n"
    "libbpf: failed to load object 'rs_sched'\n";

TEST(VerifierSummaryTest, NamesTheProgramAndTheVerifiersLastReason) {
  EXPECT_EQ(VerifierSummary(kRefusedOn61),
            "handle_sched_switch: R2 unbounded memory access, make sure to bounds check any such "
            "access");
}

TEST(VerifierSummaryTest, IsEmptyWithoutAVerifierLog) {
  EXPECT_EQ(VerifierSummary(""), "");
  EXPECT_EQ(VerifierSummary("libbpf: failed to find BTF for extern 'x'\n"), "");
}

TEST(VerifierSummaryTest, ALogCutBeforeItsEndStillGivesItsLastLine) {
  EXPECT_EQ(VerifierSummary("libbpf: prog 'p': -- BEGIN PROG LOAD LOG --\n0: R1=ctx\n1: (61) r2"),
            "p: 1: (61) r2");
}

}  // namespace
}  // namespace ringside::bpf
