#include "tools/kv_bench/kv_targets.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "etcd/rpc.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tools/kv_bench/grpc_channels.h"

namespace ddp::kv_bench {
namespace {

constexpr absl::Duration kCallDeadline = absl::Seconds(10);

std::string ErrorText(const grpc::Status& status) {
  if (status.ok()) return "";
  return absl::StrCat("gRPC code ", status.error_code(), ": ",
                      status.error_message());
}

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + kCallDeadline));
}

class DdpTarget final : public KvTarget {
 public:
  DdpTarget(std::string address, std::string name_space)
      : address_(std::move(address)), name_space_(std::move(name_space)) {}
  std::string name() const override { return "ddp"; }
  void Connect(int clients) override {
    stubs_.clear();
    for (int i = 0; i < clients; ++i) {
      stubs_.push_back(
          v1::KeyValueService::NewStub(NewDistinctChannel(address_, i)));
    }
  }
  std::string Put(int client, const std::string& key,
                  const std::string& value) override {
    v1::PutRequest request;
    request.set_namespace_(name_space_);
    request.set_key(key);
    request.set_value(value);
    v1::PutResponse response;
    grpc::ClientContext context;
    SetDeadline(context);
    return ErrorText(stubs_[client]->Put(&context, request, &response));
  }
  std::string Get(int client, const std::string& key) override {
    v1::GetRequest request;
    request.set_namespace_(name_space_);
    request.set_key(key);
    v1::GetResponse response;
    grpc::ClientContext context;
    SetDeadline(context);
    return ErrorText(stubs_[client]->Get(&context, request, &response));
  }
  bool SupportsAdd() const override { return true; }
  std::string Add(int client, const std::string& key) override {
    v1::AddRequest request;
    request.set_namespace_(name_space_);
    request.set_key(key);
    request.set_delta(1);
    v1::AddResponse response;
    grpc::ClientContext context;
    SetDeadline(context);
    return ErrorText(stubs_[client]->Add(&context, request, &response));
  }

 private:
  std::string address_;
  std::string name_space_;
  std::vector<std::unique_ptr<v1::KeyValueService::Stub>> stubs_;
};

class EtcdTarget final : public KvTarget {
 public:
  explicit EtcdTarget(std::string address) : address_(std::move(address)) {}
  std::string name() const override { return "etcd"; }
  void Connect(int clients) override {
    stubs_.clear();
    for (int i = 0; i < clients; ++i) {
      stubs_.push_back(
          etcdserverpb::KV::NewStub(NewDistinctChannel(address_, i)));
    }
  }
  std::string Put(int client, const std::string& key,
                  const std::string& value) override {
    etcdserverpb::PutRequest request;
    request.set_key(key);
    request.set_value(value);
    etcdserverpb::PutResponse response;
    grpc::ClientContext context;
    SetDeadline(context);
    return ErrorText(stubs_[client]->Put(&context, request, &response));
  }
  // A linearizable (default) read, like ddp's.
  std::string Get(int client, const std::string& key) override {
    etcdserverpb::RangeRequest request;
    request.set_key(key);
    etcdserverpb::RangeResponse response;
    grpc::ClientContext context;
    SetDeadline(context);
    grpc::Status status = stubs_[client]->Range(&context, request, &response);
    if (status.ok() && response.kvs_size() != 1) return "key not found";
    return ErrorText(status);
  }
  bool SupportsAdd() const override { return false; }
  std::string Add(int, const std::string&) override {
    return "etcd has no atomic add";
  }

 private:
  std::string address_;
  std::vector<std::unique_ptr<etcdserverpb::KV::Stub>> stubs_;
};

}  // namespace

std::unique_ptr<KvTarget> NewDdpTarget(const std::string& address,
                                       const std::string& name_space) {
  return std::make_unique<DdpTarget>(address, name_space);
}

std::unique_ptr<KvTarget> NewEtcdTarget(const std::string& address) {
  return std::make_unique<EtcdTarget>(address);
}

}  // namespace ddp::kv_bench
