#include "client/progress_reader.h"

#include <sys/stat.h>
#include <utime.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);

class ProgressReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    mkdir(dir_.c_str(), 0755);
  }
  std::string File(int rank) { return absl::StrCat(dir_, "/progress_", rank, ".json"); }
  // Writes `json` to rank's file, dated `at`.
  void Write(int rank, const std::string& json, absl::Time at) {
    std::ofstream(File(rank), std::ios::trunc) << json;
    struct utimbuf times;
    times.actime = times.modtime = absl::ToUnixSeconds(at);
    ASSERT_EQ(utime(File(rank).c_str(), &times), 0);
  }

  std::string dir_;
  FakeClock clock_{kStart};
};

TEST_F(ProgressReaderTest, Reports_StepMetricsAgeAndRate) {
  ProgressReader reader(clock_, ProgressReader::Options());
  reader.Reset({File(0), File(1)});
  Write(0, R"({"step": 100, "metrics": {"loss": 0.5}})", kStart - absl::Seconds(2));
  auto latest = reader.Latest();
  ASSERT_EQ(latest.size(), 2u);
  ASSERT_TRUE(latest[0].has_value());
  EXPECT_FALSE(latest[1].has_value()) << "rank 1 reported nothing";
  EXPECT_EQ(latest[0]->local_rank(), 0);
  EXPECT_EQ(latest[0]->step(), 100);
  EXPECT_EQ(latest[0]->age_ms(), 2000);
  EXPECT_DOUBLE_EQ(latest[0]->metrics().at("loss"), 0.5);
  EXPECT_EQ(latest[0]->steps_per_second(), 0) << "one report: no rate yet";

  // 10 s later, 50 steps further (int64 as a string, as proto JSON allows).
  clock_.Advance(absl::Seconds(10));
  Write(0, R"({"step": "150", "metrics": {"loss": 0.25}})", kStart + absl::Seconds(8));
  latest = reader.Latest();
  EXPECT_EQ(latest[0]->step(), 150);
  EXPECT_DOUBLE_EQ(latest[0]->steps_per_second(), 5.0);
  EXPECT_EQ(latest[0]->age_ms(), 2000);
}

TEST_F(ProgressReaderTest, Checkpoint_RelayedAndRateKeptOnTheSameStep) {
  ProgressReader::Options options;
  options.interval = absl::ZeroDuration();
  ProgressReader reader(clock_, options);
  reader.Reset({File(0)});
  Write(0, R"({"step": 10})", kStart - absl::Seconds(4));
  EXPECT_EQ(reader.Latest()[0]->checkpoint_unix_ms(), 0) << "none reported";
  Write(0, R"({"step": 20})", kStart - absl::Seconds(2));
  EXPECT_DOUBLE_EQ(reader.Latest()[0]->steps_per_second(), 5.0);
  Write(0, R"({"step": 20, "checkpoint_unix_ms": "1699999999500", "checkpoint_step": 19})", kStart);
  auto latest = reader.Latest();
  EXPECT_EQ(latest[0]->checkpoint_unix_ms(), 1'699'999'999'500);
  EXPECT_EQ(latest[0]->checkpoint_step(), 19);
  EXPECT_DOUBLE_EQ(latest[0]->steps_per_second(), 5.0) << "a checkpoint is no stall";
}

TEST_F(ProgressReaderTest, ReadAtMostOncePerInterval_SameReportBetweenReads) {
  ProgressReader::Options options;
  options.interval = absl::Seconds(5);
  ProgressReader reader(clock_, options);
  reader.Reset({File(0)});
  Write(0, R"({"step": 1})", kStart);
  EXPECT_EQ(reader.Latest()[0]->step(), 1);
  Write(0, R"({"step": 2})", kStart + absl::Seconds(1));
  clock_.Advance(absl::Seconds(2));
  auto latest = reader.Latest();
  EXPECT_EQ(latest[0]->step(), 1) << "not read again within the interval";
  EXPECT_EQ(latest[0]->age_ms(), 0) << "as read: the same report until the next read";
  clock_.Advance(absl::Seconds(3));
  EXPECT_EQ(reader.Latest()[0]->step(), 2);
}

TEST_F(ProgressReaderTest, BadFileOrTooManyMetrics_LastGoodReportAndBoundsKept) {
  ProgressReader::Options options;
  options.interval = absl::ZeroDuration();
  options.max_metrics = 2;
  ProgressReader reader(clock_, options);
  reader.Reset({File(0)});
  const std::string long_name(65, 'x');
  Write(0,
        absl::StrCat(R"({"step": 7, "metrics": {"c": 3, "a": 1, "b": 2, ")", long_name,
                     R"(": 4}, "unknown_field": true})"),
        kStart);
  auto latest = reader.Latest();
  ASSERT_TRUE(latest[0].has_value());
  EXPECT_EQ(latest[0]->metrics_size(), 2);
  EXPECT_TRUE(latest[0]->metrics().contains("a"));
  EXPECT_TRUE(latest[0]->metrics().contains("b"));
  Write(0, "not json", kStart + absl::Seconds(1));
  EXPECT_EQ(reader.Latest()[0]->step(), 7);
  Write(0, R"({"step": -3})", kStart + absl::Seconds(2));
  EXPECT_EQ(reader.Latest()[0]->step(), 7);
  reader.Reset({File(0), File(1)});
  Write(0, R"({"step": 1})", kStart + absl::Seconds(3));
  latest = reader.Latest();
  EXPECT_EQ(latest[0]->step(), 1);
  EXPECT_EQ(latest[0]->steps_per_second(), 0) << "a new generation: no rate carried over";
}

}  // namespace
}  // namespace ddp::client
