#ifndef DDP_TOOLS_DDPCTL_COMMAND_LINE_H_
#define DDP_TOOLS_DDPCTL_COMMAND_LINE_H_

// Argument parsing and the command table of ddpctl, in plain C++ (no gRPC), so
// a unit test drives it directly.
//
//   ddpctl [GLOBAL FLAGS] GROUP VERB [ARGS] [COMMAND FLAGS]
//
// Each command is one CommandSpec row (group, verb, positional arguments,
// flags, help). New groups (`jobs ...`) are new rows; the parser and the help
// text need no change. ParseCommandLine validates everything it can without a
// server: unknown commands or flags, missing/extra arguments, malformed numbers
// and durations. Typed accessors (FlagInt64, ArgInt64, ...) validate the rest.
//
// Possible errors: INVALID_ARGUMENT for every usage error (exit code 2), with a
// message naming the offending word. Thread-safety: plain values, no shared
// state.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tls_files.h"

namespace ddp::ddpctl {

// Process exit codes, documented in --help.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnavailable = 3;

enum class FlagKind { kBool, kString, kInt64, kDuration };

struct FlagSpec {
  std::string name;  // Without the leading "--".
  FlagKind kind = FlagKind::kBool;
  std::string value_name;  // e.g. "REV"; empty for booleans.
  std::string help;
  // May be given more than once; the values are joined with ','. Otherwise
  // the last one wins.
  bool repeated = false;
};

struct ArgSpec {
  std::string name;  // e.g. "KEY".
  std::string help;
  bool optional = false;
  bool repeated = false;  // Only the last argument; one or more (zero if optional).
};

struct CommandSpec {
  std::string group;  // "kv", "lease", "jobs".
  std::string verb;   // "put", "grant", ...
  std::string summary;
  std::vector<ArgSpec> args;
  std::vector<FlagSpec> flags;
  std::string details;  // Extra paragraph for per-command help; may be empty.
};

// Every command ddpctl knows, in help order.
const std::vector<CommandSpec>& CommandTable();

struct GlobalOptions {
  std::string coordinator;  // HOST:PORT, or several comma-separated (HA).
  bool json = false;
  absl::Duration timeout = absl::Seconds(10);
  std::string name_space = "default";
  bool name_space_given = false;  // --namespace was on the command line
  // --tls-ca/--tls-cert/--tls-key, else $DDP_TLS_CA/$DDP_TLS_CERT/$DDP_TLS_KEY.
  TlsClientFiles tls;
  // --token-file's contents, else $DDP_TOKEN: sent as "authorization: Bearer".
  std::string token;
};

// The result of parsing one command line.
struct Invocation {
  enum class Kind { kRun, kHelp };
  Kind kind = Kind::kRun;
  std::string help_text;                 // For kHelp: what to print on stdout.
  const CommandSpec* command = nullptr;  // For kRun.
  GlobalOptions global;
  std::vector<std::string> args;             // Positional, in order.
  std::map<std::string, std::string> flags;  // Given flags; booleans as "true".

  bool HasFlag(const std::string& name) const { return flags.count(name) > 0; }
  std::string FlagString(const std::string& name, const std::string& fallback = "") const;
  // Flags were already syntax-checked by the parser; these never fail for a
  // flag the spec declares with that kind.
  int64_t FlagInt64(const std::string& name, int64_t fallback) const;
  absl::Duration FlagDuration(const std::string& name, absl::Duration fallback) const;
};

// Parses argv[1..]. `default_coordinator` is used when --coordinator is absent
// (main passes $DDP_COORDINATOR or localhost:29400).
absl::StatusOr<Invocation> ParseCommandLine(const std::vector<std::string>& argv,
                                            const std::string& default_coordinator);

// Parses a decimal int64 argument; INVALID_ARGUMENT naming `what` otherwise.
absl::StatusOr<int64_t> ParseInt64(const std::string& text, const std::string& what);
// Parses "10s", "500ms", "1m30s" or a bare number of seconds; must be > 0.
absl::StatusOr<absl::Duration> ParsePositiveDuration(const std::string& text,
                                                     const std::string& what);

// A node count range, as torchrun's --nnodes: "N" (MIN = MAX = N) or
// "MIN:MAX", with 1 <= MIN <= MAX <= 2^31-1.
struct NodeRange {
  int32_t min_nodes = 0;
  int32_t max_nodes = 0;
};
absl::StatusOr<NodeRange> ParseNodeRange(const std::string& text, const std::string& what);
// Splits a repeated flag's value (see FlagSpec::repeated) into its parts,
// dropping empty ones.
std::vector<std::string> SplitFlagValues(const std::string& joined);

// The top-level help (global flags, every command, exit codes).
std::string MainHelp();
// Help for one command: usage line, arguments, flags, details.
std::string CommandHelp(const CommandSpec& command);

}  // namespace ddp::ddpctl

#endif  // DDP_TOOLS_DDPCTL_COMMAND_LINE_H_
