#ifndef RINGSIDE_AGENT_CLI_AGENT_CLIENT_H_
#define RINGSIDE_AGENT_CLI_AGENT_CLIENT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/cli/command_line.h"
#include "ringside/control/control.pb.h"

namespace ringside::agent {

// What `status`, `snapshot` and `stop` share: they find a running agent's
// control socket the same way and report its failures the same way.

// The flags naming the socket: --socket PATH and -c CONFIG.
std::vector<FlagSpec> AgentSocketFlags();

// The control socket to use: --socket if given, else the control_socket of
// the config -c names, else kDefaultControlSocket. A config that can be
// read but does not load (an edit the running agent refused on reload)
// still names its socket: the control_socket line found in its text, else
// the default; `*note` (if given) then says so, with the config's error.
// Errors: the config cannot be read.
absl::StatusOr<std::string> ResolveControlSocket(const ParsedArgs& args,
                                                 std::string* note = nullptr);

// Sends `request` to the agent on `socket_path` within `timeout`. On success
// returns its reply, which has `expected` set. Otherwise prints on stderr
// "ringside COMMAND: " and what went wrong (nobody listening, with how to
// start an agent; permission denied, naming who may; a timeout; "the agent
// refused: <its error>"), stores the exit status in *exit_code (kExitUsage
// for a socket path that cannot be one, else kExitFailure), and returns
// nullopt.
std::optional<control::Reply> AskAgent(const std::string& command, const std::string& socket_path,
                                       const control::Request& request,
                                       control::Reply::ReplyCase expected, absl::Duration timeout,
                                       int* exit_code);

// Resolves the socket (printing a config error and returning kExitUsage
// through *exit_code if that fails), then AskAgent().
std::optional<control::Reply> AskAgent(const CommandSpec& spec, const ParsedArgs& args,
                                       const control::Request& request,
                                       control::Reply::ReplyCase expected, absl::Duration timeout,
                                       int* exit_code);

}  // namespace ringside::agent

#endif  // RINGSIDE_AGENT_CLI_AGENT_CLIENT_H_
