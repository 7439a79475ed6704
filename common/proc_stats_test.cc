#include "common/proc_stats.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(ProcStats, ParseStatCpuTime_CommandWithSpacesAndParens_SumsFields) {
  // utime=150, stime=50 ticks at 100 Hz: 2 s.
  const std::string stat =
      "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 150 50 0 0 20 "
      "0 8 0 555 1000000 200 18446744073709551615";
  absl::StatusOr<absl::Duration> cpu = ParseStatCpuTime(stat, 100);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(*cpu, absl::Seconds(2));
}

TEST(ProcStats, ParseStatCpuTime_Truncated_InvalidArgument) {
  EXPECT_EQ(ParseStatCpuTime("1234 (x) S 1 2", 100).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseStatCpuTime("garbage", 100).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProcStats, ParseStatActivity_PpidPgrpStateAndCpuWithChildren) {
  // ppid 7, pgrp 1234; utime 150 + stime 50 + cutime 70 + cstime 30 ticks at
  // 100 Hz.
  const std::string stat =
      "1240 (my (odd) cmd) D 7 1234 1234 0 -1 4194560 100 0 0 0 150 50 70 30 20 "
      "0 8 0 555 1000000 200 18446744073709551615";
  absl::StatusOr<StatActivity> activity = ParseStatActivity(stat, 100);
  ASSERT_TRUE(activity.ok()) << activity.status();
  EXPECT_EQ(activity->ppid, 7);
  EXPECT_EQ(activity->pgrp, 1234);
  EXPECT_EQ(activity->state, 'D');
  EXPECT_EQ(activity->cpu_with_children, absl::Seconds(3));
  EXPECT_EQ(ParseStatActivity("1234 (x) S 1 2", 100).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ProcStats, ParseIoCharBytes_SumsReadAndWritten) {
  EXPECT_EQ(ParseIoCharBytes("rchar: 100\nwchar: 23\nsyscr: 5\nread_bytes: 4096\n"), 123);
  EXPECT_EQ(ParseIoCharBytes("garbage"), 0);
}

TEST(ProcStats, SampleProcessGroups_OwnGroup_CountsThisProcess) {
  const pid_t own = getpgrp();
  std::map<pid_t, ProcessGroupSample> groups = SampleProcessGroups({own, 999999999});
  ASSERT_EQ(groups.count(own), 1u);
  EXPECT_GE(groups[own].processes, 1);
  EXPECT_GT(groups[own].io_bytes, 0);  // the test binary read its own files
  EXPECT_EQ(groups.count(999999999), 0u);
  EXPECT_TRUE(SampleProcessGroups({}).empty());
}

// A child that waits on a pipe until the test closes it, in this process's
// group: its own tree is only itself, this process's tree holds it.
TEST(ProcStats, SampleProcessTrees_EachRootWithItsDescendantsOnly) {
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(gate[1]);
    char byte;
    (void)!read(gate[0], &byte, 1);
    _exit(0);
  }
  close(gate[0]);
  const pid_t self = getpid();
  std::map<pid_t, ProcessGroupSample> trees = SampleProcessTrees({self, child, 999999999});
  std::vector<pid_t> tree = ProcessTree(self);
  close(gate[1]);
  int status = 0;
  waitpid(child, &status, 0);

  ASSERT_EQ(trees.count(child), 1u);
  EXPECT_EQ(trees[child].processes, 1);  // not counted in its parent's tree: the nearer root wins
  ASSERT_EQ(trees.count(self), 1u);
  EXPECT_GE(trees[self].processes, 1);
  EXPECT_EQ(trees.count(999999999), 0u);
  ASSERT_FALSE(tree.empty());
  EXPECT_EQ(tree.front(), self);
  EXPECT_NE(std::find(tree.begin(), tree.end(), child), tree.end());
  EXPECT_TRUE(ProcessTree(999999999).empty());
  EXPECT_TRUE(SampleProcessTrees({}).empty());
}

TEST(ProcStats, ParseStatName_InsideOuterParentheses) {
  EXPECT_EQ(ParseStatName("12 (rdzv (x)) S 1"), "rdzv (x)");
  EXPECT_EQ(ParseStatName("garbage"), "");
}

TEST(ProcStats, BusiestThreads_DifferenceSortedAndLimited) {
  const std::map<std::string, absl::Duration> before = {{"grpc", absl::Seconds(1)},
                                                        {"idle", absl::Seconds(5)}};
  const std::map<std::string, absl::Duration> after = {{"grpc", absl::Seconds(3)},
                                                       {"idle", absl::Seconds(5)},
                                                       {"new", absl::Seconds(1)},
                                                       {"newer", absl::Milliseconds(500)}};
  std::vector<std::pair<std::string, double>> busiest =
      BusiestThreads(before, after, absl::Seconds(10), 2);
  ASSERT_EQ(busiest.size(), 2u);
  EXPECT_EQ(busiest[0].first, "grpc");
  EXPECT_DOUBLE_EQ(busiest[0].second, 0.2);
  EXPECT_EQ(busiest[1].first, "new");
  EXPECT_DOUBLE_EQ(busiest[1].second, 0.1);
}

TEST(ProcStats, ReadThreadCpuByName_Self_HasThreads) {
  absl::StatusOr<std::map<std::string, absl::Duration>> threads = ReadThreadCpuByName(getpid());
  ASSERT_TRUE(threads.ok()) << threads.status();
  EXPECT_FALSE(threads->empty());
}

TEST(ProcStats, ParseStatusRssBytes_VmRssLine_Bytes) {
  absl::StatusOr<int64_t> rss = ParseStatusRssBytes(
      "Name:\tcoordinator\nVmPeak:\t  999 kB\n"
      "VmRSS:\t   12345 kB\nThreads:\t9\n");
  ASSERT_TRUE(rss.ok()) << rss.status();
  EXPECT_EQ(*rss, 12345 * 1024);
}

TEST(ProcStats, ParseStatusRssBytes_Missing_InvalidArgument) {
  EXPECT_EQ(ParseStatusRssBytes("Name:\tx\n").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseStatusRssBytes("VmRSS:\t lots kB\n").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ProcStats, ParseCpuModel_FirstModelName) {
  EXPECT_EQ(ParseCpuModel("processor\t: 0\nmodel name\t: Fancy CPU @ 3GHz\n"
                          "model name\t: Other\n"),
            "Fancy CPU @ 3GHz");
  EXPECT_EQ(ParseCpuModel("processor\t: 0\n"), "unknown");
}

TEST(ProcStats, ReadProcess_Self_PositiveValues) {
  absl::StatusOr<int64_t> rss = ReadProcessRssBytes(getpid());
  ASSERT_TRUE(rss.ok()) << rss.status();
  EXPECT_GT(*rss, 0);
  EXPECT_TRUE(ReadProcessCpuTime(getpid()).ok());
}

TEST(ProcStats, ReadProcess_NoSuchPid_NotFound) {
  EXPECT_EQ(ReadProcessRssBytes(0x3fffffff).status().code(), absl::StatusCode::kNotFound);
}

TEST(ProcStatsTest, ParseStatState_ReadsTheLetterAfterTheName) {
  EXPECT_EQ(*ParseStatState("42 (python3) T 1 42 42 0 -1"), 'T');
  EXPECT_EQ(*ParseStatState("42 (a (b) c) S 1 42"), 'S');
  EXPECT_FALSE(ParseStatState("garbage").ok());
}

TEST(ProcStatsTest, SampleProcess_Self_RunningWithCpu) {
  absl::StatusOr<ProcessSample> sample = SampleProcess(getpid());
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->state, 'R');  // reading its own stat
  EXPECT_GE(sample->cpu, absl::ZeroDuration());
}

}  // namespace
}  // namespace ddp
