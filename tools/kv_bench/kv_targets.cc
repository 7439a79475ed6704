#include "tools/kv_bench/kv_targets.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "etcd/rpc.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tools/kv_bench/grpc_channels.h"

namespace ddp::kv_bench {
namespace {

std::string ErrorText(const grpc::Status& status) {
  if (status.ok()) return "";
  return absl::StrCat("gRPC code ", status.error_code(), ": ", status.error_message());
}

// What every client keeps between its calls: one call is in flight per client,
// so the messages are reused; the ClientContext is fresh per call (gRPC
// forbids reusing one).
template <typename Messages>
struct ClientSlot {
  int client = 0;
  absl::Duration deadline;  // zero: none
  OperationDone* done = nullptr;
  std::optional<grpc::ClientContext> context;
  Messages m;

  grpc::ClientContext* NewContext(OperationDone& on_done) {
    done = &on_done;
    context.emplace();
    if (deadline > absl::ZeroDuration()) {
      context->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    }
    return &*context;
  }
  void Finish(const grpc::Status& status) { done->Done(client, ErrorText(status)); }
  void Finish(absl::string_view error) { done->Done(client, error); }
};

// Shared by both targets: channels, stubs (one per channel) and slots.
template <typename Service, typename Messages>
class TargetBase : public KvTarget {
 public:
  explicit TargetBase(std::string address) : address_(std::move(address)) {}
  void Connect(int clients, int connections, absl::Duration deadline) override {
    stubs_.clear();
    slots_.clear();
    for (int i = 0; i < connections; ++i) {
      stubs_.push_back(Service::NewStub(NewDistinctChannel(address_, i)));
    }
    for (int i = 0; i < clients; ++i) {
      slots_.push_back(std::make_unique<ClientSlot<Messages>>());
      slots_.back()->client = i;
      slots_.back()->deadline = deadline;
      InitMessages(slots_.back()->m);
    }
  }

 protected:
  virtual void InitMessages(Messages& m) = 0;
  typename Service::Stub& StubFor(int client) { return *stubs_[client % stubs_.size()]; }
  ClientSlot<Messages>& Slot(int client) { return *slots_[client]; }

 private:
  const std::string address_;
  std::vector<std::unique_ptr<typename Service::Stub>> stubs_;
  std::vector<std::unique_ptr<ClientSlot<Messages>>> slots_;
};

struct DdpMessages {
  v1::PutRequest put;
  v1::PutResponse put_response;
  v1::GetRequest get;
  v1::GetResponse get_response;
  v1::AddRequest add;
  v1::AddResponse add_response;
};

class DdpTarget final : public TargetBase<v1::KeyValueService, DdpMessages> {
 public:
  DdpTarget(std::string address, std::string name_space)
      : TargetBase(std::move(address)), name_space_(std::move(name_space)) {}
  std::string name() const override { return "ddp"; }
  void Put(int client, std::string key, const std::string& value, OperationDone& done) override {
    ClientSlot<DdpMessages>& s = Slot(client);
    s.m.put.set_key(std::move(key));
    if (s.m.put.value() != value) s.m.put.set_value(value);
    StubFor(client).async()->Put(s.NewContext(done), &s.m.put, &s.m.put_response,
                                 [&s](grpc::Status status) { s.Finish(status); });
  }
  void Get(int client, std::string key, OperationDone& done) override {
    ClientSlot<DdpMessages>& s = Slot(client);
    s.m.get.set_key(std::move(key));
    StubFor(client).async()->Get(s.NewContext(done), &s.m.get, &s.m.get_response,
                                 [&s](grpc::Status status) { s.Finish(status); });
  }
  bool SupportsAdd() const override { return true; }
  void Add(int client, const std::string& key, OperationDone& done) override {
    ClientSlot<DdpMessages>& s = Slot(client);
    if (s.m.add.key() != key) s.m.add.set_key(key);
    StubFor(client).async()->Add(s.NewContext(done), &s.m.add, &s.m.add_response,
                                 [&s](grpc::Status status) { s.Finish(status); });
  }

 private:
  void InitMessages(DdpMessages& m) override {
    m.put.set_namespace_(name_space_);
    m.get.set_namespace_(name_space_);
    m.add.set_namespace_(name_space_);
    m.add.set_delta(1);
  }

  const std::string name_space_;
};

struct EtcdMessages {
  etcdserverpb::PutRequest put;
  etcdserverpb::PutResponse put_response;
  etcdserverpb::RangeRequest range;
  etcdserverpb::RangeResponse range_response;
};

class EtcdTarget final : public TargetBase<etcdserverpb::KV, EtcdMessages> {
 public:
  explicit EtcdTarget(std::string address) : TargetBase(std::move(address)) {}
  std::string name() const override { return "etcd"; }
  void Put(int client, std::string key, const std::string& value, OperationDone& done) override {
    ClientSlot<EtcdMessages>& s = Slot(client);
    s.m.put.set_key(std::move(key));
    if (s.m.put.value() != value) s.m.put.set_value(value);
    StubFor(client).async()->Put(s.NewContext(done), &s.m.put, &s.m.put_response,
                                 [&s](grpc::Status status) { s.Finish(status); });
  }
  // A linearizable (default) read, like ddp's.
  void Get(int client, std::string key, OperationDone& done) override {
    ClientSlot<EtcdMessages>& s = Slot(client);
    s.m.range.set_key(std::move(key));
    StubFor(client).async()->Range(s.NewContext(done), &s.m.range, &s.m.range_response,
                                   [&s](grpc::Status status) {
                                     if (status.ok() && s.m.range_response.kvs_size() != 1) {
                                       s.Finish("key not found");
                                     } else {
                                       s.Finish(status);
                                     }
                                   });
  }
  bool SupportsAdd() const override { return false; }
  void Add(int client, const std::string&, OperationDone& done) override {
    done.Done(client, "etcd has no atomic add");
  }

 private:
  void InitMessages(EtcdMessages&) override {}
};

}  // namespace

std::unique_ptr<KvTarget> NewDdpTarget(const std::string& address, const std::string& name_space) {
  return std::make_unique<DdpTarget>(address, name_space);
}

std::unique_ptr<KvTarget> NewEtcdTarget(const std::string& address) {
  return std::make_unique<EtcdTarget>(address);
}

}  // namespace ddp::kv_bench
