// GrpcKvService with authorization on, over real gRPC: what one job's token
// may do to another job's leases (issue 23).

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coordinator/auth/authorizer.h"
#include "coordinator/rpc/testing/kv_service_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::rpc {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kAdmin[] = "admin-token";
constexpr char kTokenA[] = "token-of-job-a";
constexpr char kTokenB[] = "token-of-job-b";

class GrpcKvAuthTest : public testing::KvServiceFixture {
 protected:
  void SetUp() override {
    authorizer_.SetJobTokenHash("job-a", auth::HashToken(kTokenA));
    authorizer_.SetJobTokenHash("job-b", auth::HashToken(kTokenB));
    GrpcKvServiceOptions options;
    options.authorizer = &authorizer_;
    Serve(options);
  }

  // A context carrying `token` the way ddpctl sends it.
  static std::unique_ptr<grpc::ClientContext> As(const std::string& token,
                                                 const std::string& scheme = "Bearer") {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    context->AddMetadata("authorization", scheme + " " + token);
    return context;
  }

  absl::StatusOr<int64_t> Grant(const std::string& token, const std::string& ns = "") {
    v1::LeaseGrantRequest request;
    request.set_ttl_ms(60'000);
    request.set_namespace_(ns);
    v1::LeaseGrantResponse response;
    grpc::Status status = stub_->LeaseGrant(As(token).get(), request, &response);
    if (!status.ok())
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    return response.lease();
  }

  grpc::Status Put(const std::string& token, const std::string& ns, const std::string& key,
                   int64_t lease) {
    v1::PutRequest request;
    request.set_namespace_(ns);
    request.set_key(key);
    request.set_value("v");
    request.set_lease(lease);
    v1::PutResponse response;
    return stub_->Put(As(token).get(), request, &response);
  }

  grpc::Status KeepAlive(const std::string& token, int64_t lease) {
    v1::LeaseKeepAliveRequest request;
    request.set_lease(lease);
    v1::LeaseKeepAliveResponse response;
    return stub_->LeaseKeepAlive(As(token).get(), request, &response);
  }

  grpc::Status Revoke(const std::string& token, int64_t lease, int64_t* deleted = nullptr) {
    v1::LeaseRevokeRequest request;
    request.set_lease(lease);
    v1::LeaseRevokeResponse response;
    grpc::Status status = stub_->LeaseRevoke(As(token).get(), request, &response);
    if (deleted != nullptr) *deleted = response.deleted();
    return status;
  }

  bool Exists(const std::string& ns, const std::string& key) { return store_->Get({ns, key}).ok(); }

  auth::Authorizer authorizer_{kAdmin};
};

TEST_F(GrpcKvAuthTest, OtherJobsLease_RevokeKeepAliveAttach_PermissionDenied) {
  absl::StatusOr<int64_t> lease = Grant(kTokenA);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(Put(kTokenA, "job-a", "owned", *lease).ok());

  const grpc::Status revoke = Revoke(kTokenB, *lease);
  EXPECT_EQ(revoke.error_code(), grpc::StatusCode::PERMISSION_DENIED) << revoke.error_message();
  EXPECT_THAT(revoke.error_message(), Not(HasSubstr("job-a")));
  EXPECT_TRUE(Exists("job-a", "owned"));  // nothing of job-a's was deleted
  EXPECT_EQ(KeepAlive(kTokenB, *lease).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Put(kTokenB, "job-b", "squatter", *lease).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_FALSE(Exists("job-b", "squatter"));

  // Job A itself, and the admin, may.
  EXPECT_TRUE(KeepAlive(kTokenA, *lease).ok());
  EXPECT_TRUE(KeepAlive(kAdmin, *lease).ok());
  int64_t deleted = 0;
  ASSERT_TRUE(Revoke(kAdmin, *lease, &deleted).ok());
  EXPECT_EQ(deleted, 1);
  EXPECT_FALSE(Exists("job-a", "owned"));
}

TEST_F(GrpcKvAuthTest, LeaseGrant_JobNamesOtherNamespace_PermissionDenied) {
  absl::StatusOr<int64_t> lease = Grant(kTokenB, "job-a");
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(Grant(kTokenB, "job-b").ok());
}

TEST_F(GrpcKvAuthTest, LeaseGrant_AdminForJob_JobMayUseIt) {
  absl::StatusOr<int64_t> for_a = Grant(kAdmin, "job-a");
  ASSERT_TRUE(for_a.ok()) << for_a.status();
  EXPECT_TRUE(Put(kTokenA, "job-a", "k", *for_a).ok());
  EXPECT_EQ(Revoke(kTokenB, *for_a).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // Granted by the admin without a namespace: belongs to no job.
  absl::StatusOr<int64_t> ownerless = Grant(kAdmin);
  ASSERT_TRUE(ownerless.ok()) << ownerless.status();
  EXPECT_EQ(Put(kTokenA, "job-a", "k2", *ownerless).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Put(kAdmin, "job-a", "k2", *ownerless).ok());
}

TEST_F(GrpcKvAuthTest, ListNamespaces_JobSeesItsOwn_AdminSeesAll) {
  ASSERT_TRUE(Put(kAdmin, "job-a", "k1", 0).ok());
  ASSERT_TRUE(Put(kAdmin, "job-a", "k2", 0).ok());
  ASSERT_TRUE(Put(kAdmin, "job-b", "k", 0).ok());
  // A lease's owner record lives in the store's own namespace: never listed.
  ASSERT_TRUE(Grant(kTokenA).ok());
  auto list = [this](const std::string& token) {
    v1::ListNamespacesResponse response;
    grpc::Status status =
        stub_->ListNamespaces(As(token).get(), v1::ListNamespacesRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    std::vector<std::string> names;
    for (const v1::NamespaceInfo& ns : response.namespaces()) {
      names.push_back(absl::StrCat(ns.namespace_(), "=", ns.keys()));
    }
    return names;
  };
  EXPECT_EQ(list(kAdmin), (std::vector<std::string>{"job-a=2", "job-b=1"}));
  EXPECT_EQ(list(kTokenA), (std::vector<std::string>{"job-a=2"}));
  EXPECT_EQ(list(kTokenB), (std::vector<std::string>{"job-b=1"}));
  v1::ListNamespacesResponse none;
  grpc::ClientContext anonymous;
  EXPECT_EQ(stub_->ListNamespaces(&anonymous, v1::ListNamespacesRequest(), &none).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(GrpcKvAuthTest, LeaseIds_NotSequential) {
  absl::StatusOr<int64_t> first = Grant(kTokenA);
  absl::StatusOr<int64_t> second = Grant(kTokenA);
  ASSERT_TRUE(first.ok() && second.ok());
  // Random 63-bit ids: neither is the other's neighbour, nor near 1.
  EXPECT_GT(std::abs(*second - *first), 1'000'000);
  EXPECT_GT(std::min(*first, *second), 1'000'000);
}

TEST_F(GrpcKvAuthTest, Watch_TokenRotated_EndsUnauthenticatedWithinASecond) {
  auto context = As(kTokenA);
  v1::WatchRequest request;
  request.set_namespace_("job-a");
  auto reader = stub_->Watch(context.get(), request);
  v1::WatchResponse response;
  ASSERT_TRUE(reader->Read(&response));  // open
  // Another job's rotation changes nothing for it.
  authorizer_.SetJobTokenHash("job-b", auth::HashToken("job-b-second-token"));
  ASSERT_TRUE(store_->Put({"job-a", "k", "1"}).ok());
  ASSERT_TRUE(reader->Read(&response));
  ASSERT_EQ(response.events_size(), 1);
  const absl::Time rotated = absl::Now();
  authorizer_.SetJobTokenHash("job-a", auth::HashToken("job-a-second-token"));
  ASSERT_TRUE(store_->Put({"job-a", "k", "2"}).ok());  // not delivered any more
  while (reader->Read(&response)) {
    EXPECT_EQ(response.events_size(), 0);
  }
  const grpc::Status status = reader->Finish();
  EXPECT_LT(absl::Now() - rotated, absl::Seconds(1));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("revoked"));
}

TEST_F(GrpcKvAuthTest, PutStream_EachPutAuthorizedOnItsNamespace_RotationEndsTheStream) {
  auto context = As(kTokenA);
  auto stream = stub_->PutStream(context.get());
  auto put = [&](uint64_t id, const std::string& ns) {
    v1::PutStreamRequest request;
    v1::StreamedPut* streamed = request.add_puts();
    streamed->set_id(id);
    streamed->mutable_put()->set_namespace_(ns);
    streamed->mutable_put()->set_key("k");
    streamed->mutable_put()->set_value("v");
    return stream->Write(request);
  };
  v1::PutStreamResponse response;
  auto read_one = [&] {
    if (!stream->Read(&response) || response.answers_size() != 1) return false;
    return true;
  };
  ASSERT_TRUE(put(1, "job-a"));
  ASSERT_TRUE(read_one());
  v1::StreamedPutAnswer answer = response.answers(0);
  EXPECT_EQ(answer.id(), 1u);
  EXPECT_EQ(answer.code(), 0) << answer.message();
  ASSERT_TRUE(put(2, "job-b"));  // another job's namespace
  ASSERT_TRUE(read_one());
  answer = response.answers(0);
  EXPECT_EQ(answer.id(), 2u);
  EXPECT_EQ(answer.code(), static_cast<int>(grpc::StatusCode::PERMISSION_DENIED));
  EXPECT_THAT(answer.message(), Not(HasSubstr(kTokenA)));
  EXPECT_FALSE(store_->Get({"job-b", "k"}).ok());
  authorizer_.SetJobTokenHash("job-a", auth::HashToken("job-a-second-token"));
  while (stream->Read(&response)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
}

TEST_F(GrpcKvAuthTest, PutStream_NoToken_Unauthenticated) {
  grpc::ClientContext context;
  auto stream = stub_->PutStream(&context);
  v1::PutStreamResponse answer;
  EXPECT_FALSE(stream->Read(&answer));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(GrpcKvAuthTest, Watch_OpenedWithAdminToken_NotEndedByJobRotation) {
  auto context = As(kAdmin);
  v1::WatchRequest request;
  request.set_namespace_("job-a");
  auto reader = stub_->Watch(context.get(), request);
  v1::WatchResponse response;
  ASSERT_TRUE(reader->Read(&response));
  authorizer_.SetJobTokenHash("job-a", auth::HashToken("job-a-second-token"));
  ASSERT_TRUE(store_->Put({"job-a", "k", "1"}).ok());
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.events_size(), 1);
  context->TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

}  // namespace
}  // namespace ddp::rpc
