#include "coordinator/metrics/process_metrics.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <ctime>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace ddp::metrics {
namespace {

using ::testing::HasSubstr;

// A real /proc/PID/stat line whose command name holds ") (" and spaces.
constexpr char kStat[] =
    "4242 (odd ) (name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 1000 "
    "123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
constexpr char kSystemStat[] = "cpu  1 2 3 4\nintr 5\nbtime 1700000000\nprocesses 9\n";

TEST(ProcessMetricsTest, ParseProcessStat_ReadsCpuStartTimeAndMemory) {
  absl::StatusOr<ProcessSnapshot> got = ParseProcessStat(kStat, kSystemStat, 100, 4096);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_DOUBLE_EQ(got->cpu_seconds, 3.0);                  // (250 + 50) / 100
  EXPECT_DOUBLE_EQ(got->start_time_seconds, 1700000010.0);  // btime + 1000 / 100
  EXPECT_EQ(got->virtual_bytes, 123456789);
  EXPECT_EQ(got->resident_bytes, 2048 * 4096);
}

TEST(ProcessMetricsTest, ParseProcessStat_MalformedOrNoBtime_IsInvalidArgument) {
  EXPECT_EQ(ParseProcessStat("4242 no parens", kSystemStat, 100, 4096).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseProcessStat("4242 (x) S 1 2", kSystemStat, 100, 4096).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseProcessStat(kStat, "cpu 1 2 3\n", 100, 4096).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ProcessMetricsTest, ReadSelfProcessSnapshot_CountsAnOpenedDescriptor) {
  absl::StatusOr<ProcessSnapshot> before = ReadSelfProcessSnapshot();
  ASSERT_TRUE(before.ok()) << before.status();
  const int fd = open("/dev/null", O_RDONLY);
  absl::StatusOr<ProcessSnapshot> after = ReadSelfProcessSnapshot();
  close(fd);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->open_fds, before->open_fds + 1);
  EXPECT_GT(after->resident_bytes, 0);
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  EXPECT_EQ(after->max_fds, static_cast<int64_t>(limit.rlim_cur));
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(after->start_time_seconds, now + 1);
  EXPECT_GT(after->start_time_seconds, now - 3600) << "this test started within the hour";
}

TEST(ProcessMetricsTest, ProcessFamilies_SerializeWithPrometheusNames) {
  ProcessSnapshot snapshot;
  snapshot.cpu_seconds = 1.5;
  snapshot.open_fds = 12;
  const std::string text = prometheus::TextSerializer().Serialize(ProcessFamilies(snapshot));
  EXPECT_THAT(text,
              HasSubstr("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5"));
  EXPECT_THAT(text, HasSubstr("process_open_fds 12"));
  EXPECT_THAT(text, HasSubstr("process_resident_memory_bytes "));
  EXPECT_THAT(text, HasSubstr("process_start_time_seconds "));
}

}  // namespace
}  // namespace ddp::metrics
