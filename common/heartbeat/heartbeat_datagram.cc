// SHA-256's block interface (SHA256_Init/Update/Final) is deprecated in
// OpenSSL 3 in favour of EVP, whose per-call provider dispatch costs more than
// the two blocks of a datagram's MAC; it is still part of OpenSSL 3's API.
#define OPENSSL_SUPPRESS_DEPRECATED
#include "common/heartbeat/heartbeat_datagram.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cstring>

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

constexpr size_t kBlockSize = 64;  // SHA-256's

// `state` after hashing the key XOR `pad`, padded to one block (RFC 2104).
void AbsorbPaddedKey(absl::string_view key, unsigned char pad, SHA256_CTX* state) {
  unsigned char block[kBlockSize];
  std::memset(block, pad, sizeof(block));
  for (size_t i = 0; i < key.size(); ++i) block[i] ^= static_cast<unsigned char>(key[i]);
  DDP_CHECK(SHA256_Init(state) == 1 && SHA256_Update(state, block, sizeof(block)) == 1)
      << "SHA-256 failed";
  OPENSSL_cleanse(block, sizeof(block));
}

}  // namespace

DatagramKey::DatagramKey(absl::string_view key) {
  DDP_CHECK(key.size() == kKeySize) << "heartbeat key of " << key.size() << " bytes";
  static_assert(kKeySize <= kBlockSize, "a longer key would be hashed first (RFC 2104)");
  AbsorbPaddedKey(key, 0x36, &inner_);
  AbsorbPaddedKey(key, 0x5c, &outer_);
}

DatagramKey::~DatagramKey() {
  OPENSSL_cleanse(&inner_, sizeof(inner_));
  OPENSSL_cleanse(&outer_, sizeof(outer_));
}

void DatagramKey::Sign(const unsigned char* signed_bytes, unsigned char* mac) const {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256_CTX inner = inner_;
  SHA256_CTX outer = outer_;
  DDP_CHECK(SHA256_Update(&inner, signed_bytes, kSignedSize) == 1 &&
            SHA256_Final(digest, &inner) == 1 &&
            SHA256_Update(&outer, digest, sizeof(digest)) == 1 && SHA256_Final(digest, &outer) == 1)
      << "HMAC-SHA256 failed";
  std::memcpy(mac, digest, kMacSize);
  OPENSSL_cleanse(&inner, sizeof(inner));
  OPENSSL_cleanse(&outer, sizeof(outer));
}

Datagram EncodeDatagram(const DatagramFields& fields, absl::string_view key) {
  DatagramKey prepared(key);
  return EncodeDatagram(fields, prepared);
}

Datagram EncodeDatagram(const DatagramFields& fields, const DatagramKey& key) {
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
                                              const DatagramKey& key) {
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
