#ifndef DDP_COORDINATOR_STORAGE_ETCD_ETCD_KV_RECORDS_H_
#define DDP_COORDINATOR_STORAGE_ETCD_ETCD_KV_RECORDS_H_

// The KV part of the etcd state store's prefix (see etcd_state_store.h for
// the whole layout):
//
//   PREFIX/k/HEX(ns)/HEX(key)    KeyValueRecord: a live key
//   PREFIX/l/ID16                LeaseRecord
//
// and EtcdKvView, which keeps that part decoded, as the KvStore serves it,
// while a standby's mirror follows the prefix: the new leader takes the keys
// over whole, so its promotion does not grow with the number of keys.

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "coordinator/kv/key_space.h"
#include "coordinator/kv/kv_types.h"
#include "coordinator/storage/etcd/etcd_prefix_mirror.h"
#include "ddp/state/v1/records.pb.h"

namespace ddp::storage {

// PREFIX/k/HEX(ns)/HEX(key) (`prefix` ends with '/').
std::string EtcdKvKeyName(const std::string& prefix, const std::string& ns, const std::string& key);
// PREFIX/l/ID16.
std::string EtcdLeaseKeyName(const std::string& prefix, kv::LeaseId id);
// The (namespace, key) of an EtcdKvKeyName under `prefix`; nullopt when it is
// not one.
std::optional<std::pair<std::string, std::string>> ParseEtcdKvKeyName(const std::string& prefix,
                                                                      const std::string& name);

state::v1::KeyValueRecord ToKeyValueRecord(const kv::KeyValue& kv);
// The strings are moved out of `record` (a load decodes every key).
kv::KeyValue FromKeyValueRecord(state::v1::KeyValueRecord&& record);

// What the KV part of a prefix holds at the mirror's revision, decoded.
// Made by the mirror (EtcdStateStore::MirrorOptions) for each snapshot and
// fed by its thread only; read once it is handed over (TakeAt).
class EtcdKvView final : public EtcdMirrorView {
 public:
  // `prefix` ends with '/'.
  explicit EtcdKvView(std::string prefix);

  bool Takes(const std::string& key) const override;
  void Put(const std::string& key, std::string value) override;
  void Delete(const std::string& key) override;
  // Orders the keys added since the last Settle, as the KvStore's first
  // range would (one answer's keys at a time, off the promotion's path).
  void Settle() override;
  size_t size() const override { return keys_.size() + leases_.size(); }

  // OK, or DATA_LOSS naming the first key whose record did not decode.
  const absl::Status& damage() const { return damage_; }
  kv::KeySpace& keys() { return keys_; }
  // Lease records by lease id.
  std::map<kv::LeaseId, kv::LeaseRecord>& leases() { return leases_; }

 private:
  void Damaged(const std::string& key, const char* what);

  const std::string prefix_;
  const std::string keys_part_;    // PREFIX/k/
  const std::string leases_part_;  // PREFIX/l/
  kv::KeySpace keys_;
  std::map<kv::LeaseId, kv::LeaseRecord> leases_;
  absl::Status damage_;
};

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_ETCD_ETCD_KV_RECORDS_H_
