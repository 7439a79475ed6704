#include "common/heartbeat/heartbeat_datagram.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

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

void Mac(absl::string_view key, const unsigned char* data, unsigned char* out) {
  unsigned char full[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  DDP_CHECK(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data, kSignedSize, full,
                 &length) != nullptr)
      << "HMAC-SHA256 failed";
  std::memcpy(out, full, kMacSize);
}

}  // namespace

Datagram EncodeDatagram(const DatagramFields& fields, absl::string_view key) {
  DDP_CHECK(key.size() == kKeySize) << "heartbeat key of " << key.size() << " bytes";
  Datagram d{};
  std::memcpy(d.data(), Magic(fields.kind), 4);
  d[4] = kVersion;
  d[5] = fields.flag ? 1 : 0;
  PutU64(&d[8], fields.session);
  PutU64(&d[16], fields.sequence);
  PutU64(&d[24], static_cast<uint64_t>(fields.generation));
  Mac(key, d.data(), &d[kSignedSize]);
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
  if (bytes.size() != kDatagramSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat datagram of ", bytes.size(), " bytes (want ", kDatagramSize, ")"));
  }
  if (key.size() != kKeySize) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat key of ", key.size(), " bytes (want ", kKeySize, ")"));
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
  Mac(key, d, mac);
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
