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
static_assert(kSignedSize + kMacSize == kDatagramSize);
constexpr unsigned char kVersion = 1;

// What tells the kinds apart: the magic, a name for errors, and the flag
// bits each may set.
struct KindTraits {
  const char* magic;
  const char* name;
  unsigned char flags;
};

KindTraits Traits(DatagramKind kind) {
  switch (kind) {
    case DatagramKind::kHeartbeat:
      return {"DDPh", "datagram", 0x1};
    case DatagramKind::kAck:
      return {"DDPa", "ack", 0x3};
    case DatagramKind::kStates:
      return {"DDPs", "states datagram", 0x1};
  }
  return {"", "", 0};
}

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

void DatagramKey::Sign(const unsigned char* bytes, size_t size, unsigned char* mac) const {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256_CTX inner = inner_;
  SHA256_CTX outer = outer_;
  DDP_CHECK(SHA256_Update(&inner, bytes, size) == 1 && SHA256_Final(digest, &inner) == 1 &&
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
  std::memcpy(d.data(), Traits(fields.kind).magic, 4);
  d[4] = kVersion;
  d[5] = (fields.flag ? 1 : 0) | (fields.kind == DatagramKind::kAck && fields.states_taken ? 2 : 0);
  PutU64(&d[8], fields.session);
  PutU64(&d[16], fields.sequence);
  PutU64(&d[24], static_cast<uint64_t>(fields.generation));
  key.Sign(d.data(), kSignedSize, &d[kSignedSize]);
  return d;
}

std::optional<std::string> EncodeStatesDatagram(const DatagramFields& fields, uint64_t stream_mark,
                                                absl::string_view states, const DatagramKey& key) {
  if (states.size() > kMaxStatesPayload) return std::nullopt;
  std::string bytes(kStatesHeaderSize + states.size() + kMacSize, '\0');
  auto* d = reinterpret_cast<unsigned char*>(bytes.data());
  std::memcpy(d, Traits(DatagramKind::kStates).magic, 4);
  d[4] = kVersion;
  d[5] = fields.flag ? 1 : 0;
  d[6] = static_cast<unsigned char>(states.size());
  d[7] = static_cast<unsigned char>(states.size() >> 8);
  PutU64(d + 8, fields.session);
  PutU64(d + 16, fields.sequence);
  PutU64(d + 24, static_cast<uint64_t>(fields.generation));
  PutU64(d + 32, stream_mark);
  std::memcpy(d + kStatesHeaderSize, states.data(), states.size());
  key.Sign(d, kStatesHeaderSize + states.size(), d + kStatesHeaderSize + states.size());
  return bytes;
}

bool IsStatesDatagram(absl::string_view bytes) {
  return bytes.size() >= 4 &&
         std::memcmp(bytes.data(), Traits(DatagramKind::kStates).magic, 4) == 0;
}

absl::StatusOr<uint64_t> PeekSession(absl::string_view bytes) {
  const bool states_size =
      bytes.size() >= kStatesHeaderSize + kMacSize && bytes.size() <= kMaxStatesDatagramSize;
  if (bytes.size() != kDatagramSize && !(IsStatesDatagram(bytes) && states_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat datagram of ", bytes.size(), " bytes (want ", kDatagramSize,
                     ", or a states datagram of ", kStatesHeaderSize + kMacSize, " to ",
                     kMaxStatesDatagramSize, ")"));
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

namespace {

// Checks the magic, version and flags of a datagram of `kind` (`d` has at
// least 8 bytes); with `length_in_reserved`, bytes 6-7 are the payload's
// length rather than reserved.
absl::Status CheckPreamble(const unsigned char* d, DatagramKind kind, bool length_in_reserved) {
  if (std::memcmp(d, Traits(kind).magic, 4) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a heartbeat ", Traits(kind).name, " (magic ",
                     absl::CEscape(absl::string_view(reinterpret_cast<const char*>(d), 4)), ")"));
  }
  if (d[4] != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat datagram version ", d[4], " (this build speaks ", kVersion, ")"));
  }
  if ((d[5] & ~Traits(kind).flags) != 0 || (!length_in_reserved && (d[6] != 0 || d[7] != 0))) {
    return absl::InvalidArgumentError("heartbeat datagram with unknown flags or reserved bits set");
  }
  return absl::OkStatus();
}

absl::Status CheckMac(const unsigned char* d, size_t signed_size, const DatagramKey& key) {
  unsigned char mac[kMacSize];
  key.Sign(d, signed_size, mac);
  if (CRYPTO_memcmp(mac, d + signed_size, kMacSize) != 0) {
    return absl::InvalidArgumentError("heartbeat datagram with a bad MAC");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DatagramFields> DecodeDatagram(absl::string_view bytes, DatagramKind kind,
                                              const DatagramKey& key) {
  if (kind == DatagramKind::kStates) {
    return absl::InvalidArgumentError("a states datagram decodes with DecodeStatesDatagram");
  }
  if (bytes.size() != kDatagramSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat datagram of ", bytes.size(), " bytes (want ", kDatagramSize, ")"));
  }
  const auto* d = reinterpret_cast<const unsigned char*>(bytes.data());
  if (absl::Status s = CheckPreamble(d, kind, /*length_in_reserved=*/false); !s.ok()) return s;
  if (absl::Status s = CheckMac(d, kSignedSize, key); !s.ok()) return s;
  DatagramFields fields;
  fields.kind = kind;
  fields.flag = (d[5] & 1) != 0;
  fields.states_taken = (d[5] & 2) != 0;
  fields.session = GetU64(d + 8);
  fields.sequence = GetU64(d + 16);
  fields.generation = static_cast<int64_t>(GetU64(d + 24));
  return fields;
}

absl::StatusOr<StatesDatagram> DecodeStatesDatagram(absl::string_view bytes,
                                                    const DatagramKey& key) {
  if (bytes.size() < kStatesHeaderSize + kMacSize || bytes.size() > kMaxStatesDatagramSize) {
    return absl::InvalidArgumentError(absl::StrCat("heartbeat states datagram of ", bytes.size(),
                                                   " bytes (want ", kStatesHeaderSize + kMacSize,
                                                   " to ", kMaxStatesDatagramSize, ")"));
  }
  const auto* d = reinterpret_cast<const unsigned char*>(bytes.data());
  if (absl::Status s = CheckPreamble(d, DatagramKind::kStates, /*length_in_reserved=*/true);
      !s.ok()) {
    return s;
  }
  const size_t length = static_cast<size_t>(d[6]) | (static_cast<size_t>(d[7]) << 8);
  if (kStatesHeaderSize + length + kMacSize != bytes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat states datagram of ", bytes.size(), " bytes says its payload has ",
                     length, " (want ", bytes.size() - kStatesHeaderSize - kMacSize, ")"));
  }
  if (absl::Status s = CheckMac(d, kStatesHeaderSize + length, key); !s.ok()) return s;
  StatesDatagram datagram;
  datagram.fields.kind = DatagramKind::kStates;
  datagram.fields.flag = (d[5] & 1) != 0;
  datagram.fields.session = GetU64(d + 8);
  datagram.fields.sequence = GetU64(d + 16);
  datagram.fields.generation = static_cast<int64_t>(GetU64(d + 24));
  datagram.stream_mark = GetU64(d + 32);
  datagram.states = bytes.substr(kStatesHeaderSize, length);
  return datagram;
}

absl::StatusOr<StatesDatagram> DecodeAgentDatagram(absl::string_view bytes,
                                                   const DatagramKey& key) {
  if (IsStatesDatagram(bytes)) return DecodeStatesDatagram(bytes, key);
  StatesDatagram heartbeat;
  auto fields = DecodeDatagram(bytes, DatagramKind::kHeartbeat, key);
  if (!fields.ok()) return fields.status();
  heartbeat.fields = *fields;
  return heartbeat;
}

std::string NewKey() {
  std::string key(kKeySize, '\0');
  DDP_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), kKeySize) == 1)
      << "RAND_bytes failed";
  return key;
}

}  // namespace ddp::heartbeat
