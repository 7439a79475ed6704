#include "tools/kv_bench/process_cpu.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ddp::kv_bench {

absl::StatusOr<absl::Duration> ParseStatCpuTime(absl::string_view stat, int64_t ticks_per_second) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("not a /proc/PID/stat line: '", stat.substr(0, 120), "'"));
  };
  // The command name ends at the LAST ')'; the state is field 3.
  const size_t close = stat.rfind(')');
  if (close == absl::string_view::npos || ticks_per_second <= 0) return bad();
  const std::vector<absl::string_view> fields =
      absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state), so utime (14) and stime (15) are 11 and 12.
  int64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return bad();
  }
  return absl::Seconds(static_cast<double>(utime + stime) / ticks_per_second);
}

absl::StatusOr<absl::Duration> ReadProcessCpuTime(pid_t pid) {
  const std::string path = pid == 0 ? "/proc/self/stat" : absl::StrCat("/proc/", pid, "/stat");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseStatCpuTime(text.str(), sysconf(_SC_CLK_TCK));
}

}  // namespace ddp::kv_bench
