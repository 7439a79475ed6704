#include "coordinator/http/grpc_bridge.h"

#include <chrono>

#include "absl/synchronization/notification.h"
#include "common/grpc_status.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/support/byte_buffer.h"

namespace ddp::http {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(250);

grpc::ByteBuffer Serialize(const google::protobuf::Message& message) {
  std::string bytes = message.SerializeAsString();
  grpc::Slice slice(std::move(bytes));
  return grpc::ByteBuffer(&slice, 1);
}

absl::Status Parse(const grpc::ByteBuffer& buffer, google::protobuf::Message* message) {
  grpc::Slice slice;
  if (!buffer.DumpToSingleSlice(&slice).ok() ||
      !message->ParseFromArray(slice.begin(), static_cast<int>(slice.size()))) {
    return absl::InternalError("the coordinator sent a reply that does not parse");
  }
  return absl::OkStatus();
}

void AddMetadata(grpc::ClientContext& context, const Metadata& metadata) {
  for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
}

// Waits for the next completion; between completions asks `still_wanted`.
// Returns false when the queue shut down or the caller gave up (then the call
// was cancelled and the completion is still drained).
bool Await(grpc::CompletionQueue& cq, grpc::ClientContext& context,
           const std::function<bool()>& still_wanted, bool* ok) {
  void* tag = nullptr;
  bool cancelled = false;
  while (true) {
    const auto deadline = std::chrono::system_clock::now() + kPollInterval;
    switch (cq.AsyncNext(&tag, ok, deadline)) {
      case grpc::CompletionQueue::GOT_EVENT:
        return !cancelled;
      case grpc::CompletionQueue::SHUTDOWN:
        return false;
      case grpc::CompletionQueue::TIMEOUT:
        if (!cancelled && still_wanted && !still_wanted()) {
          context.TryCancel();
          cancelled = true;
        }
        break;
    }
  }
}

}  // namespace

GrpcBridge::GrpcBridge(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)), stub_(channel_) {}

absl::Status GrpcBridge::Unary(const std::string& method, const google::protobuf::Message& request,
                               google::protobuf::Message* response, const Metadata& metadata) {
  grpc::ClientContext context;
  AddMetadata(context, metadata);
  const grpc::ByteBuffer request_bytes = Serialize(request);
  grpc::ByteBuffer response_bytes;
  grpc::Status status;
  absl::Notification done;
  stub_.UnaryCall(&context, method, grpc::StubOptions(), &request_bytes, &response_bytes,
                  [&](grpc::Status s) {
                    status = std::move(s);
                    done.Notify();
                  });
  done.WaitForNotification();
  if (!status.ok()) return FromGrpcStatus(status);
  return Parse(response_bytes, response);
}

absl::Status GrpcBridge::ServerStream(
    const std::string& method, const google::protobuf::Message& request,
    const google::protobuf::Message& response_prototype, const Metadata& metadata,
    const std::function<bool(const google::protobuf::Message&)>& on_message,
    const std::function<bool()>& still_wanted) {
  grpc::ClientContext context;
  AddMetadata(context, metadata);
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub_.PrepareCall(&context, method, &cq);
  bool ok = false;
  bool wanted = true;
  call->StartCall(nullptr);
  wanted = Await(cq, context, still_wanted, &ok);
  if (wanted && ok) {
    call->Write(Serialize(request), nullptr);
    wanted = Await(cq, context, still_wanted, &ok);
  }
  if (wanted && ok) {
    call->WritesDone(nullptr);
    wanted = Await(cq, context, still_wanted, &ok);
  }
  grpc::ByteBuffer reply;
  while (wanted && ok) {
    call->Read(&reply, nullptr);
    wanted = Await(cq, context, still_wanted, &ok);
    if (!wanted || !ok) break;
    std::unique_ptr<google::protobuf::Message> message(response_prototype.New());
    absl::Status parsed = Parse(reply, message.get());
    if (!parsed.ok() || !on_message(*message)) {
      context.TryCancel();
      wanted = false;
    }
  }
  // Finish always completes (after a cancel too); drain it, then the queue.
  grpc::Status status;
  call->Finish(&status, nullptr);
  void* tag = nullptr;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return FromGrpcStatus(status);
}

}  // namespace ddp::http
