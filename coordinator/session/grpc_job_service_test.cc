// Integration tests of JobService (the scheduler API) over real gRPC, with fake
// agents driving the jobs.

#include <vector>

#include "coordinator/session/testing/job_services_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::session {
namespace {

using ::ddp::session::testing::FakeAgent;
using ::ddp::session::testing::FastSettings;
using ::ddp::session::testing::kWait;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class JobServiceTest : public testing::JobServicesTest {
 protected:
  grpc::Status CreateJob(const std::string& job_id, const v1::JobSettings& settings, v1::Job* job) {
    grpc::ClientContext context;
    v1::CreateJobRequest request;
    request.set_job_id(job_id);
    *request.mutable_settings() = settings;
    return jobs_->CreateJob(&context, request, job);
  }

  // Reads a WatchJob stream until it ends or `max_events` arrived.
  struct WatchResult {
    std::vector<v1::JobEvent> events;
    grpc::Status status;
  };
  WatchResult Watch(const std::string& job_id, int64_t from_index, size_t max_events = 1000) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    request.set_from_index(from_index);
    auto reader = jobs_->WatchJob(&context, request);
    WatchResult result;
    v1::JobEvent event;
    while (result.events.size() < max_events && reader->Read(&event)) {
      result.events.push_back(event);
    }
    if (result.events.size() == max_events) context.TryCancel();
    result.status = reader->Finish();
    return result;
  }
};

std::vector<v1::JobEvent::Type> Types(const std::vector<v1::JobEvent>& events) {
  std::vector<v1::JobEvent::Type> types;
  for (const v1::JobEvent& e : events) types.push_back(e.type());
  return types;
}

TEST_F(JobServiceTest, CreateJob_ThenAgentsJoin_WatchSeesWholeLifeCycle) {
  v1::Job job;
  ASSERT_TRUE(CreateJob("w", FastSettings(2, 2, 1), &job).ok());
  EXPECT_EQ(job.state(), v1::WAITING);
  EXPECT_EQ(job.settings().heartbeat_timeout_ms(), 300);

  FakeAgent& a = MakeAgent("w", "a", std::nullopt);  // joins without flags
  FakeAgent& b = MakeAgent("w", "b", std::nullopt);
  ASSERT_TRUE(a.Register(kWait).ok());
  ASSERT_TRUE(b.Register(kWait).ok());
  ASSERT_TRUE(a.WaitForAssignment(1, kWait).ok());
  ASSERT_TRUE(b.WaitForAssignment(1, kWait).ok());
  a.ReportExit(0, 2);
  ASSERT_TRUE(a.WaitForAssignment(2, kWait).ok());
  ASSERT_TRUE(b.WaitForAssignment(2, kWait).ok());
  a.ReportExit(0, 0);
  b.ReportExit(0, 0);
  ASSERT_TRUE(a.WaitForJobFinished(kWait).ok());

  // The stream replays from index 1 and ends after JOB_FINISHED.
  WatchResult all = Watch("w", 1);
  EXPECT_TRUE(all.status.ok()) << all.status.error_message();
  EXPECT_THAT(Types(all.events),
              ElementsAre(v1::JobEvent::JOB_CREATED, v1::JobEvent::NODE_JOINED,
                          v1::JobEvent::NODE_JOINED, v1::JobEvent::GENERATION_OPENED,
                          v1::JobEvent::WORKER_FAILED, v1::JobEvent::RESTARTING,
                          v1::JobEvent::GENERATION_OPENED, v1::JobEvent::JOB_FINISHED));
  for (size_t i = 0; i < all.events.size(); ++i) {
    EXPECT_EQ(all.events[i].index(), static_cast<int64_t>(i) + 1);
  }
  EXPECT_EQ(all.events[4].failure().exit_code(), 2);
  EXPECT_EQ(all.events[4].node_id(), "a");

  // Resume from an index: only the rest.
  WatchResult rest = Watch("w", 6);
  EXPECT_TRUE(rest.status.ok());
  ASSERT_EQ(rest.events.size(), 3u);
  EXPECT_EQ(rest.events[0].index(), 6);
  EXPECT_EQ(rest.events[0].type(), v1::JobEvent::RESTARTING);

  // A finished job watched for new events only ends at once.
  WatchResult none = Watch("w", 0);
  EXPECT_TRUE(none.status.ok());
  EXPECT_TRUE(none.events.empty());
}

TEST_F(JobServiceTest, WatchJob_LiveEvents_DeliveredAsTheyHappen) {
  v1::Job job;
  ASSERT_TRUE(CreateJob("live", FastSettings(1, 1), &job).ok());
  WatchResult result;
  std::thread watcher([&] { result = Watch("live", 0, 2); });
  // Wait until the watch is subscribed before producing events.
  absl::Time deadline = absl::Now() + kWait;
  while (services_->job_watchers() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  FakeAgent& a = MakeAgent("live", "a", std::nullopt);
  ASSERT_TRUE(a.Register(kWait).ok());
  watcher.join();
  EXPECT_THAT(Types(result.events),
              ElementsAre(v1::JobEvent::NODE_JOINED, v1::JobEvent::GENERATION_OPENED));
}

TEST_F(JobServiceTest, WatchJob_UnknownJob_NotFound) {
  WatchResult result = Watch("nope", 1);
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(JobServiceTest, CancelJob_ReachesAgents) {
  v1::Job job;
  ASSERT_TRUE(CreateJob("c", FastSettings(1, 1), &job).ok());
  FakeAgent& a = MakeAgent("c", "a", std::nullopt);
  ASSERT_TRUE(a.Register(kWait).ok());
  ASSERT_TRUE(a.WaitForAssignment(1, kWait).ok());
  grpc::ClientContext context;
  v1::CancelJobRequest request;
  request.set_job_id("c");
  request.set_reason("preempted");
  ASSERT_TRUE(jobs_->CancelJob(&context, request, &job).ok());
  EXPECT_EQ(job.state(), v1::CANCELLED);
  absl::StatusOr<v1::JobFinished> finished = a.WaitForJobFinished(kWait);
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_EQ(finished->state(), v1::CANCELLED);
  EXPECT_THAT(finished->message(), HasSubstr("preempted"));
}

TEST_F(JobServiceTest, ExcludeNode_AgentDismissedAndOthersRestart) {
  v1::Job job;
  ASSERT_TRUE(CreateJob("x", FastSettings(1, 2), &job).ok());
  FakeAgent& a = MakeAgent("x", "a", std::nullopt);
  FakeAgent& b = MakeAgent("x", "b", std::nullopt);
  ASSERT_TRUE(a.Register(kWait).ok());
  ASSERT_TRUE(b.Register(kWait).ok());
  ASSERT_TRUE(a.WaitForAssignment(1, kWait).ok());
  grpc::ClientContext context;
  v1::ExcludeNodeRequest request;
  request.set_job_id("x");
  request.set_node_id("b");
  request.set_reason("bad GPU");
  ASSERT_TRUE(jobs_->ExcludeNode(&context, request, &job).ok());
  absl::StatusOr<v1::NodeDismissed> dismissed = b.WaitForDismissed(kWait);
  ASSERT_TRUE(dismissed.ok()) << dismissed.status();
  EXPECT_THAT(dismissed->reason(), HasSubstr("bad GPU"));
  absl::StatusOr<v1::Assignment> next = a.WaitForAssignment(2, kWait);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->group_world_size(), 1);
}

TEST_F(JobServiceTest, DrainNode_NodeLeavesAtItsDeadlineDrainedAndOthersGoOn) {
  v1::Job job;
  ASSERT_TRUE(CreateJob("x", FastSettings(1, 2), &job).ok());
  FakeAgent& a = MakeAgent("x", "a", std::nullopt);
  FakeAgent& b = MakeAgent("x", "b", std::nullopt);
  ASSERT_TRUE(a.Register(kWait).ok());
  ASSERT_TRUE(b.Register(kWait).ok());
  ASSERT_TRUE(a.WaitForAssignment(1, kWait).ok());
  grpc::ClientContext context;
  v1::DrainNodeRequest request;
  request.set_node_id("b");
  request.set_grace_ms(300);  // the fake agents never say they are ready
  request.set_reason("kernel update");
  v1::DrainNodeResponse response;
  ASSERT_TRUE(jobs_->DrainNode(&context, request, &response).ok());
  EXPECT_EQ(std::vector<std::string>(response.job_ids().begin(), response.job_ids().end()),
            std::vector<std::string>{"x"});
  EXPECT_GT(response.leaves_at_unix_ms(), 0);
  absl::StatusOr<v1::NodeDismissed> dismissed = b.WaitForDismissed(kWait);
  ASSERT_TRUE(dismissed.ok()) << dismissed.status();
  EXPECT_TRUE(dismissed->drained());
  EXPECT_THAT(dismissed->reason(), HasSubstr("kernel update"));
  absl::StatusOr<v1::Assignment> next = a.WaitForAssignment(2, kWait);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->group_world_size(), 1);
  EXPECT_EQ(next->restart_count(), 0);
}

TEST_F(JobServiceTest, DrainNode_BadInput_ErrorsNameTheValue) {
  grpc::ClientContext c1;
  v1::DrainNodeRequest request;
  request.set_node_id("nobody");
  v1::DrainNodeResponse response;
  grpc::Status status = jobs_->DrainNode(&c1, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("nobody"));
  grpc::ClientContext c2;
  request.set_grace_ms(-5);
  status = jobs_->DrainNode(&c2, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("grace_ms=-5"));
  grpc::ClientContext c3;
  request.set_grace_ms(0);
  request.set_node_id("bad id");
  EXPECT_EQ(jobs_->DrainNode(&c3, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(JobServiceTest, CreateJob_InvalidSettings_InvalidArgument) {
  v1::Job job;
  v1::JobSettings bad = FastSettings(1, 1);
  bad.set_heartbeat_timeout_ms(10);  // below 2 * heartbeat interval
  grpc::Status status = CreateJob("bad", bad, &job);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("heartbeat"));

  grpc::ClientContext context;
  v1::CreateJobRequest no_settings;
  no_settings.set_job_id("empty");
  status = jobs_->CreateJob(&context, no_settings, &job);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(JobServiceTest, CreateJob_SameSettingsIdempotent_OtherAlreadyExists) {
  v1::Job job;
  ASSERT_TRUE(CreateJob("dup", FastSettings(1, 2), &job).ok());
  EXPECT_TRUE(CreateJob("dup", FastSettings(1, 2), &job).ok());
  EXPECT_EQ(CreateJob("dup", FastSettings(1, 3), &job).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
}

TEST_F(JobServiceTest, ListJobs_FilterByState) {
  v1::Job job;
  ASSERT_TRUE(CreateJob("j1", FastSettings(1, 1), &job).ok());
  ASSERT_TRUE(CreateJob("j2", FastSettings(1, 1), &job).ok());
  grpc::ClientContext cancel_context;
  v1::CancelJobRequest cancel;
  cancel.set_job_id("j2");
  ASSERT_TRUE(jobs_->CancelJob(&cancel_context, cancel, &job).ok());

  grpc::ClientContext context;
  v1::ListJobsRequest request;
  request.add_states(v1::CANCELLED);
  v1::ListJobsResponse response;
  ASSERT_TRUE(jobs_->ListJobs(&context, request, &response).ok());
  ASSERT_EQ(response.jobs_size(), 1);
  EXPECT_EQ(response.jobs(0).job_id(), "j2");

  grpc::ClientContext bad_context;
  request.add_states(static_cast<v1::JobState>(42));
  EXPECT_EQ(jobs_->ListJobs(&bad_context, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(JobServiceTest, UpdateJob_GrowsJob_SpareJoinsNextGeneration) {
  v1::Job job;
  ASSERT_TRUE(CreateJob("grow", FastSettings(1, 1), &job).ok());
  FakeAgent& a = MakeAgent("grow", "a", std::nullopt);
  ASSERT_TRUE(a.Register(kWait).ok());
  ASSERT_TRUE(a.WaitForAssignment(1, kWait).ok());
  FakeAgent& b = MakeAgent("grow", "b", std::nullopt);
  absl::StatusOr<v1::Registered> registered = b.Register(kWait);
  ASSERT_TRUE(registered.ok());
  EXPECT_EQ(registered->role(), v1::SPARE);
  grpc::ClientContext context;
  v1::UpdateJobRequest request;
  request.set_job_id("grow");
  request.set_min_nodes(1);
  request.set_max_nodes(2);
  ASSERT_TRUE(jobs_->UpdateJob(&context, request, &job).ok());
  absl::StatusOr<v1::Assignment> next = b.WaitForAssignment(2, kWait);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->group_world_size(), 2);
  v1::Job now = GetJob("grow");
  ASSERT_EQ(now.members_size(), 2);
  EXPECT_EQ(now.members(1).global_rank_offset(), 1);
}

}  // namespace
}  // namespace ddp::session
