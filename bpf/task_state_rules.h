#ifndef RINGSIDE_BPF_TASK_STATE_RULES_H_
#define RINGSIDE_BPF_TASK_STATE_RULES_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace ringside::bpf {

// The RS_TASK_STATE_RULE_* bits (bpf/task_state.h) of the kernel whose
// release string (uname -r, e.g. "6.1.123-1-amd64") is `release`: which of
// the two later changes to the kernel's prev_state mapping it has (6.6, 6.13),
// mainline or backported to a stable series. A release that does not start
// with MAJOR.MINOR gets the newest rules: the mapping of current kernels.
// (A distribution kernel that backported either change without the stable
// release that carried it reports a compound state, TASK_IDLE|TASK_FREEZABLE
// or TASK_FROZEN, with another letter than ours; never an invalid one.)
uint32_t TaskStateRulesForRelease(absl::string_view release);

}  // namespace ringside::bpf

#endif  // RINGSIDE_BPF_TASK_STATE_RULES_H_
