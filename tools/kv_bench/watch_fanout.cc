// Watch fan-out for ddp and etcd with gRPC's callback API: one reactor per
// watch stream, spread over a few connections.

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "etcd/rpc.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tools/kv_bench/grpc_channels.h"
#include "tools/kv_bench/kv_targets.h"

namespace ddp::kv_bench {
namespace {

constexpr int kWatchConnections = 16;
constexpr absl::Duration kRegisterBound = absl::Seconds(30);
constexpr absl::Duration kRoundBound = absl::Seconds(10);

// Counts notifications and registrations across all reactors.
struct FanoutCounters {
  absl::Mutex mu;
  int registered ABSL_GUARDED_BY(mu) = 0;
  int notified ABSL_GUARDED_BY(mu) = 0;
  int done ABSL_GUARDED_BY(mu) = 0;
  absl::Time last_notified ABSL_GUARDED_BY(mu);
  std::string error ABSL_GUARDED_BY(mu);

  void Notified() {
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mu);
    ++notified;
    last_notified = now;
  }
  void Done(const grpc::Status& status) {
    absl::MutexLock lock(&mu);
    ++done;
    if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED && error.empty()) {
      error = absl::StrCat("watch stream ended: ", status.error_message());
    }
  }
};

class DdpWatcher final : public grpc::ClientReadReactor<v1::WatchResponse> {
 public:
  DdpWatcher(v1::KeyValueService::Stub& stub, const v1::WatchRequest& request,
             FanoutCounters& counters)
      : counters_(counters) {
    stub.async()->Watch(&context_, &request, this);
    StartRead(&response_);
    StartCall();
  }
  void Cancel() { context_.TryCancel(); }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (response_.events_size() > 0) counters_.Notified();
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override { counters_.Done(status); }

 private:
  FanoutCounters& counters_;
  grpc::ClientContext context_;
  v1::WatchResponse response_;
};

class EtcdWatcher final
    : public grpc::ClientBidiReactor<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse> {
 public:
  EtcdWatcher(etcdserverpb::Watch::Stub& stub, const std::string& key, FanoutCounters& counters)
      : counters_(counters) {
    request_.mutable_create_request()->set_key(key);
    stub.async()->Watch(&context_, this);
    StartWrite(&request_);
    StartRead(&response_);
    StartCall();
  }
  void Cancel() { context_.TryCancel(); }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (response_.created()) {
      absl::MutexLock lock(&counters_.mu);
      ++counters_.registered;
    }
    if (response_.events_size() > 0) counters_.Notified();
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override { counters_.Done(status); }

 private:
  FanoutCounters& counters_;
  grpc::ClientContext context_;
  etcdserverpb::WatchRequest request_;
  etcdserverpb::WatchResponse response_;
};

// The parts both systems share: waiting for registrations and rounds.
template <typename Watcher>
class FanoutBase : public WatchFanout {
 public:
  std::string Round(int64_t round, absl::Duration* last_notified) override {
    {
      absl::MutexLock lock(&counters_.mu);
      counters_.notified = 0;
    }
    const absl::Time start = absl::Now();
    if (std::string error = PutOnce(absl::StrCat("round-", round)); !error.empty()) {
      return error;
    }
    absl::MutexLock lock(&counters_.mu);
    const int expected = static_cast<int>(watchers_.size());
    auto all = [&] { return counters_.notified >= expected || !counters_.error.empty(); };
    if (!counters_.mu.AwaitWithTimeout(absl::Condition(&all), kRoundBound)) {
      return absl::StrCat("only ", counters_.notified, " of ", expected,
                          " watchers notified within ", absl::FormatDuration(kRoundBound));
    }
    if (!counters_.error.empty()) return counters_.error;
    *last_notified = counters_.last_notified - start;
    return "";
  }
  void Stop() override {
    for (auto& watcher : watchers_) watcher->Cancel();
    absl::MutexLock lock(&counters_.mu);
    auto done = [&] { return counters_.done >= static_cast<int>(watchers_.size()); };
    counters_.mu.AwaitWithTimeout(absl::Condition(&done), kRoundBound);
  }
  ~FanoutBase() override { Stop(); }

 protected:
  virtual std::string PutOnce(const std::string& value) = 0;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<Watcher>> watchers_;
  FanoutCounters counters_;
  std::string key_;
};

class DdpFanout final : public FanoutBase<DdpWatcher> {
 public:
  DdpFanout(std::string address, std::string name_space)
      : address_(std::move(address)), name_space_(std::move(name_space)) {}

  std::string Start(int watchers, const std::string& key) override {
    key_ = key;
    for (int i = 0; i < kWatchConnections; ++i) {
      channels_.push_back(NewDistinctChannel(address_, 5000 + i));
      stubs_.push_back(v1::KeyValueService::NewStub(channels_.back()));
    }
    before_ = Watchers();
    v1::WatchRequest request;
    request.set_namespace_(name_space_);
    request.set_prefix(key);
    for (int i = 0; i < watchers; ++i) {
      watchers_.push_back(
          std::make_unique<DdpWatcher>(*stubs_[i % kWatchConnections], request, counters_));
    }
    // ddp sends nothing on registration; its Status counts open watchers.
    const absl::Time deadline = absl::Now() + kRegisterBound;
    while (Watchers() < before_ + watchers) {
      if (absl::Now() > deadline) return "watchers did not register in time";
      absl::SleepFor(absl::Milliseconds(10));
    }
    return "";
  }
  // Also waits until the server has closed these streams, so the next test's
  // count of open watchers starts from what it was before this one.
  void Stop() override {
    FanoutBase<DdpWatcher>::Stop();
    if (stubs_.empty()) return;
    const absl::Time deadline = absl::Now() + kRoundBound;
    while (Watchers() > before_ && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  }

 private:
  int64_t Watchers() {
    grpc::ClientContext context;
    v1::StatusResponse response;
    if (!stubs_[0]->Status(&context, v1::StatusRequest(), &response).ok()) {
      return -1;
    }
    return response.watchers();
  }
  std::string PutOnce(const std::string& value) override {
    v1::PutRequest request;
    request.set_namespace_(name_space_);
    request.set_key(key_);
    request.set_value(value);
    v1::PutResponse response;
    grpc::ClientContext context;
    grpc::Status status = stubs_[0]->Put(&context, request, &response);
    return status.ok() ? "" : status.error_message();
  }

  std::string address_;
  std::string name_space_;
  std::vector<std::unique_ptr<v1::KeyValueService::Stub>> stubs_;
  int64_t before_ = 0;  // the server's open watchers before Start
};

class EtcdFanout final : public FanoutBase<EtcdWatcher> {
 public:
  explicit EtcdFanout(std::string address) : address_(std::move(address)) {}

  std::string Start(int watchers, const std::string& key) override {
    key_ = key;
    for (int i = 0; i < kWatchConnections; ++i) {
      channels_.push_back(NewDistinctChannel(address_, 5000 + i));
      stubs_.push_back(etcdserverpb::Watch::NewStub(channels_.back()));
    }
    kv_ = etcdserverpb::KV::NewStub(channels_[0]);
    for (int i = 0; i < watchers; ++i) {
      watchers_.push_back(
          std::make_unique<EtcdWatcher>(*stubs_[i % kWatchConnections], key, counters_));
    }
    absl::MutexLock lock(&counters_.mu);
    auto all = [&] { return counters_.registered >= watchers; };
    if (!counters_.mu.AwaitWithTimeout(absl::Condition(&all), kRegisterBound)) {
      return "etcd watchers did not register in time";
    }
    return "";
  }

 private:
  std::string PutOnce(const std::string& value) override {
    etcdserverpb::PutRequest request;
    request.set_key(key_);
    request.set_value(value);
    etcdserverpb::PutResponse response;
    grpc::ClientContext context;
    grpc::Status status = kv_->Put(&context, request, &response);
    return status.ok() ? "" : status.error_message();
  }

  std::string address_;
  std::vector<std::unique_ptr<etcdserverpb::Watch::Stub>> stubs_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
};

}  // namespace

std::unique_ptr<WatchFanout> NewDdpWatchFanout(const std::string& address,
                                               const std::string& name_space) {
  return std::make_unique<DdpFanout>(address, name_space);
}

std::unique_ptr<WatchFanout> NewEtcdWatchFanout(const std::string& address) {
  return std::make_unique<EtcdFanout>(address);
}

}  // namespace ddp::kv_bench
