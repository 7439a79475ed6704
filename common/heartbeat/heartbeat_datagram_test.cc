#include "common/heartbeat/heartbeat_datagram.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace ddp::heartbeat {
namespace {

absl::string_view View(const Datagram& d) {
  return absl::string_view(reinterpret_cast<const char*>(d.data()), d.size());
}

DatagramFields Sample() {
  DatagramFields f;
  f.kind = DatagramKind::kHeartbeat;
  f.flag = true;
  f.session = 0x0102030405060708ULL;
  f.sequence = 77;
  f.generation = 5;
  return f;
}

TEST(HeartbeatDatagramTest, RoundTripsBothKinds) {
  const std::string key = NewKey();
  ASSERT_EQ(key.size(), kKeySize);
  for (DatagramKind kind : {DatagramKind::kHeartbeat, DatagramKind::kAck}) {
    DatagramFields f = Sample();
    f.kind = kind;
    f.generation = -1;  // the sign survives
    const Datagram d = EncodeDatagram(f, key);
    auto got = DecodeDatagram(View(d), kind, key);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->kind, kind);
    EXPECT_TRUE(got->flag);
    EXPECT_EQ(got->session, f.session);
    EXPECT_EQ(got->sequence, 77u);
    EXPECT_EQ(got->generation, -1);
    EXPECT_EQ(*PeekSession(View(d)), f.session);
  }
}

TEST(HeartbeatDatagramTest, RejectsAnotherKindAKeyOrASize) {
  const std::string key = NewKey();
  const Datagram d = EncodeDatagram(Sample(), key);
  EXPECT_FALSE(DecodeDatagram(View(d), DatagramKind::kAck, key).ok());  // a reflected heartbeat
  EXPECT_NE(NewKey(), key);
  auto wrong_key = DecodeDatagram(View(d), DatagramKind::kHeartbeat, NewKey());
  ASSERT_FALSE(wrong_key.ok());
  EXPECT_NE(wrong_key.status().message().find("bad MAC"), std::string::npos);
  EXPECT_FALSE(DecodeDatagram(View(d).substr(0, 47), DatagramKind::kHeartbeat, key).ok());
  EXPECT_FALSE(DecodeDatagram("", DatagramKind::kHeartbeat, key).ok());
  EXPECT_FALSE(PeekSession("short").ok());
  EXPECT_FALSE(DecodeDatagram(View(d), DatagramKind::kHeartbeat, "short key").ok());
}

TEST(HeartbeatDatagramTest, PreparedKey_SameMacAsOneShotHmacEveryTime) {
  const std::string key = NewKey();
  DatagramKey prepared(key);
  for (uint64_t sequence = 1; sequence <= 3; ++sequence) {  // reused: the schedule is kept
    DatagramFields f = Sample();
    f.sequence = sequence;
    const Datagram d = EncodeDatagram(f, prepared);
    unsigned char reference[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    ASSERT_NE(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), d.data(), 32, reference,
                   &length),
              nullptr);
    EXPECT_EQ(std::memcmp(d.data() + 32, reference, 16), 0) << "sequence " << sequence;
    EXPECT_EQ(d, EncodeDatagram(f, key));
    auto got = DecodeDatagram(View(d), DatagramKind::kHeartbeat, prepared);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->sequence, sequence);
  }
}

TEST(HeartbeatDatagramTest, PreparedKey_OtherKeyRejectedAndMoveKeepsKey) {
  const std::string key = NewKey();
  DatagramKey other(NewKey());
  const Datagram d = EncodeDatagram(Sample(), key);
  auto wrong = DecodeDatagram(View(d), DatagramKind::kHeartbeat, other);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("bad MAC"), std::string::npos);
  DatagramKey moved(key);
  other = std::move(moved);
  EXPECT_TRUE(DecodeDatagram(View(d), DatagramKind::kHeartbeat, other).ok());
}

TEST(HeartbeatDatagramTest, EveryFlippedBitIsRejected) {
  const std::string key = NewKey();
  const Datagram d = EncodeDatagram(Sample(), key);
  for (size_t byte = 0; byte < kDatagramSize; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      Datagram bad = d;
      bad[byte] ^= static_cast<unsigned char>(1 << bit);
      auto got = DecodeDatagram(View(bad), DatagramKind::kHeartbeat, key);
      EXPECT_FALSE(got.ok()) << "byte " << byte << " bit " << bit;
      if (!got.ok()) {
        EXPECT_EQ(got.status().message().find(key), std::string::npos);
      }
    }
  }
}

TEST(HeartbeatDatagramTest, AckSaysWhetherStatesWereTaken) {
  const std::string key = NewKey();
  for (bool taken : {false, true}) {
    DatagramFields f = Sample();
    f.kind = DatagramKind::kAck;
    f.flag = false;
    f.states_taken = taken;
    auto got = DecodeDatagram(View(EncodeDatagram(f, key)), DatagramKind::kAck, key);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->states_taken, taken);
    EXPECT_FALSE(got->flag);
  }
  // Only an ack says it: a heartbeat never carries the bit.
  DatagramFields heartbeat = Sample();
  heartbeat.states_taken = true;
  auto got = DecodeDatagram(View(EncodeDatagram(heartbeat, key)), DatagramKind::kHeartbeat, key);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->states_taken);
}

std::string StatesSample(const DatagramKey& key, absl::string_view payload,
                         uint64_t stream_mark = 9) {
  DatagramFields f = Sample();
  f.kind = DatagramKind::kStates;
  std::optional<std::string> bytes = EncodeStatesDatagram(f, stream_mark, payload, key);
  EXPECT_TRUE(bytes.has_value());
  return bytes.value_or("");
}

TEST(HeartbeatDatagramTest, StatesDatagram_RoundTripsWithItsMarkAndPayload) {
  const std::string raw_key = NewKey();
  DatagramKey key(raw_key);
  for (size_t size : {size_t{0}, size_t{1}, size_t{300}, kMaxStatesPayload}) {
    const std::string payload(size, 'p');
    const std::string bytes = StatesSample(key, payload, /*stream_mark=*/1234567);
    EXPECT_EQ(bytes.size(), kStatesHeaderSize + size + kMacSize);
    EXPECT_TRUE(IsStatesDatagram(bytes));
    EXPECT_EQ(*PeekSession(bytes), Sample().session);
    auto got = DecodeStatesDatagram(bytes, key);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->fields.kind, DatagramKind::kStates);
    EXPECT_TRUE(got->fields.flag);
    EXPECT_EQ(got->fields.session, Sample().session);
    EXPECT_EQ(got->fields.sequence, 77u);
    EXPECT_EQ(got->fields.generation, 5);
    EXPECT_EQ(got->stream_mark, 1234567u);
    EXPECT_EQ(got->states, payload);
    // The MAC covers the header and the payload, as HMAC-SHA256 says.
    unsigned char reference[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    ASSERT_NE(HMAC(EVP_sha256(), raw_key.data(), static_cast<int>(raw_key.size()),
                   reinterpret_cast<const unsigned char*>(bytes.data()), 40 + size, reference,
                   &length),
              nullptr);
    EXPECT_EQ(std::memcmp(bytes.data() + 40 + size, reference, 16), 0) << size;
  }
  // One byte more than fits: the heartbeat goes on the stream instead.
  DatagramFields f = Sample();
  f.kind = DatagramKind::kStates;
  EXPECT_FALSE(EncodeStatesDatagram(f, 1, std::string(kMaxStatesPayload + 1, 'p'), key));
}

TEST(HeartbeatDatagramTest, StatesDatagram_RejectsWrongSizesLengthsKindsAndKeys) {
  DatagramKey key(NewKey());
  const std::string bytes = StatesSample(key, "workers");
  DatagramKey other(NewKey());
  auto forged = DecodeStatesDatagram(bytes, other);
  ASSERT_FALSE(forged.ok());
  EXPECT_NE(forged.status().message().find("bad MAC"), std::string::npos);
  // Cut short, or a byte longer: the length field no longer agrees.
  auto cut = DecodeStatesDatagram(bytes.substr(0, bytes.size() - 1), key);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("payload has 7"), std::string::npos) << cut.status();
  EXPECT_FALSE(DecodeStatesDatagram(bytes + "x", key).ok());
  EXPECT_FALSE(DecodeStatesDatagram(bytes.substr(0, 55), key).ok());
  EXPECT_FALSE(DecodeStatesDatagram(std::string(kMaxStatesDatagramSize + 1, 'D'), key).ok());
  EXPECT_FALSE(PeekSession(std::string(kMaxStatesDatagramSize + 1, 'D')).ok());
  // Not a heartbeat, and a heartbeat is not one.
  EXPECT_FALSE(DecodeDatagram(bytes, DatagramKind::kStates, key).ok());
  const Datagram heartbeat = EncodeDatagram(Sample(), key);
  EXPECT_FALSE(IsStatesDatagram(View(heartbeat)));
  EXPECT_FALSE(DecodeStatesDatagram(View(heartbeat), key).ok());
  // A heartbeat-sized datagram that claims to be a states one is still
  // looked up (its session), then fails its checks.
  std::string claimed(View(heartbeat));
  std::memcpy(claimed.data(), "DDPs", 4);
  EXPECT_TRUE(PeekSession(claimed).ok());
  EXPECT_FALSE(DecodeStatesDatagram(claimed, key).ok());
}

TEST(HeartbeatDatagramTest, StatesDatagram_EveryFlippedBitIsRejected) {
  DatagramKey key(NewKey());
  const std::string bytes = StatesSample(key, "a few workers' states");
  for (size_t byte = 0; byte < bytes.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = bytes;
      bad[byte] = static_cast<char>(bad[byte] ^ (1 << bit));
      EXPECT_FALSE(DecodeStatesDatagram(bad, key).ok()) << "byte " << byte << " bit " << bit;
    }
  }
}

}  // namespace
}  // namespace ddp::heartbeat
