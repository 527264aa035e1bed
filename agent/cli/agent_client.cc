#include "agent/cli/agent_client.h"

#include <cstdio>
#include <fstream>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/config/config_loader.h"
#include "agent/config/defaults.h"
#include "agent/control/control_client.h"

namespace ringside::agent {
namespace {

void PrintError(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "ringside %s: %s\n", command.c_str(), message.c_str());
}

}  // namespace

std::vector<FlagSpec> AgentSocketFlags() {
  return {
      {0, "socket", "PATH",
       absl::StrCat("the agent's control socket (default: the config's control_socket, else ",
                    kDefaultControlSocket, ")"),
       false},
      {'c', "config", "FILE", "the agent's config file, to find its control_socket", false},
  };
}

absl::StatusOr<std::string> ResolveControlSocket(const ParsedArgs& args, std::string* note) {
  if (args.Has("socket")) return args.Get("socket");
  if (args.Has("config")) {
    const std::string& path = args.Get("config");
    absl::StatusOr<config::TraceConfig> config = LoadConfigFile(path);
    if (config.ok()) {
      return config->has_control_socket() ? config->control_socket()
                                          : std::string(kDefaultControlSocket);
    }
    std::ifstream in(path);
    if (!in) return config.status();
    // Readable but broken: the agent still runs on what it loaded before,
    // and `status` is how one finds out. Its socket, from the text.
    std::string socket = kDefaultControlSocket;
    std::string line;
    while (std::getline(in, line)) {
      absl::string_view l = absl::StripLeadingAsciiWhitespace(line);
      if (!absl::ConsumePrefix(&l, "control_socket")) continue;
      l = absl::StripLeadingAsciiWhitespace(l);
      if (!absl::ConsumePrefix(&l, ":")) continue;
      l = absl::StripLeadingAsciiWhitespace(l);
      if (!absl::ConsumePrefix(&l, "\"")) continue;
      const size_t end = l.find('"');
      if (end != absl::string_view::npos && end > 0) socket = std::string(l.substr(0, end));
    }
    if (note != nullptr) {
      *note = absl::StrCat(config.status().message(), "; asking the agent on ", socket,
                           " (the running agent keeps the config it loaded)");
    }
    return socket;
  }
  return std::string(kDefaultControlSocket);
}

std::optional<control::Reply> AskAgent(const std::string& command, const std::string& socket_path,
                                       const control::Request& request,
                                       control::Reply::ReplyCase expected, absl::Duration timeout,
                                       int* exit_code) {
  *exit_code = kExitFailure;
  absl::StatusOr<control::Reply> reply = CallAgent(socket_path, request, timeout);
  if (!reply.ok()) {
    std::string message(reply.status().message());
    switch (reply.status().code()) {
      case absl::StatusCode::kUnavailable:
        if (absl::StartsWith(message, "no ringside agent")) {
          absl::StrAppend(&message, "; is it running? `ringside agent` starts one");
        }
        break;
      case absl::StatusCode::kInvalidArgument:
        *exit_code = kExitUsage;
        break;
      default:
        break;
    }
    PrintError(command, message);
    return std::nullopt;
  }
  if (reply->has_error()) {
    PrintError(command, absl::StrCat("the agent refused: ", reply->error()));
    return std::nullopt;
  }
  if (reply->reply_case() != expected) {
    PrintError(command, absl::StrCat("the agent on ", socket_path,
                                     " sent a reply of another kind than asked for (",
                                     static_cast<int>(reply->reply_case()), ")"));
    return std::nullopt;
  }
  *exit_code = kExitOk;
  return *std::move(reply);
}

std::optional<control::Reply> AskAgent(const CommandSpec& spec, const ParsedArgs& args,
                                       const control::Request& request,
                                       control::Reply::ReplyCase expected, absl::Duration timeout,
                                       int* exit_code) {
  std::string note;
  absl::StatusOr<std::string> socket_path = ResolveControlSocket(args, &note);
  if (!socket_path.ok()) {
    PrintError(spec.name, std::string(socket_path.status().message()));
    *exit_code = kExitUsage;
    return std::nullopt;
  }
  if (!note.empty()) PrintError(spec.name, absl::StrCat("note: ", note));
  return AskAgent(spec.name, *socket_path, request, expected, timeout, exit_code);
}

}  // namespace ringside::agent
