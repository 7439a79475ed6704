// A real coordinator whose fsync starts failing (LD_PRELOAD fault injector:
// the data reaches the file, the call reports EIO, as a failing disk or a file
// system shut down under the process can do):
//   - the write whose commit failed is answered UNKNOWN ("outcome unknown"),
//     never "no effect";
//   - the store is then fail-stop: later writes are refused (UNAVAILABLE,
//     "until the coordinator is restarted"), reads keep serving;
//   - after a restart on a healthy disk the store recovers from its WAL, the
//     write whose outcome was unknown turns out to be there (so "no effect"
//     would have been a lie), and writes are accepted again.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ddp/v1/jobs.grpc.pb.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/crash/coordinator_process.h"
#include "tests/crash/test_channel.h"

namespace ddp::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class StorageFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = std::string(tmp != nullptr ? tmp : "/tmp") + "/storage-failure";
    std::system(absl::StrCat("rm -rf ", root_, " && mkdir -p ", root_).c_str());
    trigger_ = root_ + "/fail-fsync";
    full_trigger_ = root_ + "/disk-full";
    const char* srcdir = std::getenv("TEST_SRCDIR");
    options_.binary = CoordinatorBinaryFromRunfiles();
    options_.data_dir = root_ + "/data";
    options_.work_dir = root_;
    options_.extra_env = {absl::StrCat("LD_PRELOAD=", srcdir != nullptr ? srcdir : ".",
                                       "/ddp_coordinator/tests/crash/libslow_fsync.so"),
                          "DDP_TEST_FSYNC_DELAY_MS=0",
                          absl::StrCat("DDP_TEST_FSYNC_FAIL_FILE=", trigger_),
                          absl::StrCat("DDP_TEST_WAL_FULL_FILE=", full_trigger_)};
  }

  grpc::Status Put(v1::KeyValueService::Stub& stub, const std::string& key,
                   const std::string& value) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    context.set_wait_for_ready(true);  // across the restart
    v1::PutRequest request;
    request.set_namespace_("job");
    request.set_key(key);
    request.set_value(value);
    v1::PutResponse response;
    return stub.Put(&context, request, &response);
  }

  // Retries UNAVAILABLE for a while: the first call after a restart may land
  // on the connection to the killed process.
  std::string Get(v1::KeyValueService::Stub& stub, const std::string& key) {
    std::string value;
    for (int attempt = 0; attempt < 100; ++attempt) {
      if (TryGet(stub, key, &value)) break;
      usleep(100 * 1000);
    }
    return value;
  }

  bool TryGet(v1::KeyValueService::Stub& stub, const std::string& key, std::string* value) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    context.set_wait_for_ready(true);  // across the restart
    v1::GetRequest request;
    request.set_namespace_("job");
    request.set_key(key);
    v1::GetResponse response;
    grpc::Status status = stub.Get(&context, request, &response);
    *value = status.ok() ? response.kv().value() : "<" + status.error_message() + ">";
    return status.error_code() != grpc::StatusCode::UNAVAILABLE;
  }

  std::string root_;
  std::string trigger_;
  std::string full_trigger_;
  CoordinatorProcessOptions options_;
};

TEST_F(StorageFailureTest, FsyncFails_UnknownThenFailStopThenRestartRecovers) {
  CoordinatorProcess process(options_);
  ASSERT_TRUE(process.Start().ok());
  auto stub = v1::KeyValueService::NewStub(MakeFastReconnectChannel(process.address(), 1));
  ASSERT_TRUE(Put(*stub, "a", "1").ok());

  std::ofstream(trigger_) << "fail\n";
  grpc::Status unknown = Put(*stub, "a", "2");
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::UNKNOWN) << unknown.error_message();
  EXPECT_THAT(unknown.error_message(), HasSubstr("outcome of this write is unknown"));
  EXPECT_THAT(unknown.error_message(), Not(HasSubstr("no effect")));

  grpc::Status refused = Put(*stub, "b", "1");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("until the coordinator is restarted"));
  EXPECT_EQ(Get(*stub, "a"), "1");  // reads serve what was acknowledged

  std::remove(trigger_.c_str());
  // Still refused: an fsync error is not retried (the kernel may have dropped
  // the pages it failed to write).
  EXPECT_EQ(Put(*stub, "b", "1").error_code(), grpc::StatusCode::UNAVAILABLE);

  process.Kill9();
  ASSERT_TRUE(process.Start().ok());
  // The write reported as unknown was in fact on disk.
  EXPECT_EQ(Get(*stub, "a"), "2");
  EXPECT_TRUE(Put(*stub, "b", "1").ok());
  EXPECT_EQ(Get(*stub, "b"), "1");
  EXPECT_EQ(process.Terminate(), 0);
}

// Issue 23.10: the disk fills up under a COMMIT (SQLite writes the WAL
// then). Whether the commit reached the disk is not known: UNKNOWN, and never
// "no effect" or "retry" (a client would retry a non-idempotent write).
TEST_F(StorageFailureTest, DiskFullOnCommit_UnknownNeverSaysNoEffect) {
  CoordinatorProcess process(options_);
  ASSERT_TRUE(process.Start().ok());
  auto stub = v1::KeyValueService::NewStub(MakeFastReconnectChannel(process.address(), 1));
  ASSERT_TRUE(Put(*stub, "a", "1").ok());

  std::ofstream(full_trigger_) << "full\n";
  grpc::Status unknown = Put(*stub, "a", "2");
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::UNKNOWN) << unknown.error_message();
  EXPECT_THAT(unknown.error_message(), HasSubstr("unknown"));
  EXPECT_THAT(unknown.error_message(), HasSubstr("disk is full"));
  EXPECT_THAT(unknown.error_message(), Not(HasSubstr("no effect")));
  EXPECT_THAT(unknown.error_message(), Not(HasSubstr("retry later")));
  std::remove(full_trigger_.c_str());
  // Issue 23.12: a scheduler change is refused at once, as a KV write is,
  // instead of waiting 10 s to end UNKNOWN.
  auto jobs = v1::JobService::NewStub(MakeFastReconnectChannel(process.address(), 1));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::CreateJobRequest create;
  create.set_job_id("j");
  create.mutable_settings()->set_min_nodes(1);
  create.mutable_settings()->set_max_nodes(1);
  v1::Job created;
  const absl::Time asked = absl::Now();
  const grpc::Status job = jobs->CreateJob(&context, create, &created);
  EXPECT_EQ(job.error_code(), grpc::StatusCode::UNAVAILABLE) << job.error_message();
  EXPECT_THAT(job.error_message(), HasSubstr("until the coordinator is restarted"));
  EXPECT_LT(absl::Now() - asked, absl::Seconds(5));
  grpc::Status refused = Put(*stub, "b", "1");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("until the coordinator is restarted"));
  EXPECT_EQ(process.Terminate(), 0);
}

}  // namespace
}  // namespace ddp::testing
