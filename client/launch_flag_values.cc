#include "client/launch_flag_values.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/endpoint.h"
#include "common/status_macros.h"

namespace ddp::client::launch_flags {
namespace {

constexpr absl::Duration kMaxDuration = absl::Hours(24 * 7);

bool IsIdChar(char c) { return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.'; }

}  // namespace

std::string Shown(absl::string_view text) {
  if (text.size() <= kMaxShownChars) return std::string(text);
  return absl::StrCat(text.substr(0, kMaxShownChars), "...");
}

absl::Status BadValue(absl::string_view flag, absl::string_view value, absl::string_view expected) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid value '", Shown(value), "' for ", flag, ": expected ", expected));
}

absl::Status ParseInt(absl::string_view flag, absl::string_view value, int lo, int hi, int* out) {
  int parsed = 0;
  if (!absl::SimpleAtoi(value, &parsed) || parsed < lo || parsed > hi) {
    return BadValue(flag, value, absl::StrCat("an integer in [", lo, ", ", hi, "]"));
  }
  *out = parsed;
  return absl::OkStatus();
}

// Seconds as a number ("30", "0.5") or an absl duration ("30s", "1m30s").
absl::Status ParseDuration(absl::string_view flag, absl::string_view value, bool allow_zero,
                           absl::Duration* out) {
  absl::Duration parsed;
  double seconds = 0;
  if (absl::SimpleAtod(value, &seconds) && std::isfinite(seconds)) {
    parsed = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(value, &parsed)) {
    parsed = absl::InfiniteDuration();  // rejected below
  }
  const absl::Duration lo = allow_zero ? absl::ZeroDuration() : absl::Nanoseconds(1);
  if (parsed < lo || parsed > kMaxDuration) {
    return BadValue(flag, value,
                    absl::StrCat("seconds (e.g. 30 or 0.5) or a duration like 30s, ",
                                 allow_zero ? "at least 0" : "greater than 0", " and at most ",
                                 absl::FormatDuration(kMaxDuration)));
  }
  *out = parsed;
  return absl::OkStatus();
}

absl::Status ParseBool(absl::string_view flag, absl::string_view value, bool* out) {
  std::string lower = absl::AsciiStrToLower(value);
  if (lower == "1" || lower == "true" || lower == "yes") {
    *out = true;
  } else if (lower == "0" || lower == "false" || lower == "no") {
    *out = false;
  } else {
    return BadValue(flag, value, "true or false");
  }
  return absl::OkStatus();
}

absl::Status ParseId(absl::string_view flag, absl::string_view value, std::string* out) {
  if (value.empty() || value.size() > kMaxIdChars ||
      !std::all_of(value.begin(), value.end(), IsIdChar)) {
    return BadValue(flag, value,
                    absl::StrCat("1 to ", kMaxIdChars, " characters of [A-Za-z0-9._-]"));
  }
  *out = std::string(value);
  return absl::OkStatus();
}

absl::Status ParseNonBlank(absl::string_view flag, absl::string_view value, size_t max_chars,
                           std::string* out) {
  if (value.empty() || value.size() > max_chars ||
      std::any_of(value.begin(), value.end(),
                  [](char c) { return absl::ascii_isspace(c) || absl::ascii_iscntrl(c); })) {
    return BadValue(flag, value, absl::StrCat("1 to ", max_chars, " characters without spaces"));
  }
  *out = std::string(value);
  return absl::OkStatus();
}

// One coordinator, or the coordinators of an HA deployment, read as ddpctl
// reads them (common/endpoint.h: HOST[:PORT], default port 29400).
absl::Status ParseEndpoint(absl::string_view flag, absl::string_view value, std::string* out) {
  DDP_ASSIGN_OR_RETURN(std::vector<std::string> list, ParseCoordinatorList(flag, value));
  *out = absl::StrJoin(list, ",");
  return absl::OkStatus();
}

absl::Status ParseNnodes(absl::string_view flag, absl::string_view value, LaunchOptions* o) {
  std::vector<absl::string_view> parts = absl::StrSplit(value, ':');
  int lo = 0, hi = 0;
  if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &lo) ||
      !absl::SimpleAtoi(parts.back(), &hi) || lo < 1 || hi > kMaxNodes) {
    return BadValue(flag, value, absl::StrCat("N or MIN:MAX with 1 <= MIN <= MAX <= ", kMaxNodes));
  }
  if (lo > hi) {
    return absl::InvalidArgumentError(absl::StrCat("invalid value '", Shown(value), "' for ", flag,
                                                   ": MIN (", lo, ") is greater than MAX (", hi,
                                                   "); write MIN:MAX, e.g. ", hi, ":", lo));
  }
  o->min_nodes = lo;
  o->max_nodes = hi;
  return absl::OkStatus();
}

// torchrun's determine_local_world_size: an integer; `cpu` = CPU count; `gpu` =
// GPU count (error without GPUs); `auto` = GPU count when there are GPUs, else
// CPU count.
absl::Status ParseNproc(absl::string_view flag, absl::string_view value, const HostInfo& host,
                        LaunchOptions* o) {
  int n = 0;
  if (value == "cpu") {
    n = host.cpu_count;
  } else if (value == "gpu") {
    if (host.gpu_count <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag,
                       "=gpu but no NVIDIA GPU is visible on this host (none in "
                       "/proc/driver/nvidia/gpus, or CUDA_VISIBLE_DEVICES hides them); pass "
                       "a "
                       "number or `cpu`"));
    }
    n = host.gpu_count;
  } else if (value == "auto") {
    n = host.gpu_count > 0 ? host.gpu_count : host.cpu_count;
  } else if (!absl::SimpleAtoi(value, &n)) {
    return BadValue(flag, value, "a number, auto, cpu or gpu");
  }
  if (n < 1 || n > kMaxProcsPerNode) {
    return BadValue(flag, value, absl::StrCat("between 1 and ", kMaxProcsPerNode, " workers"));
  }
  o->nproc_per_node = n;
  o->nproc_per_node_spec = std::string(value);
  return absl::OkStatus();
}

absl::Status ParseRdzvConf(absl::string_view flag, absl::string_view value, RendezvousConf* conf) {
  static const char* const kIgnoredKeys[] = {
      "is_host",   "read_timeout", "keep_alive_interval", "keep_alive_max_attempt",
      "use_libuv", "rank",         "store_type",          "protocol",
      "cacerts"};
  for (absl::string_view item : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, '=');
    const std::string key(absl::StripAsciiWhitespace(kv.first));
    const absl::string_view val = absl::StripAsciiWhitespace(kv.second);
    if (key.empty() || item.find('=') == absl::string_view::npos || val.empty()) {
      return BadValue(flag, item, "key=value pairs separated by commas");
    }
    const std::string label = absl::StrCat(flag, " key ", key);
    std::optional<absl::Duration>* target = nullptr;
    if (key == "join_timeout" || key == "timeout") target = &conf->join_timeout;
    if (key == "last_call_timeout") target = &conf->last_call_timeout;
    if (key == "close_timeout") target = &conf->close_timeout;
    if (key == "heartbeat_timeout" || key == "heartbeat") target = &conf->heartbeat_timeout;
    if (key == "shutdown_timeout") target = &conf->shutdown_timeout;
    if (target != nullptr) {
      absl::Duration d;
      DDP_RETURN_IF_ERROR(ParseDuration(label, val, /*allow_zero=*/false, &d));
      *target = d;
      continue;
    }
    if (std::find(std::begin(kIgnoredKeys), std::end(kIgnoredKeys), key) !=
        std::end(kIgnoredKeys)) {
      conf->ignored.emplace_back(key, std::string(val));
      continue;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown ", flag, " key '", Shown(key),
                     "'; known keys: join_timeout (alias timeout), "
                     "last_call_timeout, close_timeout, "
                     "heartbeat_timeout, shutdown_timeout (ignored for "
                     "torchrun compatibility: is_host, "
                     "read_timeout, keep_alive_interval, "
                     "keep_alive_max_attempt, use_libuv, rank, "
                     "store_type, protocol, cacerts)"));
  }
  return absl::OkStatus();
}

absl::Status ParseRankList(absl::string_view flag, absl::string_view value, std::set<int>* out) {
  out->clear();
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    int rank = 0;
    if (!absl::SimpleAtoi(item, &rank) || rank < 0 || rank >= kMaxProcsPerNode) {
      out->clear();
      return BadValue(flag, value, "comma-separated local ranks, e.g. 0,1,2");
    }
    out->insert(rank);
  }
  return absl::OkStatus();
}

absl::Status ParseModuleList(absl::string_view flag, absl::string_view value,
                             std::vector<std::string>* out) {
  out->clear();
  const std::string expected =
      absl::StrCat("up to ", kMaxPrewarmModules, " comma-separated Python modules of up to ",
                   kMaxModuleNameChars, " characters, e.g. torch,torch.distributed");
  for (absl::string_view module : absl::StrSplit(value, ',')) {
    bool valid = !module.empty() && module.size() <= kMaxModuleNameChars;
    for (absl::string_view part : absl::StrSplit(module, '.')) {
      valid = valid && !part.empty() && !absl::ascii_isdigit(part[0]);
      for (char c : part) valid = valid && (absl::ascii_isalnum(c) || c == '_');
    }
    if (!valid || out->size() == kMaxPrewarmModules) {
      out->clear();
      return BadValue(flag, value, expected);
    }
    out->emplace_back(module);
  }
  return absl::OkStatus();
}

}  // namespace ddp::client::launch_flags
