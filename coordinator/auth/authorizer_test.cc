#include "coordinator/auth/authorizer.h"

#include <set>
#include <string>

#include "ddp/v1/cluster.pb.h"
#include "ddp/v1/jobs.pb.h"
#include "ddp/v1/kv.pb.h"
#include "ddp/v1/nodes.pb.h"
#include "ddp/v1/session.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

namespace ddp::auth {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kAdmin[] = "admin-secret-0123456789";
constexpr char kTokenA[] = "job-a-secret-0123456789";
constexpr char kTokenB[] = "job-b-secret-0123456789";

class AuthorizerTest : public ::testing::Test {
 protected:
  AuthorizerTest() : auth_(kAdmin) {
    auth_.SetJobTokenHash("job-a", HashToken(kTokenA));
    auth_.SetJobTokenHash("job-b", HashToken(kTokenB));
  }
  Identity As(const std::string& token) const { return auth_.Resolve("Bearer " + token); }

  Authorizer auth_;
};

// Every method of the three services has exactly one rule.
TEST(MethodRules, CoverEveryMethodOfTheServices) {
  std::set<std::string> in_protos;
  for (const google::protobuf::FileDescriptor* file :
       {v1::PutRequest::descriptor()->file(), v1::Job::descriptor()->file(),
        v1::AgentMessage::descriptor()->file(), v1::ClusterStatus::descriptor()->file(),
        v1::Node::descriptor()->file()}) {
    for (int s = 0; s < file->service_count(); ++s) {
      const google::protobuf::ServiceDescriptor* service = file->service(s);
      for (int m = 0; m < service->method_count(); ++m) {
        in_protos.insert("/" + service->full_name() + "/" + service->method(m)->name());
      }
    }
  }
  std::set<std::string> in_table;
  for (const MethodRule& rule : MethodRules()) {
    EXPECT_TRUE(in_table.insert(std::string(rule.method)).second) << "twice: " << rule.method;
  }
  EXPECT_EQ(in_table, in_protos);
}

// The matrix: every method x {no credentials, another job's token, this job's
// token, admin}.
TEST_F(AuthorizerTest, EveryMethodEveryIdentity) {
  for (const MethodRule& rule : MethodRules()) {
    SCOPED_TRACE(std::string(rule.method));
    EXPECT_EQ(auth_.Authorize(Identity{}, rule.method, "job-a").code(),
              absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(auth_.Authorize(As("wrong-token"), rule.method, "job-a").code(),
              absl::StatusCode::kUnauthenticated);
    EXPECT_TRUE(auth_.Authorize(As(kAdmin), rule.method, "job-a").ok());
    const absl::Status own = auth_.Authorize(As(kTokenA), rule.method, "job-a");
    const absl::Status other = auth_.Authorize(As(kTokenB), rule.method, "job-a");
    switch (rule.access) {
      case Access::kAdmin:
        EXPECT_EQ(own.code(), absl::StatusCode::kPermissionDenied);
        EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
        break;
      case Access::kJob:
        EXPECT_TRUE(own.ok()) << own;
        EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
        break;
      case Access::kAuthenticated:
        EXPECT_TRUE(own.ok()) << own;
        EXPECT_TRUE(other.ok()) << other;
        break;
    }
  }
}

TEST_F(AuthorizerTest, MessagesNeverEchoATokenAndSayWhatToDo) {
  const absl::Status none = auth_.Authorize(As("not-a-token"), "/ddp.v1.JobService/GetJob", "x");
  EXPECT_THAT(none.message(), HasSubstr("DDP_TOKEN"));
  EXPECT_THAT(none.message(), Not(HasSubstr("not-a-token")));
  const absl::Status denied = auth_.Authorize(As(kTokenB), "/ddp.v1.JobService/CancelJob", "job-b");
  EXPECT_THAT(denied.message(), HasSubstr("admin token"));
  EXPECT_THAT(denied.message(), Not(HasSubstr(kTokenB)));
}

TEST_F(AuthorizerTest, ReplacedTokenIsRevoked) {
  EXPECT_EQ(As(kTokenA).kind, Identity::Kind::kJob);
  auth_.SetJobTokenHash("job-a", HashToken("job-a-second-token-0123"));
  EXPECT_EQ(As(kTokenA).kind, Identity::Kind::kNone);
  EXPECT_EQ(As("job-a-second-token-0123").job_id, "job-a");
  auth_.SetJobTokenHash("job-a", "");
  EXPECT_EQ(As("job-a-second-token-0123").kind, Identity::Kind::kNone);
}

TEST_F(AuthorizerTest, HeaderForms) {
  EXPECT_EQ(auth_.Resolve(std::string("Bearer ") + kAdmin).kind, Identity::Kind::kAdmin);
  EXPECT_EQ(auth_.Resolve(std::string("bearer ") + kAdmin + " ").kind, Identity::Kind::kAdmin);
  EXPECT_EQ(auth_.Resolve(kAdmin).kind, Identity::Kind::kNone);  // no scheme
  EXPECT_EQ(auth_.Resolve("Bearer ").kind, Identity::Kind::kNone);
  EXPECT_EQ(auth_.Resolve("").kind, Identity::Kind::kNone);
}

// RFC 7235: the scheme is case-insensitive; one or more spaces follow it.
TEST_F(AuthorizerTest, Resolve_SchemeInAnyCase_Accepted) {
  for (const char* scheme : {"BEARER ", "BeArEr ", "bearer  "}) {
    EXPECT_EQ(auth_.Resolve(scheme + std::string(kAdmin)).kind, Identity::Kind::kAdmin) << scheme;
    EXPECT_EQ(auth_.Resolve(scheme + std::string(kTokenA)).job_id, "job-a") << scheme;
  }
  EXPECT_EQ(auth_.Resolve(std::string("Basic ") + kAdmin).kind, Identity::Kind::kNone);
  EXPECT_EQ(auth_.Resolve(std::string("Bearerx ") + kAdmin).kind, Identity::Kind::kNone);
  EXPECT_EQ(auth_.Resolve("BEARER").kind, Identity::Kind::kNone);
}

TEST(Authorizer, OffWithoutAnAdminToken_AcceptsEverything) {
  Authorizer off("");
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(off.Authorize(Identity{}, "/ddp.v1.JobService/CancelJob", "x").ok());
}

TEST(Tokens, NewTokensAreLongRandomAndHashesStable) {
  const std::string a = NewToken();
  const std::string b = NewToken();
  EXPECT_NE(a, b);
  EXPECT_GE(a.size(), 43u);  // 32 bytes in base64
  EXPECT_EQ(HashToken("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(AuthorizerTest, WatchRevocation_NewToken_CallsBackOnceForThatJobOnly) {
  int a_revoked = 0, b_revoked = 0;
  absl::Status a_status;
  auto watch_a = auth_.WatchRevocation(As(kTokenA), [&](const absl::Status& status) {
    ++a_revoked;
    a_status = status;
  });
  auto watch_b = auth_.WatchRevocation(As(kTokenB), [&](const absl::Status&) { ++b_revoked; });
  ASSERT_TRUE(watch_a.ok() && watch_b.ok());
  ASSERT_NE(*watch_a, nullptr);
  auth_.SetJobTokenHash("job-a", HashToken(kTokenA));  // the same token: nothing revoked
  EXPECT_EQ(a_revoked, 0);
  auth_.SetJobTokenHash("job-a", HashToken("job-a-new-secret-0123456789"));
  EXPECT_EQ(a_revoked, 1);
  EXPECT_EQ(a_status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(a_status.message(), HasSubstr("revoked"));
  EXPECT_EQ(b_revoked, 0);
  auth_.SetJobTokenHash("job-a", "");  // once only
  EXPECT_EQ(a_revoked, 1);
  auth_.SetJobTokenHash("job-b", "");  // revoked outright
  EXPECT_EQ(b_revoked, 1);
}

TEST_F(AuthorizerTest, WatchRevocation_TokenNewerThanTheWatch_StillWatched) {
  auth_.SetJobTokenHash("job-a", HashToken("job-a-second-secret-012345"));
  const Identity second = As("job-a-second-secret-012345");
  int revoked = 0;
  auto watch = auth_.WatchRevocation(second, [&](const absl::Status&) { ++revoked; });
  ASSERT_TRUE(watch.ok()) << watch.status();
  auth_.SetJobTokenHash("job-a", HashToken("job-a-third-secret-0123456"));
  EXPECT_EQ(revoked, 1);
}

TEST_F(AuthorizerTest, WatchRevocation_RevokedBeforeTheWatch_Unauthenticated) {
  const Identity old = As(kTokenA);
  auth_.SetJobTokenHash("job-a", HashToken("job-a-new-secret-0123456789"));
  auto watch = auth_.WatchRevocation(old, [](const absl::Status&) {});
  EXPECT_EQ(watch.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(watch.status().message(), HasSubstr("revoked"));
  EXPECT_THAT(watch.status().message(), Not(HasSubstr(kTokenA)));
}

TEST_F(AuthorizerTest, WatchRevocation_DestroyedWatch_NotCalled) {
  int revoked = 0;
  {
    auto watch = auth_.WatchRevocation(As(kTokenA), [&](const absl::Status&) { ++revoked; });
    ASSERT_TRUE(watch.ok());
  }
  auth_.SetJobTokenHash("job-a", "");
  EXPECT_EQ(revoked, 0);
}

TEST_F(AuthorizerTest, WatchRevocation_AdminNeverRevoked_NoWatch) {
  auto watch = auth_.WatchRevocation(As(kAdmin), [](const absl::Status&) {});
  ASSERT_TRUE(watch.ok());
  EXPECT_EQ(*watch, nullptr);
}

}  // namespace
}  // namespace ddp::auth
