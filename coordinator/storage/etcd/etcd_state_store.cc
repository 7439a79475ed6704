#include "coordinator/storage/etcd/etcd_state_store.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/storage/etcd/etcd_channel.h"
#include "coordinator/storage/etcd/etcd_kv_records.h"
#include "coordinator/storage/job_record_codec.h"
#include "coordinator/storage/write_batch_checks.h"
#include "ddp/state/v1/records.pb.h"

namespace ddp::storage {
namespace {

namespace pb = ::ddp::state::v1;
using rendezvous::JobChanges;
using rendezvous::JobCounters;
using rendezvous::JobRecord;
using rendezvous::JobSnapshot;

// The cluster's quarantine policy (v1::QuarantinePolicy), under the prefix.
constexpr char kQuarantinePolicyKey[] = "p/quarantine";

// One attempt of a transaction; lost answers are retried up to the timeout.
constexpr absl::Duration kAttemptTimeout = absl::Seconds(1);
constexpr absl::Duration kRetryPause = absl::Milliseconds(100);

std::string Hex(absl::string_view bytes) { return absl::BytesToHexString(bytes); }

absl::Status DataLoss(absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("etcd state store: ", what,
                   ". The keys were damaged or written by another "
                   "program: restore them from a backup (etcdctl snapshot)"));
}

// An RPC failure of a transaction: whether it was applied is not known.
absl::Status TxnFailure(const grpc::Status& status) {
  const absl::Status s = FromGrpcStatus(status);
  if (s.code() == absl::StatusCode::kInvalidArgument) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd refused the transaction (", s.message(),
                     "); a batch must fit etcd's --max-txn-ops and --max-request-bytes"));
  }
  return absl::UnknownError(absl::StrCat("the outcome of an etcd transaction is unknown (",
                                         s.ToString(), "); read before retrying"));
}

// The key of event `index` of the job whose events are under `events`.
std::string EventKey(const std::string& events, int64_t index) {
  return events + absl::StrFormat("%016x", std::max<int64_t>(0, index));
}

// `ranges` (to delete) merged, less every key `writes` puts: etcd refuses a
// transaction that puts a key inside a range it deletes.
std::vector<std::pair<std::string, std::string>> OutsidePuts(
    std::vector<std::pair<std::string, std::string>> ranges,
    const std::map<std::string, std::optional<std::string>>& writes) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<std::string, std::string>> merged;
  for (auto& range : ranges) {
    if (range.first >= range.second) continue;
    if (!merged.empty() && range.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, range.second);
    } else {
      merged.push_back(std::move(range));
    }
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [from, to] : merged) {
    std::string start = from;
    for (auto it = writes.lower_bound(from); it != writes.end() && it->first < to; ++it) {
      if (!it->second) continue;  // a delete inside: harmless
      if (start < it->first) out.emplace_back(start, it->first);
      start = it->first + std::string(1, '\0');
    }
    if (start < to) out.emplace_back(start, to);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdStateStore>> EtcdStateStore::Open(const std::string& endpoint,
                                                                     const std::string& prefix,
                                                                     absl::Duration timeout) {
  EtcdStateStoreOptions options;
  options.timeout = timeout;
  return Open(OpenEtcdChannel({endpoint}), prefix, std::move(options));
}

absl::StatusOr<std::unique_ptr<EtcdStateStore>> EtcdStateStore::Open(
    std::shared_ptr<grpc::Channel> channel, const std::string& prefix,
    EtcdStateStoreOptions options) {
  std::unique_ptr<EtcdStateStore> store(new EtcdStateStore(
      etcdserverpb::KV::NewStub(channel), absl::StrCat(prefix, "/"), std::move(options)));
  DDP_RETURN_IF_ERROR(store->Init());
  return store;
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdStateStore::RangePage(
    const std::string& from, const std::string& end) const {
  etcdserverpb::RangeRequest request;
  request.set_key(from);
  request.set_range_end(end);
  request.set_limit(1000);
  etcdserverpb::RangeResponse response;
  grpc::ClientContext context;
  context.set_deadline(EtcdDeadline(timeout_));
  grpc::Status status = stub_->Range(&context, request, &response);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot read from etcd: ", FromGrpcStatus(status).ToString()));
  }
  return response;
}

absl::StatusOr<std::vector<etcdserverpb::KeyValue>> EtcdStateStore::RangePrefix(
    const std::string& prefix) const {
  std::vector<etcdserverpb::KeyValue> out;
  std::string from = prefix;
  const std::string end = EtcdPrefixEnd(prefix);
  while (true) {
    DDP_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse response, RangePage(from, end));
    for (const etcdserverpb::KeyValue& kv : response.kvs()) out.push_back(kv);
    if (!response.more() || response.kvs_size() == 0) return out;
    from = response.kvs(response.kvs_size() - 1).key() + std::string(1, '\0');
  }
}

EtcdPrefixMirrorOptions EtcdStateStore::MirrorOptions(const std::string& prefix) {
  EtcdPrefixMirrorOptions options;
  options.prefix = absl::StrCat(prefix, "/");
  options.skip = {absl::StrCat(prefix, "/e/")};
  options.new_view = [kv_prefix = options.prefix] {
    return std::make_unique<EtcdKvView>(kv_prefix);
  };
  return options;
}

absl::StatusOr<std::unique_ptr<EtcdStateStore>> EtcdStateStore::OpenFromMirror(
    std::shared_ptr<grpc::Channel> channel, const std::string& prefix,
    EtcdStateStoreOptions options, EtcdPrefixMirror& mirror, absl::Duration catch_up) {
  std::unique_ptr<EtcdStateStore> store(new EtcdStateStore(
      etcdserverpb::KV::NewStub(channel), absl::StrCat(prefix, "/"), std::move(options)));
  const std::string meta_key = store->prefix_ + "m/meta";
  DDP_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse meta,
                       store->RangePage(meta_key, meta_key + std::string(1, '\0')));
  if (meta.kvs_size() == 0) {  // nothing committed yet: nothing to load either
    mirror.Stop();
    DDP_RETURN_IF_ERROR(store->Init());
    return store;
  }
  const etcdserverpb::KeyValue& last = meta.kvs(0);
  DDP_ASSIGN_OR_RETURN(EtcdPrefixSnapshot snapshot, mirror.TakeAt(last.mod_revision(), catch_up));
  auto held = snapshot.keys.find(meta_key);
  if (held == snapshot.keys.end() || held->second.mod_revision != last.mod_revision() ||
      held->second.value != last.value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the mirror at etcd revision ", snapshot.revision, " holds ",
                     held == snapshot.keys.end()
                         ? std::string("no meta key")
                         : absl::StrCat("the meta key of revision ", held->second.mod_revision),
                     ", etcd the one of revision ", last.mod_revision()));
  }
  absl::MutexLock lock(&store->mu_);
  DDP_RETURN_IF_ERROR(store->InitFrom(snapshot));
  if (auto* kv = dynamic_cast<EtcdKvView*>(snapshot.view.get())) {
    snapshot.view.release();
    store->warm_kv_.reset(kv);
  }
  store->warm_ = std::move(snapshot);
  return store;
}

absl::Status EtcdStateStore::Init() {
  EtcdPrefixSnapshot stored;
  for (const char* part : {"m/", "j/", "n/", "r/", "c/", "h/", "p/"}) {
    DDP_ASSIGN_OR_RETURN(std::vector<etcdserverpb::KeyValue> kvs, RangePrefix(prefix_ + part));
    for (etcdserverpb::KeyValue& kv : kvs) {
      stored.keys[kv.key()] = EtcdMirroredValue{std::move(*kv.mutable_value()), kv.mod_revision()};
    }
  }
  absl::MutexLock lock(&mu_);
  return InitFrom(stored);
}

absl::Status EtcdStateStore::InitFrom(EtcdPrefixSnapshot& stored) {
  if (auto meta = stored.keys.find(prefix_ + "m/meta"); meta != stored.keys.end()) {
    pb::KvMetaRecord record;
    if (!record.ParseFromString(meta->second.value))
      return DataLoss("the meta record does not decode");
    revision_ = record.revision();
    compacted_ = record.compacted_revision();
    next_lease_id_ = record.next_lease_id();
    meta_mod_revision_ = meta->second.mod_revision;
  }
  for (const char* part : {"j/", "n/", "r/", "h/", "p/"}) {
    const std::string from = prefix_ + part;
    auto it = stored.keys.lower_bound(from);
    while (it != stored.keys.end() && absl::StartsWith(it->first, from)) {
      job_keys_.emplace_hint(job_keys_.end(), it->first, std::move(it->second.value));
      it = stored.keys.erase(it);
    }
  }
  if (auto counts = stored.keys.find(prefix_ + "c/events"); counts != stored.keys.end()) {
    absl::StatusOr<rendezvous::JobEventCounts> decoded = DecodeEventCounts(counts->second.value);
    if (!decoded.ok()) return DataLoss(decoded.status().message());
    event_counts_ = *std::move(decoded);
  }
  return absl::OkStatus();
}

absl::Status EtcdStateStore::ForEachStored(
    const std::string& part,
    const std::function<absl::Status(const std::string& key, const std::string& value)>& f) const {
  const std::string from = prefix_ + part;
  if (warm_) {
    for (auto it = warm_->keys.lower_bound(from);
         it != warm_->keys.end() && absl::StartsWith(it->first, from); ++it) {
      DDP_RETURN_IF_ERROR(f(it->first, it->second.value));
    }
    return absl::OkStatus();
  }
  DDP_ASSIGN_OR_RETURN(std::vector<etcdserverpb::KeyValue> kvs, RangePrefix(from));
  for (const etcdserverpb::KeyValue& kv : kvs) DDP_RETURN_IF_ERROR(f(kv.key(), kv.value()));
  return absl::OkStatus();
}

std::string EtcdStateStore::NewWriterId() {
  std::random_device device;
  return absl::StrFormat("%08x%08x", device(), device());
}

std::string EtcdStateStore::MetaValue(const std::string& commit) const {
  pb::KvMetaRecord record;
  record.set_revision(revision_);
  record.set_compacted_revision(compacted_);
  record.set_next_lease_id(next_lease_id_);
  record.set_last_commit(commit);
  return record.SerializeAsString();
}

void EtcdStateStore::Fatal(const absl::Status& why) {
  if (!fatal_ && options_.on_fatal) options_.on_fatal(why);
  fatal_ = true;
}

absl::StatusOr<bool> EtcdStateStore::WasApplied(const std::string& commit) {
  DDP_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse meta,
                       RangePage(prefix_ + "m/meta", prefix_ + "m/meta" + std::string(1, '\0')));
  if (meta.kvs_size() == 0) return false;
  pb::KvMetaRecord record;
  if (!record.ParseFromString(meta.kvs(0).value()))
    return DataLoss("the meta record does not decode");
  if (record.last_commit() != commit) return false;
  meta_mod_revision_ = meta.kvs(0).mod_revision();
  return true;
}

absl::Status EtcdStateStore::Txn(
    const std::map<std::string, std::optional<std::string>>& writes,
    const std::vector<std::pair<std::string, std::string>>& delete_ranges) {
  etcdserverpb::TxnRequest txn;
  etcdserverpb::Compare* guard = txn.add_compare();
  guard->set_key(prefix_ + "m/meta");
  guard->set_result(etcdserverpb::Compare::EQUAL);
  if (meta_mod_revision_ == 0) {
    guard->set_target(etcdserverpb::Compare::VERSION);
    guard->set_version(0);
  } else {
    guard->set_target(etcdserverpb::Compare::MOD);
    guard->set_mod_revision(meta_mod_revision_);
  }
  if (options_.fence) {
    etcdserverpb::Compare* leads = txn.add_compare();
    leads->set_key(options_.fence->key);
    leads->set_result(etcdserverpb::Compare::EQUAL);
    leads->set_target(etcdserverpb::Compare::CREATE);
    leads->set_create_revision(options_.fence->create_revision);
  }
  for (const auto& [key, value] : writes) {
    etcdserverpb::RequestOp* op = txn.add_success();
    if (value) {
      op->mutable_request_put()->set_key(key);
      op->mutable_request_put()->set_value(*value);
    } else {
      op->mutable_request_delete_range()->set_key(key);
    }
  }
  for (const auto& [from, to] : delete_ranges) {
    etcdserverpb::DeleteRangeRequest* op = txn.add_success()->mutable_request_delete_range();
    op->set_key(from);
    op->set_range_end(to);
  }
  // The meta key last: a standby's mirror that holds it holds the whole
  // transaction (OpenFromMirror relies on it).
  etcdserverpb::RequestOp* meta = txn.add_success();
  meta->mutable_request_put()->set_key(prefix_ + "m/meta");
  const std::string commit = absl::StrCat(writer_id_, "/", ++commits_);
  meta->mutable_request_put()->set_value(MetaValue(commit));
  // An answer lost (an etcd member died, its raft leader changed) leaves the
  // outcome unknown: the same transaction is sent again. It applies at most
  // once (the meta guard), and the meta key says whether an earlier attempt
  // did (it names its commit).
  const absl::Time give_up = absl::Now() + timeout_;
  grpc::Status failure;
  while (true) {
    etcdserverpb::TxnResponse response;
    grpc::ClientContext context;
    context.set_deadline(EtcdDeadline(std::min(kAttemptTimeout, give_up - absl::Now())));
    grpc::Status status = stub_->Txn(&context, txn, &response);
    if (status.ok() && response.succeeded()) {
      meta_mod_revision_ = response.header().revision();
      break;
    }
    if (status.ok()) {
      if (!failure.ok()) {
        absl::StatusOr<bool> applied = WasApplied(commit);
        if (applied.ok() && *applied) break;
      }
      const absl::Status refused = absl::FailedPreconditionError(absl::StrCat(
          options_.fence ? "this coordinator no longer leads (its election key was deleted or "
                           "re-created) or another writer changed "
                         : "another writer changed ",
          prefix_, " in etcd since this coordinator's last commit; nothing was written"));
      Fatal(refused);
      return refused;
    }
    const absl::Status s = TxnFailure(status);
    if (s.code() == absl::StatusCode::kInvalidArgument) return s;  // refused: not applied
    failure = status;
    if (absl::Now() >= give_up) {
      Fatal(s);
      return s;
    }
    absl::SleepFor(kRetryPause);
  }
  return absl::OkStatus();
}

absl::Status EtcdStateStore::CommitState(const commit::StateBatch& batch) {
  if (batch.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  warm_.reset();  // etcd holds more than the mirror's keys from now on
  warm_kv_.reset();
  std::map<std::string, std::optional<std::string>> writes;
  // The job part, on a copy of the job keys; the differences are written.
  std::map<std::string, std::string> jobs = job_keys_;
  // Events: written as they come (never kept in memory); deleted by range.
  std::map<std::string, std::string> event_puts;
  std::vector<std::pair<std::string, std::string>> event_deletes;
  rendezvous::JobEventCounts counts = event_counts_;
  for (const JobChanges& c : batch.jobs) {
    if (c.job && !c.job_removed && c.job->job_id() != c.job_id) {
      return absl::InvalidArgumentError(
          absl::StrCat("JobChanges for job '", absl::CHexEscape(c.job_id),
                       "' carries a record of another job; they must name the same job"));
    }
    const std::string job_key = prefix_ + "j/" + Hex(c.job_id);
    const std::string nodes = prefix_ + "n/" + Hex(c.job_id) + "/";
    const std::string runs = prefix_ + "r/" + Hex(c.job_id) + "/";
    auto erase_from = [&jobs](const std::string& from, const std::string& to) {
      jobs.erase(jobs.lower_bound(from), jobs.lower_bound(to));
    };
    auto run_key = [&runs](int run) { return runs + absl::StrFormat("%08x", run); };
    const std::string events = prefix_ + "v/" + Hex(c.job_id) + "/";
    if (c.job_removed) {
      jobs.erase(job_key);
      erase_from(nodes, EtcdPrefixEnd(nodes));
      event_puts.erase(event_puts.lower_bound(events),
                       event_puts.lower_bound(EtcdPrefixEnd(events)));
      event_deletes.emplace_back(events, EtcdPrefixEnd(events));
      if (!c.archived_run) {  // DeleteJob: the past runs go too
        erase_from(runs, EtcdPrefixEnd(runs));
        continue;
      }
      erase_from(runs, run_key(c.keep_runs_from));
      JobRecord run = *c.archived_run;
      run.set_job_id(c.job_id);
      jobs[run_key(run.run())] = EncodeStoredJob(run, rendezvous::CountersOf(run));
      continue;
    }
    if (c.job) {
      jobs[job_key] = EncodeStoredJob(*c.job, c.counters.value_or(rendezvous::CountersOf(*c.job)));
    } else {
      auto it = jobs.find(job_key);
      if (it == jobs.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("node changes for job '", absl::CHexEscape(c.job_id),
                         "' which has no record; the first batch of a job must carry its record"));
      }
      if (c.counters) {
        DDP_ASSIGN_OR_RETURN(JobRecord record, DecodeStoredJob(it->second));
        it->second = EncodeStoredJob(record, *c.counters);
      }
    }
    // Removals first: a batch that removes and re-adds a node ends with the node.
    for (const std::string& node : c.removed_nodes) jobs.erase(nodes + Hex(node));
    for (const rendezvous::NodeRecord& node : c.upserted_nodes) {
      jobs[nodes + Hex(node.node_id())] = EncodeNodeRecord(node);
    }
    for (const rendezvous::JobEvent& event : c.appended_events) {
      event_puts[EventKey(events, event.index())] = EncodeJobEvent(event);
      counts.Add(event);
    }
    if (c.drop_events_before > 0) {
      const std::string below = EventKey(events, c.drop_events_before);
      event_puts.erase(event_puts.lower_bound(events), event_puts.lower_bound(below));
      event_deletes.emplace_back(events, below);
    }
  }
  for (auto& [key, value] : event_puts) writes[key] = std::move(value);
  if (!(counts == event_counts_)) writes[prefix_ + "c/events"] = EncodeEventCounts(counts);
  for (const auto& [key, value] : jobs) {
    auto old = job_keys_.find(key);
    if (old == job_keys_.end() || old->second != value) writes[key] = value;
  }
  for (const auto& [key, value] : job_keys_) {
    if (jobs.count(key) == 0) writes[key] = std::nullopt;
  }
  // The fleet's node records, whole.
  for (const v1::Node& node : batch.nodes) {
    const std::string key = prefix_ + "h/" + Hex(node.node_id());
    std::string value = node.SerializeAsString();
    auto old = job_keys_.find(key);
    if (old == job_keys_.end() || old->second != value) writes[key] = value;
    jobs[key] = std::move(value);
  }
  if (batch.quarantine_policy) {
    const std::string key = prefix_ + kQuarantinePolicyKey;
    std::string value = batch.quarantine_policy->SerializeAsString();
    auto old = job_keys_.find(key);
    if (old == job_keys_.end() || old->second != value) writes[key] = value;
    jobs[key] = std::move(value);
  }
  // The KV part.
  const kv::Revision old_revision = revision_;
  const kv::LeaseId old_next_lease = next_lease_id_;
  if (batch.kv) {
    const kv::KvWriteBatch& k = *batch.kv;
    DDP_RETURN_IF_ERROR(kv::CheckWriteBatch(k, revision_));
    for (const kv::KeyValue& kv : k.upserts) {
      writes[EtcdKvKeyName(prefix_, kv.ns, kv.key)] = ToKeyValueRecord(kv).SerializeAsString();
    }
    for (const auto& [ns, key] : k.deletes) writes[EtcdKvKeyName(prefix_, ns, key)] = std::nullopt;
    int64_t seq = 0;
    for (size_t i = 0; i < k.events.size(); ++i) {
      const kv::Event& event = k.events[i];
      seq = (i > 0 && k.events[i - 1].revision() == event.revision()) ? seq + 1 : 0;
      pb::EventRecord record;
      record.set_type(static_cast<int32_t>(event.type));
      *record.mutable_kv() = ToKeyValueRecord(event.kv);
      writes[prefix_ + absl::StrFormat("e/%016x%08x", event.revision(), seq)] =
          record.SerializeAsString();
    }
    for (const kv::LeaseRecord& lease : k.lease_grants) {
      pb::LeaseRecord record;
      record.set_id(lease.id);
      record.set_ttl_ms(lease.ttl_ms);
      writes[EtcdLeaseKeyName(prefix_, lease.id)] = record.SerializeAsString();
    }
    for (kv::LeaseId id : k.lease_revokes) {
      writes[EtcdLeaseKeyName(prefix_, id)] = std::nullopt;
    }
    revision_ = k.revision;
    if (k.next_lease_id != 0) next_lease_id_ = k.next_lease_id;
  }
  absl::Status status = Txn(writes, OutsidePuts(std::move(event_deletes), writes));
  if (!status.ok()) {
    revision_ = old_revision;
    next_lease_id_ = old_next_lease;
    return status;
  }
  job_keys_ = std::move(jobs);
  event_counts_ = std::move(counts);
  return absl::OkStatus();
}

absl::StatusOr<kv::PersistedKvState> EtcdStateStore::Load() {
  kv::PersistedKvState state;
  const absl::Time start = absl::Now();
  absl::MutexLock lock(&mu_);
  state.revision = revision_;
  state.compacted_revision = compacted_;
  state.next_lease_id = next_lease_id_;
  const char* source = "read from etcd";
  if (warm_kv_ != nullptr) {  // the standby's: decoded and indexed already
    source = "taken from the standby's copy";
    DDP_RETURN_IF_ERROR(warm_kv_->damage());
    state.keys = std::move(warm_kv_->keys());
    for (auto& [id, lease] : warm_kv_->leases()) state.leases.push_back(lease);
    warm_kv_.reset();
  } else {
    if (warm_) source = "decoded from the mirror";
    pb::KeyValueRecord record;
    DDP_RETURN_IF_ERROR(ForEachStored("k/", [&](const std::string&, const std::string& value) {
      if (!record.ParseFromString(value)) return DataLoss("a key record does not decode");
      state.keys.Upsert(FromKeyValueRecord(std::move(record)));
      return absl::OkStatus();
    }));
    DDP_RETURN_IF_ERROR(ForEachStored("l/", [&](const std::string&, const std::string& value) {
      pb::LeaseRecord lease;
      if (!lease.ParseFromString(value)) return DataLoss("a lease record does not decode");
      state.leases.push_back(kv::LeaseRecord{lease.id(), lease.ttl_ms()});
      return absl::OkStatus();
    }));
  }
  DDP_LOG(INFO) << "etcd state store: " << state.keys.size() << " keys and " << state.leases.size()
                << " leases " << source << " in " << absl::FormatDuration(absl::Now() - start);
  return state;
}

absl::StatusOr<std::vector<kv::Event>> EtcdStateStore::ReadEvents(const std::string& ns,
                                                                  const std::string& prefix,
                                                                  kv::Revision from_revision,
                                                                  size_t max_events) {
  {
    absl::MutexLock lock(&mu_);
    DDP_RETURN_IF_ERROR(kv::CheckReadFrom(from_revision, compacted_));
  }
  std::vector<kv::Event> out;
  std::string from =
      prefix_ + absl::StrFormat("e/%016x%08x", std::max<kv::Revision>(0, from_revision), 0);
  const std::string end = EtcdPrefixEnd(prefix_ + "e/");
  while (out.size() < max_events) {
    DDP_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse response, RangePage(from, end));
    for (const etcdserverpb::KeyValue& kv : response.kvs()) {
      pb::EventRecord record;
      if (!record.ParseFromString(kv.value())) return DataLoss("an event record does not decode");
      if (record.kv().ns() != ns || !absl::StartsWith(record.kv().key(), prefix)) continue;
      out.push_back(kv::Event{static_cast<kv::EventType>(record.type()),
                              FromKeyValueRecord(std::move(*record.mutable_kv()))});
      if (out.size() == max_events) break;
    }
    if (!response.more() || response.kvs_size() == 0) break;
    from = response.kvs(response.kvs_size() - 1).key() + std::string(1, '\0');
  }
  return out;
}

absl::Status EtcdStateStore::Compact(kv::Revision revision) {
  absl::MutexLock lock(&mu_);
  DDP_RETURN_IF_ERROR(kv::CheckCompactRevision(revision, revision_));
  if (revision <= compacted_) return absl::OkStatus();
  warm_.reset();
  const kv::Revision old = compacted_;
  compacted_ = revision;
  absl::Status status =
      Txn({}, {{prefix_ + "e/", prefix_ + absl::StrFormat("e/%016x", revision + 1)}});
  if (!status.ok()) compacted_ = old;
  return status;
}

absl::StatusOr<std::vector<JobSnapshot>> EtcdStateStore::LoadAll() const {
  absl::MutexLock lock(&mu_);
  std::vector<JobSnapshot> out;
  std::map<std::string, size_t> index;  // hex job id -> snapshot
  const std::string jobs = prefix_ + "j/", nodes = prefix_ + "n/", runs = prefix_ + "r/";
  for (auto it = job_keys_.lower_bound(jobs);
       it != job_keys_.end() && absl::StartsWith(it->first, jobs); ++it) {
    DDP_ASSIGN_OR_RETURN(JobRecord record, DecodeStoredJob(it->second));
    index[it->first.substr(jobs.size())] = out.size();
    out.push_back(JobSnapshot{std::move(record), {}, {}});
  }
  // "HEX(job)/...": the snapshot of the job the key belongs to.
  auto owner = [&](const std::string& rest) -> absl::StatusOr<JobSnapshot*> {
    auto found = index.find(rest.substr(0, rest.find('/')));
    if (found == index.end()) return DataLoss("rows of a job without a record");
    return &out[found->second];
  };
  for (auto it = job_keys_.lower_bound(nodes);
       it != job_keys_.end() && absl::StartsWith(it->first, nodes); ++it) {
    DDP_ASSIGN_OR_RETURN(JobSnapshot * snapshot, owner(it->first.substr(nodes.size())));
    DDP_ASSIGN_OR_RETURN(rendezvous::NodeRecord node, DecodeNodeRecord(it->second));
    snapshot->nodes.push_back(std::move(node));
  }
  for (auto it = job_keys_.lower_bound(runs);
       it != job_keys_.end() && absl::StartsWith(it->first, runs); ++it) {
    DDP_ASSIGN_OR_RETURN(JobSnapshot * snapshot, owner(it->first.substr(runs.size())));
    DDP_ASSIGN_OR_RETURN(JobRecord run, DecodeStoredJob(it->second));
    snapshot->past_runs.push_back(std::move(run));
  }
  // Events are not kept in memory: read them (in key order: by job, then
  // index).
  const std::string events = prefix_ + "v/";
  DDP_RETURN_IF_ERROR(
      ForEachStored("v/", [&](const std::string& key, const std::string& value) -> absl::Status {
        DDP_ASSIGN_OR_RETURN(JobSnapshot * snapshot, owner(key.substr(events.size())));
        absl::StatusOr<rendezvous::JobEvent> event = DecodeJobEvent(value, snapshot->job.job_id());
        if (!event.ok()) return DataLoss(event.status().message());
        snapshot->events.push_back(*std::move(event));
        return absl::OkStatus();
      }));
  return out;
}

absl::StatusOr<rendezvous::JobEventCounts> EtcdStateStore::LoadEventCounts() const {
  absl::MutexLock lock(&mu_);
  return event_counts_;
}

absl::StatusOr<std::vector<v1::Node>> EtcdStateStore::LoadNodes() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Node> out;
  const std::string nodes = prefix_ + "h/";
  for (auto it = job_keys_.lower_bound(nodes);
       it != job_keys_.end() && absl::StartsWith(it->first, nodes); ++it) {
    v1::Node node;
    if (!node.ParseFromString(it->second)) {
      return DataLoss(absl::StrCat("the fleet record at ", it->first, " does not decode"));
    }
    out.push_back(std::move(node));
  }
  return out;
}

absl::StatusOr<std::optional<v1::QuarantinePolicy>> EtcdStateStore::LoadQuarantinePolicy() const {
  absl::MutexLock lock(&mu_);
  auto it = job_keys_.find(prefix_ + kQuarantinePolicyKey);
  if (it == job_keys_.end()) return std::nullopt;
  v1::QuarantinePolicy policy;
  if (!policy.ParseFromString(it->second)) {
    return DataLoss(absl::StrCat("the quarantine policy at ", it->first, " does not decode"));
  }
  return policy;
}

}  // namespace ddp::storage
