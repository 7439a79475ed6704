#include "tests/ha/failover_kv_client.h"

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace ddp::testing {

FailoverKvClient::FailoverKvClient(const std::string& targets, absl::Duration give_up)
    : give_up_(give_up), endpoints_(absl::StrSplit(targets, ',')) {}

v1::KeyValueService::Stub* FailoverKvClient::Connected(absl::Duration bound, std::string* target) {
  const absl::Time deadline = absl::Now() + bound;
  while (absl::Now() < deadline) {
    std::shared_ptr<grpc::Channel> channel;
    {
      absl::MutexLock lock(&mu_);
      *target = endpoints_.current();
      std::shared_ptr<grpc::Channel>& slot = channels_[*target];
      if (slot == nullptr) {
        grpc::ChannelArguments args;
        args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
        args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
        args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
        slot = grpc::CreateCustomChannel(*target, grpc::InsecureChannelCredentials(), args);
        stubs_[*target] = v1::KeyValueService::NewStub(slot);
      }
      channel = slot;
    }
    if (channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Milliseconds(100)))) {
      absl::MutexLock lock(&mu_);
      return stubs_[*target].get();
    }
    absl::MutexLock lock(&mu_);
    if (endpoints_.current() == *target) endpoints_.Next("");  // nothing was sent
  }
  return nullptr;
}

void FailoverKvClient::Failed(const std::string& target, const grpc::ClientContext& context) {
  absl::MutexLock lock(&mu_);
  if (endpoints_.current() == target) endpoints_.Next(LeaderHint(context));
}

template <typename Request, typename Response>
grpc::Status FailoverKvClient::Call(Method<Request, Response> method, const Request& request,
                                    Response* response) {
  const absl::Time deadline = absl::Now() + give_up_;
  while (true) {
    std::string target;
    v1::KeyValueService::Stub* stub = Connected(deadline - absl::Now(), &target);
    if (stub == nullptr) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no coordinator could be connected to");
    }
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    grpc::Status status = (stub->*method)(&context, request, response);
    if (status.ok()) return status;
    const bool refused =
        !LeaderHint(context).empty() || status.error_message().find("standby") != std::string::npos;
    Failed(target, context);
    if (!refused || absl::Now() >= deadline) return status;
  }
}

grpc::Status FailoverKvClient::Put(const v1::PutRequest& request, v1::PutResponse* response) {
  return Call(&v1::KeyValueService::Stub::Put, request, response);
}

grpc::Status FailoverKvClient::Add(const v1::AddRequest& request, v1::AddResponse* response) {
  return Call(&v1::KeyValueService::Stub::Add, request, response);
}

grpc::Status FailoverKvClient::Range(const v1::RangeRequest& request, v1::RangeResponse* response) {
  // A read: sent again after any failure.
  grpc::Status status;
  const absl::Time deadline = absl::Now() + give_up_;
  do {
    status = Call(&v1::KeyValueService::Stub::Range, request, response);
  } while (!status.ok() && status.error_code() == grpc::StatusCode::UNAVAILABLE &&
           absl::Now() < deadline);
  return status;
}

grpc::Status FailoverKvClient::Status(v1::StatusResponse* response) {
  grpc::Status status;
  const absl::Time deadline = absl::Now() + give_up_;
  do {
    status = Call(&v1::KeyValueService::Stub::Status, v1::StatusRequest(), response);
  } while (!status.ok() && status.error_code() == grpc::StatusCode::UNAVAILABLE &&
           absl::Now() < deadline);
  return status;
}

}  // namespace ddp::testing
