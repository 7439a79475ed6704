#include "tests/e2e/agent_process.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddp::testing {
namespace {

using Args = std::vector<std::string>;

TEST(AgentArgsTest, OnlyRequiredFlags_UnsetOnesLeftOut) {
  EXPECT_EQ(AgentArgs({.coordinator = "127.0.0.1:5000",
                       .job = "j",
                       .node_id = "n",
                       .entrypoint = {"train.py", "--steps", "3"}}),
            (Args{"--coordinator", "127.0.0.1:5000", "--job", "j", "--node-id", "n", "train.py",
                  "--steps", "3"}));
}

TEST(AgentArgsTest, EveryNamedFlag_GivenWithItsValueBeforeTheTestsOwn) {
  EXPECT_EQ(AgentArgs({.coordinator = "c:1",
                       .job = "j",
                       .node_id = "n",
                       .local_addr = "127.0.0.1",
                       .log_dir = "/logs",
                       .rdzv_conf = "join_timeout=60",
                       .nnodes = "1:2",
                       .nproc_per_node = 2,
                       .max_restarts = 0,
                       .connect_timeout_s = 30,
                       .shutdown_timeout_s = 3,
                       .flags = {"--monitor-interval", "0.1"},
                       .no_python = true,
                       .entrypoint = {"/bin/sh", "-c", "true"}}),
            (Args{"--coordinator",
                  "c:1",
                  "--job",
                  "j",
                  "--node-id",
                  "n",
                  "--local-addr",
                  "127.0.0.1",
                  "--log-dir",
                  "/logs",
                  "--rdzv-conf",
                  "join_timeout=60",
                  "--nnodes",
                  "1:2",
                  "--nproc-per-node",
                  "2",
                  "--max-restarts",
                  "0",
                  "--connect-timeout",
                  "30",
                  "--shutdown-timeout",
                  "3",
                  "--monitor-interval",
                  "0.1",
                  "--no-python",
                  "/bin/sh",
                  "-c",
                  "true"}));
}

}  // namespace
}  // namespace ddp::testing
