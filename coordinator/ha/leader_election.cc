#include "coordinator/ha/leader_election.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/storage/etcd/etcd_channel.h"

namespace ddp::ha {
namespace {

using storage::EtcdDeadline;

absl::Time Now() { return MonotonicClock::Get().Now(); }

v1::CoordinatorInfo ParseInfo(const std::string& value) {
  v1::CoordinatorInfo info;
  if (!info.ParseFromString(value)) info.set_name("(an undecodable leader key)");
  return info;
}

// How long a standby's watch lasts before it reads the key again: a watch
// on a member cut off from the others would otherwise never see the key go.
constexpr absl::Duration kWatchRenewal = absl::Seconds(5);
constexpr absl::Duration kRetryPause = absl::Milliseconds(100);

}  // namespace

LeaderElection::LeaderElection(std::shared_ptr<grpc::Channel> etcd, LeaderElectionOptions options)
    : options_(std::move(options)),
      key_(options_.prefix + "/leader"),
      kv_(etcdserverpb::KV::NewStub(etcd)),
      lease_(etcdserverpb::Lease::NewStub(etcd)),
      watch_(etcdserverpb::Watch::NewStub(etcd)) {}

absl::StatusOr<std::unique_ptr<LeaderElection>> LeaderElection::Create(
    std::shared_ptr<grpc::Channel> etcd, LeaderElectionOptions options) {
  if (!etcd->WaitForConnected(EtcdDeadline(options.connect_timeout))) {
    return absl::UnavailableError(
        absl::StrCat("etcd did not answer within ", absl::FormatDuration(options.connect_timeout),
                     ": check --store and that the etcd members run and are reachable"));
  }
  std::unique_ptr<LeaderElection> election(new LeaderElection(std::move(etcd), std::move(options)));
  DDP_RETURN_IF_ERROR(election->GrantLease(election->options_.connect_timeout));
  election->keepalive_ = std::thread([e = election.get()] { e->KeepAliveLoop(); });
  return election;
}

absl::Status LeaderElection::GrantLease(absl::Duration timeout) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(
      std::max<int64_t>(1, absl::ToInt64Seconds(options_.lease_ttl + absl::Milliseconds(999))));
  etcdserverpb::LeaseGrantResponse response;
  grpc::ClientContext context;
  context.set_deadline(EtcdDeadline(timeout));
  const absl::Time sent = Now();
  grpc::Status status = lease_->LeaseGrant(&context, request, &response);
  if (!status.ok() || !response.error().empty()) {
    return absl::UnavailableError(
        absl::StrCat("etcd refused a lease for the leader election: ",
                     status.ok() ? response.error() : FromGrpcStatus(status).ToString()));
  }
  absl::MutexLock lock(&mu_);
  lease_id_ = response.id();
  ttl_ = absl::Seconds(response.ttl());
  lease_end_ = sent + ttl_;
  return absl::OkStatus();
}

LeaderElection::~LeaderElection() {
  bool leading;
  {
    absl::MutexLock lock(&mu_);
    leading = leading_ && !lost_;
  }
  Stop();
  if (leading) Resign();
}

bool LeaderElection::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

absl::StatusOr<int64_t> LeaderElection::KeepAliveOnce() {
  int64_t id;
  absl::Duration wait;
  {
    absl::MutexLock lock(&mu_);
    id = lease_id_;
    // Never waits past the local end of the lease: a leader notices it at
    // once, not when a hung keep-alive gives up.
    wait = std::min(
        {options_.rpc_timeout, ttl_ / 2, std::max(absl::Milliseconds(10), LocalEnd() - Now())});
  }
  grpc::ClientContext context;
  context.set_deadline(EtcdDeadline(wait));
  auto stream = lease_->LeaseKeepAlive(&context);
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(id);
  etcdserverpb::LeaseKeepAliveResponse response;
  const bool answered = stream->Write(request) && stream->Read(&response);
  context.TryCancel();
  grpc::Status status = stream->Finish();
  if (!answered) {
    return absl::UnavailableError(
        absl::StrCat("lease keep-alive not answered: ", FromGrpcStatus(status).ToString()));
  }
  return response.ttl();
}

void LeaderElection::KeepAliveLoop() {
  while (!stopping()) {
    const absl::Time sent = Now();
    absl::StatusOr<int64_t> ttl = KeepAliveOnce();
    absl::Duration period;
    bool expired;
    {
      absl::MutexLock lock(&mu_);
      if (ttl.ok() && *ttl > 0) {
        ttl_ = absl::Seconds(*ttl);
        lease_end_ = sent + ttl_;
      }
      period = ttl.ok() ? ttl_ / 4 : std::min(ttl_ / 4, kRetryPause);
      expired = (ttl.ok() && *ttl <= 0) || Now() >= LocalEnd();
    }
    if (expired) {
      const absl::Status why = absl::AbortedError(
          ttl.ok() ? "etcd says the leader lease is gone (expired or revoked)"
                   : absl::StrCat("the leader lease could not be renewed before it ran out (",
                                  ttl.status().message(), ")"));
      if (!Lost(why)) {
        // A candidate: its key, if any, went with the lease; a new lease
        // for its next campaign.
        absl::Status granted = GrantLease(options_.rpc_timeout);
        if (!granted.ok()) period = kRetryPause;
      }
    }
    absl::MutexLock lock(&mu_);
    if (lost_) return;
    const absl::Duration wait =
        std::max(absl::ZeroDuration(), std::min(sent + period, LocalEnd()) - Now());
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), wait);
  }
}

absl::Status LeaderElection::CheckLeading() const {
  absl::MutexLock lock(&mu_);
  if (leading_ && Now() < LocalEnd()) return absl::OkStatus();
  return absl::UnavailableError(
      "this coordinator's leadership lease ran out (it may have been paused or cut off from "
      "etcd); another coordinator may lead: retry with the coordinator list");
}

bool LeaderElection::Lost(const absl::Status& why) {
  {
    absl::MutexLock lock(&mu_);
    if (!leading_) return false;
    lost_ = true;
    leading_ = false;
  }
  DDP_LOG(ERROR) << "leader election: " << why.message();
  if (options_.on_lost) options_.on_lost(why);
  return true;
}

absl::StatusOr<etcdserverpb::TxnResponse> LeaderElection::TryCreate() {
  etcdserverpb::TxnRequest txn;
  etcdserverpb::Compare* absent = txn.add_compare();
  absent->set_key(key_);
  absent->set_result(etcdserverpb::Compare::EQUAL);
  absent->set_target(etcdserverpb::Compare::CREATE);
  absent->set_create_revision(0);
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(key_);
  put->set_value(options_.self.SerializeAsString());
  {
    absl::MutexLock lock(&mu_);
    put->set_lease(lease_id_);
  }
  txn.add_failure()->mutable_request_range()->set_key(key_);
  etcdserverpb::TxnResponse response;
  grpc::ClientContext context;
  context.set_deadline(EtcdDeadline(options_.rpc_timeout));
  grpc::Status status = kv_->Txn(&context, txn, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::Status LeaderElection::WatchLeader(const etcdserverpb::KeyValue& kv) {
  if (options_.on_leader) options_.on_leader(ParseInfo(kv.value()));
  grpc::ClientContext context;
  context.set_deadline(EtcdDeadline(kWatchRenewal));
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || lost_) return absl::CancelledError("stopping");
    watch_context_ = &context;
  }
  auto stream = watch_->Watch(&context);
  etcdserverpb::WatchRequest request;
  request.mutable_create_request()->set_key(key_);
  request.mutable_create_request()->set_start_revision(kv.mod_revision() + 1);
  bool deleted = false;
  if (stream->Write(request)) {
    etcdserverpb::WatchResponse response;
    while (!deleted && stream->Read(&response)) {
      if (response.canceled()) break;
      for (const etcdserverpb::Event& event : response.events()) {
        if (event.type() == etcdserverpb::Event::DELETE) {
          deleted = true;
          break;
        }
        if (options_.on_leader) options_.on_leader(ParseInfo(event.kv().value()));
      }
    }
  }
  context.TryCancel();
  stream->Finish();
  absl::MutexLock lock(&mu_);
  watch_context_ = nullptr;
  if (deleted && options_.on_leader) options_.on_leader(v1::CoordinatorInfo());
  return absl::OkStatus();
}

absl::Status LeaderElection::Campaign() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return absl::CancelledError("the election was stopped");
      if (lost_) return absl::AbortedError("the lease of this candidate was lost");
    }
    absl::StatusOr<etcdserverpb::TxnResponse> response = TryCreate();
    if (!response.ok()) {
      DDP_LOG(WARNING) << "leader election: cannot reach etcd (" << response.status()
                       << "); retrying";
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), kRetryPause);
      continue;
    }
    int64_t created = 0;
    if (response->succeeded()) {
      created = response->header().revision();
    } else if (response->responses_size() > 0 &&
               response->responses(0).response_range().kvs_size() > 0) {
      const etcdserverpb::KeyValue& kv = response->responses(0).response_range().kvs(0);
      absl::MutexLock lock(&mu_);
      // Ours already: an earlier attempt whose answer was lost created it.
      if (kv.lease() == lease_id_) created = kv.create_revision();
    }
    if (created != 0) {
      absl::MutexLock lock(&mu_);
      if (lost_) return absl::AbortedError("the lease of this candidate was lost");
      leading_ = true;
      fence_revision_ = created;
      return absl::OkStatus();
    }
    if (response->responses_size() > 0 && response->responses(0).response_range().kvs_size() > 0) {
      WatchLeader(response->responses(0).response_range().kvs(0)).IgnoreError();
    }
  }
}

storage::EtcdFence LeaderElection::fence() const {
  absl::MutexLock lock(&mu_);
  return storage::EtcdFence{key_, fence_revision_};
}

absl::Duration LeaderElection::lease_ttl() const {
  absl::MutexLock lock(&mu_);
  return ttl_;
}

void LeaderElection::Resign() {
  int64_t id;
  {
    absl::MutexLock lock(&mu_);
    id = lease_id_;
    leading_ = false;
  }
  // Revoking the lease deletes the leader key with it.
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(id);
  etcdserverpb::LeaseRevokeResponse response;
  grpc::ClientContext context;
  context.set_deadline(EtcdDeadline(options_.rpc_timeout));
  grpc::Status status = lease_->LeaseRevoke(&context, request, &response);
  if (!status.ok()) {
    DDP_LOG(WARNING) << "leader election: could not resign (" << FromGrpcStatus(status)
                     << "); the others take over when the lease expires";
  }
}

void LeaderElection::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (watch_context_ != nullptr) watch_context_->TryCancel();
  }
  if (keepalive_.joinable()) keepalive_.join();
}

}  // namespace ddp::ha
