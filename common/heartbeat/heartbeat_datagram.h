#ifndef DDP_COMMON_HEARTBEAT_HEARTBEAT_DATAGRAM_H_
#define DDP_COMMON_HEARTBEAT_HEARTBEAT_DATAGRAM_H_

// The wire format of heartbeats over UDP (docs/api.md, "Heartbeats over UDP").
// A session's Registered.heartbeat_channel names a UDP port, a session id and
// a 32-byte key; the agent then sends its empty heartbeats as datagrams and
// the coordinator answers those that ask with an ack datagram. Both are 48
// bytes, integers little-endian:
//
//   0  magic      "DDPh" (heartbeat) or "DDPa" (ack)
//   4  version    1
//   5  flags      heartbeat: bit 0 ask for an ack
//                 ack:       bit 0 refused: send heartbeats on the stream
//   6  reserved   0 (2 bytes)
//   8  session    the session id of Registered.heartbeat_channel
//   16 sequence   the heartbeat's (the ack repeats it)
//   24 generation heartbeat: the agent's generation; ack: the running
//                 generation (HeartbeatAck.running_generation)
//   32 mac        the first 16 bytes of HMAC-SHA256(key, bytes 0..31)
//
// Decoding checks the size, magic, version, reserved bytes and the MAC (in
// constant time); anything else is rejected with a reason (no crash, no
// allocation for bad input).

#include <openssl/sha.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddp::heartbeat {

inline constexpr size_t kDatagramSize = 48;
inline constexpr size_t kKeySize = 32;
using Datagram = std::array<unsigned char, kDatagramSize>;

enum class DatagramKind { kHeartbeat, kAck };

struct DatagramFields {
  DatagramKind kind = DatagramKind::kHeartbeat;
  bool flag = false;  // heartbeat: ask for an ack; ack: refused
  uint64_t session = 0;
  uint64_t sequence = 0;
  int64_t generation = 0;
};

// A session's key with HMAC-SHA256's key schedule done once (RFC 2104: the
// SHA-256 states after the inner and the outer padded key), for the side that
// signs or checks many datagrams with it (the coordinator's endpoint,
// rdzv_sim): a MAC is then two SHA-256 blocks, ~170 ns here against ~440 ns
// through OpenSSL's EVP_MAC with a prepared context and ~5 us for its one-shot HMAC()
// (docs/benchmarks.md), and the state lives in the key itself (224 bytes, no
// heap), next to the session that uses it.
// Thread-safety: Sign is const (it works on copies of the prepared states), so
// any number of threads may sign with one key at once.
class DatagramKey {
 public:
  // `key` must be kKeySize bytes (checked: a programming error otherwise).
  explicit DatagramKey(absl::string_view key);
  ~DatagramKey();  // wipes the key-derived state
  DatagramKey(DatagramKey&& other) noexcept = default;
  DatagramKey& operator=(DatagramKey&& other) noexcept = default;
  DatagramKey(const DatagramKey&) = delete;
  DatagramKey& operator=(const DatagramKey&) = delete;

  // The first 16 bytes of HMAC-SHA256(key, signed_bytes[0..31]) into `mac`.
  void Sign(const unsigned char* signed_bytes, unsigned char* mac) const;

 private:
  SHA256_CTX inner_;  // after SHA-256 of (key XOR ipad)
  SHA256_CTX outer_;  // after SHA-256 of (key XOR opad)
};

// `key` must be kKeySize bytes.
Datagram EncodeDatagram(const DatagramFields& fields, absl::string_view key);
Datagram EncodeDatagram(const DatagramFields& fields, const DatagramKey& key);

// The session id of a datagram of the right size (to find its key), else
// INVALID_ARGUMENT.
absl::StatusOr<uint64_t> PeekSession(absl::string_view bytes);

// The fields of `bytes` when it is a well-formed datagram of `kind` signed
// with `key`; INVALID_ARGUMENT saying what is wrong otherwise (the key never
// appears in it).
absl::StatusOr<DatagramFields> DecodeDatagram(absl::string_view bytes, DatagramKind kind,
                                              absl::string_view key);
absl::StatusOr<DatagramFields> DecodeDatagram(absl::string_view bytes, DatagramKind kind,
                                              const DatagramKey& key);

// kKeySize random bytes from OpenSSL's generator.
std::string NewKey();

}  // namespace ddp::heartbeat

#endif  // DDP_COMMON_HEARTBEAT_HEARTBEAT_DATAGRAM_H_
