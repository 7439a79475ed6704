#include "coordinator/metrics/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ddp::metrics {
namespace {

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Quote(absl::string_view text) {
  return absl::StrCat("'", text.substr(0, 120), text.size() > 120 ? "...'" : "'");
}

prometheus::MetricFamily Family(std::string name, std::string help, prometheus::MetricType type,
                                double value) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
  return family;
}

}  // namespace

absl::StatusOr<ProcessSnapshot> ParseProcessStat(absl::string_view stat,
                                                 absl::string_view system_stat,
                                                 int64_t ticks_per_second, int64_t page_bytes) {
  // The command name (field 2) is in parentheses and may hold both; the
  // fields after the last ')' start at field 3.
  const size_t close = stat.rfind(')');
  if (close == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("no command name in /proc stat ", Quote(stat)));
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipWhitespace());
  // Field N (1-based, man 5 proc) is fields[N - 3]: utime 14, stime 15,
  // starttime 22, vsize 23, rss 24 (pages).
  if (fields.size() < 22) {
    return absl::InvalidArgumentError(absl::StrCat("too few fields in /proc stat ", Quote(stat)));
  }
  int64_t utime = 0, stime = 0, start_ticks = 0, vsize = 0, rss_pages = 0;
  if (!absl::SimpleAtoi(fields[11], &utime) || !absl::SimpleAtoi(fields[12], &stime) ||
      !absl::SimpleAtoi(fields[19], &start_ticks) || !absl::SimpleAtoi(fields[20], &vsize) ||
      !absl::SimpleAtoi(fields[21], &rss_pages)) {
    return absl::InvalidArgumentError(
        absl::StrCat("non-numeric fields in /proc stat ", Quote(stat)));
  }
  int64_t boot_time = -1;
  for (absl::string_view line : absl::StrSplit(system_stat, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ") && absl::SimpleAtoi(line, &boot_time)) break;
  }
  if (boot_time < 0) {
    return absl::InvalidArgumentError("no btime line in /proc/stat");
  }
  ProcessSnapshot snapshot;
  snapshot.cpu_seconds = static_cast<double>(utime + stime) / ticks_per_second;
  snapshot.start_time_seconds =
      static_cast<double>(boot_time) + static_cast<double>(start_ticks) / ticks_per_second;
  snapshot.virtual_bytes = vsize;
  snapshot.resident_bytes = rss_pages * page_bytes;
  return snapshot;
}

absl::StatusOr<ProcessSnapshot> ReadSelfProcessSnapshot() {
  absl::StatusOr<std::string> stat = ReadWhole("/proc/self/stat");
  if (!stat.ok()) return stat.status();
  absl::StatusOr<std::string> system_stat = ReadWhole("/proc/stat");
  if (!system_stat.ok()) return system_stat.status();
  absl::StatusOr<ProcessSnapshot> snapshot =
      ParseProcessStat(*stat, *system_stat, sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE));
  if (!snapshot.ok()) return snapshot.status();
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return absl::NotFoundError("cannot read /proc/self/fd");
  int64_t open = 0;
  while (dirent* entry = readdir(fds)) {
    if (entry->d_name[0] != '.') ++open;
  }
  closedir(fds);
  snapshot->open_fds = open - 1;  // the descriptor of the listing itself
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    snapshot->max_fds = static_cast<int64_t>(limit.rlim_cur);
  }
  return snapshot;
}

std::vector<prometheus::MetricFamily> ProcessFamilies(const ProcessSnapshot& snapshot) {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> families;
  families.push_back(Family("process_cpu_seconds_total",
                            "Total user and system CPU time spent in seconds.", MetricType::Counter,
                            snapshot.cpu_seconds));
  families.push_back(Family("process_resident_memory_bytes", "Resident memory size in bytes.",
                            MetricType::Gauge, static_cast<double>(snapshot.resident_bytes)));
  families.push_back(Family("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                            MetricType::Gauge, static_cast<double>(snapshot.virtual_bytes)));
  families.push_back(Family("process_open_fds", "Number of open file descriptors.",
                            MetricType::Gauge, static_cast<double>(snapshot.open_fds)));
  families.push_back(Family("process_max_fds", "Maximum number of open file descriptors.",
                            MetricType::Gauge, static_cast<double>(snapshot.max_fds)));
  families.push_back(Family("process_start_time_seconds",
                            "Start time of the process since unix epoch in seconds.",
                            MetricType::Gauge, snapshot.start_time_seconds));
  return families;
}

}  // namespace ddp::metrics
