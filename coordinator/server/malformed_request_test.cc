// Bytes that are not a valid message, sent to a real coordinator: unary methods
// answer INVALID_ARGUMENT naming the method and the expected message type (not
// gRPC's bare UNIMPLEMENTED), and a Session stream ends with INVALID_ARGUMENT
// (not a clean OK), while the server keeps serving well-formed requests.

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "coordinator/server/coordinator_server.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"

namespace ddp::server {
namespace {

using ::testing::HasSubstr;

// Not a protobuf message: a field tag followed by a truncated varint.
const char kGarbage[] = "\x08\xff\xff\xff";

grpc::ByteBuffer Bytes(const std::string& text) {
  grpc::Slice slice(text);
  return grpc::ByteBuffer(&slice, 1);
}

class MalformedRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("TEST_TMPDIR");
    CoordinatorServerOptions options;
    options.data_dir = std::string(dir ? dir : "/tmp") + "/" +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name();
    options.bind_address = "127.0.0.1";
    options.port = 0;
    auto server = CoordinatorServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
  }

  grpc::Status CallUnary(const std::string& method, const std::string& bytes) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    grpc::CompletionQueue cq;
    const grpc::ByteBuffer request = Bytes(bytes);
    auto call = stub.PrepareUnaryCall(&context, method, request, &cq);
    call->StartCall();
    grpc::ByteBuffer reply;
    grpc::Status status;
    call->Finish(&reply, &status, reinterpret_cast<void*>(1));
    void* tag;
    bool ok;
    EXPECT_TRUE(cq.Next(&tag, &ok));
    return status;
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(MalformedRequestTest, UnaryMethodsAnswerInvalidArgumentNamingMethodAndType) {
  for (const auto& [method, type] :
       {std::pair<std::string, std::string>{"/ddp.v1.KeyValueService/Put", "ddp.v1.PutRequest"},
        {"/ddp.v1.KeyValueService/Range", "ddp.v1.RangeRequest"},
        {"/ddp.v1.JobService/CreateJob", "ddp.v1.CreateJobRequest"}}) {
    const grpc::Status status = CallUnary(method, kGarbage);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_THAT(status.error_message(), HasSubstr(method));
    EXPECT_THAT(status.error_message(), HasSubstr(type));
  }
  // An unknown method is still UNIMPLEMENTED.
  EXPECT_EQ(CallUnary("/ddp.v1.KeyValueService/Nope", "").error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  // Well-formed requests are served as before.
  v1::PutRequest put;
  put.set_namespace_("ns");
  put.set_key("k");
  put.set_value("v");
  auto stub = v1::KeyValueService::NewStub(channel_);
  grpc::ClientContext context;
  v1::PutResponse response;
  EXPECT_TRUE(stub->Put(&context, put, &response).ok());
  EXPECT_EQ(response.revision(), 1);
}

TEST_F(MalformedRequestTest, SessionEndsWithInvalidArgumentNotOk) {
  grpc::GenericStub stub(channel_);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&context, "/ddp.v1.SessionService/Session", &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  call->Write(Bytes(kGarbage), reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  grpc::ByteBuffer reply;
  call->Read(&reply, reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_FALSE(ok) << "the coordinator sent a reply to garbage";
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("/ddp.v1.SessionService/Session"));
  EXPECT_THAT(status.error_message(), HasSubstr("ddp.v1.AgentMessage"));
}

// Watch and WatchJob (server streams) parse their one request as unary
// methods do: garbage ends them with INVALID_ARGUMENT, not UNIMPLEMENTED.
TEST_F(MalformedRequestTest, ServerStreamsEndWithInvalidArgumentNamingMethodAndType) {
  for (const auto& [method, type] :
       {std::pair<std::string, std::string>{"/ddp.v1.KeyValueService/Watch", "ddp.v1.WatchRequest"},
        {"/ddp.v1.JobService/WatchJob", "ddp.v1.WatchJobRequest"}}) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    grpc::CompletionQueue cq;
    auto call = stub.PrepareCall(&context, method, &cq);
    void* tag;
    bool ok;
    call->StartCall(reinterpret_cast<void*>(1));
    ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
    call->WriteLast(Bytes(kGarbage), grpc::WriteOptions(), reinterpret_cast<void*>(2));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    grpc::ByteBuffer reply;
    call->Read(&reply, reinterpret_cast<void*>(3));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_FALSE(ok) << method << " sent a reply to garbage";
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(4));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(method));
    EXPECT_THAT(status.error_message(), HasSubstr(type));
  }
}

}  // namespace
}  // namespace ddp::server
