#include "tools/continuity_bench/put_prober.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ddp::continuity_bench {

PutProber::PutProber(const std::string& targets, absl::Duration interval)
    : interval_(interval), client_(targets, /*give_up=*/absl::Seconds(5)) {}

PutProber::~PutProber() { Stop(); }

void PutProber::Start() {
  thread_ = std::thread([this] { Run(); });
}

void PutProber::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::vector<absl::Time> PutProber::Acks() const {
  absl::MutexLock lock(&mu_);
  return acks_;
}

void PutProber::Run() {
  for (int64_t seq = 0; !stop_; ++seq) {
    const absl::Time next = absl::Now() + interval_;
    v1::PutRequest put;
    put.set_namespace_("continuity-bench");
    put.set_key(absl::StrCat("probe/", seq % 64));  // a bounded key set
    put.set_value(absl::StrCat(seq));
    v1::PutResponse response;
    const grpc::Status status = client_.Put(put, &response);
    const absl::Time done = absl::Now();
    if (status.ok()) {
      absl::MutexLock lock(&mu_);
      acks_.push_back(done);
    } else {
      ++failed_;
    }
    if (done < next) absl::SleepFor(next - done);
  }
}

}  // namespace ddp::continuity_bench
