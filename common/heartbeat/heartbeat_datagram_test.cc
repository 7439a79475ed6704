#include "common/heartbeat/heartbeat_datagram.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>
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

}  // namespace
}  // namespace ddp::heartbeat
