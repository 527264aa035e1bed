// SPDX-License-Identifier: GPL-2.0
/* The three groups (sched, process, incidents) as one object, which the
 * loader tries first when all three are asked for: libbpf then reads and
 * searches the kernel's BTF once instead of once per object, about a
 * quarter of the agent's start-up CPU. Should this kernel's verifier refuse
 * one of them, the loader falls back to the groups' own objects, so that
 * the others still load (EventSource::LoadGroups). The files share
 * rings.bpf.h, whose maps and variables are then defined once, and the
 * scheduling group's per-CPU batches (sched_batch.bpf.h), which the process
 * programs fill too here (RS_BATCH_PROCESS_RECORDS). */
#define RS_BATCH_PROCESS_RECORDS
#include "bpf/incidents.bpf.c"
#include "bpf/process.bpf.c"
#include "bpf/sched.bpf.c"
