#include "tools/kv_bench/kv_targets.h"

#include <deque>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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

// One PutStream on one connection: the puts of the clients mapped to it go on
// it, each answered by id (the client's index: one put in flight per client).
class PutStreamConnection final
    : public grpc::ClientBidiReactor<v1::PutStreamRequest, v1::PutStreamResponse> {
 public:
  using Answered = std::function<void(int client, absl::string_view error)>;
  PutStreamConnection(v1::KeyValueService::Stub& stub, Answered answered)
      : answered_(std::move(answered)) {
    stub.async()->PutStream(&context_, this);
    StartRead(&response_);
    StartCall();
  }
  ~PutStreamConnection() override {
    context_.TryCancel();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  void Send(int client, v1::StreamedPut put) {
    put.set_id(static_cast<uint64_t>(client));
    std::string ended;
    {
      absl::MutexLock lock(&mu_);
      if (done_) {
        ended = ErrorText(status_);
      } else {
        queue_.push_back(std::move(put));
        if (!writing_) WriteNextLocked();
        return;
      }
    }
    answered_(client, ended);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (ok && !queue_.empty()) WriteNextLocked();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    for (const v1::StreamedPutAnswer& answer : response_.answers()) {
      std::string error;
      if (answer.code() != 0) error = absl::StrCat("code ", answer.code(), ": ", answer.message());
      answered_(static_cast<int>(answer.id()), error);
    }
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    status_ =
        status.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "put stream ended") : status;
    done_ = true;
  }

 private:
  // Every put queued now in one message.
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    writing_ = true;
    in_flight_.Clear();
    while (!queue_.empty() && in_flight_.puts_size() < kMaxPutsPerMessage) {
      *in_flight_.add_puts() = std::move(queue_.front());
      queue_.pop_front();
    }
    StartWrite(&in_flight_);
  }
  static constexpr int kMaxPutsPerMessage = 1024;  // the coordinator's limit

  const Answered answered_;
  grpc::ClientContext context_;
  v1::PutStreamResponse response_;
  absl::Mutex mu_;
  std::deque<v1::StreamedPut> queue_ ABSL_GUARDED_BY(mu_);
  v1::PutStreamRequest in_flight_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

// The coordinator with every put on PutStream (one stream per connection);
// gets and adds as DdpTarget. Deadlines do not apply to the puts.
class DdpStreamTarget final : public KvTarget {
 public:
  DdpStreamTarget(std::string address, std::string name_space)
      : address_(address), name_space_(name_space), unary_(address, name_space) {}
  std::string name() const override { return "ddp-stream"; }
  void Connect(int clients, int connections, absl::Duration deadline) override {
    unary_.Connect(clients, connections, deadline);
    streams_.clear();
    stubs_.clear();
    done_.assign(clients, nullptr);
    for (int i = 0; i < connections; ++i) {
      stubs_.push_back(v1::KeyValueService::NewStub(NewDistinctChannel(address_, i)));
      streams_.push_back(std::make_unique<PutStreamConnection>(
          *stubs_.back(),
          [this](int client, absl::string_view error) { done_[client]->Done(client, error); }));
    }
  }
  void Put(int client, std::string key, const std::string& value, OperationDone& done) override {
    done_[client] = &done;
    v1::StreamedPut put;
    put.mutable_put()->set_namespace_(name_space_);
    put.mutable_put()->set_key(std::move(key));
    put.mutable_put()->set_value(value);
    streams_[client % streams_.size()]->Send(client, std::move(put));
  }
  void Get(int client, std::string key, OperationDone& done) override {
    unary_.Get(client, std::move(key), done);
  }
  bool SupportsAdd() const override { return true; }
  void Add(int client, const std::string& key, OperationDone& done) override {
    unary_.Add(client, key, done);
  }

 private:
  const std::string address_;
  const std::string name_space_;
  DdpTarget unary_;
  std::vector<OperationDone*> done_;  // per client: the put in flight's
  std::vector<std::unique_ptr<v1::KeyValueService::Stub>> stubs_;
  std::vector<std::unique_ptr<PutStreamConnection>> streams_;
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

std::unique_ptr<KvTarget> NewDdpStreamTarget(const std::string& address,
                                             const std::string& name_space) {
  return std::make_unique<DdpStreamTarget>(address, name_space);
}

std::unique_ptr<KvTarget> NewEtcdTarget(const std::string& address) {
  return std::make_unique<EtcdTarget>(address);
}

}  // namespace ddp::kv_bench
