// JobServices across a coordinator restart with the SQLite job store: agents
// resume their sessions and the job keeps its generation.

#include <cstdlib>
#include <memory>
#include <string>

#include "coordinator/session/testing/job_services_fixture.h"
#include "coordinator/storage/sqlite_state_store.h"
#include "gtest/gtest.h"

namespace ddp::session {
namespace {

using ::ddp::session::testing::FakeAgent;
using ::ddp::session::testing::FastSettings;
using ::ddp::session::testing::kWait;

class JobServicesRestartTest : public testing::JobServicesTest {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("TEST_TMPDIR");
    db_path_ = std::string(dir != nullptr ? dir : "/tmp") + "/coordinator.db";
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db_path_ + suffix).c_str());
    OpenStore();
    StartServer(store_.get());
  }
  void OpenStore() {
    auto store = storage::SqliteStateStore::Open(db_path_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  std::string db_path_;
  std::unique_ptr<storage::SqliteStateStore> store_;
};

class JobServicesStoreDownTest : public testing::JobServicesTest {};

TEST_F(JobServicesRestartTest, Restart_AgentsResume_SameGeneration) {
  v1::JobSettings settings = FastSettings(2, 2);
  settings.set_heartbeat_timeout_ms(5000);  // room for the restart
  FakeAgent& a = MakeAgent("r", "a", settings, 11);
  FakeAgent& b = MakeAgent("r", "b", settings, 22);
  ASSERT_TRUE(a.Register(kWait).ok());
  ASSERT_TRUE(b.Register(kWait).ok());
  absl::StatusOr<v1::Assignment> before = a.WaitForAssignment(1, kWait);
  ASSERT_TRUE(before.ok());

  StopServer();  // sessions end with UNAVAILABLE
  store_.reset();
  OpenStore();
  StartServer(store_.get());
  EXPECT_EQ(GetJob("r").generation(), 1);
  EXPECT_EQ(GetJob("r").state(), v1::RUNNING);

  FakeAgent& a2 = MakeAgent("r", "a", std::nullopt, 11);
  FakeAgent& b2 = MakeAgent("r", "b", std::nullopt, 22);
  absl::StatusOr<v1::Registered> ra = a2.Register(kWait);
  ASSERT_TRUE(ra.ok()) << ra.status();
  EXPECT_TRUE(ra->resumed());
  ASSERT_TRUE(b2.Register(kWait).ok());
  absl::StatusOr<v1::Assignment> after = a2.WaitForAssignment(1, kWait);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->generation(), 1);
  EXPECT_EQ(after->nccl_unique_id(), before->nccl_unique_id());
  EXPECT_EQ(after->group_rank(), before->group_rank());
}

TEST_F(JobServicesRestartTest, Shutdown_EndsSessionsWithUnavailable) {
  FakeAgent& a = MakeAgent("s", "a", FastSettings(1, 1));
  ASSERT_TRUE(a.Register(kWait).ok());
  services_->Shutdown();
  absl::StatusOr<grpc::Status> end = a.WaitForStreamEnd(kWait);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->error_code(), grpc::StatusCode::UNAVAILABLE);
}

// The job store refuses writes: nothing is acknowledged (no Registered, no
// assignment) until the writer's retry gets the registration in.
TEST_F(JobServicesStoreDownTest, StoreDown_NothingAcknowledgedUntilDurable) {
  memory_store_.FailWith(absl::UnavailableError("disk full"));
  v1::JobSettings settings = FastSettings(1, 1);
  settings.set_heartbeat_timeout_ms(20000);  // no heartbeats before Registered
  FakeAgent& a = MakeAgent("d", "a", settings);
  absl::StatusOr<v1::Registered> early = a.Register(absl::Milliseconds(300));
  EXPECT_FALSE(early.ok());
  EXPECT_TRUE(a.assignments().empty());
  memory_store_.FailWith(absl::OkStatus());
  absl::StatusOr<v1::Assignment> assignment = a.WaitForAssignment(1, kWait);
  ASSERT_TRUE(assignment.ok()) << assignment.status();
  EXPECT_EQ(assignment->generation(), 1);
}

}  // namespace
}  // namespace ddp::session
