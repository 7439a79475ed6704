#include "common/heartbeat/heartbeat_datagram.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace ddp::heartbeat {
namespace {

constexpr size_t kSignedSize = 32;
constexpr size_t kMacSize = kDatagramSize - kSignedSize;
constexpr unsigned char kVersion = 1;

const char* Magic(DatagramKind kind) { return kind == DatagramKind::kHeartbeat ? "DDPh" : "DDPa"; }

void PutU64(unsigned char* at, uint64_t value) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<unsigned char>(value >> (8 * i));
}

uint64_t GetU64(const unsigned char* at) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(at[i]) << (8 * i);
  return value;
}

// HMAC with its digest looked up once per process.
EVP_MAC* HmacSha256() {
  static EVP_MAC* const mac = [] {
    EVP_MAC* fetched = EVP_MAC_fetch(nullptr, OSSL_MAC_NAME_HMAC, nullptr);
    DDP_CHECK(fetched != nullptr) << "OpenSSL has no HMAC";
    return fetched;
  }();
  return mac;
}

}  // namespace

DatagramKey::DatagramKey(absl::string_view key) : context_(EVP_MAC_CTX_new(HmacSha256())) {
  DDP_CHECK(key.size() == kKeySize) << "heartbeat key of " << key.size() << " bytes";
  DDP_CHECK(context_ != nullptr) << "EVP_MAC_CTX_new failed";
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_END};
  DDP_CHECK(EVP_MAC_init(context_, reinterpret_cast<const unsigned char*>(key.data()), key.size(),
                         params) == 1)
      << "HMAC-SHA256 key set-up failed";
}

DatagramKey::~DatagramKey() { EVP_MAC_CTX_free(context_); }

DatagramKey::DatagramKey(DatagramKey&& other) noexcept
    : context_(std::exchange(other.context_, nullptr)) {}

DatagramKey& DatagramKey::operator=(DatagramKey&& other) noexcept {
  if (this != &other) {
    EVP_MAC_CTX_free(context_);
    context_ = std::exchange(other.context_, nullptr);
  }
  return *this;
}

void DatagramKey::Sign(const unsigned char* signed_bytes, unsigned char* mac) {
  DDP_CHECK(context_ != nullptr) << "DatagramKey used after a move";
  unsigned char full[EVP_MAX_MD_SIZE];
  size_t length = 0;
  // A null key restarts the MAC from the key schedule computed once above.
  DDP_CHECK(EVP_MAC_init(context_, nullptr, 0, nullptr) == 1 &&
            EVP_MAC_update(context_, signed_bytes, kSignedSize) == 1 &&
            EVP_MAC_final(context_, full, &length, sizeof(full)) == 1 && length >= kMacSize)
      << "HMAC-SHA256 failed";
  std::memcpy(mac, full, kMacSize);
}

Datagram EncodeDatagram(const DatagramFields& fields, absl::string_view key) {
  DatagramKey prepared(key);
  return EncodeDatagram(fields, prepared);
}

Datagram EncodeDatagram(const DatagramFields& fields, DatagramKey& key) {
  Datagram d{};
  std::memcpy(d.data(), Magic(fields.kind), 4);
  d[4] = kVersion;
  d[5] = fields.flag ? 1 : 0;
  PutU64(&d[8], fields.session);
  PutU64(&d[16], fields.sequence);
  PutU64(&d[24], static_cast<uint64_t>(fields.generation));
  key.Sign(d.data(), &d[kSignedSize]);
  return d;
}

absl::StatusOr<uint64_t> PeekSession(absl::string_view bytes) {
  if (bytes.size() != kDatagramSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat datagram of ", bytes.size(), " bytes (want ", kDatagramSize, ")"));
  }
  return GetU64(reinterpret_cast<const unsigned char*>(bytes.data()) + 8);
}

absl::StatusOr<DatagramFields> DecodeDatagram(absl::string_view bytes, DatagramKind kind,
                                              absl::string_view key) {
  if (key.size() != kKeySize) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat key of ", key.size(), " bytes (want ", kKeySize, ")"));
  }
  DatagramKey prepared(key);
  return DecodeDatagram(bytes, kind, prepared);
}

absl::StatusOr<DatagramFields> DecodeDatagram(absl::string_view bytes, DatagramKind kind,
                                              DatagramKey& key) {
  if (bytes.size() != kDatagramSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat datagram of ", bytes.size(), " bytes (want ", kDatagramSize, ")"));
  }
  const auto* d = reinterpret_cast<const unsigned char*>(bytes.data());
  if (std::memcmp(d, Magic(kind), 4) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a heartbeat ", kind == DatagramKind::kAck ? "ack" : "datagram",
                     " (magic ", absl::CEscape(bytes.substr(0, 4)), ")"));
  }
  if (d[4] != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat datagram version ", d[4], " (this build speaks ", kVersion, ")"));
  }
  if (d[5] > 1 || d[6] != 0 || d[7] != 0) {
    return absl::InvalidArgumentError("heartbeat datagram with unknown flags or reserved bits set");
  }
  unsigned char mac[kMacSize];
  key.Sign(d, mac);
  if (CRYPTO_memcmp(mac, d + kSignedSize, kMacSize) != 0) {
    return absl::InvalidArgumentError("heartbeat datagram with a bad MAC");
  }
  DatagramFields fields;
  fields.kind = kind;
  fields.flag = d[5] == 1;
  fields.session = GetU64(d + 8);
  fields.sequence = GetU64(d + 16);
  fields.generation = static_cast<int64_t>(GetU64(d + 24));
  return fields;
}

std::string NewKey() {
  std::string key(kKeySize, '\0');
  DDP_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), kKeySize) == 1)
      << "RAND_bytes failed";
  return key;
}

}  // namespace ddp::heartbeat
