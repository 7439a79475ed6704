#include "coordinator/storage/etcd/etcd_kv_records.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace ddp::storage {
namespace {

namespace pb = ::ddp::state::v1;

bool IsHex(absl::string_view text) {
  for (char c : text) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return text.size() % 2 == 0;
}

}  // namespace

std::string EtcdKvKeyName(const std::string& prefix, const std::string& ns,
                          const std::string& key) {
  return absl::StrCat(prefix, "k/", absl::BytesToHexString(ns), "/", absl::BytesToHexString(key));
}

std::string EtcdLeaseKeyName(const std::string& prefix, kv::LeaseId id) {
  return prefix + absl::StrFormat("l/%016x", id);
}

std::optional<std::pair<std::string, std::string>> ParseEtcdKvKeyName(const std::string& prefix,
                                                                      const std::string& name) {
  absl::string_view rest(name);
  if (!absl::ConsumePrefix(&rest, prefix) || !absl::ConsumePrefix(&rest, "k/")) return std::nullopt;
  const size_t slash = rest.find('/');
  if (slash == absl::string_view::npos) return std::nullopt;
  const absl::string_view ns = rest.substr(0, slash), key = rest.substr(slash + 1);
  if (!IsHex(ns) || !IsHex(key)) return std::nullopt;
  return std::make_pair(absl::HexStringToBytes(ns), absl::HexStringToBytes(key));
}

pb::KeyValueRecord ToKeyValueRecord(const kv::KeyValue& kv) {
  pb::KeyValueRecord r;
  r.set_ns(kv.ns);
  r.set_key(kv.key);
  r.set_value(kv.value);
  r.set_create_revision(kv.create_revision);
  r.set_mod_revision(kv.mod_revision);
  r.set_version(kv.version);
  r.set_lease(kv.lease);
  return r;
}

kv::KeyValue FromKeyValueRecord(pb::KeyValueRecord&& r) {
  return kv::KeyValue{std::move(*r.mutable_ns()),
                      std::move(*r.mutable_key()),
                      std::move(*r.mutable_value()),
                      r.create_revision(),
                      r.mod_revision(),
                      r.version(),
                      r.lease()};
}

EtcdKvView::EtcdKvView(std::string prefix)
    : prefix_(std::move(prefix)), keys_part_(prefix_ + "k/"), leases_part_(prefix_ + "l/") {}

bool EtcdKvView::Takes(const std::string& key) const {
  return absl::StartsWith(key, keys_part_) || absl::StartsWith(key, leases_part_);
}

void EtcdKvView::Damaged(const std::string& key, const char* what) {
  if (!damage_.ok()) return;
  damage_ = absl::DataLossError(absl::StrCat("etcd state store: ", what, " (etcd key '",
                                             absl::CHexEscape(key.substr(0, 128)),
                                             "'): the keys were damaged or written by another "
                                             "program: restore them from a backup"));
}

void EtcdKvView::Put(const std::string& key, std::string value) {
  if (absl::StartsWith(key, keys_part_)) {
    pb::KeyValueRecord record;
    if (!record.ParseFromString(value)) return Damaged(key, "a key record does not decode");
    keys_.Upsert(FromKeyValueRecord(std::move(record)));
    return;
  }
  pb::LeaseRecord lease;
  if (!lease.ParseFromString(value)) return Damaged(key, "a lease record does not decode");
  leases_[lease.id()] = kv::LeaseRecord{lease.id(), lease.ttl_ms()};
}

void EtcdKvView::Delete(const std::string& key) {
  if (absl::StartsWith(key, keys_part_)) {
    std::optional<std::pair<std::string, std::string>> name = ParseEtcdKvKeyName(prefix_, key);
    if (!name) return Damaged(key, "a key's name does not decode");
    keys_.Erase(name->first, name->second);
    return;
  }
  const char* id_text = key.c_str() + leases_part_.size();
  char* end = nullptr;
  const unsigned long long id = std::strtoull(id_text, &end, 16);
  if (end == id_text || *end != '\0') return Damaged(key, "a lease's name does not decode");
  leases_.erase(static_cast<kv::LeaseId>(id));
}

void EtcdKvView::Settle() { keys_.IndexAll(); }

}  // namespace ddp::storage
