#include "tools/ddpctl/command_line.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/endpoint.h"
#include "common/status_macros.h"
#include "common/token_file.h"

namespace ddp::ddpctl {
namespace {

// Longest argument echoed back in an error message.
constexpr size_t kMaxEchoedBytes = 64;

std::string Echo(const std::string& text) {
  if (text.size() <= kMaxEchoedBytes) return absl::StrCat("'", text, "'");
  return absl::StrCat("'", text.substr(0, kMaxEchoedBytes), "...' (", text.size(), " bytes)");
}

const std::vector<FlagSpec>& GlobalFlags() {
  static const auto* flags = new std::vector<FlagSpec>{
      {"coordinator", FlagKind::kString, "HOST[:PORT][,HOST[:PORT]...]",
       "Coordinator address (port 29400 when none is given; grpc:// or http:// accepted, as "
       "ddp-client reads it); for coordinators in HA, all of them (ddpctl finds the leader). "
       "Default: $DDP_COORDINATOR, else localhost:29400"},
      {"json", FlagKind::kBool, "", "Print results as JSON, one object a line"},
      {"timeout", FlagKind::kDuration, "DURATION",
       "Deadline of each call, e.g. 500ms, 10s, 2m (default 10s)"},
      {"namespace", FlagKind::kString, "NS",
       "Key namespace, [A-Za-z0-9._-]{1,128} (default: default)"},
      {"tls-ca", FlagKind::kString, "FILE",
       "PEM CA certificates that signed the coordinator's: connect over TLS (default: "
       "$DDP_TLS_CA)"},
      {"tls-cert", FlagKind::kString, "FILE",
       "PEM client certificate for a coordinator that requires one (mTLS; default: "
       "$DDP_TLS_CERT)"},
      {"tls-key", FlagKind::kString, "FILE",
       "PEM private key of --tls-cert (default: $DDP_TLS_KEY)"},
      {"token-file", FlagKind::kString, "FILE",
       "File with the bearer token for a coordinator with authorization (default: the token "
       "in $DDP_TOKEN)"},
  };
  return *flags;
}

const FlagSpec* FindFlag(const std::vector<FlagSpec>& flags, const std::string& name) {
  for (const FlagSpec& flag : flags) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

absl::Status CheckFlagValue(const FlagSpec& flag, const std::string& value) {
  const std::string what = absl::StrCat("--", flag.name);
  switch (flag.kind) {
    case FlagKind::kInt64:
      return ParseInt64(value, what).status();
    case FlagKind::kDuration:
      return ParsePositiveDuration(value, what).status();
    case FlagKind::kString:
      if (value.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(what, " needs a value"));
      }
      return absl::OkStatus();
    case FlagKind::kBool:
      if (value != "true" && value != "false") {
        return absl::InvalidArgumentError(
            absl::StrCat(what, "=", Echo(value), " must be true or false"));
      }
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

std::string FlagUsage(const FlagSpec& flag) {
  if (flag.kind == FlagKind::kBool) return absl::StrCat("--", flag.name);
  return absl::StrCat("--", flag.name, " ", flag.value_name, flag.repeated ? " ..." : "");
}

std::string UsageLine(const CommandSpec& command) {
  std::string line = absl::StrCat("ddpctl [GLOBAL FLAGS] ", command.group, " ", command.verb);
  for (const ArgSpec& arg : command.args) {
    std::string word = arg.repeated ? absl::StrCat(arg.name, "...") : arg.name;
    absl::StrAppend(&line, " ", arg.optional ? absl::StrCat("[", word, "]") : word);
  }
  for (const FlagSpec& flag : command.flags) {
    absl::StrAppend(&line, " [", FlagUsage(flag), "]");
  }
  return line;
}

std::string GroupVerbs(const std::string& group) {
  std::vector<std::string> verbs;
  for (const CommandSpec& command : CommandTable()) {
    if (command.group == group) verbs.push_back(command.verb);
  }
  return absl::StrJoin(verbs, "|");
}

}  // namespace

std::string Invocation::FlagString(const std::string& name, const std::string& fallback) const {
  auto it = flags.find(name);
  return it == flags.end() ? fallback : it->second;
}

int64_t Invocation::FlagInt64(const std::string& name, int64_t fallback) const {
  auto it = flags.find(name);
  if (it == flags.end()) return fallback;
  absl::StatusOr<int64_t> value = ParseInt64(it->second, name);
  return value.ok() ? *value : fallback;
}

absl::Duration Invocation::FlagDuration(const std::string& name, absl::Duration fallback) const {
  auto it = flags.find(name);
  if (it == flags.end()) return fallback;
  absl::StatusOr<absl::Duration> value = ParsePositiveDuration(it->second, name);
  return value.ok() ? *value : fallback;
}

absl::StatusOr<int64_t> ParseInt64(const std::string& text, const std::string& what) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "=", Echo(text), " is not a decimal 64-bit integer"));
  }
  return value;
}

absl::StatusOr<absl::Duration> ParsePositiveDuration(const std::string& text,
                                                     const std::string& what) {
  absl::Duration duration;
  int64_t seconds = 0;
  if (absl::SimpleAtoi(text, &seconds)) {
    duration = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, &duration)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "=", Echo(text), " is not a duration (e.g. 500ms, 10s, 2m)"));
  }
  if (duration <= absl::ZeroDuration() || duration == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "=", Echo(text), " must be a positive duration"));
  }
  return duration;
}

absl::StatusOr<NodeRange> ParseNodeRange(const std::string& text, const std::string& what) {
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  int32_t min = 0;
  int32_t max = 0;
  bool parsed = false;
  if (parts.size() == 1) {
    parsed = absl::SimpleAtoi(parts[0], &min);
    max = min;
  } else if (parts.size() == 2) {
    parsed = absl::SimpleAtoi(parts[0], &min) && absl::SimpleAtoi(parts[1], &max);
  }
  if (!parsed) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "=", Echo(text), " is not N or MIN:MAX (e.g. 2 or 2:4)"));
  }
  if (min < 1 || max < min) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "=", Echo(text), " needs 1 <= MIN <= MAX"));
  }
  return NodeRange{min, max};
}

std::vector<std::string> SplitFlagValues(const std::string& joined) {
  return absl::StrSplit(joined, ',', absl::SkipEmpty());
}

absl::StatusOr<Invocation> ParseCommandLine(const std::vector<std::string>& argv,
                                            const std::string& default_coordinator) {
  Invocation invocation;
  invocation.global.coordinator = default_coordinator;
  std::vector<std::string> words;  // Group, verb, then positional arguments.
  std::vector<std::pair<const FlagSpec*, std::string>> command_flags;
  bool help = false;
  bool flags_done = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& token = argv[i];
    if (flags_done || token.size() < 2 || token[0] != '-' || (token[1] != '-' && token != "-h")) {
      words.push_back(token);
      continue;
    }
    if (token == "--") {
      flags_done = true;
      continue;
    }
    if (token == "-h" || token == "--help") {
      help = true;
      continue;
    }
    std::string name = token.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      has_value = true;
    }
    // The command is known once group and verb are read; before that only
    // global flags are accepted, after it both.
    const FlagSpec* spec = FindFlag(GlobalFlags(), name);
    const bool global = spec != nullptr;
    if (spec == nullptr && words.size() >= 2) {
      for (const CommandSpec& command : CommandTable()) {
        if (command.group == words[0] && command.verb == words[1]) {
          spec = FindFlag(command.flags, name);
        }
      }
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name.substr(0, kMaxEchoedBytes),
                       words.size() >= 2 ? " for this command" : "", "; see ddpctl --help"));
    }
    if (spec->kind == FlagKind::kBool) {
      if (!has_value) value = "true";
    } else if (!has_value) {
      if (i + 1 >= argv.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value (", spec->value_name, ")"));
      }
      value = argv[++i];
    }
    if (absl::Status status = CheckFlagValue(*spec, value); !status.ok()) {
      return status;
    }
    if (!global) {
      command_flags.emplace_back(spec, value);
    } else if (name == "coordinator") {
      invocation.global.coordinator = value;
    } else if (name == "json") {
      invocation.global.json = value == "true";
    } else if (name == "timeout") {
      invocation.global.timeout = *ParsePositiveDuration(value, name);
    } else if (name == "namespace") {
      invocation.global.name_space = value;
      invocation.global.name_space_given = true;
    } else if (name == "tls-ca") {
      invocation.global.tls.ca = value;
    } else if (name == "tls-cert") {
      invocation.global.tls.cert = value;
    } else if (name == "tls-key") {
      invocation.global.tls.key = value;
    } else if (name == "token-file") {
      DDP_ASSIGN_OR_RETURN(std::string token, ReadTokenFile("--token-file", value));
      invocation.global.token = std::move(token);
    }
  }
  if (invocation.global.token.empty()) {
    if (const char* token = std::getenv("DDP_TOKEN"); token != nullptr) {
      invocation.global.token = token;
    }
  }
  invocation.global.tls = WithTlsEnvironment(invocation.global.tls);

  if (!help) {
    const std::string what =
        invocation.global.coordinator == default_coordinator
            ? "--coordinator (default from $DDP_COORDINATOR or localhost:29400)"
            : "--coordinator";
    // HOST, HOST:PORT, grpc://..., lists: as ddp-client reads them.
    DDP_ASSIGN_OR_RETURN(std::vector<std::string> coordinators,
                         ParseCoordinatorList(what, invocation.global.coordinator));
    invocation.global.coordinator = absl::StrJoin(coordinators, ",");
    DDP_RETURN_IF_ERROR(CheckTlsClientFiles(invocation.global.tls));
  }
  if (words.empty()) {
    if (help) {
      invocation.kind = Invocation::Kind::kHelp;
      invocation.help_text = MainHelp();
      return invocation;
    }
    return absl::InvalidArgumentError("no command given; see ddpctl --help");
  }
  bool group_known = false;
  for (const CommandSpec& command : CommandTable()) {
    if (command.group != words[0]) continue;
    group_known = true;
    if (words.size() >= 2 && command.verb == words[1]) {
      invocation.command = &command;
    }
  }
  if (!group_known) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown command ", Echo(words[0]), "; see ddpctl --help"));
  }
  if (invocation.command == nullptr) {
    if (help) {
      invocation.kind = Invocation::Kind::kHelp;
      invocation.help_text = MainHelp();
      return invocation;
    }
    return absl::InvalidArgumentError(
        absl::StrCat(words.size() < 2 ? "missing" : absl::StrCat("unknown ", Echo(words[1])),
                     " subcommand of ", words[0], "; expected ", GroupVerbs(words[0])));
  }
  const CommandSpec& command = *invocation.command;
  if (help) {
    invocation.kind = Invocation::Kind::kHelp;
    invocation.help_text = CommandHelp(command);
    return invocation;
  }
  invocation.args.assign(words.begin() + 2, words.end());
  size_t required = 0;
  bool unbounded = false;
  for (const ArgSpec& arg : command.args) {
    if (!arg.optional) ++required;
    if (arg.repeated) unbounded = true;
  }
  const std::string name = absl::StrCat(command.group, " ", command.verb);
  if (invocation.args.size() < required) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": missing ",
                                                   command.args[invocation.args.size()].name,
                                                   "; usage: ", UsageLine(command)));
  }
  if (!unbounded && invocation.args.size() > command.args.size()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": unexpected argument ",
                                                   Echo(invocation.args[command.args.size()]),
                                                   "; usage: ", UsageLine(command)));
  }
  for (auto& [flag, value] : command_flags) {
    std::string& stored = invocation.flags[flag->name];
    stored = flag->repeated && !stored.empty() ? absl::StrCat(stored, ",", value) : value;
  }
  return invocation;
}

std::string CommandHelp(const CommandSpec& command) {
  std::string text = absl::StrCat("Usage: ", UsageLine(command), "\n\n", command.summary, "\n");
  if (!command.args.empty()) absl::StrAppend(&text, "\nArguments:\n");
  for (const ArgSpec& arg : command.args) {
    absl::StrAppend(&text, absl::StrFormat("  %-24s %s\n", arg.name, arg.help));
  }
  if (!command.flags.empty()) absl::StrAppend(&text, "\nFlags:\n");
  for (const FlagSpec& flag : command.flags) {
    absl::StrAppend(&text, absl::StrFormat("  %-24s %s\n", FlagUsage(flag), flag.help));
  }
  if (!command.details.empty()) {
    absl::StrAppend(&text, "\n", command.details, "\n");
  }
  absl::StrAppend(&text, "\nGlobal flags (before or after the command):\n");
  for (const FlagSpec& flag : GlobalFlags()) {
    absl::StrAppend(&text, absl::StrFormat("  %-24s %s\n", FlagUsage(flag), flag.help));
  }
  return text;
}

std::string MainHelp() {
  std::string text =
      "Usage: ddpctl [GLOBAL FLAGS] COMMAND [ARGS] [FLAGS]\n\n"
      "Admin CLI of the ddp coordinator.\n\nGlobal flags:\n";
  for (const FlagSpec& flag : GlobalFlags()) {
    absl::StrAppend(&text, absl::StrFormat("  %-24s %s\n", FlagUsage(flag), flag.help));
  }
  absl::StrAppend(&text, "\nCommands:\n");
  for (const CommandSpec& command : CommandTable()) {
    absl::StrAppend(&text,
                    absl::StrFormat("  %-24s %s\n", absl::StrCat(command.group, " ", command.verb),
                                    command.summary));
  }
  absl::StrAppend(&text,
                  "\n`ddpctl COMMAND --help` explains a command's arguments and flags.\n"
                  "Keys and values are taken as given (bytes); output prints them as text\n"
                  "when they are valid UTF-8, else as base64 (JSON) or escaped text.\n\n"
                  "Exit codes:\n"
                  "  0  success; also a conditional write whose condition did not hold\n"
                  "     (kv cas, kv put --if-absent/--expect-revision print FAILURE, as\n"
                  "     etcdctl's txn)\n"
                  "  1  the coordinator refused or failed the call (message on stderr)\n"
                  "  2  usage error (bad command, argument or flag)\n"
                  "  3  coordinator unavailable (not answering or shutting down): retry\n");
  return text;
}

}  // namespace ddp::ddpctl
