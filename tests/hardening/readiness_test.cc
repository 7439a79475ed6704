// A real coordinator whose database another process holds locked (issue 23,
// point 12): while every commit fails with "database is locked", /readyz
// answers 503 naming it (before: 200), and 200 again once a commit succeeds.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coordinator/http/testing/raw_http.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/crash/coordinator_process.h"
#include "tests/hardening/http_coordinator.h"

namespace ddp::testing {
namespace {

using http::testing::Call;
using http::testing::HttpAnswer;
using ::testing::HasSubstr;

constexpr char kSqlite[] = "/usr/bin/sqlite3";

grpc::Status Put(v1::KeyValueService::Stub& stub, const std::string& value) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::PutRequest request;
  request.set_namespace_("job");
  request.set_key("k");
  request.set_value(value);
  v1::PutResponse response;
  return stub.Put(&context, request, &response);
}

TEST(ReadinessTest, EveryCommitFailsDatabaseLocked_ReadyzSays503UntilOneSucceeds) {
  if (access(kSqlite, X_OK) != 0) GTEST_SKIP() << kSqlite << " is not installed";
  const CoordinatorProcessOptions options = HttpCoordinatorOptions();
  CoordinatorProcess coordinator(options);
  const absl::StatusOr<int> http_port = StartWithHttp(coordinator, options);
  ASSERT_TRUE(http_port.ok()) << http_port.status();
  const int http = *http_port;
  auto stub = v1::KeyValueService::NewStub(
      grpc::CreateChannel(coordinator.address(), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(Put(*stub, "1").ok());
  EXPECT_EQ(Call(http, "GET", "/readyz").status, 200);

  // Another process takes the database's write lock and keeps it.
  const std::string command = absl::StrCat(kSqlite, " ", options.data_dir, "/coordinator.db");
  FILE* holder = popen(command.c_str(), "w");
  ASSERT_NE(holder, nullptr);
  std::fputs("BEGIN EXCLUSIVE;\n", holder);
  std::fflush(holder);
  absl::SleepFor(absl::Milliseconds(300));
  const grpc::Status locked = Put(*stub, "2");  // waits out SQLite's busy timeout
  EXPECT_EQ(locked.error_code(), grpc::StatusCode::UNAVAILABLE) << locked.error_message();
  const HttpAnswer not_ready = Call(http, "GET", "/readyz");
  EXPECT_EQ(not_ready.status, 503);
  EXPECT_THAT(not_ready.body, HasSubstr("database is locked"));
  EXPECT_EQ(Call(http, "GET", "/healthz").status, 200);  // alive all the same

  std::fputs("ROLLBACK;\n.quit\n", holder);
  pclose(holder);
  ASSERT_TRUE(Put(*stub, "3").ok());
  EXPECT_EQ(Call(http, "GET", "/readyz").status, 200);
  EXPECT_EQ(coordinator.Terminate(), 0);
}

}  // namespace
}  // namespace ddp::testing
