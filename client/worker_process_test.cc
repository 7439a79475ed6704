#include "client/worker_process.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

std::string ReadAll(int fd) {
  std::string out;
  char buf[1024];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) break;
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, n);
  }
  return out;
}

void CloseAll(SpawnedWorker& w) {
  close(w.pidfd);
  close(w.stdout_fd);
  close(w.stderr_fd);
}

TEST(SpawnWorkerTest, Spawn_Script_OutputEnvExitCodeAndOwnGroup) {
  auto w = SpawnWorker({"/bin/sh", "-c", "echo out $FOO; echo err >&2; exit 3"},
                       {"FOO=bar", "PATH=/usr/bin:/bin"});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->exec_error.empty());
  EXPECT_EQ(ReadAll(w->stdout_fd), "out bar\n");
  EXPECT_EQ(ReadAll(w->stderr_fd), "err\n");
  pollfd p{w->pidfd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);  // the pidfd signals the exit
  int status = 0;
  ASSERT_EQ(waitpid(w->pid, &status, 0), w->pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  CloseAll(*w);
}

TEST(SpawnWorkerTest, Spawn_IdleCpuPriority_IdleUntilRestored) {
  WorkerStdio stdio;
  stdio.idle_cpu_priority = true;
  auto w = SpawnWorker({"/bin/sh", "-c", "sleep 30"}, {}, stdio);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(sched_getscheduler(w->pid), SCHED_IDLE);
  const absl::Status restored = RestoreNormalCpuPriority(w->pid);
  if (CanRestoreNormalCpuPriority()) {
    EXPECT_TRUE(restored.ok()) << restored;
    EXPECT_EQ(sched_getscheduler(w->pid), SCHED_OTHER);
  } else {
    EXPECT_TRUE(absl::IsPermissionDenied(restored)) << restored;
  }
  SignalProcessGroup(w->pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(w->pid, &status, 0), w->pid);
  EXPECT_TRUE(absl::IsNotFound(RestoreNormalCpuPriority(w->pid)));
  CloseAll(*w);
}

TEST(SpawnWorkerTest, Spawn_OwnProcessGroup_PgidIsPid) {
  auto w = SpawnWorker({"/bin/sh", "-c", "sleep 30"}, {});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(getpgid(w->pid), w->pid);
  EXPECT_TRUE(ProcessGroupAlive(w->pid));
  SignalProcessGroup(w->pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(w->pid, &status, 0), w->pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  CloseAll(*w);
}

TEST(SpawnWorkerTest, Spawn_JoinProcessGroup_SharesTheLeadersGroup) {
  auto leader = SpawnWorker({"/bin/sh", "-c", "sleep 30"}, {});
  ASSERT_TRUE(leader.ok()) << leader.status();
  WorkerStdio stdio;
  stdio.process_group = leader->pid;
  auto member = SpawnWorker({"/bin/sh", "-c", "sleep 30"}, {}, stdio);
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_EQ(getpgid(member->pid), leader->pid);
  SignalProcessGroup(leader->pid, SIGKILL);  // one signal for both
  int status = 0;
  ASSERT_EQ(waitpid(member->pid, &status, 0), member->pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(waitpid(leader->pid, &status, 0), leader->pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  CloseAll(*leader);
  CloseAll(*member);
}

TEST(SpawnWorkerTest, Spawn_JoinGroupThatIsGone_LeadsItsOwn) {
  auto gone = SpawnWorker({"/bin/true"}, {});
  ASSERT_TRUE(gone.ok()) << gone.status();
  ASSERT_EQ(waitpid(gone->pid, nullptr, 0), gone->pid);
  WorkerStdio stdio;
  stdio.process_group = gone->pid;
  auto w = SpawnWorker({"/bin/sh", "-c", "sleep 30"}, {}, stdio);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(getpgid(w->pid), w->pid);  // never left in this process's group
  SignalProcessGroup(w->pid, SIGKILL);
  ASSERT_EQ(waitpid(w->pid, nullptr, 0), w->pid);
  CloseAll(*gone);
  CloseAll(*w);
}

// Two workers in one group, the first with a child of its own: signalling the
// first's tree ends it and its child, and leaves the second running.
TEST(SignalProcessTreeTest, SharedGroup_OnlyThatWorkerAndItsDescendants) {
  auto first = SpawnWorker({"/bin/sh", "-c", "sleep 30 & echo $!; wait"}, {});
  ASSERT_TRUE(first.ok()) << first.status();
  WorkerStdio stdio;
  stdio.process_group = first->pid;
  auto second = SpawnWorker({"/bin/sh", "-c", "sleep 30"}, {}, stdio);
  ASSERT_TRUE(second.ok()) << second.status();
  char line[32] = {};
  pollfd p{first->stdout_fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  ASSERT_GT(read(first->stdout_fd, line, sizeof(line) - 1), 0);
  const pid_t grandchild = static_cast<pid_t>(std::atoi(line));
  ASSERT_GT(grandchild, 0);

  SignalProcessTree(first->pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(first->pid, &status, 0), first->pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  // The grandchild (reparented once its parent died) is gone too.
  for (int i = 0; i < 500 && kill(grandchild, 0) == 0; ++i) usleep(10000);
  EXPECT_NE(kill(grandchild, 0), 0) << "grandchild " << grandchild << " survived";
  EXPECT_EQ(waitpid(second->pid, &status, WNOHANG), 0) << "the other worker was hit";
  SignalProcessGroup(first->pid, SIGKILL);
  ASSERT_EQ(waitpid(second->pid, &status, 0), second->pid);
  CloseAll(*first);
  CloseAll(*second);
}

TEST(SpawnWorkerTest, Spawn_MissingProgram_ExecErrorAndExit127) {
  auto w = SpawnWorker({"/no/such/program"}, {});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_NE(w->exec_error.find("cannot execute '/no/such/program'"), std::string::npos)
      << w->exec_error;
  EXPECT_NE(w->exec_error.find("No such file"), std::string::npos);
  int status = 0;
  ASSERT_EQ(waitpid(w->pid, &status, 0), w->pid);
  EXPECT_EQ(WEXITSTATUS(status), 127);
  CloseAll(*w);
}

TEST(SpawnWorkerTest, Spawn_IgnoredSigpipeInAgent_DefaultInWorker) {
  signal(SIGPIPE, SIG_IGN);
  auto w = SpawnWorker({"/bin/sh", "-c", "grep SigIgn /proc/self/status"}, {});
  signal(SIGPIPE, SIG_DFL);
  ASSERT_TRUE(w.ok()) << w.status();
  // grep reads its own status; SIGPIPE (bit 12) must not be in its ignored set.
  const std::string line = ReadAll(w->stdout_fd);
  ASSERT_EQ(line.rfind("SigIgn:\t", 0), 0u) << line;
  const uint64_t ignored = std::stoull(line.substr(8), nullptr, 16);
  EXPECT_EQ(ignored & (uint64_t{1} << (SIGPIPE - 1)), 0u) << line;
  waitpid(w->pid, nullptr, 0);
  CloseAll(*w);
}

TEST(SpawnWorkerTest, Spawn_EmptyArgv_InvalidArgument) {
  EXPECT_EQ(SpawnWorker({}, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SignalNameTest, Names_KnownAndUnknown) {
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(SignalName(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(200), "SIG200");
}

TEST(ProcessGroupAliveTest, NoSuchGroup_False) {
  EXPECT_FALSE(ProcessGroupAlive(0));
  EXPECT_FALSE(ProcessGroupAlive(4194303));  // above any pid_max default in use
}

}  // namespace
}  // namespace ddp::client
