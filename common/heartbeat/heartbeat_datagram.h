#ifndef DDP_COMMON_HEARTBEAT_HEARTBEAT_DATAGRAM_H_
#define DDP_COMMON_HEARTBEAT_HEARTBEAT_DATAGRAM_H_

// The wire format of heartbeats over UDP (docs/api.md, "Heartbeats over UDP").
// A session's Registered.heartbeat_channel names a UDP port, a session id and
// a 32-byte key; the agent then sends its heartbeats as datagrams (those that
// carry worker states as states datagrams, below) and the coordinator answers
// those that ask with an ack datagram. A heartbeat datagram and an ack are 48
// bytes, integers little-endian:
//
//   0  magic      "DDPh" (heartbeat) or "DDPa" (ack)
//   4  version    1
//   5  flags      heartbeat: bit 0 ask for an ack
//                 ack:       bit 0 refused: send heartbeats on the stream
//                            bit 1 the worker states it carried were taken
//                            (answers a states datagram, below)
//   6  reserved   0 (2 bytes)
//   8  session    the session id of Registered.heartbeat_channel
//   16 sequence   the heartbeat's (the ack repeats it)
//   24 generation heartbeat: the agent's generation; ack: the running
//                 generation (HeartbeatAck.running_generation)
//   32 mac        the first 16 bytes of HMAC-SHA256(key, bytes 0..31)
//
// A heartbeat whose workers' states changed goes as a states datagram when
// Registered.heartbeat_channel.worker_states says the coordinator takes them
// (and they fit): 56 + L bytes, at most kMaxStatesDatagramSize,
//
//   0  magic      "DDPs"
//   4  version    1
//   5  flags      bit 0 ask for an ack (a states datagram always asks: the
//                 agent sends its states again until an ack says they
//                 were taken)
//   6  length     L, the payload's bytes (16 bits)
//   8  session, 16 sequence, 24 generation: as in a heartbeat datagram
//   32 stream mark: how many messages the agent had written on its stream
//                 (after Register) when it made this datagram; the
//                 coordinator takes the states only at that point of the
//                 stream (docs/api.md, "Worker states in datagrams")
//   40 payload    a serialized ddp.v1.Heartbeat holding only `workers`
//   40+L mac      the first 16 bytes of HMAC-SHA256(key, bytes 0..39+L)
//
// Decoding checks the size, magic, version, reserved bytes and the MAC (in
// constant time); anything else is rejected with a reason (no crash, no
// allocation for bad input).

#include <openssl/sha.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddp::heartbeat {

inline constexpr size_t kDatagramSize = 48;
inline constexpr size_t kKeySize = 32;
using Datagram = std::array<unsigned char, kDatagramSize>;

// States datagrams: the header before the payload, the MAC after it, and the
// largest one (fits the smallest IPv6 path: 1,280 bytes less the IP and UDP
// headers).
inline constexpr size_t kStatesHeaderSize = 40;
inline constexpr size_t kMacSize = 16;
inline constexpr size_t kMaxStatesDatagramSize = 1200;
inline constexpr size_t kMaxStatesPayload =
    kMaxStatesDatagramSize - kStatesHeaderSize - kMacSize;

enum class DatagramKind { kHeartbeat, kAck, kStates };

struct DatagramFields {
  DatagramKind kind = DatagramKind::kHeartbeat;
  bool flag = false;  // heartbeat, states: ask for an ack; ack: refused
  bool states_taken = false;  // ack only: the states datagram's states were taken
  uint64_t session = 0;
  uint64_t sequence = 0;
  int64_t generation = 0;
};

// A decoded states datagram (or, from DecodeAgentDatagram, a heartbeat one);
// `states` points into the decoded bytes.
struct StatesDatagram {
  DatagramFields fields;  // kind kStates
  uint64_t stream_mark = 0;
  absl::string_view states;  // a serialized ddp.v1.Heartbeat (workers only)
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

  // The first kMacSize bytes of HMAC-SHA256(key, bytes[0..size-1]) into `mac`.
  void Sign(const unsigned char* bytes, size_t size, unsigned char* mac) const;

 private:
  SHA256_CTX inner_;  // after SHA-256 of (key XOR ipad)
  SHA256_CTX outer_;  // after SHA-256 of (key XOR opad)
};

// `key` must be kKeySize bytes.
Datagram EncodeDatagram(const DatagramFields& fields, absl::string_view key);
Datagram EncodeDatagram(const DatagramFields& fields, const DatagramKey& key);

// A states datagram for `fields` (kind kStates; `flag` asks for an ack) with
// the payload `states`; nullopt when `states` is longer than
// kMaxStatesPayload (the heartbeat then goes on the stream).
std::optional<std::string> EncodeStatesDatagram(const DatagramFields& fields,
                                                uint64_t stream_mark, absl::string_view states,
                                                const DatagramKey& key);

// The session id of a datagram of a size some kind has (to find its key),
// else INVALID_ARGUMENT.
absl::StatusOr<uint64_t> PeekSession(absl::string_view bytes);
// Whether `bytes` claim to be a states datagram (its magic; DecodeStatesDatagram
// checks the rest).
bool IsStatesDatagram(absl::string_view bytes);

// The fields of `bytes` when it is a well-formed datagram of `kind` signed
// with `key`; INVALID_ARGUMENT saying what is wrong otherwise (the key never
// appears in it).
absl::StatusOr<DatagramFields> DecodeDatagram(absl::string_view bytes, DatagramKind kind,
                                              absl::string_view key);
absl::StatusOr<DatagramFields> DecodeDatagram(absl::string_view bytes, DatagramKind kind,
                                              const DatagramKey& key);
// The same for a states datagram: size, magic, version, length, flags, MAC.
absl::StatusOr<StatesDatagram> DecodeStatesDatagram(absl::string_view bytes,
                                                    const DatagramKey& key);
// What an agent sends, either kind (the coordinator's side): a heartbeat
// datagram decodes with kind kHeartbeat, stream mark 0 and no states.
absl::StatusOr<StatesDatagram> DecodeAgentDatagram(absl::string_view bytes,
                                                   const DatagramKey& key);

// kKeySize random bytes from OpenSSL's generator.
std::string NewKey();

}  // namespace ddp::heartbeat

#endif  // DDP_COMMON_HEARTBEAT_HEARTBEAT_DATAGRAM_H_
