#ifndef DDP_CLIENT_LAUNCH_FLAG_VALUES_H_
#define DDP_CLIENT_LAUNCH_FLAG_VALUES_H_

// Parsers for the values of ddp-client's flags (internal to launch_options).
// Each returns INVALID_ARGUMENT naming the flag, the offending value (capped)
// and the accepted form. Thread-safety: pure functions.

#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/launch_options.h"

namespace ddp::client::launch_flags {

inline constexpr int kMaxNodes = 100000;
inline constexpr int kMaxProcsPerNode = 1024;
inline constexpr int kMaxRestarts = 1000000;
inline constexpr size_t kMaxIdChars = 128;
inline constexpr size_t kMaxShownChars = 80;
inline constexpr size_t kMaxPrewarmModules = 32;
inline constexpr size_t kMaxModuleNameChars = 200;
// --hang-timeout other than 0 (off): the workers' activity is sampled every
// second, so one quiet sample must never be a hang.
inline constexpr absl::Duration kMinHangTimeout = absl::Seconds(2);

// `text`, cut to kMaxShownChars with "..." appended.
std::string Shown(absl::string_view text);
absl::Status BadValue(absl::string_view flag, absl::string_view value, absl::string_view expected);
absl::Status ParseInt(absl::string_view flag, absl::string_view value, int lo, int hi, int* out);
// Seconds ("30", "0.5") or an absl duration ("30s"); at most a week.
absl::Status ParseDuration(absl::string_view flag, absl::string_view value, bool allow_zero,
                           absl::Duration* out);
absl::Status ParseBool(absl::string_view flag, absl::string_view value, bool* out);
// 1..128 characters of [A-Za-z0-9._-].
absl::Status ParseId(absl::string_view flag, absl::string_view value, std::string* out);
absl::Status ParseNonBlank(absl::string_view flag, absl::string_view value, size_t max_chars,
                           std::string* out);
// HOST:PORT or [IPV6]:PORT.
absl::Status ParseEndpoint(absl::string_view flag, absl::string_view value, std::string* out);
absl::Status ParseNnodes(absl::string_view flag, absl::string_view value, LaunchOptions* o);
absl::Status ParseNproc(absl::string_view flag, absl::string_view value, const HostInfo& host,
                        LaunchOptions* o);
absl::Status ParseRdzvConf(absl::string_view flag, absl::string_view value, RendezvousConf* conf);
absl::Status ParseRankList(absl::string_view flag, absl::string_view value, std::set<int>* out);
// MODULE[,MODULE...]: up to kMaxPrewarmModules dotted Python names
// (torch.distributed), each up to kMaxModuleNameChars.
absl::Status ParseModuleList(absl::string_view flag, absl::string_view value,
                             std::vector<std::string>* out);

}  // namespace ddp::client::launch_flags

#endif  // DDP_CLIENT_LAUNCH_FLAG_VALUES_H_
