#include "tools/continuity_bench/agent_log.h"

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace ddp::continuity_bench {
namespace {

// The integer right after `prefix` in `line` (from the first occurrence), or
// false when there is none.
bool IntAfter(absl::string_view line, absl::string_view prefix, int64_t* value) {
  const size_t at = line.find(prefix);
  if (at == absl::string_view::npos) return false;
  absl::string_view rest = line.substr(at + prefix.size());
  size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  return digits > 0 && absl::SimpleAtoi(rest.substr(0, digits), value);
}

}  // namespace

absl::Time LineTime(absl::string_view line) {
  // 2026-11-23T00:55:26.123456Z: 27 characters.
  if (line.size() < 27 || line[4] != '-' || line[10] != 'T' || line[26] != 'Z') {
    return absl::InfinitePast();
  }
  absl::Time at;
  std::string error;
  if (!absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", std::string(line.substr(0, 27)), absl::UTCTimeZone(),
                       &at, &error)) {
    return absl::InfinitePast();
  }
  return at;
}

AgentLogEvents ScanAgentLog(absl::string_view text) {
  AgentLogEvents events;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, "session resumed with the coordinator at")) {
      events.resumed.push_back(LineTime(line));
    } else if (absl::StrContains(line, "] registered with the coordinator at")) {
      events.registered.push_back(LineTime(line));
    } else if (absl::StrContains(line, "ran out") && absl::StrContains(line, "froze the workers")) {
      events.froze.push_back(LineTime(line));
    } else if (absl::StrContains(line, "thawed the workers (SIGCONT) after ")) {
      Thaw thaw{LineTime(line), absl::ZeroDuration()};
      absl::string_view rest = line.substr(line.find("thawed the workers (SIGCONT) after ") + 35);
      const size_t end = rest.find(" frozen");
      if (end != absl::string_view::npos) {
        absl::ParseDuration(rest.substr(0, end), &thaw.frozen_for);
      }
      events.thawed.push_back(thaw);
    } else if (absl::StrContains(line, " local_rank ") && absl::StrContains(line, " generation ")) {
      const size_t at = line.find("rank ");
      WorkerStart start;
      long long generation = -1;
      int local_rank = -1;
      if (at != absl::string_view::npos &&
          std::sscanf(std::string(line.substr(at)).c_str(),
                      "rank %d/%d local_rank %d restart %d generation %lld", &start.rank,
                      &start.world_size, &local_rank, &start.restart, &generation) == 5) {
        start.generation = generation;
        events.worker_starts.push_back(start);
      }
    } else if (absl::StrContains(line, " loss ")) {
      int64_t step = -1;
      if (IntAfter(line, "step ", &step) && step > events.last_step) events.last_step = step;
    } else if (absl::StrContains(line, " done, params sha256 ")) {
      ++events.ranks_done;
    }
  }
  return events;
}

}  // namespace ddp::continuity_bench
