#ifndef RINGSIDE_TESTS_FTRACE_TESTING_KERNEL_FORMATS_H_
#define RINGSIDE_TESTS_FTRACE_TESTING_KERNEL_FORMATS_H_

namespace ringside::ftrace::testing {

// events/sched/sched_switch/format as a 6.18 kernel writes it, shared by
// the tests of the format parser and of the event table.
inline constexpr char kSchedSwitchFormat[] = R"(name: sched_switch
ID: 372
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:char prev_comm[16];	offset:8;	size:16;	signed:0;
	field:pid_t prev_pid;	offset:24;	size:4;	signed:1;
	field:int prev_prio;	offset:28;	size:4;	signed:1;
	field:long prev_state;	offset:32;	size:8;	signed:1;
	field:char next_comm[16];	offset:40;	size:16;	signed:0;
	field:pid_t next_pid;	offset:56;	size:4;	signed:1;
	field:int next_prio;	offset:60;	size:4;	signed:1;

print fmt: "prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d", REC->prev_comm, REC->prev_pid, REC->prev_prio, REC->prev_state, "", REC->next_comm, REC->next_pid, REC->next_prio
)";

// events/ftrace/print/format (trace_marker's writes), as 6.x kernels write
// it.
inline constexpr char kPrintFormat[] = R"(name: print
ID: 5
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:unsigned long ip;	offset:8;	size:8;	signed:0;
	field:char buf[];	offset:16;	size:0;	signed:0;

print fmt: "%ps: %s", (void *)REC->ip, REC->buf
)";

// events/header_page and events/header_event of an x86-64 kernel with
// 4 KiB pages.
inline constexpr char kHeaderPage[] =
    "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
    "\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
    "\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
    "\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
inline constexpr char kHeaderEvent[] =
    "# compressed entry header\n\ttype_len    :    5 bits\n\ttime_delta  :   27 bits\n"
    "\tarray       :   32 bits\n\n\tpadding     : type == 29\n\ttime_extend : type == 30\n"
    "\ttime_stamp : type == 31\n\tdata max type_len  == 28\n";

}  // namespace ringside::ftrace::testing

#endif  // RINGSIDE_TESTS_FTRACE_TESTING_KERNEL_FORMATS_H_
