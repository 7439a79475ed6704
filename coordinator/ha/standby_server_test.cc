#include "coordinator/ha/standby_server.h"

#include <chrono>
#include <memory>
#include <string>

#include "ddp/v1/kv.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"

namespace ddp::ha {
namespace {

using ::testing::HasSubstr;

class StandbyServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StandbyServerOptions options;
    options.bind_address = "127.0.0.1";
    options.port = 0;
    auto started = StandbyServer::Start(std::move(options));
    ASSERT_TRUE(started.ok()) << started.status();
    standby_ = *std::move(started);
    stub_ = v1::KeyValueService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(standby_->port()), grpc::InsecureChannelCredentials()));
  }

  // Opens a Watch on the standby and returns how it ended, with the
  // trailing "ddp-leader" (empty if absent) and whether any message came.
  grpc::Status Watch(std::string* leader, bool* got_message) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::WatchRequest request;
    request.set_namespace_("job");
    request.set_start_revision(1);
    auto reader = stub_->Watch(&context, request);
    v1::WatchResponse response;
    *got_message = reader->Read(&response);
    while (reader->Read(&response)) {
    }
    grpc::Status status = reader->Finish();
    leader->clear();
    auto it = context.GetServerTrailingMetadata().find(kLeaderMetadata);
    if (it != context.GetServerTrailingMetadata().end()) {
      leader->assign(it->second.data(), it->second.size());
    }
    return status;
  }

  std::unique_ptr<StandbyServer> standby_;
  std::unique_ptr<v1::KeyValueService::Stub> stub_;
};

// Issue 23, point 7, ruled out: a Watch that reaches a standby (one about to
// be promoted included) is never registered anywhere to wait silently; it
// ends at once with UNAVAILABLE, naming the leader when one is known.
TEST_F(StandbyServerTest, Watch_LeaderKnown_EndsUnavailableNamingLeader) {
  v1::CoordinatorInfo leader;
  leader.set_grpc_address("10.0.0.7:29400");
  leader.set_name("host-7/42");
  standby_->SetLeader(leader);
  std::string hint;
  bool got_message = true;
  const grpc::Status status = Watch(&hint, &got_message);
  EXPECT_FALSE(got_message);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("10.0.0.7:29400"));
  EXPECT_EQ(hint, "10.0.0.7:29400");
}

TEST_F(StandbyServerTest, Watch_NoLeaderYet_EndsUnavailable) {
  std::string hint;
  bool got_message = true;
  const grpc::Status status = Watch(&hint, &got_message);
  EXPECT_FALSE(got_message);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("no coordinator leads yet"));
  EXPECT_EQ(hint, "");
}

}  // namespace
}  // namespace ddp::ha
