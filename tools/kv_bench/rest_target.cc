#include "tools/kv_bench/rest_target.h"

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/proto_json.h"
#include "ddp/v1/kv.pb.h"
#include "httplib.h"

namespace ddp::kv_bench {
namespace {

// One logical client: a thread with its own keep-alive connection that runs
// the operations posted to it, one at a time.
class RestClient {
 public:
  RestClient(const std::string& host, int port, absl::Duration deadline) : http_(host, port) {
    http_.set_keep_alive(true);
    http_.set_tcp_nodelay(true);
    if (deadline > absl::ZeroDuration()) {
      const int64_t ms = absl::ToInt64Milliseconds(deadline);
      http_.set_read_timeout(ms / 1000, (ms % 1000) * 1000);
    }
    thread_ = std::thread([this] { Loop(); });
  }
  ~RestClient() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }

  void Post(std::function<void(httplib::Client&)> operation) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(operation));
  }

 private:
  void Loop() {
    while (true) {
      std::function<void(httplib::Client&)> operation;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](RestClient* c) { return c->stopping_ || !c->queue_.empty(); }, this));
        if (queue_.empty()) return;
        operation = std::move(queue_.front());
        queue_.pop_front();
      }
      operation(http_);
    }
  }

  httplib::Client http_;
  absl::Mutex mu_;
  std::deque<std::function<void(httplib::Client&)>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

std::string Outcome(const httplib::Result& result) {
  if (!result) return absl::StrCat("HTTP error: ", httplib::to_string(result.error()));
  if (result->status != 200) return absl::StrCat("HTTP ", result->status, ": ", result->body);
  return "";
}

class RestTarget : public KvTarget {
 public:
  RestTarget(std::string host, int port, std::string name_space)
      : host_(std::move(host)), port_(port), ns_(std::move(name_space)) {}

  std::string name() const override { return absl::StrCat("ddp REST ", host_, ":", port_); }

  void Connect(int clients, int /*connections*/, absl::Duration deadline) override {
    clients_.clear();
    for (int i = 0; i < clients; ++i) {
      clients_.push_back(std::make_unique<RestClient>(host_, port_, deadline));
    }
  }

  void Put(int client, std::string key, const std::string& value, OperationDone& done) override {
    v1::PutRequest body;
    body.set_value(value);
    clients_[client]->Post(
        [this, client, key = std::move(key), json = ProtoJson(body), &done](httplib::Client& http) {
          done.Done(client, Outcome(http.Put(Path(key).c_str(), json, "application/json")));
        });
  }

  void Get(int client, std::string key, OperationDone& done) override {
    clients_[client]->Post([this, client, key = std::move(key), &done](httplib::Client& http) {
      done.Done(client, Outcome(http.Get(Path(key).c_str())));
    });
  }

  bool SupportsAdd() const override { return true; }

  void Add(int client, const std::string& key, OperationDone& done) override {
    clients_[client]->Post([this, client, key, &done](httplib::Client& http) {
      done.Done(client, Outcome(http.Post((Path(key) + ":add").c_str(), R"({"delta":"1"})",
                                          "application/json")));
    });
  }

 private:
  std::string Path(const std::string& key) const { return absl::StrCat("/v1/kv/", ns_, "/", key); }

  const std::string host_;
  const int port_;
  const std::string ns_;
  std::vector<std::unique_ptr<RestClient>> clients_;
};

}  // namespace

std::unique_ptr<KvTarget> NewRestTarget(const std::string& address, const std::string& name_space) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    port = 80;
  }
  return std::make_unique<RestTarget>(address.substr(0, colon), port, name_space);
}

}  // namespace ddp::kv_bench
